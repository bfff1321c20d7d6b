"""Build ``dist/antrea``: the plugin as one self-contained executable file.

The result is a zipapp holding the plugin's modules of cni_client and minigrpc, and nothing
else, behind a short POSIX ``sh`` prologue.  ``install -m 755 dist/antrea
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
* The prologue passes the entry point as ``-c`` code and the file as its first argument,
  rather than running the archive: Python runs an archive's ``__main__.py`` through
  :mod:`runpy`, which imports importlib's Python parts, os, collections and functools first,
  about 8 ms of a 20 ms VERSION on 3.11.  The same entry point is also the archive's
  ``__main__.py``, so ``python dist/antrea`` still works.
* Nothing is vendored: minigrpc speaks HTTP/2 and HPACK with its own codecs
  (:mod:`minigrpc.http2.frames`, :mod:`minigrpc.http2.hpack_codec`), so h2, hpack and hyperframe
  are not inside, and the bundle is built from the repository alone, offline, the same on every
  machine.
* protobuf is not inside: the plugin encodes and decodes its two messages with
  :mod:`cni_client.messages`.  The modules that need protobuf (the reference agent, the demo and
  every generated ``*_pb2`` module, minigrpc's add-ons' included) are left out too; the plugin
  imports none of them.  So are minigrpc's servers, its asyncio package and its health and
  reflection add-ons (:data:`NOT_A_CLIENT`).
* zipimport cannot write bytecode caches, so without help every run would recompile every
  module it imports (about 1 MB of source, most of a cold start), and compiled code is tied to
  one interpreter's magic number.  Nor is zipimport cheap when it has bytecode: it reads the
  archive's whole central directory on every start, one entry per module per interpreter.  So
  the archive holds, per interpreter the building machine has (``cpython-36`` ...
  ``cpython-313``, ``pypy39``), one *blob*, ``bytecode/<cache tag>.marshal``: an index of
  module name -> (is a package, where its code is), then each module's code, compiled and
  marshalled by that interpreter.  The prologue's entry code knows each blob's offset in the
  file (the build writes them in), reads its own interpreter's (``sys.implementation.
  cache_tag``) index and puts a meta-path finder for it in front of every other, which reads
  the code of each module imported, and nothing else: the plugin's modules load without
  zipimport ever opening the archive (3 to 5 ms of CPU less per run than the trees of
  ``.pyc`` files zipimport served before, on 3.6 and 3.11).  An interpreter without a blob
  imports the sources at the archive root.  Our own modules are compiled without their type
  hints (tools/strip_typing.py): annotations are evaluated when a function is defined, so
  every module would import :mod:`typing`, and with it :mod:`re`, about 5 ms of CPU on every
  start on 3.11; the build output names any module that keeps typing (it then imports it
  itself).  Each compiler runs with ``PYTHONHASHSEED=0``, so
  that frozenset constants are marshalled in the same order on every build.  PyPy writes marshal
  format 2: its format 3 and later refer back to an equal object only when it is the same object,
  and which equal strings PyPy has made one object varies from run to run (one module in about
  four builds differed), while format 2 writes every object out in full.  The builder needs
  only the Python that runs it (3.6 or newer); the other interpreters are optional workers, and
  the build output says which versions have bytecode and which fall back to source.
* The plugin's modules need Python 3.6 (:data:`OWN_MIN_PYTHON`); the entry point checks it
  first and answers with one CNI error JSON (code 999) instead of a SyntaxError traceback on an
  older interpreter (the prologue takes the first interpreter it finds).
* Members are stored, not deflated: zipimport would inflate every module it loads on every run,
  about 7 ms of a 60 ms start (docs/benchmarks.md), to save about 1.2 MB on disk.
* The archive is reproducible: sorted entries, fixed timestamps and permissions.

Usage: ``python tools/build_dist.py [--output dist/antrea] [--no-compile | --compile-with
PYTHON ...]``
"""

import argparse
import glob
import io
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import zipfile
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Where strip_typing.py is, for the compiling interpreters.
TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))

