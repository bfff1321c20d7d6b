"""Build ``dist/antrea``: the plugin as one self-contained executable file.

The result is a zipapp holding the plugin's modules of cni_client, minigrpc, h2, hpack and
hyperframe, behind a short POSIX ``sh`` prologue.  ``install -m 755 dist/antrea
/opt/cni/bin/antrea`` then works on a node that has some Python 3.6 or newer and no pip
packages: the runtime executes the plugin on the host, in its own environment, so nothing may
come from the node but the interpreter.

Choices and why:

* The file starts with ``#!/bin/sh``, not ``#!/usr/bin/env python3``: nodes do not agree on
  the interpreter's name.  RHEL 8 and its rebuilds may only have
  ``/usr/libexec/platform-python``, other nodes only a ``python3.X``.  The prologue tries
  ``python3`` on PATH, then ``/usr/libexec/platform-python``, then ``python3.X`` names (newest
  first) and ``pypy3``, and ``exec``s the first it finds on the same file.  Python reads a zip
  archive from its end (the central directory records where the members are), so the
  prologue in front of the archive is never seen by Python.  Where no interpreter exists, the
  prologue prints one CNI error JSON (code 999, naming what it looked for) and exits 1, as the
  plugin itself would, never a shell error.
* The interpreter runs with ``-I -S``: no ``PYTHON*`` variables, no user or system
  site-packages and no ``.pth`` start-up hooks of the node.  Everything the plugin imports is
  in the archive, and skipping ``site`` shortens every start.
* The vendored h2 4.1.0, hpack 4.0.0 and hyperframe 6.0.1 (``--for-python``, what ``make dist``
  builds) are the releases that support the oldest interpreter the bundle claims: Python
  3.6.1; they run unchanged up to 3.13 and on PyPy.  They are pinned, not "the newest that
  supports X.Y", so the bundle is the same whatever the index holds today.
* protobuf is not inside: the plugin encodes and decodes its two messages with
  :mod:`cni_client.messages`.  The modules that need protobuf (the reference agent, the demo and
  the generated ``cni_pb2``) are left out too, so nothing in the bundle can import it.
* zipimport cannot write bytecode caches, so every run would recompile every module it
  imports.  Each module therefore also ships as ``<name>.pyc`` compiled by the building
  interpreter as an *unchecked hash* pyc (PEP 552: no mtime to go stale in a zip).  Another
  Python version sees a different magic number and quietly falls back to the ``.py``.
* The vendored packages declare a minimum Python (``Requires-Python``); the entry point
  checks it first and answers with one CNI error JSON (code 999) instead of a SyntaxError
  traceback on an older interpreter (the prologue takes the first interpreter it finds).
* Members are stored, not deflated: zipimport would inflate every module it loads on every run,
  about 7 ms of a 60 ms start (docs/benchmarks.md), to save about 1.2 MB on disk.
* The archive is reproducible: sorted entries, fixed timestamps and permissions.
* The licenses of the vendored distributions go into ``LICENSES/``.

Without ``--for-python`` (or with ``--site-packages``) the build vendors the packages that the
building interpreter imports, for an offline build; the bundle then needs what they need.

Usage: ``python tools/build_dist.py [--output dist/antrea] [--for-python X.Y |
--site-packages DIR] [--no-compile]``
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import io
import os
import py_compile
import re
import stat
import subprocess
import sys
import tempfile
import zipfile
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The oldest Python that the plugin's modules of cni_client and minigrpc run on.
OWN_MIN_PYTHON = (3, 6)
#: Our packages, taken from the repository.
OWN_PACKAGES = ("cni_client", "minigrpc")
#: Modules of our packages that the plugin never imports and that need protobuf.
NOT_IN_BUNDLE = frozenset(("cni_client/agent.py", "cni_client/demo.py", "cni_client/cni_pb2.py"))
#: Vendored packages: (import name, distribution name whose metadata and licenses we read).
VENDORED = (("h2", "h2"), ("hpack", "hpack"), ("hyperframe", "hyperframe"))
#: Never copied: caches, compiled extensions, test data.
SKIPPED_DIRS = frozenset(("__pycache__", "testdata", "tests"))
COPIED_SUFFIXES = (".py", ".typed")
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
#: The interpreters the prologue tries, in order: what a node calls its Python 3.
INTERPRETERS = ("python3", "/usr/libexec/platform-python",
                *(f"python3.{minor}" for minor in range(14, 5, -1)), "pypy3")
#: The code of the plugin's own "internal error" (the skel's catch-all).
ERR_INTERNAL = 999

PROLOGUE = """\
#!/bin/sh
# antrea-cni: a POSIX sh prologue in front of a Python zip archive (tools/build_dist.py).
# sh runs these lines and execs Python on this same file; Python reads the archive from
# the end of the file and never sees them.
for python in {names}; do
    if command -v "$python" >/dev/null 2>&1; then
        exec "$python" -I -S "$0" "$@"
    fi
