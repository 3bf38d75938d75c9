"""A worker that serves Python handlers over needle's worker protocol
(docs/api.md, "Workers")."""

import json
import logging
import os
import queue
import random
import signal
import socket
import threading
import time
import traceback
import uuid
from datetime import datetime, timezone

from .client import Client, NeedleError

_log = logging.getLogger("needle_client")

# Bound on the retries of one report (an outcome), in seconds.
_REPORT_TIMEOUT = 60.0
# Bound on the log lines a task keeps until they are sent.
_MAX_PENDING_LINES = 1000
# Bound on the outcomes of one batch (POST /v1/leases/report, a poll's "done").
_MAX_BATCH = 1000
# Bound on the encoded size of one batch, well under the peer's --max-body
# (32 MiB by default); a 413 lowers it to what the peer takes. A result
# larger than this fails its task, as one over the peer's --max-result does.
_MAX_REQUEST = 16 << 20
# Bound on the error text of a fail: the peer keeps 32 KiB of it (its head
# and tail); a longer one only makes the report larger.
_MAX_ERROR = 32 << 10
# Bound on a release's reason (the peer's).
_MAX_REASON = 1024
# Concurrency bound: a poll takes at most 1,000 tasks.
_MAX_CONCURRENCY = 1000


class Permanent(Exception):
    """Raise it in a handler to fail the task without further attempts."""


def _ids(t):
    """The structured ids of a log record about task t (logging's extra)."""
    return {"task": t.id, "group": t.group}


class Task:
    """A task handed to a handler.

    Attributes: ``id``, ``group``, ``name``, ``handler``, ``payload`` (the
    decoded JSON), ``inputs`` (results of its dependencies by name; {}
    without), ``attempt`` (this run's attempt number, 1-based, as exec's
    NEEDLE_ATTEMPT), ``round`` (the lease's round: a run of the same attempt
    after a lost lease has a higher one), ``deadline`` (epoch seconds when
    the lease runs out), ``lease``, ``shard``/``shards`` (a broadcast copy's
    index and count, else None), ``trace`` (the group's trace: a W3C
    traceparent when the submission carried one, for the handler's spans;
    else an id or None), ``priority``, ``max_attempts`` (the attempts its
    retry policy allows in all: ``attempt == max_attempts`` is the last;
    None from a peer of an older release), ``error`` (the last failed
    attempt's error when it runs again, else None), ``stage`` and ``item``
    (0-based, in a pipeline and a streaming pipeline, else None) and
    ``raw`` (the task as the peer sent it).

    ``canceled`` is a threading.Event set when the handler should stop: the
    task was canceled, its lease was lost, or the worker is stopping. A
    long handler checks ``should_stop()`` now and then.
    """

    def __init__(self, raw):
        self.raw = raw
        self.id = raw["id"]
        self.group = raw.get("group")
        self.name = raw.get("name")
        self.handler = raw["handler"]
        self.payload = raw.get("payload")
        self.inputs = raw.get("inputs") or {}
        self.attempt = int(raw.get("attempt") or 0) + 1
        self.round = int(raw.get("round") or 0)
        self.lease = raw["lease"]
        self.deadline = _parse_time(raw.get("deadline"))
        self.shard = raw.get("shard")
        self.shards = raw.get("shards")
        self.trace = raw.get("trace")
        self.priority = int(raw.get("priority") or 0)
        self.max_attempts = raw.get("max_attempts")
        self.error = raw.get("error")
        self.stage = raw.get("stage")
        self.item = raw.get("item")
        self.canceled = threading.Event()
        self.started = time.monotonic()
        self._lines = []
        self._dropped = 0
        self._mu = threading.Lock()
        self._state = "running"  # running, lost (canceled or lease lost), released, done
        self.began = False  # its handler was called

    def log(self, line):
        """Adds a line (or several) to the attempt's task log (GET
        /v1/tasks/{id}/logs); sent with the heartbeats and before the
        outcome."""
        at = _format_time(time.time())  # the peer shows when the handler wrote it
        with self._mu:
            for s in str(line).rstrip("\n").split("\n"):
                if len(self._lines) >= _MAX_PENDING_LINES:
                    self._lines.pop(0)
                    self._dropped += 1
                self._lines.append({"text": s, "at": at})

    def should_stop(self):
        """True once the handler should give up: canceled, lease lost,
        worker stopping, or the deadline passed."""
        return self.canceled.is_set() or (self.deadline is not None and time.time() >= self.deadline)

    def _take_lines(self):
        with self._mu:
            out, self._lines = self._lines, []
            if self._dropped:
                note = {"text": "(%d lines dropped: the log was not sent fast enough)" % self._dropped}
                if out:
                    note["at"] = out[0]["at"]
                out.insert(0, note)
                self._dropped = 0
            return out

    def _end(self, state):
        """Moves a running task to state; False when it had ended already."""
        with self._mu:
            if self._state != "running":
                return False
            self._state = state
            return True

    def __repr__(self):
        return "Task(%s, handler=%s, attempt=%d, round=%d)" % (self.id, self.handler, self.attempt, self.round)


