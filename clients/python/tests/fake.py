"""An in-memory peer serving the worker protocol and a few task routes, for
the unit tests. Its knobs make requests fail."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakePeer:
    def __init__(self, want=0):
        self.cv = threading.Condition()
        self.queue = []  # tasks not handed out yet
        self.leases = {}  # lease -> task
        self.outcomes = {}  # lease -> ("complete", result) or ("fail", error, permanent)
        self.reports = {}  # lease -> outcome requests
        self.beats = {}  # lease -> heartbeats
        self.logs = {}  # lease -> lines
        self.log_times = {}  # lease -> the time each line came with (None: none)
        self.no_line_times = False  # an older peer: lines with times are a 400 naming lines
        self.polls = []  # poll bodies
        self.requests = []  # (method, path, body, headers)
        self.want = want
        self.done = threading.Event()
        self.fail_next = {}  # kind (poll, complete, fail, heartbeat) -> 503s to answer
        self.drop_next = 0  # requests answered by closing the connection
        self.lost = set()  # leases answering 409 lease_lost
        self.cancel_after = 0  # heartbeats after which a lease is canceled
        self.refuse_poll = 0  # a status every poll gets
        self.no_batch = False  # an older peer: no batch route
        self.no_slots = False  # an older peer: a poll with "slots" is a 400 naming it
        self.batches = []  # sizes of the batches received on the batch route
        self.poll_done = []  # the outcomes each poll carried, as it arrived
        self.gate = None  # a threading.Event batch reports wait for, when set
        self.max_body = None  # bytes: a larger request is 413 payload_too_large, as --max-body
        self.max_result = None  # bytes: a larger result is a 400 verdict and fails the task, as --max-result
        self.refuse_lease = None  # a lease whose entry makes its whole batch or poll a 400
        self.extra = 0  # tasks a poll hands out beyond its max (a misbehaving peer)
        self.too_large = []  # (path, bytes) of the requests answered 413
        self.refused = []  # (path, field) of the requests answered 400
        self.sizes = []  # (path, bytes) of every request
        self.tasks = {}  # task id -> task view, for GET /v1/tasks/{id}
        self.gets = {}  # task id -> GETs answered
        self.n = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                fake.serve(self, "POST")

            def do_GET(self):
                fake.serve(self, "GET")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]

    def close(self):
        with self.cv:
            self.cv.notify_all()
        self.server.shutdown()
        self.server.server_close()

    def lease_of(self, i):
        return "%032x" % (i + 1)

    def add(self, handler, *payloads):
        with self.cv:
            for p in payloads:
                t = {"id": "g.%d" % self.n, "group": "g", "handler": handler, "state": "RUNNING", "attempt": 0,
                     "round": 1, "payload": p, "lease": self.lease_of(self.n),
                     "deadline": "2999-01-01T00:00:00.123456789Z", "timeout": "1h"}
                self.n += 1
                self.queue.append(t)
            self.cv.notify_all()

    # -- serving --------------------------------------------------------

    def serve(self, h, method):
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        path = h.path
        with self.cv:
            self.sizes.append((path, n))
            if self.max_body is not None and n > self.max_body:
                self.too_large.append((path, n))
                return self.error(h, 413, "payload_too_large")
        try:
            # As Go's decoder: NaN and Infinity are not JSON.
            body = json.loads(raw, parse_constant=_not_json) if n else None
        except ValueError:
            with self.cv:
                self.refused.append((path, None))
            return self.error(h, 400, "invalid_argument")
        with self.cv:
            self.requests.append((method, path, body, dict(h.headers)))
            if self.drop_next > 0:
                self.drop_next -= 1
                h.close_connection = True
                h.wfile.flush()
                h.connection.shutdown(2)
                return
        if method == "POST" and h.headers.get("Content-Type") != "application/json":
            return self.error(h, 415, "unsupported_media_type")
        kind, lease = "poll", None
        if path == "/v1/leases/report":
            if self.no_batch:
                return self.error(h, 404, "not_found")
            kind = "report"
        elif path.startswith("/v1/leases/"):
            lease, kind = path[len("/v1/leases/"):].split("/", 1)
        elif path.startswith("/v1/tasks/") and method == "GET":
            return self.get_task(h, path)
        elif path != "/v1/workers/poll":
            return self.error(h, 404, "not_found")
        with self.cv:
            if self.fail_next.get(kind, 0) > 0:
                self.fail_next[kind] -= 1
                return self.error(h, 503, "unavailable")
        for i, e in enumerate((body or {}).get("done") or []):
            if e["lease"] == self.refuse_lease:  # a malformed entry: the whole request is refused
                with self.cv:
                    self.refused.append((path, "done[%d].lease" % i))
                return self.error(h, 400, "invalid_argument", "done[%d].lease" % i)
        if kind == "poll":
            return self.poll(h, body)
        if kind == "report":
            with self.cv:
                self.batches.append(len(body["done"]))
                gate = self.gate
            if gate is not None:
                gate.wait()
            with self.cv:
                verdicts = self.take_all(body["done"])
            return self.reply(h, 200, {"done": verdicts})
        return self.lease(h, kind, lease, body)

    def reply(self, h, status, obj):
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        try:
            h.wfile.write(data)
        except OSError:
            pass  # the client went away (a stopped worker's poll)

    def error(self, h, status, code, field=None):
        e = {"code": code, "message": code}
        if field:
            e["field"] = field
        self.reply(h, status, {"error": e})

    def take_all(self, done):
        """Takes a batch of outcomes; returns the verdicts. self.cv is held."""
        out = []
        for i, e in enumerate(done):
            lease = e["lease"]
            if lease not in self.leases or lease in self.lost:
                out.append({"lease": lease, "status": 409, "error": {"code": "lease_lost", "message": "lost"}})
                continue
            if e.get("release"):
                self.take(lease, ("release", e.get("reason")))
            elif e.get("error") is not None:
                self.take(lease, ("fail", e["error"], e.get("permanent", False)))
            elif self.too_big(e.get("result")):
                self.take(lease, ("fail", "result over --max-result", True))
                out.append({"lease": lease, "status": 400, "error": {
                    "code": "invalid_argument", "message": "result over --max-result",
                    "field": "done[%d].result" % i}})
                continue
            else:
                self.take(lease, ("complete", e.get("result")))
            out.append({"lease": lease, "status": 200})
        return out

    def too_big(self, result):
        return self.max_result is not None and len(json.dumps(result)) > self.max_result

    def take(self, lease, outcome):
        """Records an outcome of lease (the first is kept). self.cv is held."""
        self.reports[lease] = self.reports.get(lease, 0) + 1
        if lease not in self.outcomes:
            self.outcomes[lease] = outcome
            if len(self.outcomes) == self.want:
                self.done.set()
            self.cv.notify_all()

    def poll(self, h, body):
        wait = float(body["wait"].rstrip("ms")) / 1000
        if self.no_slots and "slots" in body:
            with self.cv:
                self.refused.append(("/v1/workers/poll", "slots"))
            return self.error(h, 400, "invalid_argument", "slots")
        with self.cv:
            self.poll_done.append(body.get("done") or [])
            verdicts = self.take_all(body.get("done") or [])
            if self.refuse_poll:
                return self.error(h, self.refuse_poll, "unauthenticated")
            self.cv.wait_for(lambda: self.queue, timeout=wait)
            self.polls.append(body)
            n = body["max"] + self.extra
            got, self.queue = self.queue[:n], self.queue[n:]
            for t in got:
                self.leases[t["lease"]] = t
        ans = {"tasks": got}
        if verdicts:
            ans["done"] = verdicts
        self.reply(h, 200, ans)

    def lease(self, h, kind, lease, body):
        with self.cv:
            if lease not in self.leases or lease in self.lost:
                return self.error(h, 409, "lease_lost")
            if kind == "heartbeat":
                self.beats[lease] = self.beats.get(lease, 0) + 1
                canceled = bool(self.cancel_after) and self.beats[lease] >= self.cancel_after
                return self.reply(h, 200, {"canceled": canceled, "deadline": "2999-01-01T00:00:00Z"})
            if kind == "logs":
                lines = body["lines"]
                if self.no_line_times and any(not isinstance(ln, str) for ln in lines):
                    self.refused.append(("logs", "lines"))
                    return self.error(h, 400, "invalid_argument", "lines")
                for ln in lines:
                    text, at = (ln, None) if isinstance(ln, str) else (ln["text"], ln.get("at"))
                    self.logs.setdefault(lease, []).append(text)
                    self.log_times.setdefault(lease, []).append(at)
                return self.reply(h, 200, {"ok": True})
            if kind == "release":
                self.take(lease, ("release", (body or {}).get("reason")))
            elif kind == "complete":
                if self.too_big(body["result"]):
                    self.take(lease, ("fail", "result over --max-result", True))
                    return self.error(h, 400, "invalid_argument", "result")
                self.take(lease, ("complete", body["result"]))
            else:
                self.take(lease, ("fail", body["error"], body["permanent"]))
            return self.reply(h, 200, {"ok": True})

    def get_task(self, h, path):
        tid = path[len("/v1/tasks/"):].split("?")[0]
        with self.cv:
            self.gets[tid] = self.gets.get(tid, 0) + 1
            views = self.tasks.get(tid)
            if not views:
                return self.error(h, 404, "not_found")
            v = views[min(self.gets[tid], len(views)) - 1]
        self.reply(h, 200, v)


def _not_json(name):
    raise ValueError("%s is not JSON" % name)
