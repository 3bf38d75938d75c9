"""Unit tests of Client against an in-memory peer (tests/fake.py)."""

import os
import unittest
from unittest import mock

from fake import FakePeer
from needle_client import Client, NeedleError
from needle_client.worker import _parse_time


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakePeer()
        self.addCleanup(self.fake.close)

    def client(self, url=None):
        c = Client(url or self.fake.url)
        self.addCleanup(c.close)
        return c

    def test_token_from_environment(self):
        with mock.patch.dict(os.environ, {"NEEDLE_API_TOKEN": "from-env", "NEEDLE_URL": self.fake.url}):
            c = Client()
            self.addCleanup(c.close)
        self.assertEqual((c.url, c.token), (self.fake.url, "from-env"))
        self.fake.tasks["g.0"] = [{"id": "g.0", "state": "SUCCEEDED"}]
        c.get("g.0")
        self.assertEqual(self.fake.requests[-1][3].get("Authorization"), "Bearer from-env")

    def test_wait_polls_until_terminal(self):
        self.fake.tasks["g.1"] = [{"id": "g.1", "state": "RUNNING"}, {"id": "g.1", "state": "RUNNING"},
                                  {"id": "g.1", "state": "SUCCEEDED", "result": 7}]
        c = self.client()
        with mock.patch("needle_client.client._WAIT_MIN_GAP", 0.0):
            t = c.wait("g.1")
        self.assertEqual((t["state"], t["result"], self.fake.gets["g.1"]), ("SUCCEEDED", 7, 3))
        self.assertTrue(all("wait=" in r[1] for r in self.fake.requests))

    def test_wait_times_out(self):
        self.fake.tasks["g.2"] = [{"id": "g.2", "state": "RUNNING"}]
        with self.assertRaises(TimeoutError):
            self.client().wait("g.2", timeout=0.05)

    def test_errors(self):
        with self.assertRaises(NeedleError) as cm:
            self.client().get("missing")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        self.assertFalse(cm.exception.transient)
        with self.assertRaises(NeedleError) as cm:
            self.client("http://127.0.0.1:1").get("x")
        self.assertEqual(cm.exception.status, 0)
        self.assertTrue(cm.exception.transient)
        with self.assertRaises(ValueError):
            Client("ftp://x")

    def test_ids_are_escaped(self):
        self.fake.tasks["a%2Fb"] = [{"id": "a/b", "state": "SUCCEEDED"}]
        self.client().get("a/b")
        self.assertEqual(self.fake.requests[-1][1], "/v1/tasks/a%2Fb")

    def test_parse_time(self):
        self.assertAlmostEqual(_parse_time("2026-01-02T03:04:05.123456789Z"), 1767323045.123456, places=5)
        self.assertEqual(_parse_time("2026-01-02T03:04:05Z"), 1767323045.0)
        self.assertIsNone(_parse_time(None))


if __name__ == "__main__":
    unittest.main()
