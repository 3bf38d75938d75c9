"""Integration tests against a real peer: they run when NEEDLE_TEST_URL
names one (cmd/needled's TestPythonClient starts needled and sets it, with
NEEDLE_API_TOKEN), and skip otherwise."""

import os
import threading
import unittest
import uuid

from needle_client import Client, NeedleError, Permanent, Worker

URL = os.environ.get("NEEDLE_TEST_URL")
WAIT = 60


@unittest.skipUnless(URL, "NEEDLE_TEST_URL names no peer")
class IntegrationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.prefix = "py%s." % uuid.uuid4().hex[:6]  # handler names of this run
        cls.blocked = threading.Event()
        cls.unblocked = threading.Event()

        def upper(task):
            base = task.payload["s"].upper()
            for name, res in sorted(task.inputs.items()):
                base += "+" + res["s"]
            return {"s": base, "attempt": task.attempt, "group": task.group}

        def flaky(task):
            if task.attempt == 1:
                raise RuntimeError("first attempt fails")
            # The second attempt is the last, and knows why the first failed.
            return [task.attempt, task.max_attempts, "first attempt fails" in (task.error or ""), task.priority]

        def bad(task):
            raise Permanent("no such image")

        def chatty(task):
            for i in range(3):
                task.log("step %d" % i)
                task.canceled.wait(0.4)  # spans heartbeats
            return "said it"

        def block(task):
            cls.blocked.set()
            if task.canceled.wait(WAIT):
                cls.unblocked.set()
            return None

        p = cls.prefix
        cls.worker = Worker({p + "upper": upper, p + "flaky": flaky, p + "bad": bad, p + "chatty": chatty,
                             p + "block": block, p + "nope": bad}, concurrency=4, heartbeat=0.2, poll_wait=5)
        cls.thread = threading.Thread(target=cls.worker.run, kwargs={"handle_signals": False}, daemon=True)
        cls.thread.start()
        cls.client = Client()

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.thread.join(WAIT)
        cls.client.close()

    def test_dag_with_inputs_and_retry(self):
        p = self.prefix
        res = self.client.submit_group([
            {"name": "a", "handler": p + "upper", "payload": {"s": "hi"}},
            {"name": "b", "handler": p + "upper", "payload": {"s": "there"}, "deps": ["a"]},
            {"name": "c", "handler": p + "flaky", "retry": {"max_attempts": 2, "backoff": "100ms"}, "priority": 3},
        ])
        g = self.client.wait_group(res["group"], timeout=WAIT)
        self.assertEqual(g["state"], "SUCCEEDED", g)
        by = {t["name"]: t for t in g["tasks"]}
        self.assertEqual(by["a"]["result"], {"s": "HI", "attempt": 1, "group": res["group"]})
        self.assertEqual(by["b"]["result"]["s"], "THERE+HI")
        self.assertEqual((by["c"]["result"], by["c"]["attempt"]), ([2, 2, True, 3], 2))

    def test_group_concurrency(self):
        p = self.prefix
        res = self.client.submit_group([{"handler": p + "upper", "payload": {"s": str(i)}} for i in range(4)],
                                       mode="parallel", concurrency=1)
        g = self.client.wait_group(res["group"], timeout=WAIT)
        self.assertEqual((g["state"], g["concurrency"]), ("SUCCEEDED", 1), g)

    def test_permanent_failure(self):
        t = self.client.wait(self.client.submit(self.prefix + "bad", {"img": 1},
                                                retry={"max_attempts": 3})["id"], timeout=WAIT)
        self.assertEqual((t["state"], t["attempt"]), ("FAILED", 1), t)
        self.assertIn("no such image", t["error"])

    def test_logs_of_a_long_task(self):
        tid = self.client.submit(self.prefix + "chatty")["id"]
        t = self.client.wait(tid, timeout=WAIT)
        self.assertEqual((t["state"], t["result"]), ("SUCCEEDED", "said it"), t)
        lines = [line["text"] for line in self.client.logs(tid)["lines"]]
        self.assertEqual(lines, ["step 0", "step 1", "step 2"])

    def test_cancel_reaches_the_handler(self):
        tid = self.client.submit(self.prefix + "block")["id"]
        self.assertTrue(self.blocked.wait(WAIT))
        self.client.cancel(tid)
        self.assertTrue(self.unblocked.wait(WAIT), "the handler was not told of the cancel")
        self.assertEqual(self.client.get(tid)["state"], "CANCELED")

    def test_iter_failed_stats_and_retry(self):
        h = self.prefix + "nope"
        ids = {self.client.submit(h, {"i": i})["id"] for i in range(3)}
        for tid in ids:
            self.assertEqual(self.client.wait(tid, timeout=WAIT)["state"], "FAILED")
        failed = [t["id"] for t in self.client.iter_tasks(state="FAILED", handler=h, limit=2)]  # two pages
        self.assertEqual(sorted(failed), sorted(ids))
        counts = {s["handler"]: s for s in self.client.stats()["handlers"]}[h]["counts"]
        self.assertEqual(counts.get("FAILED"), 3, counts)
        for tid in failed:
            self.client.retry(tid)
        for tid in ids:
            self.assertEqual(self.client.wait(tid, timeout=WAIT)["attempt"], 2)
        lonely = self.prefix + "nobody"
        tid = self.client.submit(lonely)["id"]
        try:
            st = {s["handler"]: s for s in self.client.stats()["handlers"]}[lonely]
            self.assertEqual(st.get("waiting"), 'no live worker serves handler "%s"' % lonely, st)
        finally:
            self.client.cancel(tid)

    def test_token_is_required(self):
        with self.assertRaises(NeedleError) as cm:
            Client(URL, token="wrong").list(limit=1)
        self.assertEqual(cm.exception.status, 401)


if __name__ == "__main__":
    unittest.main()
