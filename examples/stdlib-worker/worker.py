#!/usr/bin/env python3
"""A needle worker written from docs/api.md alone: Python's standard library,
no needle client.

It serves the handlers named on its command line with one demo function,
which reads its payload:

    {"log": ["line", ...],   # lines for GET /v1/tasks/{id}/logs
     "sleep": 0.5,           # seconds to run (heartbeating; a cancel stops it)
     "fail": "why",          # fail the attempt with this error ...
     "permanent": true,      # ... for good (else the retry policy applies)
     "fail_until": 2,        # fail (retryably) while attempt + 1 < this
     "result": <any JSON>}   # the result (default: the payload's "result")

The protocol (docs/api.md, "Workers in any language"):

- POST /v1/workers/poll with the free slots as "max", a "wait", the
  worker's "slots" and an "instance" new at each start; each task comes
  with its "lease" and "deadline".
- While a task runs: POST /v1/leases/{lease}/heartbeat every few seconds
  ("canceled": true stops the handler; 409 lease_lost ends it silently),
  carrying the lines logged since (POST /v1/leases/{lease}/logs).
- Its outcome: POST /v1/leases/{lease}/complete or /fail ("permanent").
- On SIGTERM or SIGINT: stop polling, let running tasks finish for a grace
  period, release the rest (POST /v1/leases/{lease}/release).
- 429 and 503 are answered again after their Retry-After; 409 lease_lost
  and 404 (an unknown lease) end a report: the task is someone else's now.

    python3 worker.py --addr http://127.0.0.1:7070 --handlers demo,demo.slow
"""

import argparse
import datetime
import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.parse
import uuid

HEARTBEAT = 2.0  # seconds; well under the peer's --worker-ttl (10 s)


class APIError(Exception):
    def __init__(self, status, code, message, field, retry_after):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.field, self.retry_after = status, code, field, retry_after


class Connection:
    """The connection of a request under way, which another thread may cut."""

    def __init__(self):
        self.lock, self.conn, self.cutting = threading.Lock(), None, False

    def hold(self, conn):
        if conn is not None:
            conn.connect()  # its socket, for cut
        with self.lock:
            if conn is not None and self.cutting:
                raise InterruptedError("stopping")
            self.conn = conn

    def cut(self):
        with self.lock:
            self.cutting = True
            if self.conn is not None and self.conn.sock is not None:
                try:
                    self.conn.sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass


