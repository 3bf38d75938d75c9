"""Unit tests of Client against an in-memory peer (tests/fake.py)."""

import os
import shutil
import tempfile
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

    def test_addr_and_token_file_from_environment(self):
        # The CLI's variables: a team that exported NEEDLE_ADDR and mounted
        # a token file for the CLI gets its Python clients and workers
        # pointed at the same peer with the same token (audit s77, F3).
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, "api.token")
        with open(path, "w") as f:
            f.write("from-file\n")
        env = {"NEEDLE_ADDR": self.fake.url, "NEEDLE_API_TOKEN_FILE": path}
        with mock.patch.dict(os.environ, env):
            os.environ.pop("NEEDLE_URL", None)
            os.environ.pop("NEEDLE_API_TOKEN", None)
            c = Client()
            self.addCleanup(c.close)
        self.assertEqual((c.url, c.token), (self.fake.url, "from-file"))
        self.fake.tasks["g.0"] = [{"id": "g.0", "state": "SUCCEEDED"}]
        c.get("g.0")
        self.assertEqual(self.fake.requests[-1][3].get("Authorization"), "Bearer from-file")
        # NEEDLE_URL wins over NEEDLE_ADDR; both token variables is an error,
        # as in the CLI; so is a peer's token file line (two lines here).
        with mock.patch.dict(os.environ, {"NEEDLE_URL": self.fake.url, "NEEDLE_ADDR": "http://other:1"}):
            os.environ.pop("NEEDLE_API_TOKEN_FILE", None)
            self.assertEqual(Client().url, self.fake.url)
        with mock.patch.dict(os.environ, {"NEEDLE_API_TOKEN": "x", "NEEDLE_API_TOKEN_FILE": path}):
            with self.assertRaisesRegex(ValueError, "both set"):
                Client(self.fake.url)
        with open(path, "w") as f:
            f.write("tok1 name=a\ntok2 name=b\n")
        with mock.patch.dict(os.environ, {"NEEDLE_API_TOKEN_FILE": path}):
            os.environ.pop("NEEDLE_API_TOKEN", None)
            with self.assertRaisesRegex(ValueError, "more than one line"):
                Client(self.fake.url)

    def test_addr_without_scheme_from_environment(self):
        # NEEDLE_ADDR=host:port, as the CLI and the Go client's FromEnv
        # take it (http:// added); a bad variable is named in the error,
        # and a url passed in is taken as it is.
        host_port = self.fake.url.split("://", 1)[1]
        for name in ("NEEDLE_ADDR", "NEEDLE_URL"):
            with mock.patch.dict(os.environ, {name: host_port}):
                os.environ.pop("NEEDLE_URL" if name == "NEEDLE_ADDR" else "NEEDLE_ADDR", None)
                c = Client()
                self.addCleanup(c.close)
            self.assertEqual(c.url, self.fake.url)
        self.fake.tasks["g.0"] = [{"id": "g.0", "state": "SUCCEEDED"}]
        self.assertEqual(c.get("g.0")["state"], "SUCCEEDED")
        with mock.patch.dict(os.environ, {"NEEDLE_ADDR": "ftp://x:1"}):
            os.environ.pop("NEEDLE_URL", None)
            with self.assertRaisesRegex(ValueError, "^NEEDLE_ADDR: want http"):
                Client()
        with self.assertRaisesRegex(ValueError, "^url: want http"):
            Client(host_port)

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
