"""The reference agent's logic, called directly: validation, pools, result bytes, locking.

These are the agent behaviours of antrea-agent's cniserver that the plugin tests rely on; calling
the
servicer without a network keeps the big tables fast.  The servicer is the real one, fed real
``CniCmdRequest`` messages (the context is unused by it).
"""

from __future__ import annotations

import json
import threading
from concurrent import futures
from typing import Any, List, Optional

import pytest

from cni_client import agent, cni_pb2, go_compat

pytestmark = pytest.mark.timeout(60)


def request(config: Any, container_id: str = "c1", ifname: str = "eth0",
            netns: str = "/var/run/netns/n1", args: str = "") -> Any:
    data = config if isinstance(config, bytes) else json.dumps(config).encode()
    return cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(
        container_id=container_id, netns=netns, ifname=ifname, args=args, path="/opt/cni/bin",
        network_configuration=data))


def config(version: Optional[str] = "0.3.0", **extra: Any) -> dict:
    body: dict = {"name": "antrea", "type": "antrea", "ipam": {"type": "host-local"}}
    if version is not None:
        body["cniVersion"] = version
    body.update(extra)
    return body


def servicer(*pools: str) -> agent.CniServicer:
    return agent.CniServicer(list(pools) or ["10.10.1.0/24"], cni_pb2)


def error_of(response: Any) -> Optional[tuple]:
    if not response.HasField("error"):
        return None
    return (response.error.code, response.error.message)


# --------------------------------------------------------------------------------------------
# Validation (antrea-agent's cniserver), in the agent's order.

VALIDATION_ROWS = [
    ("not-json", b"{", "", (6, "Failed to decode network config")),
    ("array", b"[]", "", (6, "Failed to decode network config")),
    ("type-not-string", config(type=5), "", (6, "Failed to decode network config")),
    ("ipam-not-object", config(ipam="host-local"), "", (6, "Failed to decode network config")),
    ("prev-result-not-object", config("1.0.0", prevResult=[]), "",
     (6, "Failed to decode network config")),
    ("bad-cni-args", config(), "K8S_POD_NAME=a;OTHER=b", (6, "Failed to decode network config")),
    ("cni-args-no-equals", config(), "IgnoreUnknown=1;x", (6, "Failed to decode network config")),
    ("cni-args-ignore-unknown", config(), "IgnoreUnknown=true;OTHER=b", None),
    ("cni-args-known", config(), "K8S_POD_NAMESPACE=a;K8S_POD_NAME=b;K8S_POD_UID=c;"
                                 "K8S_POD_INFRA_CONTAINER_ID=d", None),
    ("no-version", config(None), "",
     (1, "Unsupported CNI version [], supported versions [0.1.0 0.2.0 0.3.0 0.3.1 0.4.0 1.0.0"
         " 1.1.0]")),
    ("short-version", config("1.0"), "",
     (1, "Unsupported CNI version [1.0], supported versions [0.1.0 0.2.0 0.3.0 0.3.1 0.4.0"
         " 1.0.0 1.1.0]")),
    ("bad-version-beats-type", config("9", type="x"), "",
     (1, "Unsupported CNI version [9], supported versions [0.1.0 0.2.0 0.3.0 0.3.1 0.4.0"
         " 1.0.0 1.1.0]")),
    ("type", config(type="bridge"), "", (2, "Network configuration does not support type=bridge")),
    ("no-type", {"cniVersion": "0.3.0", "name": "a"}, "",
     (2, "Network configuration does not support type=")),
    ("ipam", config(ipam={"type": "static"}), "",
     (2, "Network configuration does not support ipam/type=static")),
    ("ipam-antrea", config(ipam={"type": "antrea"}), "", None),
    ("keys-case-insensitive", {"CNIVERSION": "0.3.0", "Type": "antrea",
                               "IPAM": {"TYPE": "host-local"}, "name": "a"}, "", None),
]


@pytest.mark.parametrize(("conf", "args", "expected"), [row[1:] for row in VALIDATION_ROWS],
                         ids=[row[0] for row in VALIDATION_ROWS])
