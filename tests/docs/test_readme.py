"""The README's examples work as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python_blocks() -> list:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def assert_prints_what_its_comments_say(block: str) -> list:
    """Run a README block; each ``print(...)  # text`` line must print exactly ``text``."""
    expected = [
        line.rsplit("# ", 1)[1] for line in block.splitlines() if "print(" in line and "# " in line
    ]
    result = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, cwd=ROOT, timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected
    return expected


@pytest.mark.timeout(60)
def test_usage_example_runs_and_prints_what_its_comments_say() -> None:
    block = _python_blocks()[0]
    expected = [m.group(1) for m in re.finditer(r"# (\S.*)$", block, re.M)]
    result = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, cwd=ROOT, timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected


@pytest.mark.timeout(60)
def test_stub_example_runs_against_the_reference_servicer() -> None:
    """The protobuf snippet, run against a servicer that echoes the container id."""
    snippet = _python_blocks()[1]
    code = (
        "from concurrent import futures\n"
        "import minigrpc as grpc\n"
        "from cni_client import cni_pb2\n"
        "server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))\n"
        "class Echo:\n"
        "    def CmdAdd(self, request, context):\n"
        "        name = request.cni_args.container_id.encode()\n"
        "        return cni_pb2.CniCmdResponse(cni_result=name)\n"
        "grpc.add_servicer(server, cni_pb2.DESCRIPTOR.services_by_name['Cni'], Echo())\n"
        "port = server.add_insecure_port('127.0.0.1:0')\n"
        "server.start()\n"
        "with grpc.insecure_channel(f'127.0.0.1:{port}') as channel:\n"
        + "".join(f"    {line}\n" for line in snippet.splitlines())
        + "    print(response.cni_result)\n"
        "server.stop(None)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "b'c1'"


@pytest.mark.timeout(60)
def test_streaming_example_runs_and_prints_what_its_comments_say() -> None:
    (block,) = [
        b
        for b in _python_blocks()
        if "unary_stream_rpc_method_handler" in b and "aio.server()" not in b
    ]
    # The comment at the end of each print(...) line is what that line prints.
    assert_prints_what_its_comments_say(block)


@pytest.mark.timeout(60)
def test_asyncio_server_example_runs_and_prints_what_its_comments_say() -> None:
    (block,) = [b for b in _python_blocks() if "aio.server()" in b]
    assert_prints_what_its_comments_say(block)


@pytest.mark.timeout(60)
def test_addons_example_runs_and_prints_what_its_comments_say() -> None:
    (block,) = [b for b in _python_blocks() if "enable_server_reflection" in b]
    assert assert_prints_what_its_comments_say(block) == ["2", "no such thing"]


@pytest.mark.timeout(60)
def test_asyncio_client_example_runs_and_prints_what_its_comments_say() -> None:
    (block,) = [b for b in _python_blocks() if "aio.UnaryUnaryClientInterceptor" in b]
    assert_prints_what_its_comments_say(block)
