"""PyPy beside CPython: the minigrpc client and server run under ``pypy3`` for their own rows.

grpcio does not run on PyPy at all, so there minigrpc is the only synchronous gRPC; the
question the rows answer is how its JIT-compiled client and server compare with grpcio's C
core on CPython.  PyPy needs a warm-up before its numbers mean anything: its clients make
:data:`PYPY_WARMUP` untimed calls first (CPython clients make the mode's usual few hundred),
and its server gets as many from a CPython client as soon as it has started.

The interpreter is Debian's ``pypy3`` (``apt-get install pypy3``).  A virtualenv with h2 (the
only runtime dependency the bench path needs: it uses identity serializers, not protobuf) is
made on first use in the user's cache directory, outside the repository; the repository itself
is put on ``PYTHONPATH``.  Without ``pypy3`` the bench says so and leaves the rows out.
"""

import hashlib
import os
import shutil
import subprocess
from typing import Dict, Optional, Tuple

#: Untimed calls a PyPy client makes before timing starts, and a CPython client makes into a
#: PyPy server, while the JIT compiles the hot paths. Measured with the minigrpc client against
#: grpc-go's server (3000 timed calls after each count, two runs): after 3000 warm-up calls
#: the p50 was 183-221 µs and the client's CPU 173-192 µs per call, because the JIT was still
#: compiling; after 6000, 10000, 20000 or 40000 it was 152-165 µs and 103-114 µs.  10000
#: leaves a margin above that knee.
PYPY_WARMUP = 10000
#: Row names of the minigrpc client and server run under PyPy.
PYPY_CLIENT = "minigrpc-pypy"
#: minigrpc.aio's client under PyPy (warm latency only).
PYPY_AIO_CLIENT = "minigrpc-aio-pypy"
#: Each PyPy client row and the bench.workloads client it runs.
PYPY_CLIENTS = {PYPY_CLIENT: "minigrpc", PYPY_AIO_CLIENT: "minigrpc-aio"}
PYPY_SERVER = "minigrpc-pypy"
#: minigrpc.aio's server under PyPy (bench/aio_servers.py).
PYPY_AIO_SERVER = "minigrpc-aio-pypy"
#: Each PyPy server row and the bench.peers implementation it runs.
PYPY_SERVERS = {PYPY_SERVER: "minigrpc", PYPY_AIO_SERVER: "minigrpc-aio"}
#: What the venv holds (the setup.cfg range of minigrpc's one pure-Python dependency).
_REQUIREMENTS = ("h2>=4.1,<5",)


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "minigrpc", "bench-pypy")


def pypy_python_or_reason() -> Tuple[Optional[str], str]:
    """``(python of the PyPy venv, "")``, or ``(None, why not)``."""
    pypy = shutil.which("pypy3")
    if pypy is None:
        return None, "pypy3 is not installed (Debian package pypy3)"
    key = hashlib.sha256(("\n".join((pypy, *_REQUIREMENTS))).encode()).hexdigest()[:12]
    venv = os.path.join(_cache_dir(), key)
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(os.path.join(venv, ".ready")):
        return python, ""
    try:
        subprocess.run([pypy, "-m", "venv", venv], check=True, capture_output=True, timeout=300)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        *_REQUIREMENTS], check=True, capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"could not make a PyPy venv: {exc} {detail.decode(errors='replace')[-200:]}"
    with open(os.path.join(venv, ".ready"), "w") as marker:
        marker.write("ok\n")
    return python, ""


def pypy_env(repo_root: str) -> Dict[str, str]:
    """The environment of a PyPy child: the repository importable, nothing else changed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = repo_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                     else "")
    return env


def pypy_version(python: str) -> str:
    """``PyPy 7.3.11 (Python 3.9.16)``."""
    try:
        completed = subprocess.run(
            [python, "-c", "import sys, platform; v = sys.pypy_version_info; "
             "print(f'PyPy {v.major}.{v.minor}.{v.micro} (Python {platform.python_version()})')"],
            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return completed.stdout.strip() or "?"