#: The oldest Python that the plugin's modules of cni_client and minigrpc run on.
OWN_MIN_PYTHON = (3, 6)
#: Our packages, taken from the repository.
OWN_PACKAGES = ("cni_client", "minigrpc")
#: Modules of our packages that the plugin never imports and that need protobuf.
NOT_IN_BUNDLE = frozenset(("cni_client/agent.py", "cni_client/demo.py"))
#: Generated protobuf code (``*_pb2.py``, ``*_pb2_grpc.py``: cni_client's messages, minigrpc's
#: health, reflection and status add-ons) needs protobuf, which the bundle does not carry.
PROTOBUF_SUFFIXES = ("_pb2.py", "_pb2_grpc.py")
#: minigrpc's parts that a plugin making one blocking call never imports: the servers (blocking
#: and asyncio, and the server's end of HTTP/2 with its flood limits), the asyncio client, the
#: health and reflection add-ons, the command line, and the decisions of long-lived channels
#: (docs/long-lived-channels.md), which a one-shot call has no use for.  Left out, they cost
#: nothing on a start: zipimport reads the archive's whole central directory on every run, one
#: entry per source and per ``.pyc`` of every tree.
NOT_A_CLIENT = re.compile(
    r"^minigrpc/(aio/|health/|reflection/|_pb/|cli/|__main__\.py"
    r"|(blocking|protocol|driver)/server_|blocking/servicer_context\.py"
    r"|http2/(server|flood)\.py"
    r"|driver/(backoff|balancing|channel_args|hedging|keepalive|retries|service_config)\.py)"
)
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
        exec "$python" -I -S -c '{entry}' "$0" "$@"
    fi
done
printf '{{\\n    "code": {code},\\n    "msg": "%s"\\n}}' '{message}'
exit 1
"""

#: The entry point, run by the prologue as ``python -c`` and stored as the archive's
#: ``__main__.py`` for ``python dist/antrea``; ``{locate}`` finds the archive and ``{read}``
#: reads this interpreter's module blob (see the module docstring).  No single quote: the
#: prologue quotes it for sh.
ENTRY_POINT = """\
import sys
{locate}
MIN_PYTHON = {min_python!r}
if sys.version_info[:2] < MIN_PYTHON:
    # The plugin needs a newer Python: say so as one CNI error (code 999).
    found = ".".join(str(part) for part in sys.version_info[:3])
    needed = ".".join(str(part) for part in MIN_PYTHON)
    message = ("internal error: this antrea-cni bundle needs Python " + needed
               + " or newer, but it runs on Python " + found)
    out = getattr(sys.stdout, "buffer", None)
    if out is not None:
        out.write(("{{\\n    \\"code\\": 999,\\n    \\"msg\\": \\"" + message
                   + "\\"\\n}}").encode())
        out.flush()
    sys.exit(1)
# Each interpreter that has a blob imports every module from it (no zipimport, no
# central directory to read); any other imports the sources at the archive root.
BLOBS = {blobs}
blob = BLOBS.get(sys.implementation.cache_tag)
if blob is None:
    sys.path.insert(0, archive)
else:
    import marshal
{read}
    Spec = type(sys.__spec__)

    class Bundled:
        # Finds and loads the blob modules: name -> (is a package, where its code is).
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            found = modules.get(name)
            return None if found is None else Spec(name, cls, is_package=found[0])

        @staticmethod
        def create_module(spec):
            return None

        @staticmethod
        def exec_module(module):
            package, start, length = modules[module.__name__]
            exec(marshal.loads(code_of(start, length)), module.__dict__)

    sys.meta_path.insert(0, Bundled)
from cni_client.__main__ import main
sys.exit(main())
"""

#: How the entry point finds the archive and reads its blob.  Run by the prologue, ``python -c
#: CODE FILE ARGS``: argv becomes ``[FILE, ARGS...]``, as ``python FILE ARGS`` would make it,
#: and the blob starts at the offset the build wrote into the code (``BLOBS``: tag -> offset);
#: only the index and the code of the modules imported are read.  As ``__main__.py``, runpy
#: has set argv and the blob is an archive member.
LOCATE_FROM_PROLOGUE = "del sys.argv[0]\narchive = sys.argv[0]"
READ_FROM_PROLOGUE = """\
    bundle = open(archive, "rb")
    bundle.seek(blob)
    size = int.from_bytes(bundle.read(8), "little")
    modules = marshal.loads(bundle.read(size))
    base = blob + 8 + size

    def code_of(start, length):
        bundle.seek(base + start)
        return bundle.read(length)
"""
LOCATE_IN_MAIN = "archive = __loader__.archive"
READ_IN_MAIN = """\
    data = __loader__.get_data(archive + "/" + blob)
    size = int.from_bytes(data[:8], "little")
    modules = marshal.loads(data[8:8 + size])
    base = 8 + size

    def code_of(start, length):
        return data[base + start:base + start + length]