done
printf '{{\\n    "code": {code},\\n    "msg": "%s"\\n}}' '{message}'
exit 1
"""

ENTRY_POINT = '''\
"""antrea-cni as a zipapp (generated by tools/build_dist.py)."""
import sys

MIN_PYTHON = {min_python!r}
if sys.version_info[:2] < MIN_PYTHON:
    # The vendored packages need a newer Python: say so as one CNI error (code 999).
    found = ".".join(str(part) for part in sys.version_info[:3])
    needed = ".".join(str(part) for part in MIN_PYTHON)
    message = ("internal error: this antrea-cni bundle needs Python " + needed
               + " or newer, but it runs on Python " + found)
    out = getattr(sys.stdout, "buffer", None)
    if out is not None:
        out.write(('{{\\n    "code": 999,\\n    "msg": "' + message + '"\\n}}').encode())
        out.flush()
    sys.exit(1)

from cni_client.__main__ import main  # noqa: E402

sys.exit(main())
'''


def parse_requires_python(text: str) -> Tuple[int, int]:
    """The lowest ``>=X.Y`` in a Requires-Python value; (3, 0) when there is none."""
    versions = [(int(major), int(minor))
                for major, minor in re.findall(r">=\s*(\d+)\.(\d+)", text)]
    return max(versions) if versions else (3, 0)


def find_distribution_info(site_dir: str, distribution: str) -> Optional[str]:
    pattern = os.path.join(site_dir, f"{distribution.replace('-', '_')}-*.dist-info")
    matches = sorted(glob.glob(pattern))
    return matches[-1] if matches else None


def distribution_metadata(dist_info: Optional[str]) -> Dict[str, str]:
    fields: Dict[str, str] = {}
    if dist_info is None:
        return fields
    path = os.path.join(dist_info, "METADATA")
    if not os.path.exists(path):
        return fields
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line in ("\n", "\r\n"):
                break  # end of the header block (continuation lines start with spaces)
            key, sep, value = line.partition(":")
            if sep and key in ("Name", "Version", "Requires-Python", "License", "Home-page"):
                fields[key] = value.strip()
    return fields


def license_files(dist_info: Optional[str]) -> List[str]:
    if dist_info is None:
        return []
    found: List[str] = []
    for pattern in ("LICENSE*", "LICENCE*", "COPYING*", os.path.join("licenses", "*")):
        found.extend(path for path in glob.glob(os.path.join(dist_info, pattern))
                     if os.path.isfile(path))
    return sorted(set(found))


def locate_package(import_name: str, site_dir: Optional[str]) -> Tuple[str, str]:
    """(directory of the package, the site directory it lives in)."""
    if site_dir is not None:
        directory = os.path.join(site_dir, *import_name.split("."))
        if not os.path.isfile(os.path.join(directory, "__init__.py")):
            raise SystemExit(f"build_dist: {import_name} is not in {site_dir}")
        return directory, site_dir
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"build_dist: cannot import {import_name}; install it or pass"
                         " --site-packages")
    directory = next(iter(spec.submodule_search_locations))
    depth = import_name.count(".") + 1
    root = directory
    for _ in range(depth):
        root = os.path.dirname(root)
    return directory, root


def package_files(directory: str, archive_prefix: str) -> Iterator[Tuple[str, str]]:
    """(source path, archive name) for every file of a package that the bundle needs."""
    for current, subdirs, files in os.walk(directory):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        relative = os.path.relpath(current, directory)
        for name in sorted(files):
            if not name.endswith(COPIED_SUFFIXES):
                continue
            parts = [archive_prefix] + ([] if relative == "." else relative.split(os.sep))
            yield os.path.join(current, name), "/".join([*parts, name])


def compile_unchecked(source: str, archive_name: str, scratch: str) -> bytes:
    """The module's bytecode as an unchecked-hash pyc, for the building interpreter."""
    target = os.path.join(scratch, "module.pyc")
    py_compile.compile(source, cfile=target, dfile=archive_name, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    with open(target, "rb") as handle:
        return handle.read()


def collect(site_dir: Optional[str]) -> Tuple[Dict[str, bytes], Tuple[int, int], List[str]]:
    """Every archive member (name -> bytes), the minimum Python, and a report."""
    members: Dict[str, bytes] = {}
    report: List[str] = []
    min_python = OWN_MIN_PYTHON
    for package in OWN_PACKAGES:
        for source, name in package_files(os.path.join(REPO_ROOT, package), package):
            if name in NOT_IN_BUNDLE:
                continue
            with open(source, "rb") as handle:
                members[name] = handle.read()
        report.append(f"{package}: from the repository")
    for import_name, distribution in VENDORED:
        directory, root = locate_package(import_name, site_dir)
        prefix = import_name.replace(".", "/")
        for source, name in package_files(directory, prefix):
            with open(source, "rb") as handle:
                members[name] = handle.read()
        dist_info = find_distribution_info(root, distribution)
        metadata = distribution_metadata(dist_info)
        needed = parse_requires_python(metadata.get("Requires-Python", ""))
        min_python = max(min_python, needed)
        licenses = license_files(dist_info)
        for path in licenses:
            with open(path, "rb") as handle:
                members[f"LICENSES/{distribution}/{os.path.basename(path)}"] = handle.read()
        if not licenses:
            # Some older wheels ship no license file; record what the
            # distribution's metadata declares so the bundle still says what it contains.
            members[f"LICENSES/{distribution}/NOTICE"] = (
                f"{distribution} {metadata.get('Version', '?')} ships no license file.\n"
                f"Its metadata declares: License: {metadata.get('License', 'unknown')}\n"
                f"Home page: {metadata.get('Home-page', 'unknown')}\n"
            ).encode()
        report.append(f"{distribution} {metadata.get('Version', '?')}: {directory}"
                      f" (Requires-Python {metadata.get('Requires-Python', 'unknown')})")
    members["__main__.py"] = ENTRY_POINT.format(min_python=min_python).encode()
    return members, min_python, report


def add_bytecode(members: Dict[str, bytes]) -> int:
    """Add ``<module>.pyc`` beside each ``<module>.py`` (see the module docstring)."""
    count = 0
    with tempfile.TemporaryDirectory(prefix="build-dist-") as scratch:
        for name in sorted(members):
            if not name.endswith(".py") or name == "__main__.py":
                continue
            source = os.path.join(scratch, "source.py")
            with open(source, "wb") as handle:
                handle.write(members[name])
            try:
                members[name + "c"] = compile_unchecked(source, name, scratch)
                count += 1
            except py_compile.PyCompileError:
                pass  # a module this Python cannot compile is still shipped as source
    return count


def prologue(min_python: Tuple[int, int]) -> bytes:
    """The ``sh`` lines in front of the archive (see the module docstring)."""
    needed = f"{min_python[0]}.{min_python[1]}"
    message = (f"internal error: antrea-cni needs Python {needed} or newer and found no"
               f" interpreter; it looked for {', '.join(INTERPRETERS)}")
    if any(char in message for char in "'\"\\%"):  # quoted once by sh, once by JSON
        raise ValueError(f"the prologue's message needs no quoting: {message!r}")
    return PROLOGUE.format(names=" ".join(INTERPRETERS), code=ERR_INTERNAL,
                           message=message).encode()


def write_archive(members: Dict[str, bytes], output: str, header: bytes) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, members[name])
    directory = os.path.dirname(os.path.abspath(output))
    os.makedirs(directory, exist_ok=True)
    partial = output + ".partial"
    with open(partial, "wb") as handle:
        handle.write(header)
        handle.write(buffer.getvalue())
    os.chmod(partial, 0o755)
    os.replace(partial, output)


