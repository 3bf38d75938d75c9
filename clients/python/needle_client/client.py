"""Typed calls to the HTTP API of a needle peer (docs/api.md)."""

import http.client
import json
import os
import socket
import threading
import time
import urllib.parse

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELED")

# ?wait= of one long poll (the peer caps it, at 5m by default).
_WAIT_POLL = 300.0
# Pause when a long poll returns early and the task is not terminal.
_WAIT_MIN_GAP = 1.0
# Bound on an answer's size.
_MAX_ANSWER = 256 << 20


class NeedleError(Exception):
    """A non-2xx answer of the API (or no answer: status 0).

    ``status`` is the HTTP status, ``code`` the API's error code
    (invalid_argument, not_found, conflict, lease_lost, unavailable, ...),
    ``field`` the JSON path at fault, when the peer named one.
    """

    def __init__(self, status, code, message, field=None):
        super().__init__("%d %s: %s" % (status, code, message))
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    @property
    def transient(self):
        """True when the same request may succeed later: the peer was
        unavailable or busy (503, 429, 502, 504) or did not answer."""
        return self.status in (0, 429, 502, 503, 504)


def _duration(v):
    """Seconds (int or float) or a Go duration string, as a Go duration."""
    if v is None or isinstance(v, str):
        return v
    return "%dms" % round(v * 1000)


_MAX_TOKEN_FILE = 4096  # bytes read of a token file, as the Go client and the CLI


def _env_token():
    """Returns the token of the environment as the CLI reads it:
    $NEEDLE_API_TOKEN, or the contents of the file $NEEDLE_API_TOKEN_FILE
    names (a mounted secret: deploy/compose.yaml's), or None. A worker
    started beside the CLI with only the file set sent no token: 401. A
    file that cannot be read is a ValueError naming the variable, raised
    when the Client (or the Worker that makes one) is made."""
    value = os.environ.get("NEEDLE_API_TOKEN") or ""
    path = os.environ.get("NEEDLE_API_TOKEN_FILE") or ""
    if not path:
        return value or None
    if value:
        raise ValueError("NEEDLE_API_TOKEN and NEEDLE_API_TOKEN_FILE are both set: set one")
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_TOKEN_FILE + 1)
        token = raw.decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        # Named, as the Go client names it: a bare FileNotFoundError of a
        # worker's start said nothing of which setting was wrong.
        raise ValueError("NEEDLE_API_TOKEN_FILE: cannot read %s: %s" % (path, e)) from e
    if len(raw) > _MAX_TOKEN_FILE:
        raise ValueError("NEEDLE_API_TOKEN_FILE: %s is larger than %d bytes" % (path, _MAX_TOKEN_FILE))
    if not token:
        raise ValueError("NEEDLE_API_TOKEN_FILE: %s is empty" % path)
    if "\n" in token or "\r" in token:
        raise ValueError("NEEDLE_API_TOKEN_FILE: %s holds more than one line: a client's file holds the token alone" % path)
    return token


