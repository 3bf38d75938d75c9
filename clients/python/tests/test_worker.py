"""Unit tests of Worker against an in-memory peer (tests/fake.py)."""

import os
import threading
import time
import unittest
from unittest import mock

from fake import FakePeer
from needle_client import Client, Permanent, Task, Worker
from needle_client.worker import _parse_time

WAIT = 20  # seconds a test waits for an event before it fails


class WorkerTest(unittest.TestCase):
    def setUp(self):
        self.fake = None
        self.threads = []

    def tearDown(self):
        for w, t in self.threads:
            w.stop()
            w.stop()
            t.join(WAIT)
        if self.fake:
            self.fake.close()

    def test_unreadable_token_file_fails_at_once(self):
        # The worker's client reads the token when it is made: a file that
        # cannot be read fails there, naming the variable, before any poll.
        self.fake = FakePeer(0)
        with mock.patch.dict(os.environ, {"NEEDLE_API_TOKEN_FILE": "/nonexistent/needle-api.token"}):
            os.environ.pop("NEEDLE_API_TOKEN", None)
            with self.assertRaisesRegex(ValueError, "NEEDLE_API_TOKEN_FILE: cannot read /nonexistent/needle-api.token"):
                Worker({"echo": lambda t: t.payload}, url=self.fake.url)
        self.assertEqual(self.fake.requests, [])

    def start(self, handlers, want, **kw):
        self.fake = FakePeer(want)
        kw.setdefault("backoff_min", 0.01)
        kw.setdefault("backoff_max", 0.05)
        kw.setdefault("poll_wait", 1.0)
        c = Client(self.fake.url, token="tok")
        self.addCleanup(c.close)
        w = Worker(handlers, client=c, **kw)
        errs = []

        def run():
            try:
                w.run(handle_signals=False)
            except Exception as e:  # noqa: BLE001
                errs.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append((w, t))
        return w, t, errs

    def test_runs_tasks(self):
        running, most, lock = [0], [0], threading.Lock()

        def echo(task):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.005)
            with lock:
                running[0] -= 1
            return {"i": task.payload, "attempt": task.attempt}

        def boom(task):
            raise ValueError("boom")

        def perm(task):
            raise Permanent("bad input")

        handlers = {"echo": echo, "boom": boom, "perm": perm, "notjson": lambda t: {1, 2}, "none": lambda t: None}
        n = 40
        w, t, errs = self.start(handlers, n, concurrency=4)
        self.fake.add("boom", 1)
        self.fake.add("perm", 2)
        self.fake.add("notjson", 3)
        self.fake.add("none", 4)
        self.fake.add("other", 5)
        self.fake.add("echo", *range(5, n))
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
        w.stop()
        t.join(WAIT)
        self.assertFalse(t.is_alive())
        self.assertEqual(errs, [])
        out = [self.fake.outcomes[self.fake.lease_of(i)] for i in range(n)]
        self.assertEqual(out[0], ("fail", "ValueError: boom", False))
        self.assertEqual(out[1], ("fail", "Permanent: bad input", True))
        self.assertEqual(out[2][0], "fail")
        self.assertIn("not JSON", out[2][1])
        self.assertTrue(out[2][2])
        self.assertEqual(out[3], ("complete", None))
        self.assertEqual(out[4], ("fail", "worker %s has no handler 'other'" % w.id, False))
        for i in range(5, n):
            self.assertEqual(out[i], ("complete", {"i": i, "attempt": 1}))
        self.assertLessEqual(most[0], 4)
        for p in self.fake.polls:
            self.assertTrue(1 <= p["max"] <= 4, p)
            self.assertEqual(p["handlers"], sorted(handlers))
            self.assertEqual(p["worker"], w.id)
        # Every lease reported; a repeat is allowed here: a poll that
        # carried outcomes and failed after the peer took them (a timeout on
        # a loaded machine) hands them to the reporter again, and the peer
        # answers a repeat as taken (the first outcome counts, checked above).
        self.assertEqual(set(self.fake.reports), {self.fake.lease_of(i) for i in range(n)})
        self.assertTrue(all(r[3].get("Authorization") == "Bearer tok" for r in self.fake.requests))
        # A failure's traceback is in the task's log.
        self.assertTrue(any("ValueError: boom" in line for line in self.fake.logs[self.fake.lease_of(0)]))

    def test_heartbeats_and_cancel(self):
        ended = threading.Event()

        def long(task):
            task.log("working\non it")
            task.canceled.wait(WAIT)
            ended.set()
            return "late"

        w, t, errs = self.start({"long": long}, 1, heartbeat=0.05)
        self.fake.cancel_after = 3
        self.fake.add("long", 1)
        self.assertTrue(ended.wait(WAIT))
        w.stop()
        t.join(WAIT)
        lease = self.fake.lease_of(0)
        self.assertEqual(self.fake.beats[lease], 3)
        self.assertEqual(self.fake.reports.get(lease), None)  # canceled: no outcome
        self.assertEqual(self.fake.logs[lease], ["working", "on it"])

    def test_retries_transient_errors(self):
        w, t, errs = self.start({"echo": lambda task: task.payload}, 2)
        self.fake.fail_next = {"poll": 3, "report": 2}
        self.fake.drop_next = 2
        self.fake.lost.add(self.fake.lease_of(1))
        self.fake.add("echo", "a", "b", "c")
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
        w.stop()
        t.join(WAIT)
        self.assertEqual(self.fake.outcomes[self.fake.lease_of(0)], ("complete", "a"))
        self.assertEqual(self.fake.outcomes[self.fake.lease_of(2)], ("complete", "c"))
        self.assertEqual(self.fake.reports.get(self.fake.lease_of(1)), None)  # lost: 409, not retried
        self.assertEqual(self.fake.fail_next, {"poll": 0, "report": 0})
        self.assertEqual(self.fake.drop_next, 0)

    def test_logs_an_unreachable_peer(self):
        # A peer that does not answer its polls (down, or a wrong URL) is
        # logged once when the polls start failing and once when it answers
        # again, not on every poll; it was silent.
        with self.assertLogs("needle_client", "INFO") as logs:
            w, t, errs = self.start({"echo": lambda task: task.payload}, 1)
            self.fake.fail_next = {"poll": 4}
            self.until(lambda: self.fake.fail_next["poll"] == 0, "4 polls failed")
            self.fake.add("echo", "a")
            self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
            w.stop()
            t.join(WAIT)
        text = "\n".join(logs.output)
        self.assertEqual(text.count("polls failing"), 1, text)
        self.assertIn("503", text)
        self.assertEqual(text.count("answers polls again after 4 failed"), 1, text)
        self.assertEqual(errs, [])

    def test_graceful_stop(self):
        started = threading.Semaphore(0)
        finish = threading.Event()

        def quick(task):
            started.release()
            finish.wait(WAIT)
            return "done"

        def stuck(task):
            started.release()
            task.canceled.wait(WAIT)
            raise Permanent("gave up")

        w, t, errs = self.start({"quick": quick, "stuck": stuck}, 2, concurrency=2, stop_grace=0.5)
        self.fake.add("quick", 1)
        self.fake.add("stuck", 2)
        self.assertTrue(started.acquire(timeout=WAIT) and started.acquire(timeout=WAIT))
        w.stop()
        finish.set()
        t.join(WAIT)
        self.assertFalse(t.is_alive())
        self.assertEqual(self.fake.outcomes[self.fake.lease_of(0)], ("complete", "done"))
        # The handler still running when the grace ended: its task is
        # handed back unrun (no attempt spent), as a killed worker's is.
        self.assertEqual(self.fake.outcomes[self.fake.lease_of(1)],
                         ("release", "worker %s stopped before the handler returned" % w.id))

    def test_prefetch(self):
        started = []
        release = threading.Event()
        began = threading.Event()

        def block(task):
            started.append(task.id)
            began.set()
            release.wait(WAIT)
            return "ran"

        w, t, errs = self.start({"block": block}, 3, concurrency=1, prefetch=2)
        self.fake.add("block", 1, 2, 3)
        self.assertTrue(began.wait(WAIT))
        deadline = time.monotonic() + WAIT
        while len(self.fake.leases) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(self.fake.polls[0]["max"], 3)
        self.assertEqual(len(started), 1)  # concurrency 1: the others wait
        w.stop()
        with self.fake.cv:  # the waiting two are handed back at once
            self.assertTrue(self.fake.cv.wait_for(lambda: len(self.fake.outcomes) == 2, timeout=WAIT))
        release.set()
        t.join(WAIT)
        for i in range(3):
            out = self.fake.outcomes[self.fake.lease_of(i)]
            if "g.%d" % i == started[0]:
                self.assertEqual(out, ("complete", "ran"))
            else:  # handed back unrun: no attempt spent
                self.assertEqual(out, ("release", "worker %s stopped before the task started" % w.id))
        self.assertEqual(len(started), 1)

    def test_releases_tasks_beyond_its_slots(self):
        # A poll that brings more tasks than asked for: the extra one is
        # handed back unrun.
        w, t, errs = self.start({"echo": lambda task: task.payload}, 2, concurrency=1)
        self.fake.extra = 1
        self.fake.add("echo", 0, 1)
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
        w.stop()
        t.join(WAIT)
        self.assertEqual(self.fake.outcomes[self.fake.lease_of(0)], ("complete", 0))
        kind, reason = self.fake.outcomes[self.fake.lease_of(1)]
        self.assertEqual(kind, "release")
        self.assertIn(w.id, reason)

    def test_stop_ends_a_waiting_poll(self):
        w, t, errs = self.start({"x": lambda task: None}, 0, poll_wait=60)
        deadline = time.monotonic() + WAIT
        while not self.fake.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        w.stop()
        t.join(WAIT)
        self.assertFalse(t.is_alive(), "run() still waits on its poll")

    def test_poll_refused(self):
        self.fake = FakePeer()
        self.fake.refuse_poll = 401
        w = Worker({"x": lambda task: None}, client=Client(self.fake.url))
        with self.assertRaises(Exception) as cm:
            w.run(handle_signals=False)
        self.assertEqual(cm.exception.status, 401)

    def test_validation(self):
        for kw in ({"handlers": {}}, {"handlers": {"x": 1}}, {"handlers": {"x": print}, "concurrency": 0},
                   {"handlers": {"x": print}, "heartbeat": 0}):
            handlers = kw.pop("handlers")
            with self.assertRaises(ValueError):
                Worker(handlers, url="http://127.0.0.1:1", **kw)

    def test_task_trace(self):
        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        raw = {"id": "g.0", "handler": "h", "lease": "l", "trace": tp}
        self.assertEqual(Task(raw).trace, tp)
        del raw["trace"]
        self.assertIsNone(Task(raw).trace)

    def test_task_context(self):
        raw = {"id": "g.3", "handler": "h", "lease": "l", "attempt": 1, "priority": 5, "max_attempts": 3,
               "error": "disk full", "stage": 1, "item": 7}
        t = Task(raw)
        self.assertEqual((t.attempt, t.max_attempts, t.priority, t.error, t.stage, t.item), (2, 3, 5, "disk full", 1, 7))
        # A peer of an older release sends none of them (priority 0, error null).
        t = Task({"id": "g.3", "handler": "h", "lease": "l", "priority": 0, "error": None})
        self.assertEqual((t.max_attempts, t.priority, t.error, t.stage, t.item), (None, 0, None, None, None))

    def until(self, cond, what):
        """Waits until cond() holds, WAIT seconds at most."""
        end = time.monotonic() + WAIT
        while not cond():
            if time.monotonic() > end:
                self.fail("not reached: %s" % what)
            time.sleep(0.005)

    def test_batches_outcomes(self):
        # Outcomes that finish while a report is in flight go together in
        # the next one, each reported once.
        release = threading.Event()

        def echo(task):
            if task.payload:
                release.wait(WAIT)
            return task.payload

        w, t, errs = self.start({"echo": echo}, 8, concurrency=2, prefetch=6)
        self.fake.gate = threading.Event()
        self.fake.add("echo", *range(8))
        self.until(lambda: self.fake.batches == [1], "task 0's report waits at the gate")
        release.set()
        self.until(lambda: w._reports.qsize() == 7, "the other outcomes queued")
        self.fake.gate.set()
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
        w.stop()
        t.join(WAIT)
        self.assertEqual(self.fake.batches, [1, 7])
        for i in range(8):
            self.assertEqual(self.fake.outcomes[self.fake.lease_of(i)], ("complete", i))
        self.assertEqual(set(self.fake.reports.values()), {1})
        self.assertEqual(errs, [])

    def test_poll_carries_outcomes(self):
        # Once the peer took a batch, a poll carries the outcomes waiting
        # while the reporter is busy, and they are not sent again.
        w, t, errs = self.start({"echo": lambda task: task.payload}, 3)
        self.fake.add("echo", 0)
        self.until(lambda: self.fake.lease_of(0) in self.fake.outcomes and w._batches, "task 0 reported")
        self.fake.gate = threading.Event()
        self.fake.add("echo", 1)  # its report waits at the gate
        self.until(lambda: len(self.fake.batches) == 2, "task 1's report sent")
        self.fake.add("echo", 2)  # its outcome goes with a poll
        self.until(lambda: any(e["lease"] == self.fake.lease_of(2) for d in self.fake.poll_done for e in d),
                   "a poll carries task 2's outcome")
        self.fake.gate.set()
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
        # The poll that carried it is answered (a poll cut short by the stop
        # would send its outcomes again, a harmless repeat).
        polls = len(self.fake.poll_done)
        self.until(lambda: len(self.fake.poll_done) > polls, "the next poll")
        w.stop()
        t.join(WAIT)
        self.assertEqual(self.fake.batches, [1, 1])
        self.assertEqual(self.fake.outcomes[self.fake.lease_of(2)], ("complete", 2))
        self.assertEqual(set(self.fake.reports.values()), {1})
        self.assertEqual(errs, [])

    def test_older_peer(self):
        # A peer without the batch route (404) is sent each outcome on its
        # lease.
        w, t, errs = self.start({"echo": lambda task: task.payload}, 5, concurrency=2)
        self.fake.no_batch = True
        self.fake.add("echo", *range(5))
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
        w.stop()
        t.join(WAIT)
        singles = [p for m, p, b, h in self.fake.requests if p.endswith("/complete")]
        self.assertEqual((len(singles), self.fake.batches), (5, []))
        self.assertEqual([d for d in self.fake.poll_done if d], [])
        self.assertEqual(set(self.fake.reports.values()), {1})

    def test_polls_state_slots(self):
        # A poll states the worker's capacity (its concurrency) as
        # "slots", which GET /v1/workers shows, beside "max", what the
        # poll asks for; a peer of an older release refuses "slots" (a 400
        # naming it), and the worker then polls without it.
        for older in (False, True):
            w, t, errs = self.start({"echo": lambda task: task.payload}, 4, concurrency=3, prefetch=2)
            self.fake.no_slots = older
            self.fake.add("echo", *range(4))
            self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
            w.stop()
            t.join(WAIT)
            self.assertEqual(errs, [])
            self.assertTrue(self.fake.polls)
            for p in self.fake.polls:
                self.assertEqual(p.get("slots"), None if older else 3, p)
                self.assertTrue(1 <= p["max"] <= 5, p)
            self.fake.close()
            self.fake = None

    def test_log_lines_carry_their_time(self):
        # Each line goes with the time the handler logged it (the peer
        # showed when it arrived: a short task's lines all had its end);
        # a peer of an older release refuses lines with times (a 400
        # naming lines), and the worker then sends them as strings.
        for older in (False, True):
            def work(task):
                task.log("first")
                time.sleep(0.05)
                task.log("second")
                return 1

            w, t, errs = self.start({"work": work}, 1)
            self.fake.no_line_times = older
            before = time.time()
            self.fake.add("work", 0)
            self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
            w.stop()
            t.join(WAIT)
            lease = self.fake.lease_of(0)
            self.assertEqual(self.fake.logs[lease], ["first", "second"])
            times = self.fake.log_times[lease]
            if older:
                self.assertEqual(times, [None, None])
                self.assertIn(("logs", "lines"), self.fake.refused)
            else:
                first, second = (_parse_time(s) for s in times)
                self.assertTrue(before - 1 <= first < second <= time.time() + 1, times)
                self.assertGreaterEqual(second - first, 0.04, times)
            self.fake.close()
            self.fake = None

    def test_nan_result_fails_its_task_alone(self):
        # NaN and Infinity are not JSON: the task fails permanently, and the
        # outcomes reported with it (batch or poll) are taken.
        release = threading.Event()

        def slow(task):
            release.wait(WAIT)
            return task.payload

        handlers = {"nan": lambda task: {"x": float("nan")}, "inf": lambda task: [float("-inf")],
                    "echo": lambda task: task.payload, "slow": slow}
        w, t, errs = self.start(handlers, 8, concurrency=2, prefetch=6)
        self.fake.add("echo", 0)
        self.until(lambda: w._batches, "a batch taken")
        self.fake.gate = threading.Event()  # the next batch waits: the polls carry outcomes
        self.fake.add("slow", 1)
        self.fake.add("nan", 2)
        self.until(lambda: len(self.fake.batches) == 2, "a batch waits at the gate")
        self.fake.add("inf", 3)
        self.fake.add("echo", 4, 5, 6, 7)
        self.until(lambda: sum(len(d) for d in self.fake.poll_done) >= 5, "polls carry the outcomes")
        self.fake.gate.set()
        release.set()
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes: %s" % self.fake.outcomes)
        w.stop()
        t.join(WAIT)
        self.assertEqual(errs, [])
        self.assertEqual(self.fake.refused, [])
        for i in (2, 3):
            kind, msg, permanent = self.fake.outcomes[self.fake.lease_of(i)]
            self.assertEqual((kind, permanent), ("fail", True))
            self.assertIn("not JSON", msg)
        for i in (0, 1, 4, 5, 6, 7):
            self.assertEqual(self.fake.outcomes[self.fake.lease_of(i)], ("complete", i))

    def test_client_refuses_nan(self):
        self.fake = FakePeer()
        c = Client(self.fake.url)
        self.addCleanup(c.close)
        with self.assertRaises(ValueError):
            c.submit("x", {"v": float("inf")})
        self.assertEqual(self.fake.sizes, [])  # nothing sent

    def big_results(self, n, size, **kw):
        """Runs n tasks whose results are size bytes each, their outcomes
        held until all n are done so that they go in one report."""
        all_done = threading.Barrier(n, timeout=WAIT)

        def big(task):
            all_done.wait()
            return "x" * size

        w, t, errs = self.start({"big": big}, n, concurrency=n, **kw)
        return w, t, errs

    def test_splits_reports_by_size(self):
        # Each report stays under the worker's bound on a request; none is
        # too large for the peer, and every outcome is taken.
        with mock.patch("needle_client.worker._MAX_REQUEST", 100_000):
            w, t, errs = self.big_results(12, 30_000)
            self.fake.max_body = 120_000
            self.fake.add("big", *range(12))
            self.assertTrue(self.fake.done.wait(WAIT), "outcomes of %s" % sorted(self.fake.outcomes))
            w.stop()
            t.join(WAIT)
        self.assertEqual(self.fake.too_large, [])
        self.assertTrue(all(n <= 100_000 for _, n in self.fake.sizes), self.fake.sizes)
        for i in range(12):
            self.assertEqual(self.fake.outcomes[self.fake.lease_of(i)], ("complete", "x" * 30_000))
        self.assertEqual(errs, [])

    def test_413_splits_the_report(self):
        # A peer whose --max-body is smaller than the worker's bound: a
        # report answered 413 is sent again in smaller ones, not dropped.
        w, t, errs = self.big_results(12, 30_000)
        self.fake.max_body = 100_000
        self.fake.add("big", *range(12))
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes of %s" % sorted(self.fake.outcomes))
        w.stop()
        t.join(WAIT)
        self.assertTrue(self.fake.too_large)
        for i in range(12):
            self.assertEqual(self.fake.outcomes[self.fake.lease_of(i)], ("complete", "x" * 30_000))
        self.assertEqual(errs, [])

    def test_413_on_a_poll(self):
        # A poll whose done is too large for the peer: its outcomes are
        # sent again (split), and the worker keeps polling.
        release = threading.Event()

        def big(task):
            if task.payload >= 2:
                release.wait(WAIT)
            return "x" * 30_000

        w, t, errs = self.start({"big": big}, 8, concurrency=8)
        self.fake.max_body = 100_000
        self.fake.add("big", 0)
        self.until(lambda: w._batches, "a batch taken")
        self.fake.gate = threading.Event()
        self.fake.add("big", 1)
        self.until(lambda: len(self.fake.batches) == 2, "a batch waits at the gate")
        self.fake.add("big", *range(2, 8))
        self.until(lambda: w._reports.qsize() == 0 and self.fake.queue == [], "tasks taken")
        release.set()
        self.until(lambda: any(p == "/v1/workers/poll" for p, _ in self.fake.too_large), "a poll's 413")
        self.fake.gate.set()
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes of %s" % sorted(self.fake.outcomes))
        w.stop()
        t.join(WAIT)
        for i in range(8):
            self.assertEqual(self.fake.outcomes[self.fake.lease_of(i)], ("complete", "x" * 30_000))
        self.assertEqual(errs, [])

    def test_outcome_too_large_for_any_request(self):
        # One result larger than the peer takes in a request: the task
        # fails permanently, saying why, rather than being lost.
        w, t, errs = self.start({"big": lambda task: "x" * task.payload}, 2)
        self.fake.max_body = 100_000
        self.fake.add("big", 200_000, 10)
        self.assertTrue(self.fake.done.wait(WAIT), "outcomes of %s" % sorted(self.fake.outcomes))
        kind, msg, permanent = self.fake.outcomes[self.fake.lease_of(0)]
        self.assertEqual((kind, permanent), ("fail", True))
        self.assertIn("413", msg)
        self.assertEqual(self.fake.outcomes[self.fake.lease_of(1)], ("complete", "x" * 10))
        # Larger than the worker's own bound: failed before it is sent.
        with mock.patch("needle_client.worker._MAX_REQUEST", 50_000):
            self.fake.want = 3
            self.fake.done.clear()
            self.fake.add("big", 60_000)
            self.assertTrue(self.fake.done.wait(WAIT), "outcomes of %s" % sorted(self.fake.outcomes))
        kind, msg, permanent = self.fake.outcomes[self.fake.lease_of(2)]
        self.assertEqual((kind, permanent), ("fail", True))
        self.assertIn("60002 bytes", msg)
        w.stop()
        t.join(WAIT)
        self.assertEqual(errs, [])

    def test_result_over_max_result_is_logged_as_refused(self):
        w, t, errs = self.start({"echo": lambda task: task.payload}, 1)
        self.fake.max_result = 10
        with self.assertLogs("needle_client", "INFO") as logs:
            self.fake.add("echo", "x" * 100)
            self.assertTrue(self.fake.done.wait(WAIT), "outcomes of %s" % sorted(self.fake.outcomes))
            w.stop()
            t.join(WAIT)
        text = "\n".join(logs.output)
        self.assertNotIn("not sent", text)
        self.assertIn("result of g.0 refused by the peer", text)
        self.assertIn("failed permanently", text)

    def test_malformed_entry_spares_its_batch(self):
        # A whole report refused (400) for one entry: the others are sent
        # again without it, and it is logged.
        w, t, errs = self.big_results(6, 10)
        self.fake.want = 5
        self.fake.refuse_lease = self.fake.lease_of(3)
        with self.assertLogs("needle_client", "INFO") as logs:
            self.fake.add("big", *range(6))
            self.assertTrue(self.fake.done.wait(WAIT), "outcomes of %s" % sorted(self.fake.outcomes))
            self.until(lambda: any("g.3" in line for line in logs.output), "g.3 logged")
            w.stop()
            t.join(WAIT)
        self.assertTrue(self.fake.refused)
        self.assertEqual(set(self.fake.outcomes), {self.fake.lease_of(i) for i in (0, 1, 2, 4, 5)})
        self.assertTrue(any("g.3" in line and "400" in line for line in logs.output), logs.output)


if __name__ == "__main__":
    unittest.main()