def test_validation(conf: Any, args: str, expected: Optional[tuple]) -> None:
    response = servicer().CmdAdd(request(conf, args=args), None)
    assert error_of(response) == expected


def test_check_needs_prev_result_from_0_4_0() -> None:
    cni = servicer()
    assert error_of(cni.CmdAdd(request(config("0.4.0")), None)) is None
    assert error_of(cni.CmdCheck(request(config("0.4.0")), None)) == (
        2, "Network configuration does not support prevResult=")
    assert error_of(cni.CmdCheck(request(config("0.3.1")), None)) is None  # not required


def test_check_compares_prev_result() -> None:
    cni = servicer()
    result = json.loads(cni.CmdAdd(request(config("1.0.0")), None).cni_result)
    assert error_of(cni.CmdCheck(request(config("1.0.0", prevResult=result)), None)) is None
    other_if = dict(result, interfaces=[{"name": "net1"}])
    assert error_of(cni.CmdCheck(request(config("1.0.0", prevResult=other_if)), None)) == (
        7, "prevResult does not match network configuration")
    wrong_ip = dict(result, ips=[{"address": "10.10.1.99/24", "interface": 1}])
    code, message = error_of(cni.CmdCheck(request(config("1.0.0", prevResult=wrong_ip)), None))
    assert code == 103 and "10.10.1.99/24" in message
    other_pod = request(config("1.0.0", prevResult=result), container_id="c2")
    assert error_of(cni.CmdCheck(other_pod, None))[0] == 103


# --------------------------------------------------------------------------------------------
# ADD results (antrea-agent's cniserver): exact bytes.

def test_add_result_0_3_0_bytes() -> None:
    cni = servicer()
    result = cni.CmdAdd(request(config("0.3.0"), args="K8S_POD_NAME=web-7f9c"), None).cni_result
    endpoint = cni.endpoints[("c1", "eth0")]
    assert result.decode() == (
        '{\n    "cniVersion": "0.3.0",\n    "interfaces": [\n        {\n'
        f'            "name": "{endpoint.host_ifname}",\n'
        f'            "mac": "{endpoint.host_mac}"\n        }},\n        {{\n'
        '            "name": "eth0",\n'
        f'            "mac": "{endpoint.container_mac}",\n'
        '            "sandbox": "/host/var/run/netns/n1"\n        }\n    ],\n'
        '    "ips": [\n        {\n            "version": "4",\n            "interface": 1,\n'
        '            "address": "10.10.1.2/24",\n            "gateway": "10.10.1.1"\n'
        '        }\n    ],\n    "routes": [\n        {\n            "dst": "0.0.0.0/0",\n'
        '            "gw": "10.10.1.1"\n        }\n    ],\n    "dns": {}\n}')
    assert endpoint.host_ifname.startswith("web7f9-") and len(endpoint.host_ifname) <= 15


def test_add_result_1_0_0_is_sorted_without_dns() -> None:
    cni = servicer()
    result = cni.CmdAdd(request(config("1.1.0")), None).cni_result
    endpoint = cni.endpoints[("c1", "eth0")]
    compact = json.dumps(json.loads(result), separators=(",", ":"))
    host = f'{{"mac":"{endpoint.host_mac}","name":"{endpoint.host_ifname}"}}'
    container = f'{{"mac":"{endpoint.container_mac}","name":"eth0"'
    assert compact == (
        '{"cniVersion":"1.1.0","interfaces":[' + host + "," + container + ','
        '"sandbox":"/host/var/run/netns/n1"}],"ips":[{"address":"10.10.1.2/24","gateway":'
        '"10.10.1.1","interface":1}],"routes":[{"dst":"0.0.0.0/0","gw":"10.10.1.1"}]}')
    assert result == json.dumps(json.loads(result), indent=4).encode()


