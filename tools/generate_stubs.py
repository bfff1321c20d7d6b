"""Regenerate ``tests/generated_stubs/``: real grpcio-tools output of several releases.

minigrpc promises that ``*_pb2_grpc.py`` modules generated for grpcio run unchanged on it, with
grpcio installed or not (``minigrpc.install_as_grpc()``).  The template of those modules changed
over the years (1.62 added ``_registered_method=True``; 1.64 added the ``GRPC_GENERATED_VERSION``
check and ``server.add_registered_method_handlers``), so the tests run the output of several
releases, committed here so that the suite needs no network:

    python tools/generate_stubs.py                 # every version in VERSIONS
    python tools/generate_stubs.py 1.85.4          # just one
    python tools/generate_stubs.py --venvs DIR      # keep the venvs in DIR for a next run

For each version the script creates a throwaway venv (``--python`` picks its interpreter:
grpcio-tools 1.48 and 1.55 ship wheels for Python 3.10 at most), installs
``grpcio-tools==VERSION`` from wheels only, runs its protoc with ``--grpc_python_out`` on
``proto/cni.proto`` and ``proto/grpc/testing/test.proto``, and writes
``tests/generated_stubs/v<VERSION with _>/{cni,test}_pb2_grpc.py``.

The modules are protoc's output byte for byte except for two things: a first comment line that
says where they come from, and the imports of the ``*_pb2`` message modules, which are rewritten
to the repository's own (``cni_client.cni_pb2``, ``tests.interop.*_pb2``).  protoc's imports
follow the ``.proto`` path (``import cni_pb2``, ``from grpc.testing import messages_pb2``); the
second would even resolve inside the ``grpc`` package, which is grpcio's, or minigrpc's alias.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Dict, List, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO_ROOT / "proto"
OUTPUT_DIR = REPO_ROOT / "tests" / "generated_stubs"

#: grpcio-tools releases whose output is committed: the oldest minigrpc admits (setup.cfg's
#: ``grpcio>=1.48``), one before and one with ``_registered_method`` (1.62), the first with the
#: version check and ``add_registered_method_handlers`` (1.64), and the newest release when it
#: was last updated.  The newest one is ``minigrpc.grpc_alias.GRPCIO_VERSION``: code from a
#: newer release loads with a warning that names both.  Whatever grpcio-tools is installed when
#: the suite runs generates a set of its own too (tests/interop/nogrpcio_suite.py, with
#: :func:`write_stubs`), so that a new template is seen the day it ships.
VERSIONS = ("1.48.2", "1.55.3", "1.62.3", "1.64.3", "1.85.4")

#: proto file (relative to ``proto/``) -> the module protoc writes, relative to its output dir.
PROTOS: Dict[str, str] = {
    "cni.proto": "cni_pb2_grpc.py",
    "grpc/testing/test.proto": "grpc/testing/test_pb2_grpc.py",
}

#: protoc's import lines of message modules -> the repository's modules.
IMPORT_REWRITES = (
    (re.compile(r"^import cni_pb2 as ", re.M), "from cni_client import cni_pb2 as "),
    (
        re.compile(r"^from grpc\.testing import (empty_pb2|messages_pb2|test_pb2) as ", re.M),
        r"from tests.interop import \1 as ",
    ),
)


def package_name(version: str) -> str:
    """``1.64.3`` -> ``v1_64_3``: a directory that is also an importable package."""
    return "v" + version.replace(".", "_")


def rewrite(source: str, version: str, proto: str) -> str:
    """protoc's module with the repository's imports and a line that says where it is from."""
    for pattern, replacement in IMPORT_REWRITES:
        source = pattern.sub(replacement, source)
    if re.search(r"^(import \w+_pb2|from grpc\.testing import)", source, re.M):
        raise RuntimeError(f"an import of {proto}'s output was not rewritten")
    header = (
        f"# grpcio-tools {version} output for proto/{proto}; message imports rewritten by "
        "tools/generate_stubs.py.\n"
    )
    return header + source


def _tools_python(version: str, venvs: Path, python: str) -> str:
    """A venv's interpreter with ``grpcio-tools==version`` installed (reused if present)."""
    home = venvs / version
    bin_dir = "Scripts" if os.name == "nt" else "bin"
    interpreter = home / bin_dir / "python"
    if not interpreter.exists():
        if python == sys.executable:
            venv.create(home, with_pip=True)
        else:
            subprocess.run([python, "-m", "venv", str(home)], check=True)
    probe = subprocess.run(
        [
            str(interpreter),
            "-c",
            "import grpc_tools, importlib.metadata as m;print(m.version('grpcio-tools'))",
        ],
        capture_output=True,
        text=True,
    )
    if probe.stdout.strip() != version:
        subprocess.run(
            [
                str(interpreter),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--only-binary",
                ":all:",
                f"grpcio-tools=={version}",
            ],
            check=True,
        )
    return str(interpreter)


def generate(version: str, venvs: Path, python: str) -> List[Path]:
    """Write ``tests/generated_stubs/<package>/`` for one grpcio-tools release."""
    interpreter = _tools_python(version, venvs, python)
    return write_stubs(interpreter, OUTPUT_DIR / package_name(version), version)


def write_stubs(interpreter: str, target: Path, version: str) -> List[Path]:
    """Run the protoc of ``interpreter``'s grpcio-tools and write its rewritten modules and an
    ``__init__.py`` to ``target`` (``version`` names the release in their first lines)."""
    target.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [
                interpreter,
                "-m",
                "grpc_tools.protoc",
                f"-I{PROTO_DIR}",
                f"--grpc_python_out={out}",
                *(str(PROTO_DIR / proto) for proto in PROTOS),
            ],
            check=True,
        )
        for proto, produced in PROTOS.items():
            source = (Path(out) / produced).read_text(encoding="utf-8")
            path = target / Path(produced).name
            path.write_text(rewrite(source, version, proto), encoding="utf-8")
            written.append(path)
    init = target / "__init__.py"
    init.write_text(
        f'"""Stubs generated by grpcio-tools {version} (tools/generate_stubs.py)."""\n',
        encoding="utf-8",
    )
    return written


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "versions",
        nargs="*",
        default=list(VERSIONS),
        help="grpcio-tools versions (default: %(default)s)",
    )
    parser.add_argument(
        "--venvs",
        type=Path,
        default=None,
        help="keep one venv per version here (default: a temporary directory)",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter for the venvs (grpcio-tools 1.48 needs <= 3.10)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stub-venvs-") as scratch:
        venvs = args.venvs or Path(scratch)
        venvs.mkdir(parents=True, exist_ok=True)
        for version in args.versions:
            for path in generate(version, venvs, args.python):
                print(path.relative_to(REPO_ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