#: What ``--for-python`` vendors: the releases that support Python 3.6.1 and newer, the oldest
#: that setup.cfg's ``h2>=4.1,<5`` admits (hpack and hyperframe are h2's own dependencies).
PINNED = ("h2==4.1.0", "hpack==4.0.0", "hyperframe==6.0.1")


def download_site_packages(python_version: str, scratch: str) -> str:
    """Fetch the :data:`PINNED` pure-Python wheels, checking that they support
    ``python_version``, and unpack them into a site directory; returns it.  Uses pip, the
    ordinary client of the configured index."""
    if python_version.count(".") == 1:
        # pip compares Requires-Python with a full version and takes X.Y as X.Y.0, which
        # ">=3.6.1" refuses; X.Y stands for the whole series, so ask for its last patch level.
        python_version += ".99"
    wheels = os.path.join(scratch, "wheels")
    site_dir = os.path.join(scratch, "site-packages")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               "--dest", wheels, "--only-binary=:all:", "--python-version", python_version,
               "--implementation", "py", "--abi", "none", "--platform", "any", *PINNED]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"build_dist: pip could not download wheels for Python"
                         f" {python_version}:\n{done.stderr.strip()}")
    for wheel in sorted(glob.glob(os.path.join(wheels, "*.whl"))):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site_dir)
    return site_dir


