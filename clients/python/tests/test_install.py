"""`pip install ./clients/python`, as docs/clients.md says, offline.

The build backend is in the tree (_build/needle_build.py, standard library
only), so pip fetches nothing to build the wheel: with setuptools as the
backend, an offline install failed ("No matching distribution found for
setuptools>=61") unless setuptools and wheel were installed and
--no-build-isolation given.
"""

import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _offline_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PIP_") or k == "PYTHONPATH":
            del env[k]
    # No index, no local wheel directory, no pip.conf: nothing to fetch from.
    env.update(PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    return env


class InstallTest(unittest.TestCase):
    def test_pip_install_offline(self):
        if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
            self.skipTest("no pip for " + sys.executable)
        with tempfile.TemporaryDirectory() as tmp:
            site = os.path.join(tmp, "site")
            env = _offline_env()
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--target", site, ROOT],
                               capture_output=True, text=True, env=env, cwd=tmp)
            self.assertEqual(r.returncode, 0, "pip install %s offline:\n%s%s" % (ROOT, r.stdout, r.stderr))
            env["PYTHONPATH"] = site
            r = subprocess.run([sys.executable, "-c", "import needle_client, sys; sys.stdout.write(needle_client.__file__)"],
                               capture_output=True, text=True, env=env, cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(site), "imported %s; want the installed copy in %s" % (r.stdout, site))
            self.assertTrue(os.path.isdir(os.path.join(site, "needle_client-0.1.0.dist-info")))

    def test_wheel_contents(self):
        sys.path.insert(0, os.path.join(ROOT, "_build"))
        try:
            import needle_build
        finally:
            sys.path.pop(0)
        with tempfile.TemporaryDirectory() as tmp:
            name = needle_build.build_wheel(tmp)
            self.assertEqual(name, "needle_client-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(tmp, name)) as z:
                names = set(z.namelist())
                meta = z.read("needle_client-0.1.0.dist-info/METADATA").decode()
        for want in ("needle_client/__init__.py", "needle_client/client.py", "needle_client/worker.py",
                     "needle_client-0.1.0.dist-info/WHEEL", "needle_client-0.1.0.dist-info/RECORD"):
            self.assertIn(want, names)
        self.assertFalse([n for n in names if "__pycache__" in n or n.startswith("tests/")], names)
        for want in ("Name: needle-client", "Version: 0.1.0", "Requires-Python: >=3.9"):
            self.assertIn(want, meta)


if __name__ == "__main__":
    unittest.main()
