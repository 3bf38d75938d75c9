"""An in-tree PEP 517 build backend of the standard library only.

`pip install ./clients/python` then needs nothing but pip: no setuptools
or wheel to fetch into the isolated build environment, so it works
offline (a host without a package index, a CI image) as it does online.
The package is one directory of pure Python, so the wheel is a zip of it
with the metadata of pyproject.toml's [project] table; an editable
install (pip install -e) is a .pth file naming this directory.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "needle_client"


def _project():
    """Returns pyproject.toml's [project] table (tomllib from 3.11; below,
    the few flat keys the metadata needs, read line by line)."""
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib
    except ImportError:
        tomllib = None
    if tomllib is not None:
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    project, section = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[project]":
                m = re.match(r'([\w-]+)\s*=\s*"([^"]*)"$', line)
                if m:
                    project[m.group(1)] = m.group(2)
    return project


def _names():
    p = _project()
    name, version = p["name"], p["version"]
    dist = re.sub(r"[-_.]+", "_", name).lower()
    return p, name, version, dist


def _metadata():
    p, name, version, _ = _names()
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append("License: " + lic["text"])
    for c in p.get("classifiers", []):
        lines.append("Classifier: " + c)
    for d in p.get("dependencies", []):
        lines.append("Requires-Dist: " + d)
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _sources():
    """Yields (path in the archive, path on disk) of the package's files."""
    top = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, fn)
            yield os.path.relpath(full, ROOT).replace(os.sep, "/"), full


def _wheel(directory, files):
    """Writes a py3-none-any wheel of files ((name, bytes) pairs) and its
    dist-info, and returns its file name."""
    _, _, version, dist = _names()
    info = "%s-%s.dist-info" % (dist, version)
    files = list(files) + [
        (info + "/METADATA", _metadata().encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: needle_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = []
    for arc, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
    record.append(info + "/RECORD,,")
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode("utf-8")))
    name = "%s-%s-py3-none-any.whl" % (dist, version)
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            zi = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, [(arc, _read(full)) for arc, full in _sources()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, [("__editable__.%s.pth" % _names()[3], (ROOT + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    _, _, version, dist = _names()
    base = "%s-%s" % (dist, version)
    name = base + ".tar.gz"
    members = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
               ("README.md", os.path.join(ROOT, "README.md")),
               ("_build/needle_build.py", os.path.abspath(__file__))] + list(_sources())
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        pkg_info = _metadata().encode("utf-8")
        for arc, data in [("PKG-INFO", pkg_info)] + [(arc, _read(full)) for arc, full in members if os.path.exists(full)]:
            ti = tarfile.TarInfo(base + "/" + arc)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, int(time.time())
            t.addfile(ti, io.BytesIO(data))
    return name