"""
#: Width of the offsets and lengths written into the prologue: its length must not depend on
#: them, since the offsets count it.
OFFSET_WIDTH = 10


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


def collect() -> Tuple[Dict[str, bytes], Tuple[int, int], List[str]]:
    """Every archive member (name -> bytes), the minimum Python, and a report."""
    members: Dict[str, bytes] = {}
    report: List[str] = []
    for package in OWN_PACKAGES:
        for source, name in package_files(os.path.join(REPO_ROOT, package), package):
            if (name in NOT_IN_BUNDLE or name.endswith(PROTOBUF_SUFFIXES)
                    or NOT_A_CLIENT.match(name)):
                continue
            with open(source, "rb") as handle:
                members[name] = handle.read()
        report.append(f"{package}: from the repository")
    return members, OWN_MIN_PYTHON, report


#: Where each interpreter's module blob lives in the archive: ``bytecode/<cache tag>.marshal``.
BYTECODE_DIR = "bytecode"

#: Run by each compiling interpreter (3.6 or newer, CPython or PyPy): compiles the archive
#: names read from stdin, found under argv[1], and writes to argv[2] one blob: the length of
#: its index (8 bytes, little-endian), the index, a ``marshal`` dict ``{module name: (is a
#: package, start, length)}``, then each module's marshalled code at ``start``.  The modules
#: whose names start with one of the prefixes in argv[4] (our own packages) are compiled without
#: typing by argv[3]'s :mod:`strip_typing`.  Then it prints its cache tag, its version, every
#: module that keeps typing (``typing <name>: why``) and every name it could not compile.
COMPILE_WORKER = """\
import ast, marshal, os, sys
source_dir, output, tools_dir = sys.argv[1], sys.argv[2], sys.argv[3]
stripped_prefixes = tuple(sys.argv[4].split(","))
sys.path.insert(0, tools_dir)
from strip_typing import Unsupported, strip_typing
modules = {}
codes = []
size = 0
# PyPy's marshal format 4 writes back-references that depend on object identity, so the same
# input can give other bytes: format 2 (no references) for its code and its index alike.
version = 2 if sys.implementation.name == "pypy" else marshal.version
failed = []
kept_typing = []
for name in sys.stdin.read().splitlines():
    with open(os.path.join(source_dir, name), "rb") as handle:
        source = handle.read()
    try:
        tree = ast.parse(source, name)
        if name.startswith(stripped_prefixes):
            try:
                tree = strip_typing(tree)
            except Unsupported as exc:
                kept_typing.append("typing %s: %s" % (name, exc))
                tree = ast.parse(source, name)
        code = compile(tree, name, "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError):
        failed.append(name)
        continue
    module = name[:-len(".py")].replace("/", ".")
    package = module.endswith(".__init__")
    if package:
        module = module[:-len(".__init__")]
    data = marshal.dumps(code, version)
    modules[module] = (package, size, len(data))
    codes.append(data)
    size += len(data)
index = marshal.dumps(modules, version)
with open(output, "wb") as handle:
    handle.write(len(index).to_bytes(8, "little") + index + b"".join(codes))
print(sys.implementation.cache_tag)
print("%d.%d.%d" % sys.version_info[:3])
for line in kept_typing:
    print(line)
for name in failed:
    print(name)
"""


class CompiledTree:
    """One interpreter's module blob, how many modules it holds, and what it could not
    compile."""

    def __init__(self, python: str, cache_tag: str, version: Tuple[int, ...], blob: bytes,
                 modules: int, failed: List[str], kept_typing: List[str]) -> None:
        self.python = python
        self.cache_tag = cache_tag
        self.version = version
        self.blob = blob
        self.modules = modules
        self.failed = failed
        self.kept_typing = kept_typing


def candidate_compilers() -> List[str]:
    """Every interpreter of this machine that may compile a tree: the builder's own Python, then
    pyenv's versions, then ``python3.X`` and ``pypy3`` on PATH.  Duplicates (one cache tag
    twice) are dropped after they report their tag."""
    found = [sys.executable]
    root = os.environ.get("PYENV_ROOT", "")
    if not root:
        pyenv = shutil.which("pyenv")
        if pyenv is not None:
            try:
                root = subprocess.run([pyenv, "root"], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, timeout=30,
                                      check=True).stdout.decode().strip()
            except (OSError, subprocess.SubprocessError):
                root = ""
    if root:
        found.extend(sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python3"))))
    for name in [f"python3.{minor}" for minor in range(6, 15)] + ["pypy3"]:
        path = shutil.which(name)
        if path is not None and "/shims/" not in path:  # pyenv's shims need a selection
            found.append(path)
    return found


def compile_tree(python: str, sources: Dict[str, bytes], scratch: str
                 ) -> Tuple[Optional[CompiledTree], str]:
    """Compile ``sources`` with ``python``: (the tree, "") or (None, why not)."""
    work = tempfile.mkdtemp(prefix="compile-", dir=scratch)
    source_dir, output = os.path.join(work, "src"), os.path.join(work, "modules.marshal")
    for name, data in sources.items():
        path = os.path.join(source_dir, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    # -S -s: nothing of the interpreter's site; not -I, which would ignore PYTHONHASHSEED.
    environment = {"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", os.defpath)}
    try:
        done = subprocess.run([python, "-S", "-s", "-c", COMPILE_WORKER, source_dir, output,  # noqa: UP022 (3.6)
                               TOOLS_DIR, ",".join(f"{package}/" for package in OWN_PACKAGES)],
                              input="\n".join(sorted(sources)).encode(), env=environment,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, str(exc)
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return None, lines[-1] if lines else f"exit status {done.returncode}"
    lines = done.stdout.decode().splitlines()
    cache_tag, version = lines[0], lines[1]
    kept_typing = [line[len("typing "):] for line in lines[2:] if line.startswith("typing ")]
    failed = [line for line in lines[2:] if not line.startswith("typing ")]
    with open(output, "rb") as handle:
        blob = handle.read()
    return CompiledTree(python, cache_tag, tuple(int(part) for part in version.split(".")),
                        blob, len(sources) - len(failed), failed, kept_typing), ""


def add_bytecode(members: Dict[str, bytes], compilers: Sequence[str],
                 min_python: Tuple[int, int]) -> Tuple[List[str], List[str], List[str]]:
    """Add ``bytecode/<cache tag>.marshal`` blobs (see the module docstring); returns the cache
    tags that have one, the interpreters found that fall back to source (tag and why) and a report
    line per interpreter tried."""
    sources = {name: data for name, data in members.items()
               if name.endswith(".py") and name != "__main__.py"}
    tags: List[str] = []
    fallbacks: List[str] = []
    report: List[str] = []
    with tempfile.TemporaryDirectory(prefix="build-dist-") as scratch:
        for python in compilers:
            tree, why_not = compile_tree(python, sources, scratch)
            if tree is None:
                report.append(f"bytecode: {python} could not compile ({why_not}); skipped")
                fallbacks.append(f"{python} ({why_not})")
                continue
            if tree.cache_tag in tags:
                continue  # the same interpreter under another name
            version = ".".join(str(part) for part in tree.version)
            if tree.version[:2] < min_python:
                report.append(f"bytecode: {tree.cache_tag} (Python {version}, {python}) is older"
                              " than the bundle needs; skipped")
                continue
            if tree.failed:
                # The blob's finder answers for every module of the bundle, so a module missing
                # from it would be missing for good: this interpreter uses the sources instead.
                report.append(f"bytecode: {tree.cache_tag} (Python {version}, {python}) cannot"
                              f" compile {', '.join(tree.failed)}; it falls back to source")
                fallbacks.append(f"{tree.cache_tag} (cannot compile {', '.join(tree.failed)})")
                continue
            members[blob_name(tree.cache_tag)] = tree.blob
            tags.append(tree.cache_tag)
            report.append(f"bytecode: {tree.cache_tag} (Python {version}, {python}):"
                          f" {tree.modules} modules")
            if len(tags) == 1:  # the same for every interpreter: said once
                report.extend(f"bytecode keeps typing in {line}" for line in tree.kept_typing)
    return sorted(tags), fallbacks, report


def blob_name(cache_tag: str) -> str:
    return f"{BYTECODE_DIR}/{cache_tag}.marshal"


def entry_point(locate: str, read: str, min_python: Tuple[int, int], blobs: str) -> str:
    return ENTRY_POINT.format(locate=locate, read=read, min_python=min_python, blobs=blobs)


def main_entry_point(min_python: Tuple[int, int], tags: Sequence[str]) -> str:
    """The archive's ``__main__.py``: blobs by member name (double quotes: see prologue)."""
    blobs = "{" + ", ".join(f'"{tag}": "{blob_name(tag)}"' for tag in tags) + "}"
    return entry_point(LOCATE_IN_MAIN, READ_IN_MAIN, min_python, blobs)


