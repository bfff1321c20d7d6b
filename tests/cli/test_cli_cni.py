"""The node's case: antrea-agent's CNI service on a unix socket, no server reflection.

The reference agent (cni_client/agent.py, what ``make demo`` runs) serves ``Cni`` without
reflection, as antrea-agent does; the tool carries the CNI proto, so ``call`` and ``describe``
work anyway, while ``list``, which is about what the server exposes, says the server has no
reflection.  The README's example is run as printed, against the agent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from typing import Iterator

import pytest
from google.protobuf import json_format

import minigrpc
from cni_client import cni_pb2
from tests.cli.support import REPO_ROOT, assert_no_traceback, run_tool, tool_env
from tests.peers import short_temp_dir
from tests.support.cni import AgentProcess

pytestmark = pytest.mark.timeout(120)

CNI = "antrea_io.antrea.pkg.apis.cni.v1beta1.Cni"
README_SOCKET = "/var/run/antrea/cni.sock"
CONFIG = b'{"cniVersion":"1.0.0","name":"antrea","type":"antrea","ipam":{"type":"host-local"}}'


@pytest.fixture
def agent() -> Iterator[str]:
    directory = short_temp_dir()
    path = os.path.join(directory, "cni.sock")
    with AgentProcess(path):
        yield path
    shutil.rmtree(directory, ignore_errors=True)


def add_request(container: str) -> cni_pb2.CniCmdRequest:
    return cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(
        container_id=container, netns=f"/var/run/netns/{container}", ifname="eth0",
        network_configuration=CONFIG))


def test_cmd_add_without_reflection_prints_what_json_format_prints(agent: str) -> None:
    request = add_request("pod-1")
    run = run_tool("call", f"unix:{agent}", f"{CNI}/CmdAdd", "-d",
                   json_format.MessageToJson(request))
    assert_no_traceback(run)
    assert (run.code, run.stderr) == (0, "status: OK\n")
    # ADD is idempotent for a container: the same call again answers the same response.
    with minigrpc.insecure_channel(f"unix:{agent}") as channel:
        stub = minigrpc.stub(cni_pb2.DESCRIPTOR.services_by_name["Cni"], channel)
        response = stub.CmdAdd(request, timeout=30)
    assert response.cni_result
    assert run.stdout == json_format.MessageToJson(response) + "\n"


def test_the_trace_shows_the_cni_call_alone(agent: str) -> None:
    """No reflection request: the carried proto is used without asking the agent."""
    run = run_tool("call", f"unix:{agent}", f"{CNI}.CmdDel", "--trace", "-d",
                   json_format.MessageToJson(add_request("pod-2")))
    assert run.code == 0, run.stderr
    paths = re.findall(r":path: (\S+)", run.stderr)
    assert paths == [f"/{CNI}/CmdDel"]


def test_describe_without_reflection_and_list_says_there_is_none(agent: str) -> None:
    run = run_tool("describe", f"unix:{agent}", CNI)
    assert run.code == 0, run.stderr
    assert run.stdout == (
        f"{CNI} is a service:\n"
        "service Cni {\n"
        "  rpc CmdAdd(.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdRequest) returns "
        "(.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdResponse);\n"
        "  rpc CmdCheck(.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdRequest) returns "
        "(.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdResponse);\n"
        "  rpc CmdDel(.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdRequest) returns "
        "(.antrea_io.antrea.pkg.apis.cni.v1beta1.CniCmdResponse);\n"
        "}\n")
    run = run_tool("list", f"unix:{agent}")
    assert_no_traceback(run)
    assert run.code == 12
    assert "does not offer server reflection" in run.stderr


def test_a_cni_error_in_the_response_is_printed_as_json(agent: str) -> None:
    """An ADD without a network config: the agent answers OK with CniCmdResponse.error (its
    code 6, DECODING_FAILURE, printed by name, as json_format prints enums)."""
    run = run_tool("call", f"unix:{agent}", f"{CNI}/CmdAdd", "-d",
                   '{"cniArgs": {"containerId": "pod-3"}}')
    assert run.code == 0, run.stderr
    printed = json.loads(run.stdout)
    assert printed["error"]["code"] == cni_pb2.ErrorCode.Name(cni_pb2.DECODING_FAILURE)


def _readme_block() -> str:
    text = open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8").read()
    blocks = [block for block in re.findall(r"```sh\n(.*?)```", text, re.S)
              if "Cni/CmdAdd" in block]
    assert len(blocks) == 1, "the README shows one CmdAdd example"
    return blocks[0]


def test_the_readme_example_runs_as_printed(agent: str) -> None:
    script = _readme_block().replace(README_SOCKET, agent).replace("python3 ", "$PYTHON ")
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=60,
                          env=tool_env({"PYTHON": sys.executable}))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # the README decodes cniResult: the CNI result itself
    assert result["cniVersion"] == "1.0.0"
    assert result["ips"][0]["address"].startswith("10.10.1.")