@pytest.mark.parametrize("version", ["0.1.0", "0.2.0"])
def test_add_result_legacy_versions(version: str) -> None:
    result = servicer().CmdAdd(request(config(version)), None).cni_result
    assert json.loads(result) == {"cniVersion": version, "ip4": {
        "ip": "10.10.1.2/24", "gateway": "10.10.1.1",
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.10.1.1"}]}, "dns": {}}


def test_dual_stack() -> None:
    cni = servicer("10.1.0.0/16", "fd00:1::/64")
    result = json.loads(cni.CmdAdd(request(config("0.4.0")), None).cni_result)
    assert result["ips"] == [
        {"version": "4", "interface": 1, "address": "10.1.0.2/16", "gateway": "10.1.0.1"},
        {"version": "6", "interface": 1, "address": "fd00:1::2/64", "gateway": "fd00:1::1"}]
    assert result["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"},
                                {"dst": "::/0", "gw": "fd00:1::1"}]


def test_html_in_ifname_is_escaped_like_go() -> None:
    result = servicer().CmdAdd(request(config("1.0.0"), ifname="e<&>"), None).cni_result
    assert b'"name": "e\\u003c\\u0026\\u003e"' in result


@pytest.mark.parametrize(("value", "expected"), [
    ({}, "{}"), ([], "[]"), ({"a": []}, '{\n    "a": []\n}'), ([1, True, None, "x"],
                                                             '[\n    1,\n    true,\n    null,\n'
                                                             '    "x"\n]'),
])
def test_go_json_indent(value: Any, expected: str) -> None:
    assert go_compat.go_json_indent(value) == expected


# --------------------------------------------------------------------------------------------
# Pools and idempotency.

def test_pool_exhaustion_and_rollback() -> None:
    cni = servicer("10.9.0.0/29", "10.8.0.0/30")  # 5 usable v4 addresses, then 1
    assert error_of(cni.CmdAdd(request(config(), container_id="a"), None)) is None
    response = cni.CmdAdd(request(config(), container_id="b"), None)
    assert error_of(response) == (101, "failed to allocate for range 1: no IP addresses"
                                       " available in range set: 10.8.0.2-10.8.0.2")
    assert len(cni.pools[0].used) == 1  # b's address from range 0 was rolled back
    cni.CmdDel(request(config(), container_id="a"), None)
    assert error_of(cni.CmdAdd(request(config(), container_id="b"), None)) is None


def test_add_and_del_are_idempotent_per_container_and_ifname() -> None:
    cni = servicer()
    first = cni.CmdAdd(request(config()), None).cni_result
    assert cni.CmdAdd(request(config()), None).cni_result == first
    net1 = json.loads(cni.CmdAdd(request(config(), ifname="net1"), None).cni_result)
    assert net1["ips"][0]["address"] == "10.10.1.3/24"
    for _ in range(2):
        response = cni.CmdDel(request(config()), None)
        assert (error_of(response), response.cni_result) == (None, b"")
    assert ("c1", "eth0") not in cni.endpoints and ("c1", "net1") in cni.endpoints


def test_concurrent_adds() -> None:
    """Calls for one container are serialised: many concurrent ADDs, one allocation."""
    cni = servicer()
    barrier = threading.Barrier(8)

    def add(container_id: str) -> bytes:
        barrier.wait()
        return bytes(cni.CmdAdd(request(config(), container_id=container_id), None).cni_result)

    with futures.ThreadPoolExecutor(8) as pool:
        same: List[bytes] = list(pool.map(add, ["same"] * 8))
        different = list(pool.map(add, [f"pod{i}" for i in range(8)]))
    assert len(set(same)) == 1
    addresses = {json.loads(result)["ips"][0]["address"] for result in different}
    assert len(addresses) == 8
    assert len(cni.pools[0].used) == 9


def test_injected_cni_error() -> None:
    cni = agent.CniServicer(["10.10.1.0/24"], cni_pb2, cni_error=102, cni_error_message="veth")
    assert error_of(cni.CmdAdd(request(config()), None)) == (102, "veth")


def test_status_code_parsing() -> None:
    import minigrpc

    assert agent.status_code(minigrpc, "unavailable") is minigrpc.StatusCode.UNAVAILABLE
    assert agent.status_code(minigrpc, "12") is minigrpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(ValueError):
        agent.status_code(minigrpc, "99")
