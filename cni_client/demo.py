"""``make demo``: the plugin driven the way a container runtime drives it, against the agent.

It starts the reference agent (:mod:`cni_client.agent`) on a temporary socket, then executes
the plugin as libcni does (docs/cni-plugin-behaviour.md, "Invocation": exec with no arguments, the
``CNI_*`` environment, the network config on stdin) for a short pod lifecycle:

VERSION, ADD for two pods, CHECK, DEL twice (idempotent), STATUS; then the agent is stopped
and one more ADD must fail with code 11 (try again later), and STATUS with code 50.

Every step prints the command, the exit status and the output, and says whether it behaved
as expected.  The demo exits 1 if any step misbehaved.
"""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONF_VERSION = "1.1.0"  # a current conflist: the runtime may send CHECK and STATUS
NETWORK_CONFIG = {"cniVersion": CONF_VERSION, "ipam": {"type": "host-local"}, "name": "antrea",
                  "type": "antrea"}
CNI_VARS = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH")

Check = Callable[[int, bytes], Optional[str]]  # returns a complaint, or None when fine


def plugin_command() -> List[str]:
    """The installed ``antrea-cni`` next to this interpreter, else ``python -m cni_client``."""
    script = os.path.join(os.path.dirname(sys.executable), "antrea-cni")
    if os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "cni_client"]


def compact(document: object) -> bytes:
    """libcni's stdin: compact JSON with sorted keys."""
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


class Demo:
    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.command = plugin_command()
        self.failures: List[str] = []
        self.step_number = 0

    def run(self, title: str, cni: Dict[str, str], stdin: bytes, check: Check) -> bytes:
        """One plugin execution, printed like a shell transcript."""
        self.step_number += 1
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT,
                                                          env.get("PYTHONPATH", "")]))
        env["ANTREA_CNI_SOCKET"] = self.socket_path
        shown = [f"{name}={shlex.quote(cni.get(name, ''))}" for name in CNI_VARS]
        for name in CNI_VARS:
            env[name] = cni.get(name, "")
        print(f"\n== {self.step_number}. {title}")
        print(f"$ {' '.join(shown)} \\\n    {' '.join(map(shlex.quote, self.command))}"
              f" <<< {shlex.quote(stdin.decode())}")
        done = subprocess.run(self.command, input=stdin, env=env, capture_output=True,
                              timeout=120, check=False)
        print(f"exit status {done.returncode}")
        if done.stdout:
            print(done.stdout.decode("utf-8", "replace"))
        if done.stderr:
            print("stderr: " + done.stderr.decode("utf-8", "replace").rstrip())
        complaint = check(done.returncode, done.stdout)
        if complaint:
            self.failures.append(f"step {self.step_number} ({title}): {complaint}")
            print(f"!! MISBEHAVED: {complaint}")
        else:
            print("-> as expected")
        return done.stdout


def pod(command: str, container_id: str, pod_name: str) -> Dict[str, str]:
    """The environment containerd gives the plugin for one pod (docs/cni-plugin-behaviour.md,
    "Deployment")."""
    return {"CNI_COMMAND": command, "CNI_CONTAINERID": container_id,
            "CNI_NETNS": f"/var/run/netns/cni-{container_id[:8]}", "CNI_IFNAME": "eth0",
            "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME={pod_name}",
            "CNI_PATH": "/opt/cni/bin"}


def expect_success(empty: bool) -> Check:
    def check(status: int, stdout: bytes) -> Optional[str]:
        if status != 0:
            return f"exit status {status}, expected 0"
        if empty and stdout:
            return "expected no output"
        return None
    return check


def expect_add_result(seen: List[str]) -> Check:
    """ADD must print a result with an eth0 address not handed to another pod."""
    def check(status: int, stdout: bytes) -> Optional[str]:
        if status != 0:
            return f"exit status {status}, expected 0"
        try:
            result = json.loads(stdout)
            address = result["ips"][0]["address"]
            names = [interface["name"] for interface in result["interfaces"]]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return f"not a CNI result: {exc!r}"
        if "eth0" not in names:
            return "no eth0 interface in the result"
        if address in seen:
            return f"address {address} handed out twice"
        seen.append(address)
        return None
    return check