def _format_time(t):
    """A Unix time as RFC 3339 in UTC with microseconds."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(s):
    if not s:
        return None
    # RFC 3339 with up to nanoseconds; fromisoformat (3.9) wants at most 6
    # fractional digits and no "Z".
    s = s.replace("Z", "+00:00")
    if "." in s:
        head, rest = s.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        s = head + "." + (rest[:i] + "000000")[:6] + rest[i:]
    try:
        return datetime.fromisoformat(s).timestamp()
    except ValueError:
        return None


class _Backoff:
    def __init__(self, lo, hi):
        self.lo, self.hi, self.next = lo, hi, 0.0

    def delay(self):
        self.next = min(max(self.next * 2, self.lo), self.hi)
        return self.next / 2 + random.random() * self.next / 2

    def reset(self):
        self.next = 0.0


class Worker:
    """Serves handlers: polls a peer for their tasks and runs them, at most
    ``concurrency`` at once, each in a thread.

    ``handlers`` maps a handler name to a function taking a Task and
    returning a JSON-serialisable result. An exception fails the attempt
    (retried as the task's retry policy says); a Permanent one fails the
    task for good.

    The peer is ``client``, else Client(url, token) (defaults:
    $NEEDLE_URL, else $NEEDLE_ADDR, else http://127.0.0.1:7070;
    $NEEDLE_API_TOKEN, else the file $NEEDLE_API_TOKEN_FILE names).

    Other options: ``labels`` ("key=value", matched against the tasks'
    require), ``id`` (the worker's name; default host-pid-random),
    ``poll_wait`` (seconds one poll waits), ``heartbeat`` (period of a
    running task's heartbeat, which keeps the worker alive, sends its log
    lines and learns of a cancellation; the first one a period after the
    task started, so short tasks send none), ``stop_grace`` (how long
    running handlers may finish once the worker stops; then their tasks are
    released: handed back unrun, no attempt spent, to run again elsewhere),
    ``backoff_min`` and
    ``backoff_max`` (delay before a poll or report is sent again after a
    503 or a connection error), ``prefetch`` (tasks held beyond
    ``concurrency``, leased and waiting for a free handler: it hides the
    time a lease takes to commit when tasks are short; a waiting task's
    timeout runs, and other workers cannot take it; on stop, those that
    did not start are released at once).
    """

    def __init__(self, handlers, *, client=None, url=None, token=None, concurrency=1, prefetch=0, labels=(),
                 id=None, poll_wait=30.0, heartbeat=2.0, stop_grace=30.0, backoff_min=0.1, backoff_max=10.0):
        if not handlers:
            raise ValueError("handlers: name at least one handler")
        for name, fn in handlers.items():
            if not callable(fn):
                raise ValueError("handlers[%r]: not callable" % name)
        if not 1 <= concurrency <= _MAX_CONCURRENCY:
            raise ValueError("concurrency: want 1..%d, got %r" % (_MAX_CONCURRENCY, concurrency))
        if not 0 <= prefetch <= _MAX_CONCURRENCY - concurrency:
            raise ValueError("prefetch: want 0..%d, got %r" % (_MAX_CONCURRENCY - concurrency, prefetch))
        if min(poll_wait, heartbeat, stop_grace, backoff_min, backoff_max) < 0 or heartbeat == 0:
            raise ValueError("durations must be positive")
        self.handlers = dict(handlers)
        self.client = client or Client(url, token)
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.labels = list(labels)
        self.id = id or "%s-%d-%s" % (socket.gethostname(), os.getpid(), uuid.uuid4().hex[:4])
        # A restart under the same id is another instance: the peer hands
        # the previous one's tasks back at once (docs/api.md, Workers).
        self._instance = uuid.uuid4().hex[:16]
        self.poll_wait = poll_wait
        self.heartbeat = heartbeat
        self.stop_grace = stop_grace
        self.backoff_min = backoff_min
        self.backoff_max = max(backoff_max, backoff_min)
        # The poller has its own client (connection), so that stop() can
        # cut a waiting poll short.
        self._poller = Client(self.client.url, self.client.token, self.client.timeout)
        self._poll_conn = None
        self._stop = threading.Event()
        self._hard = threading.Event()
        self._cv = threading.Condition()
        self._running = {}  # lease -> Task, running or queued: the tasks held
        self._queue = queue.Queue()  # tasks for the handler threads
        # Outcomes (task, entry) for the reporter: a handler's thread and
        # slot are free while its outcome is sent. The reporter sends all
        # that waited in one batch; while it has one in flight, the poller
        # carries those waiting in its poll ("done").
        self._reports = queue.Queue(maxsize=2 * (concurrency + prefetch))
        self._no_line_times = False  # the peer refused lines with times (an older release)
        self._sending = False  # the reporter has a batch in flight
        self._batches = False  # the peer took a batch: polls may carry outcomes
        self._legacy = False  # the peer has no batch route: one call per lease
        self._max_request = _MAX_REQUEST  # bound on a batch's encoded size (lowered by a 413)
        self._polled = None  # when the last poll ended (monotonic)

    # -- control --------------------------------------------------------

    def stop(self):
        """Asks the worker to stop (safe from a signal handler or any
        thread); a second call stops without waiting for stop_grace."""
        if self._stop.is_set():
            self._hard.set()
        self._stop.set()
        conn = self._poll_conn
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # ends a waiting poll now
            except OSError:
                pass
        with self._cv:
            self._cv.notify_all()

    def run(self, handle_signals=True):
        """Polls and runs tasks until stop() (or SIGTERM/SIGINT, when
        called in the main thread with handle_signals), then stops
        gracefully and returns. Raises NeedleError when the peer refuses
        the poll itself (400, 401, 403, 404)."""
        old = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old[sig] = signal.signal(sig, lambda *_: self.stop())
        threads = [threading.Thread(target=self._runner, name="needle-worker-%d" % i, daemon=True)
                   for i in range(self.concurrency)]
        threads.append(threading.Thread(target=self._heartbeats, name="needle-heartbeat", daemon=True))
        reporter = threading.Thread(target=self._reporter, name="needle-report", daemon=True)
        for t in threads + [reporter]:
            t.start()
        try:
            self._poll_loop()
        finally:
            self._stop.set()
            self._poller.close()
            self._drain()
            for _ in range(self.concurrency):
                self._queue.put(None)
            self._reports.put(None)
            reporter.join(_REPORT_TIMEOUT)
            for sig, h in old.items():
                signal.signal(sig, h)

    # -- polling --------------------------------------------------------

    def _poll_loop(self):
        bo = _Backoff(self.backoff_min, self.backoff_max)
        # "slots" states the worker's capacity, which GET /v1/workers
        # shows; "max" (below) is what one poll asks for.
        body = {"worker": self.id, "instance": self._instance, "handlers": sorted(self.handlers),
                "slots": self.concurrency, "wait": "%dms" % round(self.poll_wait * 1000)}
        if self.labels:
            body["labels"] = self.labels
        carry = True  # the poll may carry outcomes
        failed = 0  # polls failed in a row: the first and the recovery are logged
        while not self._stop.is_set():
            with self._cv:
                held = self.concurrency + self.prefetch
                while len(self._running) >= held and not self._stop.is_set():
                    self._cv.wait()
                free = held - len(self._running)
            if self._stop.is_set():
                return
            body["max"] = free
            done = self._for_poll() if carry else []
            carry = True
            if done:
                body["done"] = [e for _, e in done]
            else:
                body.pop("done", None)
            try:
                self._poll_conn = self._poller._conn(self._poller.timeout + self.poll_wait)
                if self._stop.is_set():
                    self._put_back(done)
                    return
                # Not resent on a new connection: stop() ends a poll by
                # closing its connection.
                ans = self._poller.request("POST", "/v1/workers/poll", body,
                                           timeout=self._poller.timeout + self.poll_wait, resend=False)
                bo.reset()
                if failed:
                    _log.info("peer %s answers polls again after %d failed", self._poller.url, failed)
                    failed = 0
            except NeedleError as e:
                self._put_back(done)  # the reporter sends them again
                if self._stop.is_set():
                    return
                if done and e.status in (400, 413):
                    # Its outcomes were refused with it (a 400 applies
                    # none): the reporter sends them again, in batches
                    # of their own (split as the peer takes them); the
                    # next poll carries none, and a 400 of its own raises.
                    _log.info("poll with %d outcomes refused (%s): they are sent again apart", len(done), e)
                    if e.status == 413:
                        self._lower(_size([o[1] for o in done]))
                    carry = False
                    continue
                if e.status == 400 and e.field == "slots" and "slots" in body:
                    # A peer of an older release, which knows no slots:
                    # poll again at once, without it.
                    _log.info("peer %s takes no slots in a poll (an older release): polling without", self._poller.url)
                    del body["slots"]
                    continue
                if e.status in (400, 401, 403, 404):
                    raise
                failed += 1
                if not e.transient:
                    _log.warning("poll failed: %s", e)
                elif failed == 1:
                    # Else silent for as long as the peer is down (or the
                    # URL wrong): its tasks wait, "no live worker serves" them.
                    _log.warning("polls failing (%s): polling again with backoff until the peer %s answers",
                                 e, self._poller.url)
                self._stop.wait(bo.delay())
                continue
            finally:
                self._poll_conn = None
                self._polled = time.monotonic()
            self._verdicts(done, (ans or {}).get("done") or [])
            for i, raw in enumerate((ans or {}).get("tasks") or []):
                t = Task(raw)
                if i >= free or self._stop.is_set():
                    # Not ours to run: it goes back unrun, to run elsewhere.
                    t._end("released")
                    why = "stopped before the task started" if self._stop.is_set() else \
                        "had no free slot for the task"
                    self._reports.put(_release(t, "worker %s %s" % (self.id, why)))
                    continue
                with self._cv:
                    self._running[t.lease] = t
                self._queue.put(t)

    # -- running --------------------------------------------------------

    def _runner(self):
        while True:
            t = self._queue.get()
            if t is None:
                self.client.close()
                return
            outcome = None
            try:
                outcome = self._run_task(t)
                if outcome is not None:
                    # Queued before the slot is free: the next poll may
                    # carry it.
                    self._reports.put(_outcome(*outcome))
            finally:
                with self._cv:
                    self._running.pop(t.lease, None)
                    self._cv.notify_all()

    # -- reporting ------------------------------------------------------

    def _reporter(self):
        """Sends the waiting outcomes, all of them in one batch, until the
        end mark."""
        end = False
        while not end:
            o = self._reports.get()
            if o is None:
                break
            batch = [o]
            while len(batch) < _MAX_BATCH:
                try:
                    o = self._reports.get_nowait()
                except queue.Empty:
                    break
                if o is None:
                    end = True
                    break
                batch.append(o)
            self._sending = True
            try:
                self._send_batch(batch)
            finally:
                self._sending = False
        self.client.close()

    def _for_poll(self):
        """The waiting outcomes for a poll to carry: while the reporter has
        a batch in flight (an idle one sends them at once), once the peer
        is known to take batches."""
        out = []
        if not (self._batches and self._sending):
            return out
        room = self._max_request - 4096  # the poll's own fields
        while len(out) < _MAX_BATCH:
            try:
                o = self._reports.get_nowait()
            except queue.Empty:
                break
            if o is None:  # not while polling; kept for the reporter
                self._reports.put(o)
                break
            n = _size(o[1]) + 1
            if n > room:  # for the reporter, in a batch of its own
                self._reports.put(o)
                break
            room -= n
            self._send_logs(o[0])
            out.append(o)
        return out

    def _put_back(self, done):
        for o in done:
            self._reports.put(o)

    def _send_batch(self, batch):
        """Reports a batch (POST /v1/leases/report) in requests of at most
        _MAX_BATCH outcomes and self._max_request bytes, retrying transient
        errors for a while; to a peer without the route (404), each outcome
        on its lease."""
        for t, _ in batch:
            self._send_logs(t)
        for part in self._split(batch):
            self._send_part(part)

    def _split(self, batch):
        """Cuts a batch into requests the peer takes (as far as known)."""
        parts, cur, size = [], [], 0
        for o in batch:
            n = _size(o[1]) + 1
            if cur and (len(cur) >= _MAX_BATCH or size + n > self._max_request):
                parts.append(cur)
                cur, size = [], 0
            cur.append(o)
            size += n
        if cur:
            parts.append(cur)
        return parts

    def _lower(self, size):
        """Lowers the bound on a request after a 413 for one of size bytes."""
        self._max_request = max(1024, min(self._max_request, size // 2))

    def _send_part(self, batch):
        """Sends one request of a batch. Every outcome ends taken, refused
        by its verdict, or logged as not sent: a 413 sends them again in
        smaller requests (one alone too large fails its task, saying so); a
        whole request refused (400) is sent again without the entry it
        names, or split until the entry at fault is alone."""
        if self._legacy:
            return self._send_each(batch)
        try:
            ans = self._retry("/v1/leases/report", {"done": [e for _, e in batch]})
        except NeedleError as e:
            if e.status == 404:
                self._legacy = True
                return self._send_each(batch)
            if e.status == 413 and len(batch) > 1:
                self._lower(_size([e for _, e in batch]))
                _log.info("report of %d outcomes too large for the peer (%s): sent again in smaller ones",
                          len(batch), e)
                for part in self._split(batch):
                    self._send_part(part)
                return
            if e.status == 413 and "result" in batch[0][1]:
                t, entry = batch[0]
                why = "the result is %d bytes as JSON, too large for the peer to take in a request: %s" % (
                    _size(entry["result"]), e)
                _log.warning("result of %s not sent: %s; the task fails permanently", t.id, why, extra=_ids(t))
                return self._send_part([_outcome(t, None, why, True)])
            if e.status == 400 and len(batch) > 1:
                i = _entry(e.field)
                if i is not None and i < len(batch):
                    self._refused(batch[i][0], 400, "%s (the whole report of %d outcomes was refused for it; "
                                  "the others are sent again)" % (e, len(batch)), batch[i][1])
                    rest = batch[:i] + batch[i + 1:]
                else:
                    rest = batch
                    _log.warning("report of %d outcomes refused (%s): sent again in smaller ones", len(batch), e)
                if len(rest) == len(batch):
                    half = len(rest) // 2
                    self._send_part(rest[:half])
                    self._send_part(rest[half:])
                elif rest:
                    self._send_part(rest)
                return
            for t, entry in batch:
                self._refused(t, e.status, e, entry, sent=False)
            return
        self._batches = True
        self._verdicts(batch, (ans or {}).get("done") or [])

    def _send_each(self, batch):
        """Sends each outcome of a batch on its lease (an older peer)."""
        for t, e in batch:
            if e.get("release"):
                path, body = "/release", {"reason": e["reason"]}
            elif "error" in e:
                path, body = "/fail", {"error": e["error"], "permanent": e["permanent"]}
            else:
                path, body = "/complete", {"result": e["result"]}
            try:
                self._retry("/v1/leases/" + t.lease + path, body)
            except NeedleError as err:
                self._refused(t, err.status, err, e, code=err.code)

    def _retry(self, path, body):
        """Sends a report, retrying transient errors for _REPORT_TIMEOUT."""
        end = time.monotonic() + _REPORT_TIMEOUT
        bo = _Backoff(self.backoff_min, self.backoff_max)
        while True:
            try:
                return self.client.request("POST", path, body)
            except NeedleError as e:
                delay = bo.delay()
                if not e.transient or time.monotonic() + delay > end:
                    raise
                time.sleep(delay)

    def _verdicts(self, batch, verdicts):
        """Logs the outcomes of a batch the peer did not take (each verdict
        is final)."""
        for i, (t, entry) in enumerate(batch):
            v = verdicts[i] if i < len(verdicts) else {"status": 0, "error": {"code": "", "message": "no verdict"}}
            if v.get("status") != 200:
                err = v.get("error") or {}
                msg = "%s %s: %s" % (v.get("status"), err.get("code"), err.get("message"))
                if err.get("field"):
                    msg += " (%s)" % err["field"]
                self._refused(t, v.get("status"), msg, entry, code=err.get("code"))

    def _refused(self, t, status, e, entry, code=None, sent=True):
        """Logs an outcome the peer did not take: answered (sent) with its
        verdict, or not sent at all."""
        what = _kind(entry)
        if not sent:
            _log.warning("%s of %s not sent: %s", what, t.id, e, extra=_ids(t))
        elif code == "lease_lost":
            _log.info("%s of %s not taken: %s", what, t.id, e, extra=_ids(t))
        elif status == 400 and what == "result":
            # The peer took it as a failure (over --max-result).
            _log.warning("result of %s refused by the peer: %s; the task failed permanently", t.id, e, extra=_ids(t))
        else:
            _log.warning("%s of %s refused by the peer: %s", what, t.id, e, extra=_ids(t))

    def _run_task(self, t):
        """Runs t's handler; returns its outcome to report, or None."""
        with t._mu:
            if t._state != "running":
                return None  # handed back while queued
            t.began = True
        t.started = time.monotonic()
        fn = self.handlers.get(t.handler)
        result, error, permanent = None, None, False
        if fn is None:
            error = "worker %s has no handler %r" % (self.id, t.handler)
        else:
            try:
                result = fn(t)
            except Exception as e:  # noqa: BLE001 - any failure of the handler fails the attempt
                error, permanent = _describe(e), isinstance(e, Permanent)
                t.log(traceback.format_exc())
            else:
                try:
                    # NaN and Infinity are not JSON: the peer would refuse
                    # the whole report (or poll) that carried them.
                    n = len(json.dumps(result, allow_nan=False))
                except (TypeError, ValueError) as e:
                    result, error, permanent = None, "the handler's result is not JSON: %s" % e, True
                else:
                    if n > _MAX_REQUEST - 4096:
                        result, error, permanent = None, "the handler's result is %d bytes as JSON, over the %d " \
                            "a report of worker %s carries" % (n, _MAX_REQUEST - 4096, self.id), True
        if t._end("done"):
            return (t, result, error, permanent)
        return None

    def _send_logs(self, t):
        lines = t._take_lines()
        if not lines:
            return
        if self._no_line_times:
            lines = [ln["text"] for ln in lines]
        try:
            try:
                self.client.request("POST", "/v1/leases/" + t.lease + "/logs", {"lines": lines})
            except NeedleError as e:
                if e.status != 400 or not (e.field or "").startswith("lines") or self._no_line_times:
                    raise
                # A peer of an older release takes lines as strings only:
                # they go without their times (its arrival times) from now on.
                self._no_line_times = True
                self.client.request("POST", "/v1/leases/" + t.lease + "/logs",
                                    {"lines": [ln["text"] for ln in lines]})
        except NeedleError as e:
            _log.debug("logs of %s not sent: %s", t.id, e, extra=_ids(t))

    # -- heartbeats -----------------------------------------------------

    def _heartbeats(self):
        while not self._hard.wait(self.heartbeat / 2):
            now = time.monotonic()
            with self._cv:
                due = [t for t in self._running.values()
                       if t.began and t._state == "running" and now - t.started >= self.heartbeat
                       and now - getattr(t, "_beat", t.started) >= self.heartbeat]
            for t in due:
                t._beat = now
                self._beat(t)
        self.client.close()

    def _beat(self, t):
        self._send_logs(t)
        try:
            hb = self.client.request("POST", "/v1/leases/" + t.lease + "/heartbeat", {})
        except NeedleError as e:
            if e.code == "lease_lost":
                _log.warning("lease of %s lost: %s", t.id, e, extra=_ids(t))
                t._end("lost")
                t.canceled.set()
            elif not e.transient:
                _log.warning("heartbeat of %s refused: %s", t.id, e, extra=_ids(t))
            return
        if hb and hb.get("canceled"):
            _log.info("task %s canceled", t.id, extra=_ids(t))
            t._end("lost")
            t.canceled.set()

    # -- stopping -------------------------------------------------------

    def _drain(self):
        """Hands back the tasks not started (released: no attempt spent),
        waits for running handlers up to stop_grace, then releases the
        tasks of those still running and tells them to stop."""
        with self._cv:
            held = list(self._running.values())
        queued = []
        for t in held:
            with t._mu:
                if not t.began and t._state == "running":
                    t._state = "released"
                    queued.append(t)
        for t in queued:
            self._reports.put(_release(t, "worker %s stopped before the task started" % self.id))
        end = time.monotonic() + self.stop_grace
        with self._cv:
            while self._running and not self._hard.is_set():
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(min(left, 0.5))
            left_over = list(self._running.values())
        released = [t for t in left_over if t._end("released")]  # its late outcome is dropped
        for t in left_over:
            t.canceled.set()
        for t in released:
            self._reports.put(_release(t, "worker %s stopped before the handler returned" % self.id))
        self._hard.set()


def _outcome(t, result, error, permanent):
    """t's outcome as the reporter queues it: (task, batch entry)."""
    if error is None:
        return (t, {"lease": t.lease, "result": result})
    if len(error) > _MAX_ERROR:  # its head and tail, as the peer keeps them
        half = _MAX_ERROR // 2 - 64
        error = "%s\n[... %d characters cut ...]\n%s" % (error[:half], len(error) - 2 * half, error[-half:])
    return (t, {"lease": t.lease, "error": error, "permanent": permanent})


def _release(t, reason):
    """A release of t (handed back unrun, no attempt spent) as the reporter
    queues it."""
    b = reason.encode()
    if len(b) > _MAX_REASON:
        reason = b[:_MAX_REASON - 3].decode("utf-8", "ignore") + "..."
    return (t, {"lease": t.lease, "release": True, "reason": reason})


def _kind(entry):
    """What a batch entry reports: result, failure or release."""
    if entry.get("release"):
        return "release"
    return "failure" if "error" in entry else "result"


def _size(v):
    """v's size in bytes as the client encodes it (ASCII JSON)."""
    return len(json.dumps(v, allow_nan=False))


def _entry(field):
    """The index of the entry a field names ("done[3].lease"), else None."""
    if not field or not field.startswith("done["):
        return None
    try:
        return int(field[5:field.index("]")])
    except ValueError:
        return None


def _describe(e):
    msg = str(e)
    return "%s: %s" % (type(e).__name__, msg) if msg else type(e).__name__