def build(output: str, site_dir: Optional[str] = None, compile_bytecode: bool = True,
          for_python: Optional[str] = None) -> List[str]:
    if for_python is not None:
        with tempfile.TemporaryDirectory(prefix="build-dist-wheels-") as scratch:
            report = build(output, download_site_packages(for_python, scratch),
                           compile_bytecode)
        return [f"pinned wheels ({', '.join(PINNED)}) downloaded for Python {for_python}",
                *report]
    members, min_python, report = collect(site_dir)
    if compile_bytecode:
        count = add_bytecode(members)
        report.append(f"bytecode: {count} modules for Python"
                      f" {sys.version_info[0]}.{sys.version_info[1]}")
    write_archive(members, output, prologue(min_python))
    report.append(f"needs Python >= {min_python[0]}.{min_python[1]}")
    report.append(f"wrote {output} ({os.path.getsize(output)} bytes)")
    return report


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Build the antrea-cni zipapp.")
    parser.add_argument("--output", default=os.path.join("dist", "antrea"))
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--site-packages", metavar="DIR",
                        help="vendor h2/hpack/hyperframe from this directory instead"
                             " of from where this interpreter imports them")
    source.add_argument("--for-python", metavar="X.Y",
                        help="vendor the pinned h2/hpack/hyperframe releases, checked to"
                             " support Python X.Y (pip download)")
    parser.add_argument("--no-compile", action="store_true",
                        help="ship sources only (no .pyc for this Python version)")
    options = parser.parse_args(argv)
    for line in build(options.output, options.site_packages, not options.no_compile,
                      options.for_python):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