def expect_error(code: int) -> Check:
    def check(status: int, stdout: bytes) -> Optional[str]:
        if status != 1:
            return f"exit status {status}, expected 1"
        try:
            error = json.loads(stdout)
        except ValueError:
            return "stdout is not one CNI error JSON"
        if error.get("code") != code:
            return f"error code {error.get('code')}, expected {code}"
        return None
    return check


def expect_version(status: int, stdout: bytes) -> Optional[str]:
    if status != 0:
        return f"exit status {status}, expected 0"
    try:
        versions = json.loads(stdout)["supportedVersions"]
    except (ValueError, KeyError, TypeError):
        return "not a VERSION reply"
    return None if CONF_VERSION in versions else f"{CONF_VERSION} is not supported"


def start_agent(socket_path: str) -> "subprocess.Popen[bytes]":
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH", "")]))
    argv = [sys.executable, "-m", "cni_client.agent", "--socket", socket_path,
            "--pool", "10.10.1.0/24"]
    print("$ " + " ".join(map(shlex.quote, argv)))
    agent = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
    assert agent.stdout is not None
    line = agent.stdout.readline().decode().rstrip()  # the readiness line; no sleeping
    if not line.startswith("listening on "):
        agent.kill()
        agent.wait()
        raise RuntimeError(f"the agent did not start (it printed {line!r})")
    print(f"agent: {line}")
    return agent


def stop_agent(agent: "subprocess.Popen[bytes]") -> Tuple[int, bool]:
    agent.send_signal(signal.SIGTERM)
    try:
        return agent.wait(timeout=30), True
    except subprocess.TimeoutExpired:
        agent.kill()
        return agent.wait(), False


def main(argv: Optional[Sequence[str]] = None) -> int:
    workdir = tempfile.mkdtemp(prefix="antrea-demo-")
    socket_path = os.path.join(workdir, "cni.sock")
    agent: Optional[subprocess.Popen[bytes]] = None
    try:
        print("== starting the reference agent")
        agent = start_agent(socket_path)
        demo = Demo(socket_path)
        config = compact(NETWORK_CONFIG)
        addresses: List[str] = []

        demo.run("VERSION (what a runtime asks when it loads the conflist)",
                 {"CNI_COMMAND": "VERSION", "CNI_NETNS": "dummy", "CNI_IFNAME": "dummy",
                  "CNI_PATH": "dummy"}, b'{"cniVersion":"1.1.0"}', expect_version)
        result_a = demo.run("ADD pod web-a", pod("ADD", "a1b2c3d4e5f6", "web-a"), config,
                            expect_add_result(addresses))
        demo.run("ADD pod web-b", pod("ADD", "0f9e8d7c6b5a", "web-b"), config,
                 expect_add_result(addresses))
        try:
            prev_result = json.loads(result_a)
        except ValueError:
            prev_result = {}
        demo.run("CHECK pod web-a (with the ADD result as prevResult, as CRI-O does)",
                 pod("CHECK", "a1b2c3d4e5f6", "web-a"),
                 compact(dict(NETWORK_CONFIG, prevResult=prev_result)), expect_success(True))
        for attempt in ("", " again (DEL is idempotent)"):
            demo.run(f"DEL pod web-a{attempt}", pod("DEL", "a1b2c3d4e5f6", "web-a"), config,
                     expect_success(True))
        demo.run("STATUS (can the agent take ADDs?)",
                 {"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}, config,
                 expect_success(True))

        print("\n== stopping the agent")
        status, clean = stop_agent(agent)
        agent = None
        print(f"agent exited with status {status}")
        if not clean:
            demo.failures.append("the agent did not stop on SIGTERM")
        demo.run("ADD pod web-c with the agent gone: try again later (11)",
                 pod("ADD", "5a6b7c8d9e0f", "web-c"), config, expect_error(11))
        demo.run("STATUS with the agent gone: not available (50)",
                 {"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}, config,
                 expect_error(50))

        print()
        if demo.failures:
            print(f"DEMO FAILED: {len(demo.failures)} step(s) misbehaved")
            for failure in demo.failures:
                print(f"  - {failure}")
            return 1
        print(f"demo passed: {demo.step_number} plugin runs, each as expected")
        return 0
    except Exception as exc:
        print(f"DEMO FAILED: {type(exc).__name__}: {exc}")
        return 1
    finally:
        if agent is not None:
            stop_agent(agent)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
