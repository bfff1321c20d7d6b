"""The Go plugin of the cold-start benchmarks (tests/go/antrea_cni) against the reference agent.

bench/node_cold.py times ``dist/antrea`` beside a Go plugin on grpc-go and containernetworking's
skel, as Antrea ships it.  The comparison only means something if both do the same work: here the
Go plugin and ``python -m cni_client`` each run ADD, CHECK and DEL for the same pod against the
same agent, one after the other, and must print the same bytes with the same exit status; and
an agent that is not there must be a "try again later" error (code 11) for both, with grpc-go's
own wording of the dial error.  It also guards the launcher the benchmarks measure RSS with
(tests/go/coldrun).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from tests.go_peers import GoPeers, GoUnavailable, build_go_peers
from tests.support.cni import AgentProcess, EnvValue, PluginRun, conf, pod_env, run_plugin

pytestmark = [pytest.mark.timeout(120), pytest.mark.go_peer]


@pytest.fixture(scope="module")
def peers() -> GoPeers:
    try:
        return build_go_peers()
    except GoUnavailable as exc:
        pytest.skip(f"the Go plugin cannot be built: {exc}")


@pytest.fixture(scope="module")
def socket_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("agent") / "cni.sock")
    with AgentProcess(path):
        yield path


def go_plugin(peers: GoPeers, cni: Dict[str, EnvValue], stdin: bytes,
              socket_path: str) -> PluginRun:
    return run_plugin(cni, stdin, socket_path=socket_path,
                      command=[peers.binary("antrea_cni")])


def test_add_check_del_print_what_the_python_plugin_prints(peers: GoPeers,
                                                           socket_path: str) -> None:
    """Each plugin in turn runs a pod's ADD, CHECK (with that ADD's result) and DEL; the agent's
    addresses and MACs follow from the pod, so both see the same answers."""
    outputs: List[List[PluginRun]] = []
    for run in (lambda cni, stdin: go_plugin(peers, cni, stdin, socket_path),
                lambda cni, stdin: run_plugin(cni, stdin, socket_path=socket_path)):
        add = run(pod_env("ADD", container_id="gocompare"), conf("1.0.0"))
        assert add.returncode == 0, add.stdout
        check = run(pod_env("CHECK", container_id="gocompare"),
                    conf("1.0.0", prevResult=json.loads(add.stdout)))
        delete = run(pod_env("DEL", container_id="gocompare"), conf("1.0.0"))
        outputs.append([add, check, delete])
    go, python = outputs
    assert [(run.returncode, run.stdout) for run in go] == [
        (run.returncode, run.stdout) for run in python]
    assert [run[:2] for run in go[1:]] == [(0, b""), (0, b"")]
    assert json.loads(go[0].stdout)["ips"][0]["address"] == "10.10.1.2/24"


def test_an_agent_error_keeps_its_code(peers: GoPeers, socket_path: str) -> None:
    """CHECK of a pod the agent does not know: the agent's CNI error, code and message."""
    prev = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/x"}],
            "ips": [{"address": "10.10.1.99/24", "interface": 0}]}
    env = pod_env("CHECK", container_id="unknown-pod")
    go = go_plugin(peers, env, conf("1.0.0", prevResult=prev), socket_path)
    python = run_plugin(env, conf("1.0.0", prevResult=prev), socket_path=socket_path)
    assert go.returncode == python.returncode == 1
    assert json.loads(go.stdout)["code"] == json.loads(python.stdout)["code"] == 103
    assert json.loads(go.stdout)["msg"] == json.loads(python.stdout)["msg"]


def test_no_agent_is_try_again_later(peers: GoPeers, tmp_path: Path) -> None:
    missing = str(tmp_path / "cni.sock")
    run = go_plugin(peers, pod_env("ADD"), conf("1.0.0"), missing)
    assert run.returncode == 1
    error = json.loads(run.stdout)
    assert error["code"] == 11
    assert error["msg"].startswith("rpc error: code = Unavailable desc = ")
    assert f"dial unix {missing}: connect: no such file or directory" in error["msg"]


def test_the_launcher_reports_the_child_alone(peers: GoPeers,
                                              tmp_path: Path) -> None:
    """coldrun passes stdin and stdout through and reports the child's exit status, wall and CPU
    time and peak RSS; the peak is the child's own, far below this test process's."""
    result = str(tmp_path / "result.json")
    code = "import sys; data = sys.stdin.read(); sys.stdout.write(data.upper()); sys.exit(3)"
    done = subprocess.run([peers.binary("coldrun"), "-o", result, "--", sys.executable, "-I",
                           "-S", "-c", code], input=b"cold", capture_output=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, b"COLD")
    with open(result, encoding="utf-8") as handle:
        measured = json.load(handle)
    assert measured["status"] == 3
    assert 0 < measured["cpu_ns"] <= measured["wall_ns"] * 2
    with open("/proc/self/status", encoding="ascii") as handle:
        own_peak = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))
    assert 0 < measured["maxrss_kib"] < own_peak