def prologue(min_python: Tuple[int, int], blobs: Dict[str, int]) -> bytes:
    """The ``sh`` lines in front of the archive (see the module docstring); ``blobs`` maps each
    cache tag to its blob's offset in the file."""
    needed = f"{min_python[0]}.{min_python[1]}"
    message = (f"internal error: antrea-cni needs Python {needed} or newer and found no"
               f" interpreter; it looked for {', '.join(INTERPRETERS)}")
    if any(char in message for char in "'\"\\%"):  # quoted once by sh, once by JSON
        raise ValueError(f"the prologue's message needs no quoting: {message!r}")
    table = "{" + ", ".join(f'"{tag}": {offset:{OFFSET_WIDTH}d}'
                            for tag, offset in sorted(blobs.items())) + "}"
    entry = entry_point(LOCATE_FROM_PROLOGUE, READ_FROM_PROLOGUE, min_python, table)
    if "'" in entry:
        raise ValueError("the entry point must not hold a single quote (sh quotes it)")
    return PROLOGUE.format(names=" ".join(INTERPRETERS), code=ERR_INTERNAL, entry=entry,
                           message=message).encode()


def zip_members(members: Dict[str, bytes]) -> Tuple[bytes, Dict[str, int]]:
    """The archive (sorted entries, fixed dates and modes, stored) and where each member's data
    starts in it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(info, members[name])
        offsets = {}
        for info in archive.infolist():
            # A local file header is 30 bytes, then the name and the extra field.
            header = buffer.getvalue()[info.header_offset:info.header_offset + 30]
            name_length, extra_length = struct.unpack("<HH", header[26:30])
            offsets[info.filename] = info.header_offset + 30 + name_length + extra_length
    return buffer.getvalue(), offsets


def write_archive(members: Dict[str, bytes], output: str, min_python: Tuple[int, int],
                  tags: Sequence[str]) -> None:
    """The prologue, then the archive; the prologue's blob offsets count its own length, which
    the fixed-width numbers keep the same whatever they are."""
    archive, offsets = zip_members(members)
    draft = prologue(min_python, {tag: 0 for tag in tags})
    header = prologue(min_python, {tag: len(draft) + offsets[blob_name(tag)] for tag in tags})
    if len(header) != len(draft):
        raise ValueError("the prologue's length changed with the blob offsets")
    directory = os.path.dirname(os.path.abspath(output))
    os.makedirs(directory, exist_ok=True)
    partial = output + ".partial"
    with open(partial, "wb") as handle:
        handle.write(header)
        handle.write(archive)
    os.chmod(partial, 0o755)
    os.replace(partial, output)


def build(output: str, compilers: Optional[Sequence[str]] = None) -> List[str]:
    """Build the bundle; ``compilers`` None means every interpreter found
    (:func:`candidate_compilers`), empty means sources only."""
    members, min_python, report = collect()
    if compilers is None:
        compilers = candidate_compilers()
    tags, fallbacks, compiled = add_bytecode(members, compilers, min_python)
    report.extend(compiled)
    report.append(f"bytecode for: {' '.join(tags) or 'none'}")
    report.append(f"falls back to source: {'; '.join(fallbacks) or 'none of those found'},"
                  " and every interpreter not named above")
    members["__main__.py"] = main_entry_point(min_python, tags).encode()
    write_archive(members, output, min_python, tags)
    report.append(f"needs Python >= {min_python[0]}.{min_python[1]}")
    report.append(f"wrote {output} ({os.path.getsize(output)} bytes)")
    return report


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Build the antrea-cni zipapp.")
    parser.add_argument("--output", default=os.path.join("dist", "antrea"))
    compiling = parser.add_mutually_exclusive_group()
    compiling.add_argument("--no-compile", action="store_true",
                           help="ship sources only (no bytecode for any interpreter)")
    compiling.add_argument("--compile-with", metavar="PYTHON", action="append",
                           help="compile bytecode with this interpreter (repeatable); by"
                                " default with every interpreter found (this one, pyenv's"
                                " versions, python3.X and pypy3 on PATH)")
    options = parser.parse_args(argv)
    compilers = [] if options.no_compile else options.compile_with
    for line in build(options.output, compilers):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