class Peer:
    def __init__(self, addr, token):
        self.addr, self.token = addr.rstrip("/"), token

    def call(self, method, path, body=None, timeout=60, keep=None):
        """One request; answers its JSON body, raises APIError for a 4xx or
        5xx. keep, a Connection, holds the request's connection while it
        is under way (so that another thread may cut it)."""
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        url = urllib.parse.urlsplit(self.addr)
        cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        conn = cls(url.netloc, timeout=timeout)
        try:
            if keep is not None:
                keep.hold(conn)
            conn.request(method, url.path + path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            if keep is not None:
                keep.hold(None)
            conn.close()
        if resp.status < 400:
            return json.loads(raw) if raw else None
        try:
            err = json.loads(raw)["error"]
        except (ValueError, KeyError, TypeError):
            err = {"code": "", "message": raw.decode(errors="replace")}
        ra = resp.getheader("Retry-After")
        raise APIError(resp.status, err.get("code", ""), err.get("message", ""), err.get("field"),
                       float(ra) if ra else None)

    def call_retrying(self, method, path, body=None, timeout=60, give_up=60.0, stop=None, keep=None):
        """call, again after a 429, 502, 503, 504 or a connection error
        (Retry-After, else a jittered backoff of 100 ms to 10 s)."""
        backoff, end = 0.1, time.monotonic() + give_up
        while True:
            try:
                return self.call(method, path, body, timeout, keep)
            except APIError as e:
                if e.status not in (429, 502, 503, 504) or time.monotonic() > end:
                    raise
                pause = e.retry_after if e.retry_after is not None else random.uniform(backoff / 2, backoff)
            except OSError as e:  # no peer answers: refused, reset, timed out
                if time.monotonic() > end or (stop is not None and stop.is_set()):
                    raise
                log(f"{method} {path}: {e}; again in {backoff:.1f}s")
                pause = random.uniform(backoff / 2, backoff)
            backoff = min(backoff * 2, 10.0)
            if stop is not None and stop.wait(pause):
                raise InterruptedError("stopping")
            if stop is None:
                time.sleep(pause)


def log(msg):
    print(f"worker: {msg}", file=sys.stderr, flush=True)


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


class Task:
    """One leased task: what the handler sees."""

    def __init__(self, wire):
        self.id, self.lease = wire["id"], wire["lease"]
        self.payload = wire.get("payload")
        self.inputs = wire.get("inputs") or {}
        self.attempt = wire["attempt"] + 1  # this attempt, 1-based
        self.max_attempts = wire.get("max_attempts", 1)
        self.deadline = datetime.datetime.fromisoformat(wire["deadline"].replace("Z", "+00:00"))
        self.canceled = threading.Event()  # the task was canceled, or its lease lost
        self.lines = []  # [{"text", "at"}] not sent yet
        self.lock = threading.Lock()

    def log(self, text):
        with self.lock:
            self.lines.append({"text": text, "at": now_rfc3339()})

    def take_lines(self):
        with self.lock:
            lines, self.lines = self.lines, []
        return lines

    def seconds_left(self):
        return (self.deadline - datetime.datetime.now(datetime.timezone.utc)).total_seconds()


class Fail(Exception):
    def __init__(self, message, permanent=False):
        super().__init__(message)
        self.permanent = permanent


def demo(task):
    p = task.payload if isinstance(task.payload, dict) else {}
    for line in p.get("log", []):
        task.log(str(line))
    task.log(f"attempt {task.attempt} of {task.max_attempts}")
    sleep = float(p.get("sleep", 0))
    if task.canceled.wait(min(sleep, max(task.seconds_left(), 0))):
        raise Fail("canceled while running")
    if task.seconds_left() <= 0:  # the lease ran out: the peer counts a timeout
        raise Fail("timed out")
    if task.attempt < int(p.get("fail_until", 0)):
        raise Fail(f"attempt {task.attempt} fails on purpose")
    if "fail" in p:
        raise Fail(str(p["fail"]), bool(p.get("permanent")))
    return {"result": p.get("result"), "inputs": task.inputs, "attempt": task.attempt}


class Worker:
    def __init__(self, peer, handlers, worker_id, concurrency, wait, grace):
        self.peer, self.handlers, self.id = peer, handlers, worker_id
        self.concurrency, self.wait, self.grace = concurrency, wait, grace
        self.instance = uuid.uuid4().hex
        self.running = {}  # lease -> Task
        self.slot = threading.Condition()  # guards running; notified when a task ends
        self.stop = threading.Event()
        self.exit_code = 0
        self.polling = Connection()  # the waiting poll's connection

    def run(self):
        threading.Thread(target=self.heartbeats, daemon=True).start()
        self.poller = threading.Thread(target=self.poll, daemon=True)
        self.poller.start()
        log(f"{self.id} serves {','.join(self.handlers)} from {self.peer.addr}")
        while not self.stop.wait(0.2):
            pass  # signals reach the main thread here
        return self.drain()

    def poll(self):
        while not self.stop.is_set():
            with self.slot:
                while len(self.running) >= self.concurrency and not self.stop.is_set():
                    self.slot.wait()
                free = self.concurrency - len(self.running)
            body = {"worker": self.id, "instance": self.instance, "handlers": self.handlers,
                    "max": free, "slots": self.concurrency, "wait": self.wait}
            try:
                answer = self.peer.call_retrying("POST", "/v1/workers/poll", body, timeout=330,
                                                 give_up=float("inf"), stop=self.stop, keep=self.polling)
            except InterruptedError:
                return
            except APIError as e:  # a 400, 401, 403 or 409: asking again would not help
                log(f"poll refused: {e}")
                self.exit_code = 2
                self.stop.set()
                return
            except OSError as e:  # the stop cut the poll (see drain)
                if not self.stop.is_set():
                    log(f"poll: {e}")
                return
            tasks = [Task(wire) for wire in answer["tasks"]]
            with self.slot:
                stopping = self.stop.is_set()
                if not stopping:
                    for task in tasks:
                        self.running[task.lease] = task
            for task in tasks:
                if stopping:  # leased as the worker stopped: hand it back unrun
                    self.release(task, f"worker {self.id} stopped before the task started")
                else:
                    threading.Thread(target=self.execute, args=(task,), daemon=True).start()

    def execute(self, task):
        try:
            result = demo(task)
            verb, body = "complete", {"result": result}
        except Fail as e:
            verb, body = "fail", {"error": str(e), "permanent": e.permanent}
        except Exception as e:  # a bug in the handler: retrying will not help
            verb, body = "fail", {"error": f"{type(e).__name__}: {e}", "permanent": True}
        with self.slot:
            ours = self.running.get(task.lease) is task  # not released by a stop
        if ours and not task.canceled.is_set():  # else its outcome would be refused
            self.flush_lines(task)
            self.report(task, verb, body)
        with self.slot:
            self.running.pop(task.lease, None)
            self.slot.notify_all()

    def report(self, task, verb, body):
        try:
            self.peer.call_retrying("POST", f"/v1/leases/{task.lease}/{verb}", body)
            log(f"{task.id}: {verb} taken")
        except APIError as e:
            # 409 lease_lost: ran out, canceled, or the worker was found dead;
            # 404: the peer that leased it forgot the lease. Either way the
            # task is no longer ours; nothing to send again.
            log(f"{task.id}: {verb} refused: {e}")

    def flush_lines(self, task):
        lines = task.take_lines()
        if not lines:
            return
        try:
            self.peer.call_retrying("POST", f"/v1/leases/{task.lease}/logs", {"lines": lines}, give_up=10)
        except (APIError, OSError) as e:
            log(f"{task.id}: logs refused: {e}")

    def heartbeats(self):
        while not self.stop.wait(HEARTBEAT):
            with self.slot:
                tasks = list(self.running.values())
            for task in tasks:
                if task.canceled.is_set():
                    continue
                try:
                    hb = self.peer.call_retrying("POST", f"/v1/leases/{task.lease}/heartbeat", give_up=5)
                except APIError as e:  # 409 lease_lost (or 404): as a cancel
                    log(f"{task.id}: heartbeat: {e}; stopping it")
                    task.canceled.set()
                    continue
                except OSError as e:
                    log(f"{task.id}: heartbeat: {e}")
                    continue
                if hb["canceled"]:  # its lines are refused now
                    log(f"{task.id}: canceled; stopping it")
                    task.canceled.set()
                    continue
                self.flush_lines(task)

    def drain(self):
        """Stop: cut the waiting poll, let running tasks finish for the grace
        period, release the rest."""
        # Closing the poll's sending side ends it at once: the peer puts
        # back what it had not answered yet, and what it had answered is
        # still read, and released, by the poll thread.
        self.polling.cut()
        end = time.monotonic() + self.grace
        with self.slot:
            while self.running and time.monotonic() < end:
                self.slot.wait(end - time.monotonic())
            tasks = list(self.running.values())
            self.running.clear()  # a late outcome is dropped: the task is released
        for task in tasks:
            stopped = task.canceled.is_set()  # canceled: nothing to send
            task.canceled.set()
            if not stopped:
                self.flush_lines(task)
                self.release(task, f"worker {self.id} stopped before the handler returned")
        self.poller.join(5)
        return self.exit_code

    def release(self, task, reason):
        try:
            self.peer.call_retrying("POST", f"/v1/leases/{task.lease}/release", {"reason": reason}, give_up=10)
            log(f"{task.id}: released")
        except (APIError, OSError) as e:
            log(f"{task.id}: release refused: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", default=os.environ.get("NEEDLE_ADDR", "http://127.0.0.1:7070"))
    ap.add_argument("--handlers", required=True, help="comma-separated handler names")
    ap.add_argument("--id", default=f"stdlib-{os.getpid()}")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--wait", default="10s", help="a poll's long wait (a Go duration)")
    ap.add_argument("--grace", type=float, default=5.0, help="seconds running tasks get on SIGTERM")
    args = ap.parse_args()
    token = os.environ.get("NEEDLE_API_TOKEN", "")
    w = Worker(Peer(args.addr, token), args.handlers.split(","), args.id, args.concurrency, args.wait, args.grace)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: w.stop.set())
    sys.exit(w.run())


if __name__ == "__main__":
    main()