class Client:
    """Calls the HTTP API of one peer; any peer answers for the whole mesh.

    ``url`` defaults to $NEEDLE_URL, else $NEEDLE_ADDR (the CLI's), else
    http://127.0.0.1:7070 (a variable's ``host:port`` is
    ``http://host:port``, as the CLI and the Go client read it); ``token``
    to $NEEDLE_API_TOKEN, else the
    contents of the file $NEEDLE_API_TOKEN_FILE names (as the CLI reads
    them). Connections are kept alive, one per thread.
    """

    def __init__(self, url=None, token=None, timeout=60.0):
        name, given = "url", url
        if not url:
            name, given = next(((v, os.environ[v]) for v in ("NEEDLE_URL", "NEEDLE_ADDR") if os.environ.get(v)),
                               (None, "http://127.0.0.1:7070"))
            # NEEDLE_ADDR=127.0.0.1:7070, which the CLI takes, was refused
            # here ("want http(s)://host:port") while the docs said the
            # variables were read as the CLI reads them.
            url = given if "://" in given else "http://" + given
        if token is None:
            token = _env_token()
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("%s: want http(s)://host:port, got %r" % (name, given))
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._scheme = u.scheme
        self._netloc = u.netloc
        self._prefix = u.path.rstrip("/")
        self._local = threading.local()

    # -- transport ------------------------------------------------------

    def _conn(self, timeout):
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            c = cls(self._netloc, timeout=timeout)
        c.timeout = timeout
        if c.sock is None:
            try:
                c.connect()
            except OSError as e:
                c.close()
                self._local.conn = None
                raise NeedleError(0, "unreachable", "connect to %s: %s" % (self.url, e)) from e
            # Headers and body go in one write, but without this a small
            # request can wait for a delayed ACK (Nagle).
            c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._local.conn = c
        c.sock.settimeout(timeout)
        return c

    def close(self):
        """Closes this thread's connection (the next request opens one)."""
        self._drop_conn()

    def _drop_conn(self):
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def request(self, method, path, body=None, timeout=None, resend=True):
        """Sends one request and returns the decoded JSON answer (None when
        it has no body). A non-2xx answer raises NeedleError; so does a
        request that got no answer (status 0, code "unreachable"). With
        resend, a request that failed on a kept-alive connection is sent
        once more on a new one (the peer may have closed the idle one)."""
        timeout = self.timeout if timeout is None else timeout
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            # NaN and Infinity are not JSON (the peer refuses them): a
            # ValueError, before anything is sent.
            data = json.dumps(body, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        # A kept-alive connection the peer closed fails at once: send again
        # once on a fresh one.
        for attempt in (0, 1):
            reused = getattr(self._local, "conn", None) is not None
            try:
                conn = self._conn(timeout)
                conn.request(method, self._prefix + path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read(_MAX_ANSWER)
            except (OSError, http.client.HTTPException) as e:
                self._drop_conn()
                if resend and reused and attempt == 0 and not isinstance(e, TimeoutError):
                    continue
                raise NeedleError(0, "unreachable", "%s %s: %s" % (method, path, e)) from e
            if resp.getheader("Connection", "").lower() == "close":
                self._drop_conn()
            break
        if resp.status // 100 != 2:
            raise _answer_error(resp.status, raw)
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise NeedleError(resp.status, "bad_answer", "%s %s: %s" % (method, path, e)) from e

    # -- tasks and groups ----------------------------------------------

    def submit(self, handler, payload=None, *, key=None, priority=None, timeout=None, retry=None,
               delay=None, require=None, pin=None, notify=None, trace=None):
        """Submits one task: POST /v1/tasks. Returns {"id", "group"}.

        ``timeout`` and ``delay`` are seconds or Go durations ("30s");
        ``retry`` is {"max_attempts": 3, "backoff": "1s", ...}.
        """
        body = {"handler": handler, "payload": payload}
        body.update(_fields(key=key, priority=priority, timeout=_duration(timeout), retry=retry,
                            delay=_duration(delay), require=require, pin=pin, notify=notify, trace=trace))
        return self.request("POST", "/v1/tasks", body)

    def submit_group(self, tasks=None, *, mode="dag", stages=None, key=None, notify=None, trace=None,
                     concurrency=None):
        """Submits a group: POST /v1/groups. ``tasks`` is a list of task
        dicts ({"name", "handler", "payload", "deps", ...}) for modes "dag"
        and "parallel"; ``stages`` a list of lists for "pipeline".
        ``concurrency`` runs at most that many of its tasks at once.
        Returns {"group", "tasks": {name: id}}."""
        body = {"mode": "pipeline" if stages is not None and mode == "dag" else mode}
        if tasks is not None:
            body["tasks"] = tasks
        body.update(_fields(stages=stages, key=key, notify=notify, trace=trace, concurrency=concurrency))
        return self.request("POST", "/v1/groups", body)

    def get(self, task_id, wait=None):
        """Returns a task; with ``wait`` (seconds) first waits until it is
        terminal or wait has passed."""
        return self.request("GET", "/v1/tasks/" + _q(task_id) + _query(wait=_duration(wait)),
                            timeout=self._poll_timeout(wait))

    def get_group(self, group_id, wait=None, tasks=True):
        """Returns a group (with its tasks unless tasks=False); ``wait`` as
        in get."""
        q = _query(wait=_duration(wait), tasks=None if tasks else "false")
        return self.request("GET", "/v1/groups/" + _q(group_id) + q, timeout=self._poll_timeout(wait))

    def wait(self, task_id, timeout=None):
        """Long-polls until the task is terminal and returns it. Raises
        TimeoutError after ``timeout`` seconds (None: never)."""
        return self._wait(lambda w: self.get(task_id, wait=w), timeout, task_id)

    def wait_group(self, group_id, timeout=None):
        """Long-polls until the group is terminal and returns it with its
        tasks (polling its summary until then)."""
        self._wait(lambda w: self.get_group(group_id, wait=w, tasks=False), timeout, group_id)
        return self.get_group(group_id)

    def _wait(self, get, timeout, what):
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            start = time.monotonic()
            w = _WAIT_POLL if end is None else max(0.0, min(_WAIT_POLL, end - start))
            v = get(w)
            if v.get("state") in TERMINAL:
                return v
            now = time.monotonic()
            if end is not None and now >= end:
                raise TimeoutError("%s is %s after %ss" % (what, v.get("state"), timeout))
            gap = _WAIT_MIN_GAP - (now - start)
            if gap > 0:
                time.sleep(gap if end is None else min(gap, end - now))

    def _poll_timeout(self, wait):
        return self.timeout + (wait or 0)

    def cancel(self, task_id):
        """Cancels a task and returns it."""
        return self.request("POST", "/v1/tasks/" + _q(task_id) + "/cancel")

    def cancel_group(self, group_id):
        """Cancels every non-terminal task of a group and returns it."""
        return self.request("POST", "/v1/groups/" + _q(group_id) + "/cancel")

    def retry(self, task_id, key=None):
        """Runs a FAILED or CANCELED task again and returns it."""
        return self.request("POST", "/v1/tasks/" + _q(task_id) + "/retry", _fields(key=key))

    def retry_group(self, group_id, key=None):
        """Runs every FAILED and CANCELED task of a group again."""
        return self.request("POST", "/v1/groups/" + _q(group_id) + "/retry", _fields(key=key))

    def list(self, **filters):
        """Lists tasks across the mesh: GET /v1/tasks?state=FAILED&handler=...
        Returns one page: {"tasks": [...], "cursor": next page's, ...}."""
        return self.request("GET", "/v1/tasks" + _query(**filters))

    def iter_tasks(self, **filters):
        """Yields every task across the mesh that matches the filters of
        GET /v1/tasks (state="FAILED", handler=..., created_after=...),
        newest first, page after page. A page some partitions did not
        answer raises NeedleError (503, missing_partitions) rather than
        skip their tasks."""
        q = dict(filters)
        q.setdefault("limit", 1000)
        while True:
            page = self.list(**q)
            missing = page.get("missing_partitions")
            if missing:
                raise NeedleError(503, "unavailable", "%d partitions did not answer: %s" % (len(missing), missing),
                                  "missing_partitions")
            yield from page["tasks"]
            if not page.get("cursor"):
                return
            q["cursor"] = page["cursor"]

    def stats(self):
        """Per handler across the mesh: tasks by state, the oldest READY
        task's age, and "waiting" when no live worker serves its READY
        tasks. GET /v1/stats."""
        return self.request("GET", "/v1/stats")

    def list_groups(self, **filters):
        """Lists groups across the mesh: GET /v1/groups."""
        return self.request("GET", "/v1/groups" + _query(**filters))

    def logs(self, task_id, attempt=None):
        """Returns a task's log: the latest attempt, or ``attempt``."""
        return self.request("GET", "/v1/tasks/" + _q(task_id) + "/logs" + _query(attempt=attempt))

    def events(self, task_id):
        """Returns a task's history, oldest first."""
        return self.request("GET", "/v1/tasks/" + _q(task_id) + "/events")["events"]

    def health(self):
        """Returns the peer's health (raises when it does not serve)."""
        return self.request("GET", "/healthz")


def _answer_error(status, raw):
    try:
        e = json.loads(raw)["error"]
        return NeedleError(status, e["code"], e.get("message", ""), e.get("field"))
    except (ValueError, KeyError, TypeError):
        msg = raw[:200].decode("utf-8", "replace").strip() or "HTTP %d" % status
        return NeedleError(status, "http_%d" % status, msg)


def _fields(**kw):
    return {k: v for k, v in kw.items() if v is not None}


def _q(s):
    return urllib.parse.quote(str(s), safe="")


def _query(**kw):
    q = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in sorted(kw.items()) if v is not None]
    return "?" + urllib.parse.urlencode(q) if q else ""
