"""The docs are rendered from the code's own tables, and the package imports without grpcio."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_rendered_tables_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "render_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, (
        "docs are stale; run `python tools/render_docs.py`\n" + result.stdout + result.stderr
    )


def test_minigrpc_imports_without_grpcio_and_lazily() -> None:
    """grpcio is a test peer only; `import minigrpc` must not even load h2 until used."""
    code = (
        "import sys\n"
        "for name in ('grpc', 'grpc_tools', 'grpclib'):\n"
        "    sys.modules[name] = None  # any import of them now raises ImportError\n"
        "import minigrpc\n"
        "assert 'h2' not in sys.modules, sorted(sys.modules)\n"
        "assert 'google.protobuf' not in sys.modules, sorted(sys.modules)\n"
        "import minigrpc.blocking.channel, minigrpc.blocking.server_api, minigrpc.descriptors\n"
        "import minigrpc.net.trace\n"
        "assert minigrpc.insecure_channel and minigrpc.server and minigrpc.StatusCode.OK\n"
        "import cni_client.client, cni_client.skel\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
