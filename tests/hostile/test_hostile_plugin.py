"""The CNI plugin against a hostile agent.

Every client-side scenario of :func:`tests.hostile.scenarios.client_scenarios` is replayed
against the
real plugin, run as the runtime runs it (``python -m cni_client`` with CNI_* variables and the
network configuration on stdin, ``ANTREA_CNI_SOCKET`` pointing at the faulty peer). The plugin
must print exactly one CNI error JSON on stdout (CNI SPEC.md, "Error": ``code`` int, ``msg`` str),
exit 1, print no traceback and no partial result. The CNI code follows the gRPC code through
:data:`cni_client.client.RPC_FAILURE_TO_CNI`, read from the plugin's own table.

The plugin has no deadline by design (the runtime's SIGKILL is its timeout, as antrea's Go plugin),
so a scenario that only a deadline could end must leave the plugin running once the peer has
the request; the test then kills it and checks that nothing was printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any, Dict, List

import pytest

from tests.hostile.scenarios import ClientScenario, client_scenarios, record_observation
from tests.support.scripted_peer import ScriptedServer

try:
    from cni_client import cni_pb2
    from cni_client.client import RPC_FAILURE_TO_CNI
except Exception as exc:  # skip cleanly until the client and the plugin land
    pytest.skip(f"the plugin or the client is not available: {exc!r}", allow_module_level=True)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NETWORK_CONFIG = (
    b'{"cniVersion":"0.3.0","name":"antrea","type":"antrea","ipam":{"type":"host-local"}}'
)
#: A plugin that has not exited this long after its peer answered is hung.
EXIT_LIMIT = 20.0
#: How long a plugin waiting on a silent agent must keep waiting before we SIGKILL it.
STILL_RUNNING_CHECK = 1.0
#: The code a well-formed but failing agent answer carries in the "OK" scenarios.
AGENT_ERROR_CODE = 7
AGENT_ERROR_MESSAGE = "the hostile agent refuses"

SCENARIOS = client_scenarios()

#: Scenario -> (reason starting with "BUG:", fix) for known plugin-side bugs.
KNOWN_BUGS: Dict[str, Any] = {}

#: Scenarios that exposed a bug which is now fixed: scenario -> the fix (for docs/robustness.md).
FIXED_BUGS: Dict[str, str] = {
    "garbage_preface_then_hang": (
        "the plugin hung until SIGKILL on an HTTP/1.1 answer; fixed in the client: the first"
        " frame must be SETTINGS (RFC 9113 §3.4)"
    ),
    "header_block_over_call_limit": (
        "20 kB response headers were accepted; fixed in the client: per-call header limit"
    ),
}


def fix_of(name: str) -> str:
    if name in KNOWN_BUGS:
        return str(KNOWN_BUGS[name][1])
    return FIXED_BUGS.get(name, "")


def plugin_env(socket_path: str) -> Dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CNI_") and key not in ("PYTHONWARNINGS",)
    }
    env.update(
        CNI_COMMAND="ADD",
        CNI_CONTAINERID="hostile-container-1",
        CNI_NETNS="/var/run/netns/hostile-test",
        CNI_IFNAME="eth0",
        CNI_PATH="/opt/cni/bin",
        ANTREA_CNI_SOCKET=socket_path,
        PYTHONPATH=REPO_ROOT + os.pathsep + env.get("PYTHONPATH", ""),
    )
    return env


def start_plugin(socket_path: str) -> subprocess.Popen:
    # stdin is a pipe already holding the whole configuration and closed at our end, as a
    # runtime provides it; communicate() then only reads stdout and stderr.
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, NETWORK_CONFIG)
    finally:
        os.close(write_end)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "cni_client"],
            stdin=read_end,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=plugin_env(socket_path),
            cwd=REPO_ROOT,
        )
    finally:
        os.close(read_end)


def expected_cni_code(scenario: ClientScenario) -> int:
    if scenario.expected == "OK":
        return AGENT_ERROR_CODE
    return RPC_FAILURE_TO_CNI.get(scenario.expected, RPC_FAILURE_TO_CNI[None])[0]


def _params() -> List[Any]:
    params = []
    for scenario in SCENARIOS:
        marks = []
        if scenario.name in KNOWN_BUGS:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[scenario.name][0]))
        params.append(pytest.param(scenario, id=scenario.name, marks=marks))
    return params


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scenario", _params())
def test_plugin_scenario(scenario: ClientScenario, request: pytest.FixtureRequest) -> None:
    server = ScriptedServer(scenario.script)
    server.reply_payload = cni_pb2.CniCmdResponse(
        error=cni_pb2.Error(code=AGENT_ERROR_CODE, message=AGENT_ERROR_MESSAGE)
    ).SerializeToString()
    proc = None
    try:
        proc = start_plugin(server.path)
        if scenario.deadline_only:
            assert server.headers_received.wait(EXIT_LIMIT), "the plugin never sent its request"
            # The plugin waits, like the Go plugin, until the runtime gives up on it: give it a
            # second to (wrongly) exit on its own before the "runtime" kills it.
            try:
                proc.wait(timeout=STILL_RUNNING_CHECK)
            except subprocess.TimeoutExpired:
                pass
            still_running = proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=EXIT_LIMIT)
            record_observation(
                request.node.nodeid, side="plugin", scenario=scenario.name,
                group=scenario.group, description=scenario.description,
                expected="runs until SIGKILL", observed=(
                    "ran until SIGKILL" if still_running else f"exited {proc.returncode}"
                ),
                fix=fix_of(scenario.name),
            )
            assert still_running, (
                f"the plugin exited {proc.returncode} on its own: {stdout!r} {stderr!r}"
            )
            assert stdout == b"", f"partial output before SIGKILL: {stdout!r}"
            return
        try:
            stdout, stderr = proc.communicate(timeout=EXIT_LIMIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            pytest.fail(f"the plugin hung for {EXIT_LIMIT} s (stderr {stderr!r})")
        want = expected_cni_code(scenario)
        try:
            document = json.loads(stdout)
        except ValueError:
            document = None
        record_observation(
            request.node.nodeid, side="plugin", scenario=scenario.name, group=scenario.group,
            description=scenario.description, expected=f"exit 1, CNI code {want}",
            observed=f"exit {proc.returncode}, stdout {stdout.decode('utf-8', 'replace')[:160]}",
            fix=fix_of(scenario.name),
        )
        assert b"Traceback" not in stdout + stderr, stderr.decode("utf-8", "replace")
        assert isinstance(document, dict), f"stdout is not one JSON object: {stdout!r}"
        assert isinstance(document.get("code"), int), document
        assert isinstance(document.get("msg"), str), document
        assert proc.returncode == 1, (proc.returncode, stdout, stderr)
        assert document["code"] == want, (
            f"{scenario.description}: gRPC {scenario.expected} should be CNI code {want}, "
            f"got {document}"
        )
        if scenario.expected == "OK":
            assert document["msg"] == AGENT_ERROR_MESSAGE
        else:
            assert "rpc error: code = " in document["msg"] + document.get("details", "")
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        server.close()
