#!/usr/bin/env python3
"""A needle client written from docs/api.md alone (Python's standard library,
no needle client), and a tour of the API against worker.py: it submits
tasks, a parallel group and a DAG of the worker's handler, waits for them,
cancels a running task, lists and filters, and retries failed work, and
checks every answer. It exits 0 when all held, 1 naming the first that did
not.

    python3 worker.py --addr http://127.0.0.1:7070 --handlers demo &
    python3 client.py --addr http://127.0.0.1:7070 --handler demo
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELED"}


class APIError(Exception):
    def __init__(self, status, body, headers):
        err = body.get("error", {}) if isinstance(body, dict) else {}
        super().__init__(f"{status} {err.get('code')}: {err.get('message')}")
        self.status, self.code, self.field = status, err.get("code"), err.get("field")
        self.headers = headers


class Client:
    def __init__(self, addr, token=""):
        self.addr, self.token = addr.rstrip("/"), token

    def call(self, method, path, body=None, query=None, want=(200, 201)):
        """One request; 503 and 429 are sent again after their Retry-After.
        Answers (status, JSON body)."""
        url = self.addr + path + ("?" + urllib.parse.urlencode(query, doseq=True) if query else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        for _ in range(30):
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=330) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = {"error": {"code": "", "message": raw.decode(errors="replace")}}
                if e.code in (429, 503):
                    time.sleep(float(e.headers.get("Retry-After") or 1))
                    continue
                raise APIError(e.code, parsed, e.headers) from None
        raise APIError(503, {"error": {"code": "unavailable", "message": "gave up"}}, {})

    def submit(self, task, key=None):
        body = dict(task, **({"key": key} if key else {}))
        return self.call("POST", "/v1/tasks", body)

    def submit_group(self, group):
        return self.call("POST", "/v1/groups", group)[1]

    def wait(self, kind, id, timeout=60):
        """GET ?wait= (at most 5 minutes a call) until the task or group is terminal."""
        end = time.monotonic() + timeout
        while True:
            left = max(1, min(300, int(end - time.monotonic())))
            _, obj = self.call("GET", f"/v1/{kind}/{id}", query={"wait": f"{left}s"})
            if obj["state"] in TERMINAL or time.monotonic() >= end:
                return obj

    def task(self, id):
        return self.call("GET", f"/v1/tasks/{id}")[1]

    def whole(self, path, query=None, tries=50):
        """GET a list or the stats, again while some partition did not
        answer (missing_partitions: an owner being elected)."""
        for _ in range(tries):
            _, page = self.call("GET", path, query=query)
            if not page.get("missing_partitions"):
                return page
            time.sleep(0.2)
        raise AssertionError(f"{path}: partitions {page['missing_partitions']} did not answer")

    def list(self, kind, **filters):
        """Every page of GET /v1/tasks or /v1/groups."""
        out, query = [], dict(filters)
        while True:
            page = self.whole(f"/v1/{kind}", query)
            out += page[kind]
            if "cursor" not in page:
                return out
            query["cursor"] = page["cursor"]


def running(c, id, timeout=60):
    """Polls the task until a worker runs it; answers it."""
    end = time.monotonic() + timeout
    while True:
        t = c.task(id)
        if t["state"] == "RUNNING":
            return t
        if time.monotonic() > end:
            raise AssertionError(f"task {id} is {t['state']}, not RUNNING after {timeout}s")
        time.sleep(0.05)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}", flush=True)


def tour(c, h):
    run = uuid.uuid4().hex[:8]  # this run's tasks, apart from earlier ones

    # one task, submitted and waited for; its log; an idempotent repeat
    task = {"handler": h, "payload": {"log": ["hello", "world"], "result": {"run": run}}}
    st, sub = c.submit(task, key=f"tour-{run}")
    check(st == 201 and sub["id"] == sub["group"] + ".0", f"submit: 201, id {sub['id']}")
    st, again = c.submit(task, key=f"tour-{run}")
    check(st == 200 and again["id"] == sub["id"], "the same key again: 200, same id")
    try:
        c.submit(dict(task, priority=5), key=f"tour-{run}")
        check(False, "the key with another request is refused")
    except APIError as e:
        check(e.status == 409 and e.field == "key", "the key with another request: 409 naming key")
    t = c.wait("tasks", sub["id"])
    check(t["state"] == "SUCCEEDED" and t["result"]["result"] == {"run": run}, "the task SUCCEEDED with its result")
    _, logs = c.call("GET", f"/v1/tasks/{sub['id']}/logs")
    texts = [line["text"] for line in logs["lines"]]
    check(texts[:2] == ["hello", "world"] and logs["done"], f"its log: {texts}")

    # submit and wait in one call
    st, sub = c.call("POST", "/v1/tasks", {"handler": h, "payload": {"result": 7}}, query={"wait": "30s"})
    check(st == 201 and sub["task"]["state"] == "SUCCEEDED", "POST /v1/tasks?wait=: the task in the answer")

    # a retryable failure retried by the policy, a permanent one, one out of attempts
    st, flaky = c.submit({"handler": h, "payload": {"fail_until": 3},
                          "retry": {"max_attempts": 3, "backoff": "100ms"}})
    st, perm = c.submit({"handler": h, "payload": {"fail": "corrupt", "permanent": True},
                         "retry": {"max_attempts": 3, "backoff": "100ms"}})
    st, spent = c.submit({"handler": h, "payload": {"fail": "still down"},
                          "retry": {"max_attempts": 2, "backoff": "100ms"}})
    t = c.wait("tasks", flaky["id"])
    check(t["state"] == "SUCCEEDED" and t["attempt"] == 3, f"retryable failures: SUCCEEDED at attempt {t['attempt']}")
    t = c.wait("tasks", perm["id"])
    check(t["state"] == "FAILED" and t["attempt"] == 1 and t["error"] == "corrupt",
          f"a permanent failure: FAILED after 1 attempt ({t['error']!r})")
    t = c.wait("tasks", spent["id"])
    check(t["state"] == "FAILED" and t["attempt"] == 2, f"attempts spent: FAILED after {t['attempt']}")
    _, ev = c.call("GET", f"/v1/tasks/{spent['id']}/events")
    types = [e["type"] for e in ev["events"]]
    check(types.count("failed") == 2 and "readied" in types, f"its history: {types}")

    # a parallel group
    g = c.submit_group({"mode": "parallel", "tasks": [{"handler": h, "payload": {"result": i}} for i in range(6)]})
    grp = c.wait("groups", g["group"])
    check(grp["state"] == "SUCCEEDED" and grp["counts"] == {"SUCCEEDED": 6}, "a parallel group of 6 SUCCEEDED")

    # a DAG: sum gets the results of a and b as its inputs
    g = c.submit_group({"mode": "dag", "tasks": [
        {"name": "a", "handler": h, "payload": {"result": 2}},
        {"name": "b", "handler": h, "payload": {"result": 3, "sleep": 0.2}},
        {"name": "sum", "handler": h, "payload": {"result": "sum"}, "deps": ["a", "b"]}]})
    grp = c.wait("groups", g["group"])
    s = c.task(g["tasks"]["sum"])
    check(grp["state"] == "SUCCEEDED" and s["result"]["inputs"]["a"]["result"] == 2
          and s["result"]["inputs"]["b"]["result"] == 3, "a DAG: sum ran after a and b with their results")

    # a DAG whose first task fails: its dependent is canceled; a retry by hand runs both
    g = c.submit_group({"mode": "dag", "tasks": [
        {"name": "fetch", "handler": h, "payload": {"fail_until": 2}},
        {"name": "load", "handler": h, "deps": ["fetch"]}]})
    grp = c.wait("groups", g["group"])
    check(grp["state"] == "FAILED" and grp["counts"] == {"FAILED": 1, "CANCELED": 1},
          f"a failed DAG: {grp['counts']}")
    failed = c.list("tasks", state="FAILED", handler=h, q=g["group"])
    check([t["id"] for t in failed] == [g["tasks"]["fetch"]], "list state=FAILED finds its failed task")
    _, r = c.call("POST", f"/v1/groups/{g['group']}/retry", {"key": f"retry-{run}"})
    check("repeat" not in r, "the group retried")
    _, r = c.call("POST", f"/v1/groups/{g['group']}/retry", {"key": f"retry-{run}"})
    check(r.get("repeat") is True, "the same retry key again: repeat")
    grp = c.wait("groups", g["group"])
    check(grp["state"] == "SUCCEEDED", "after the retry the DAG SUCCEEDED")
    try:
        c.call("POST", f"/v1/groups/{g['group']}/retry")
        check(False, "nothing to retry is refused")
    except APIError as e:
        check(e.status == 409, "a group with nothing to retry: 409")

    # a running task canceled: the worker hears it on its heartbeat
    st, long = c.submit({"handler": h, "payload": {"sleep": 60}})
    running(c, long["id"])
    _, t = c.call("POST", f"/v1/tasks/{long['id']}/cancel")
    check(t["state"] == "CANCELED", "cancel a RUNNING task: CANCELED")
    _, t = c.call("POST", f"/v1/tasks/{long['id']}/retry")
    t = running(c, long["id"])
    check(t.get("retries") == 1, "a canceled task retried runs again")
    _, grp = c.call("POST", f"/v1/groups/{long['group']}/cancel")
    check(grp["state"] == "CANCELED", "its group canceled")

    # lists and filters: this run's work of the handler, paged
    tasks = c.list("tasks", handler=h, limit=5, created_after=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600)))
    check(len({t["id"] for t in tasks}) == len(tasks) >= 16, f"list handler={h}, 5 a page: {len(tasks)} tasks, none twice")
    groups = c.list("groups", state="CANCELED", handler=h)
    check(long["group"] in [g["id"] for g in groups], "list groups state=CANCELED finds the canceled one")
    stats = c.whole("/v1/stats")
    row = [r for r in stats["handlers"] if r["handler"] == h]
    check(row and row[0]["counts"].get("SUCCEEDED", 0) >= 10, f"stats for {h}: {row[0]['counts'] if row else None}")

    # errors the docs promise
    try:
        c.call("GET", "/v1/tasks/g000000000000000000000000.0")
        check(False, "an unknown task is a 404")
    except APIError as e:
        check(e.status == 404 and e.code == "not_found", "an unknown task: 404 not_found")
    try:
        c.call("POST", "/v1/groups", {"mode": "dag", "tasks": [{"name": "x", "handler": h, "deps": ["y"]}]})
        check(False, "an unknown dep is a 400")
    except APIError as e:
        check(e.status == 400 and e.field == "tasks[0].deps", f"an unknown dep: 400 naming {e.field}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", default=os.environ.get("NEEDLE_ADDR", "http://127.0.0.1:7070"))
    ap.add_argument("--handler", default="demo", help="a handler worker.py serves")
    args = ap.parse_args()
    try:
        tour(Client(args.addr, os.environ.get("NEEDLE_API_TOKEN", "")), args.handler)
    except (AssertionError, APIError) as e:
        print(f"FAIL {e}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
