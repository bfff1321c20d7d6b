"""The CNI shell, byte for byte: the plugin run as libcni runs it, one subprocess per row.

Every row of the Go plugin's shell (containernetworking/cni pkg/skel, CNI SPEC.md "Section 2:
Execution Protocol" and "Section 5: Result Types") that does not need an agent is here, with the
observed
Go bytes as literal expectations.  Rows that need to get *past* the shell without an agent use
the plugin's own guards: the netns check (code 8, run before any RPC, where the Go plugin checks
after it),
GC (a no-op) and STATUS (code 50 when no agent listens).  The pure helpers behind the shell
(Go's string escaping, ``%q``, ``Atoi``, version parsing) are also checked directly on larger
tables.
"""

from __future__ import annotations

import os
from typing import Dict, Optional

import pytest

from cni_client import go_compat, skel
from tests.support.cni import (
    VERSION_BYTES,
    EnvValue,
    conf,
    error_json,
    run_plugin,
)

pytestmark = pytest.mark.timeout(120)

OWN_NETNS = "/proc/self/ns/net"  # the plugin's own netns, as seen from the plugin
SAME_NETNS = error_json(8, "plugin's netns and netns from CNI_NETNS should not be the same")
SUPPORTED = '["0.1.0" "0.2.0" "0.3.0" "0.3.1" "0.4.0" "1.0.0" "1.1.0"]'


def env(command: str, **values: EnvValue) -> Dict[str, EnvValue]:
    """CNI_* variables for a row: the command plus the given ones (others stay empty)."""
    result: Dict[str, EnvValue] = {"CNI_COMMAND": command}
    for key, value in values.items():
        result["CNI_" + key.upper()] = value
    return result


def full_env(command: str, netns: str = OWN_NETNS, **values: EnvValue) -> Dict[str, EnvValue]:
    """Everything ADD needs; the default netns is the plugin's own, so ADD/DEL stop at code 8
    once the shell has let them through."""
    base: Dict[str, EnvValue] = {"containerid": "c1", "netns": netns, "ifname": "eth0",
                                 "path": "/opt/cni/bin"}
    base.update(values)
    return env(command, **base)


def no_agent() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "no-such-dir", "cni.sock")


def incompatible(quoted: str) -> bytes:
    """Code 1 for a config version; ``quoted`` is Go's %q of it."""
    return error_json(1, "incompatible CNI versions",
                      f"config is {quoted}, plugin supports {SUPPORTED}")


# --------------------------------------------------------------------------------------------
# Environment variables (CNI SPEC.md, "Parameters") and the about text.

MISSING_ADD = error_json(4, "required env variables [CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME,"
                            "CNI_PATH] missing")
MISSING_DEL = error_json(4, "required env variables [CNI_CONTAINERID,CNI_IFNAME,CNI_PATH] missing")
MISSING_PATH = error_json(4, "required env variables [CNI_PATH] missing")
IFNAME_SPACE = error_json(4, "interface name contains / or : or whitespace characters")
IFNAME_LONG = error_json(4, "interface name is too long",
                         "interface name should be less than 16 characters")
IFNAME_DOTS = error_json(4, "interface name is . or ..")


def bad_container_id(container_id: str) -> bytes:
    return error_json(4, "invalid characters in containerID", container_id)


ENV_ROWS = [
    # (id, env, expected stdout)
    ("add-alone", env("ADD"), MISSING_ADD),
    ("check-alone", env("CHECK"), MISSING_ADD),
    ("del-alone", env("DEL"), MISSING_DEL),
    ("gc-alone", env("GC"), MISSING_PATH),
    ("status-alone", env("STATUS"), MISSING_PATH),
    ("del-needs-no-netns", env("DEL", containerid="c1", ifname="eth0"),
     error_json(4, "required env variables [CNI_PATH] missing")),
    ("add-missing-netns-only", env("ADD", containerid="c1", ifname="eth0", path="/p"),
     error_json(4, "required env variables [CNI_NETNS] missing")),
    # A validator failure is returned at once and beats "missing" (observed).
    ("ifname-beats-missing", env("ADD", ifname="a b"), IFNAME_SPACE),
    ("containerid-beats-missing", env("DEL", containerid="-x"), bad_container_id("-x")),
    ("containerid-before-ifname", env("ADD", containerid="a b", ifname="c d"),
     bad_container_id("a b")),
    # Validators run only for commands that require the variable.
    ("gc-ignores-ifname", env("GC", ifname="a b", containerid="-x"), MISSING_PATH),
    ("status-ignores-containerid", env("STATUS", containerid="!"), MISSING_PATH),
    # Container IDs: full match of [a-zA-Z0-9][a-zA-Z0-9_.\-]*.
    ("cid-leading-dash", full_env("ADD", containerid="-abc"), bad_container_id("-abc")),
    ("cid-leading-dot", full_env("ADD", containerid=".abc"), bad_container_id(".abc")),
    ("cid-trailing-newline", full_env("ADD", containerid="abc\n"), bad_container_id("abc\n")),
    ("cid-slash", full_env("ADD", containerid="ab/c"), bad_container_id("ab/c")),
    ("cid-unicode", full_env("ADD", containerid="abcé"), bad_container_id("abcé")),
    ("cid-ok-punct", full_env("ADD", containerid="A0_b.c-d"), SAME_NETNS),
    ("cid-ok-single", full_env("ADD", containerid="7"), SAME_NETNS),
    # Interface names: bytes, dots, separators, Go's unicode.IsSpace.
    ("ifname-15-bytes", full_env("ADD", ifname="a" * 15), SAME_NETNS),
    ("ifname-16-bytes", full_env("ADD", ifname="a" * 16), IFNAME_LONG),
    ("ifname-8-chars-16-bytes", full_env("ADD", ifname="é" * 8), IFNAME_LONG),
    ("ifname-7-chars-14-bytes", full_env("ADD", ifname="é" * 7), SAME_NETNS),
    ("ifname-dot", full_env("ADD", ifname="."), IFNAME_DOTS),
    ("ifname-dotdot", full_env("DEL", ifname=".."), IFNAME_DOTS),
    ("ifname-three-dots", full_env("ADD", ifname="..."), SAME_NETNS),
    ("ifname-slash", full_env("ADD", ifname="a/b"), IFNAME_SPACE),
    ("ifname-colon", full_env("ADD", ifname="a:b"), IFNAME_SPACE),
    ("ifname-tab", full_env("ADD", ifname="a\tb"), IFNAME_SPACE),
    ("ifname-vtab", full_env("ADD", ifname="a\vb"), IFNAME_SPACE),
    ("ifname-nel", full_env("ADD", ifname="a\x85b"), IFNAME_SPACE),
    ("ifname-nbsp", full_env("ADD", ifname="a\xa0b"), IFNAME_SPACE),
    ("ifname-ogham-space", full_env("ADD", ifname="a\u1680"), IFNAME_SPACE),
    ("ifname-em-space", full_env("ADD", ifname="a\u2003"), IFNAME_SPACE),
    ("ifname-line-sep", full_env("ADD", ifname="a\u2028"), IFNAME_SPACE),
    ("ifname-ideographic-space", full_env("ADD", ifname="a\u3000"), IFNAME_SPACE),
    ("ifname-narrow-nbsp", full_env("ADD", ifname="a\u202f"), IFNAME_SPACE),
    # Python's isspace() says yes, Go's unicode.IsSpace says no (a Go/Python difference).
    ("ifname-file-separator-ok", full_env("ADD", ifname="a\x1cb"), SAME_NETNS),
    ("ifname-unit-separator-ok", full_env("ADD", ifname="a\x1fb"), SAME_NETNS),
    ("ifname-zero-width-space-ok", full_env("ADD", ifname="a\u200bb"), SAME_NETNS),
    ("ifname-mongolian-vowel-sep-ok", full_env("ADD", ifname="a\u180e"), SAME_NETNS),
    ("ifname-invalid-utf8-ok", full_env("ADD", ifname=b"a\xffb"), SAME_NETNS),
    ("ifname-invalid-utf8-16-bytes", full_env("ADD", ifname=b"\xff" * 16), IFNAME_LONG),
    ("ifname-checked-on-check", full_env("CHECK", ifname="a b"), IFNAME_SPACE),
    # VERSION and unknown commands need only CNI_COMMAND.
    ("version-alone", env("VERSION"), VERSION_BYTES),
    ("version-ignores-bad-vars", env("VERSION", containerid="-x", ifname="a b"), VERSION_BYTES),
]


@pytest.mark.parametrize(("cni", "expected"), [row[1:] for row in ENV_ROWS],
                         ids=[row[0] for row in ENV_ROWS])
def test_environment_rows(cni: Dict[str, EnvValue], expected: bytes) -> None:
    run = run_plugin(cni, conf("1.0.0"))
    assert run.stdout == expected
    assert run.returncode == (0 if expected == VERSION_BYTES else 1)


@pytest.mark.parametrize("cni", [env(""), env("", ifname="a b", containerid="-x"),
                                 {"CNI_COMMAND": ""}], ids=["empty", "with-bad-vars", "unset"])
def test_about_text_when_command_is_empty(cni: Dict[str, EnvValue]) -> None:
    run = run_plugin(cni, b"not json")
    assert run.returncode == 0
    assert run.stdout == b""
    about, versions, tail = run.stderr.split(b"\n")
    assert about.startswith(b"Antrea CNI ")
    assert versions == b"CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, " \
                       b"1.0.0, 1.1.0"
    assert tail == b""


def test_env_checks_run_before_stdin_is_read() -> None:
    """stdin is garbage, but the env error is what comes out (the Go plugin checks the environment
    first)."""
    assert run_plugin(env("ADD"), b"\xff garbage").stdout == MISSING_ADD


@pytest.mark.parametrize("stdin", [b"", b"\xff\xfe garbage", b"[1,"], ids=["empty", "binary",
                                                                           "broken"])
def test_version_does_not_read_stdin(stdin: bytes) -> None:
    run = run_plugin(env("VERSION"), stdin)
    assert (run.returncode, run.stdout, run.stderr) == (0, VERSION_BYTES, b"")


def test_version_output_is_compact_with_newline() -> None:
    run = run_plugin(env("VERSION", netns="dummy", ifname="dummy", path="dummy"),
                     b'{"cniVersion":"1.1.0"}')
    assert run.stdout == (b'{"cniVersion":"1.1.0","supportedVersions":["0.1.0","0.2.0","0.3.0",'
                          b'"0.3.1","0.4.0","1.0.0","1.1.0"]}\n')


# --------------------------------------------------------------------------------------------
# Stdin handling.

NAME_STRUCT = 'struct { Name string "json:\\"name\\"" }'
UNMARSHALL = "error unmarshall network config: "
MISSING_NAME = error_json(7, "missing network name")


def bad_name(name: str) -> bytes:
    return error_json(7, "invalid characters found in network name", name)


def unknown_command(command: str) -> bytes:
    return error_json(4, f"unknown CNI_COMMAND: {command}")


STDIN_ROWS = [
    # (id, stdin, expected stdout); the command is unknown ("add"), so passing every stdin
    # check ends in "unknown CNI_COMMAND" (the Go plugin's dispatch).
    ("empty", b"", error_json(6, UNMARSHALL + "unexpected end of JSON input")),
    ("whitespace", b" \n\t\r ", error_json(6, UNMARSHALL + "unexpected end of JSON input")),
    ("array", b"[]", error_json(6, UNMARSHALL + f"json: cannot unmarshal array into Go value of"
                                                f" type {NAME_STRUCT}")),
    ("string", b'"antrea"', error_json(6, UNMARSHALL + f"json: cannot unmarshal string into Go"
                                                       f" value of type {NAME_STRUCT}")),
    ("number", b"12", error_json(6, UNMARSHALL + f"json: cannot unmarshal number into Go value"
                                                 f" of type {NAME_STRUCT}")),
    ("bool", b"true", error_json(6, UNMARSHALL + f"json: cannot unmarshal bool into Go value of"
                                                 f" type {NAME_STRUCT}")),
    ("name-number", b'{"name":5}', error_json(6, UNMARSHALL + "json: cannot unmarshal number"
                                                              " into Go struct field .name of"
                                                              " type string")),
    ("name-object", b'{"name":{}}', error_json(6, UNMARSHALL + "json: cannot unmarshal object"
                                                               " into Go struct field .name of"
                                                               " type string")),
    ("name-type-error-then-string", b'{"name":[],"name":"ok"}',
     error_json(6, UNMARSHALL + "json: cannot unmarshal array into Go struct field .name of"
                                " type string")),
    ("null", b"null", MISSING_NAME),
    ("empty-object", b"{}", MISSING_NAME),
    ("name-empty", b'{"name":""}', MISSING_NAME),
    ("name-null", b'{"name":null}', MISSING_NAME),
    ("name-space", b'{"name":"a b"}', bad_name("a b")),
    ("name-leading-dash", b'{"name":"-a"}', bad_name("-a")),
    ("name-trailing-newline", b'{"name":"a\\n"}', bad_name("a\n")),
    ("name-html", b'{"name":"<a&b>"}', bad_name("<a&b>")),
    ("name-ok", b'{"name":"a-b_c.d"}', unknown_command("add")),
    # Go matches keys case-insensitively, the last match wins, null changes nothing (a Go/Python
    # difference).
    ("name-upper", b'{"NAME":"ok"}', unknown_command("add")),
    ("name-last-wins-bad", b'{"name":"ok","Name":"-bad"}', bad_name("-bad")),
    ("name-last-wins-good", b'{"name":"-bad","nAmE":"ok"}', unknown_command("add")),
    ("name-null-keeps-value", b'{"name":"ok","name":null}', unknown_command("add")),
    ("name-escaped-key", b'{"n\\u0061me":"ok"}', unknown_command("add")),
    ("nested-name-ignored", b'{"x":{"name":"ok"}}', MISSING_NAME),
    # Strict input: UTF-8 only, no BOM, no NaN/Infinity, one document.
    ("utf8-bom", b'\xef\xbb\xbf{"name":"ok"}', None),
    ("utf16", '{"name":"ok"}'.encode("utf-16"), None),
    ("utf16-le", '{"name":"ok"}'.encode("utf-16-le"), None),
    ("nan", b'{"name":"ok","x":NaN}', None),
    ("infinity", b'{"name":"ok","x":Infinity}', None),
    ("minus-infinity", b'{"name":"ok","x":-Infinity}', None),
    ("trailing-garbage", b'{"name":"ok"} x', None),
    ("two-documents", b'{"name":"ok"}{}', None),
    ("single-quotes", b"{'name':'ok'}", None),
    ("trailing-comma", b'{"name":"ok",}', None),
    ("raw-control-char", b'{"name":"o\x01k"}', None),
    ("invalid-utf8-outside-string", b'{"name":"ok"}\xff', None),
    ("invalid-utf8-in-other-string", b'{"name":"ok","x":"\xff\xfe"}', unknown_command("add")),
    ("big-integer", b'{"name":"ok","x":1' + b"0" * 5000 + b"}", unknown_command("add")),
    ("huge-exponent", b'{"name":"ok","x":1e999}', unknown_command("add")),
    ("deep-nesting", b'{"name":"ok","x":' + b"[" * 500 + b"]" * 500 + b"}",
     unknown_command("add")),
    ("trailing-whitespace", b'{"name":"ok"}\n\n', unknown_command("add")),
]


@pytest.mark.parametrize(("stdin", "expected"), [row[1:] for row in STDIN_ROWS],
                         ids=[row[0] for row in STDIN_ROWS])
def test_stdin_rows(stdin: bytes, expected: Optional[bytes]) -> None:
    run = run_plugin(env("add"), stdin)
    assert run.returncode == 1
    if expected is None:  # a parser error: fixed prefix, Python's own description after it
        assert run.stdout.startswith(b'{\n    "code": 6,\n    "msg": "error unmarshall network'
                                     b' config: ')
        assert run.stdout.endswith(b'"\n}')
        assert b'"details"' not in run.stdout
    else:
        assert run.stdout == expected


@pytest.mark.parametrize(("depth", "accepted"), [(1500, True), (10000, True), (10001, False)])
def test_nesting_depth_follows_go(depth: int, accepted: bool) -> None:
    """Go accepts 10000 levels (then ``exceeded max depth``); Python's recursive decoder
    gives up near 1000, so deeper input goes through the iterative fallback."""
    arrays = depth - 3  # plus the top-level object and the innermost {"y":[]}
    stdin = b'{"x":' + b"[" * arrays + b'{"y":[]}' + b"]" * arrays + b',"name":"ok"}'
    run = run_plugin(env("add"), stdin)
    if accepted:
        assert run.stdout == unknown_command("add")
    else:
        assert run.stdout.startswith(b'{\n    "code": 6,\n    "msg": "error unmarshall network'
                                     b' config: exceeded max depth')


def test_invalid_utf8_in_name_becomes_replacement_character() -> None:
    """Go decodes a bad byte inside a string as U+FFFD, then the name check fails (a Go/Python
    difference)."""
    run = run_plugin(env("add"), b'{"name":"a\xff\xe2\x82b"}')
    assert run.stdout == bad_name("a\ufffd\ufffd\ufffdb")


def test_lone_surrogate_escape_becomes_replacement_character() -> None:
    run = run_plugin(env("add"), b'{"name":"\\ud800x"}')
    assert run.stdout == bad_name("\ufffdx")


def test_unknown_command_with_empty_stdin_is_a_decoding_error() -> None:
    """QUIRK of the Go plugin, kept: stdin checks come before the unknown-command error."""
    run = run_plugin(env("FOO"), b"")
    assert run.stdout == error_json(6, UNMARSHALL + "unexpected end of JSON input")


@pytest.mark.parametrize("command", ["add", "Add", "version", "FOO", "ADD "])
def test_commands_are_case_sensitive(command: str) -> None:
    run = run_plugin(env(command), conf())
    assert (run.returncode, run.stdout) == (1, unknown_command(command))


def test_stdin_read_error_is_code_5() -> None:
    """A closed stdin fails the read: Go says ``read /dev/stdin: bad file descriptor``.

    (A directory on stdin cannot be tested: CPython itself refuses to start with it.)"""
    import subprocess
    import sys

    from tests.support.cni import REPO_ROOT, plugin_env

    done = subprocess.run([sys.executable, "-m", "cni_client"], stdin=subprocess.DEVNULL,
                          env=plugin_env(env("ADD", containerid="c", netns="/n", ifname="e",
                                             path="/p")),
                          preexec_fn=lambda: os.close(0),
                          capture_output=True, cwd=REPO_ROOT, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stdout == error_json(5, "error reading from stdin: read /dev/stdin: bad file"
                                        " descriptor")


# --------------------------------------------------------------------------------------------
# Version checks (containernetworking/cni pkg/version).

VERSION_DECODE = "decoding version from network config: "
OBSERVED_INCOMPATIBLE = (
    b'{\n    "code": 1,\n    "msg": "incompatible CNI versions",\n    "details": "config is '
    b'\\"2.0.0\\", plugin supports [\\"0.1.0\\" \\"0.2.0\\" \\"0.3.0\\" \\"0.3.1\\" \\"0.4.0\\" '
    b'\\"1.0.0\\" \\"1.1.0\\"]"\n}'
)


def test_observed_incompatible_versions_bytes() -> None:
    run = run_plugin(full_env("ADD"), conf("2.0.0"))
    assert (run.returncode, run.stdout) == (1, OBSERVED_INCOMPATIBLE)


@pytest.mark.parametrize("command", ["ADD", "DEL"])
@pytest.mark.parametrize("version", skel.SUPPORTED_VERSIONS)
def test_add_del_accept_every_supported_version(command: str, version: str) -> None:
    """The shell lets the call through (it then stops at the netns guard, before any RPC)."""
    assert run_plugin(full_env(command), conf(version)).stdout == SAME_NETNS


@pytest.mark.parametrize("command", ["ADD", "DEL"])
@pytest.mark.parametrize("stdin", [conf(None), conf(""), b'{"name":"a","cniVersion":null}'],
                         ids=["absent", "empty", "null"])
def test_missing_version_means_0_1_0(command: str, stdin: bytes) -> None:
    assert run_plugin(full_env(command), stdin).stdout == SAME_NETNS


ADD_VERSION_ROWS = [
    # (config version, Go's %q of it)
    ("1.0", '"1.0"'),
    ("1.0.0 ", '"1.0.0 "'),
    ("v1.0.0", '"v1.0.0"'),
    ("0.3.0\n", '"0.3.0\\n"'),
    ("0.3.0\u2028", '"0.3.0\\u2028"'),
    ("0.3.0\u00a0", '"0.3.0\\u00a0"'),
    ("0.<3>&", '"0.<3>&"'),
    ("é", '"é"'),
]


@pytest.mark.parametrize(("version", "quoted"), ADD_VERSION_ROWS,
                         ids=[repr(row[0]) for row in ADD_VERSION_ROWS])
def test_membership_is_exact_with_go_quoting(version: str, quoted: str) -> None:
    """Membership is string equality; the details use Go's %q, then JSON escaping."""
    run = run_plugin(full_env("ADD"), conf(version))
    assert run.returncode == 1
    assert run.stdout == incompatible(quoted)


@pytest.mark.parametrize("value", ["5", "true", "[]", "{}"])
def test_version_must_be_a_string(value: str) -> None:
    kind = {"5": "number", "true": "bool", "[]": "array", "{}": "object"}[value]
    stdin = b'{"name":"antrea","cniVersion":' + value.encode() + b"}"
    run = run_plugin(full_env("ADD"), stdin)
    assert run.stdout == error_json(6, VERSION_DECODE + f"json: cannot unmarshal {kind} into Go"
                                                        " struct field .cniVersion of type string")


def test_version_key_matches_case_insensitively_including_long_s() -> None:
    """Go's EqualFold folds U+017F (long s) onto 's' (a Go/Python difference)."""
    run = run_plugin(full_env("ADD"), '{"name":"a","cniVer\u017fion":"9.9.9"}'.encode())
    assert run.stdout == incompatible('"9.9.9"')
    run = run_plugin(full_env("ADD"), b'{"name":"a","CNIVERSION":"0.3.0","cniversion":"7"}')
    assert run.stdout == incompatible('"7"')


def atoi_syntax(label: str, part: str) -> str:
    return (f'failed to convert {label} version part "{part}": strconv.Atoi: parsing "{part}":'
            " invalid syntax")


GATE_ROWS = [
    # (id, version, expected (code, msg, details) or "pass")
    ("below", "0.3.0", (1, "config version does not allow {cmd}", "")),
    ("absent-is-0.1.0", None, (1, "config version does not allow {cmd}", "")),
    ("negative", "-1.0.0", (1, "config version does not allow {cmd}", "")),
    ("above-plugin", "2.0.0", (1, "plugin version does not allow {cmd}", "")),
    ("above-plugin-minor", "1.2.0", (1, "plugin version does not allow {cmd}", "")),
    ("short-form", "1.1", (1, "incompatible CNI versions", f'config is "1.1", plugin supports'
                                                          f" {SUPPORTED}")),
    ("plus-sign", "+1.1.0", (1, "incompatible CNI versions", f'config is "+1.1.0", plugin'
                                                            f" supports {SUPPORTED}")),
    ("leading-zero", "01.1.0", (1, "incompatible CNI versions", f'config is "01.1.0", plugin'
                                                               f" supports {SUPPORTED}")),
    ("major-abc", "abc", (6, atoi_syntax("major", "abc"), "")),
    ("minor-x", "1.x", (6, atoi_syntax("minor", "x"), "")),
    ("micro-y", "1.1.y", (6, atoi_syntax("micro", "y"), "")),
    ("empty-minor", "1..0", (6, atoi_syntax("minor", ""), "")),
    ("space", " 1.1.0", (6, atoi_syntax("major", " 1"), "")),
    ("hex", "0x1.1.0", (6, atoi_syntax("major", "0x1"), "")),
    ("underscore", "1_0.1.0", (6, atoi_syntax("major", "1_0"), "")),
    ("arabic-digit", "\u0661.1.0", (6, atoi_syntax("major", "\u0661"), "")),
    ("only-sign", "+.1.0", (6, atoi_syntax("major", "+"), "")),
    ("too-many-parts", "1.1.0.0", (6, 'invalid version "1.1.0.0": too many parts', "")),
    ("too-many-empty-parts", "...", (6, 'invalid version "...": too many parts', "")),
    ("out-of-range", "99999999999999999999.0.0",
     (6, 'failed to convert major version part "99999999999999999999": strconv.Atoi: parsing'
         ' "99999999999999999999": value out of range', "")),
    ("range-before-syntax", "99999999999999999999x.0.0",
     (6, 'failed to convert major version part "99999999999999999999x": strconv.Atoi: parsing'
         ' "99999999999999999999x": value out of range', "")),
    ("quoted-part", 'a"b', (6, 'failed to convert major version part "a\\"b": strconv.Atoi:'
                               ' parsing "a\\"b": invalid syntax', "")),
    ("control-part", "a\tb", (6, 'failed to convert major version part "a\\tb": strconv.Atoi:'
                                 ' parsing "a\\tb": invalid syntax', "")),
]


@pytest.mark.parametrize("command", ["CHECK", "GC", "STATUS"])
@pytest.mark.parametrize(("version", "expected"), [row[1:] for row in GATE_ROWS],
                         ids=[row[0] for row in GATE_ROWS])
def test_check_gc_status_gating(command: str, version: Optional[str], expected: tuple) -> None:
    """Every row reads the same for the three commands; only the threshold differs and no
    row sits between 0.4.0 and 1.1.0 (those are in the next test)."""
    code, msg, details = expected
    run = run_plugin(full_env(command), conf(version))
    assert run.returncode == 1
    assert run.stdout == error_json(code, msg.format(cmd=command), details)


@pytest.mark.parametrize("version", ["0.4.0", "1.0.0"])
def test_gc_and_status_need_1_1_0(version: str) -> None:
    for command in ("GC", "STATUS"):
        run = run_plugin(env(command, path="/p"), conf(version))
        assert run.stdout == error_json(1, f"config version does not allow {command}")


def test_gc_is_a_successful_no_op() -> None:
    """GC: exit 0, no output, no RPC; GC gets only CNI_PATH from libcni."""
    run = run_plugin(env("GC", path="/opt/cni/bin"), conf("1.1.0"))
    assert (run.returncode, run.stdout) == (0, b"")


def test_status_without_agent_is_code_50() -> None:
    """Improvement on the Go plugin: STATUS probes the agent; no socket means not available."""
    run = run_plugin(env("STATUS", path="/opt/cni/bin"), conf("1.1.0"), socket_path=no_agent())
    assert run.returncode == 1
    assert run.stdout.startswith(b'{\n    "code": 50,\n    "msg": "antrea-agent is not'
                                 b' available",\n    "details": "cannot connect to ')
    assert run.stdout.endswith(b'no such file or directory"\n}')


# --------------------------------------------------------------------------------------------
# Go's encoding/json Error JSON bytes and Go's escaping, through a path that echoes input: the
# container ID.

ESCAPE_ROWS = [
    # (id, CNI_CONTAINERID bytes, expected JSON string body for details)
    ("html", b"<a>&", b'"\\u003ca\\u003e\\u0026"'),
    ("quotes-backslash", b'a"b\\c', b'"a\\"b\\\\c"'),
    ("short-escapes", b"\x08\x0c\n\r\t", b'"\\b\\f\\n\\r\\t"'),
    ("other-controls", b"\x01\x1f\x0b", b'"\\u0001\\u001f\\u000b"'),
    ("del-raw", b"a\x7f", b'"a\x7f"'),
    ("line-separators", "\u2028\u2029".encode(), b'"\\u2028\\u2029"'),
    ("raw-utf8", "é☺😈".encode(), '"é☺😈"'.encode()),
    ("invalid-utf8", b"a\xffb\xc3", b'"a\\ufffdb\\ufffd"'),
    ("truncated-sequence", b"-\xe2\x82", b'"-\\ufffd\\ufffd"'),
    ("surrogate-bytes", b"-\xed\xa0\x80", b'"-\\ufffd\\ufffd\\ufffd"'),
]


@pytest.mark.parametrize(("container_id", "body"), [row[1:] for row in ESCAPE_ROWS],
                         ids=[row[0] for row in ESCAPE_ROWS])
def test_error_json_escaping(container_id: bytes, body: bytes) -> None:
    run = run_plugin(full_env("ADD", containerid=container_id), conf())
    assert run.returncode == 1
    assert run.stdout == (b'{\n    "code": 4,\n    "msg": "invalid characters in containerID",\n'
                          b'    "details": ' + body + b"\n}")


def test_unknown_command_is_escaped_in_msg() -> None:
    run = run_plugin(env("<&>\xff".encode("latin-1")), conf())
    assert run.stdout == (b'{\n    "code": 4,\n    "msg": "unknown CNI_COMMAND: '
                          b'\\u003c\\u0026\\u003e\\ufffd"\n}')


# --------------------------------------------------------------------------------------------
# Go's encoding/json: an unexpected exception is code 999 with a message, never a traceback on
# stdout.


def test_internal_error_is_code_999(tmp_path: os.PathLike[str]) -> None:
    """A broken installation (here: a minigrpc that fails to import) surfaces as 999."""
    broken = os.path.join(os.fspath(tmp_path), "minigrpc")
    os.mkdir(broken)
    with open(os.path.join(broken, "__init__.py"), "w") as handle:
        handle.write("raise RuntimeError('broken install')\n")
    from tests.support.cni import REPO_ROOT

    run = run_plugin(full_env("ADD", netns="/var/run/netns/x"), conf(), cwd=os.fspath(tmp_path),
                     extra_env={"PYTHONPATH": os.fspath(tmp_path) + os.pathsep + REPO_ROOT})
    assert run.returncode == 1
    assert run.stdout == error_json(999, "internal error: RuntimeError: broken install")
    assert b"Traceback" not in run.stderr
    assert run.stderr.count(b"\n") == 1


# --------------------------------------------------------------------------------------------
# The pure helpers, on tables too big for one subprocess per row.

@pytest.mark.parametrize(("text", "expected"), [
    ("", '""'), ("a", '"a"'), ("<>&", '"\\u003c\\u003e\\u0026"'),
    ("\u2028\u2029", '"\\u2028\\u2029"'), ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
    ("\x00\x1f", '"\\u0000\\u001f"'), ("\x7f", '"\x7f"'), ('"\\', '"\\"\\\\"'),
    ("é☺😈", '"é☺😈"'), ("\udcff", '"\\ufffd"'), ("\ud800", '"\\ufffd"'), ("/", '"/"'),
])
def test_go_json_string(text: str, expected: str) -> None:
    assert go_compat.go_json_string(text) == expected


def test_go_json_string_matches_contract_recipe_for_all_bmp() -> None:
    """json.dumps(ensure_ascii=False) + the five replacements (Go's encoding/json) for every
    non-surrogate."""
    from tests.support.cni import go_escape

    text = "".join(chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF)
    assert go_compat.go_json_string(text) == go_escape(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("", '""'), ("1.0", '"1.0"'), ('a"b', '"a\\"b"'), ("a\\b", '"a\\\\b"'),
    ("\n\t\a\v", '"\\n\\t\\a\\v"'), ("\x00\x7f", '"\\x00\\x7f"'), ("é", '"é"'),
    ("\u00a0", '"\\u00a0"'), ("\u2028", '"\\u2028"'), ("\U000e0001", '"\\U000e0001"'),
    ("\udcff", '"\\xff"'), (" ", '" "'),
])
def test_go_quote(text: str, expected: str) -> None:
    assert go_compat.go_quote(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("0", 0), ("-0", 0), ("+7", 7), ("007", 7), ("123456789012345678", 123456789012345678),
    ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -(2**63)),
])
def test_go_atoi_values(text: str, expected: int) -> None:
    assert go_compat.go_atoi(text) == expected


@pytest.mark.parametrize(("text", "error"), [
    ("", "invalid syntax"), ("+", "invalid syntax"), ("-", "invalid syntax"),
    ("1a", "invalid syntax"), ("a1", "invalid syntax"), (" 1", "invalid syntax"),
    ("1 ", "invalid syntax"), ("1_000", "invalid syntax"), ("0x10", "invalid syntax"),
    ("\u0661", "invalid syntax"), ("++1", "invalid syntax"), ("1e3", "invalid syntax"),
    ("9223372036854775808", "value out of range"), ("-9223372036854775809", "value out of range"),
    ("18446744073709551616", "value out of range"), ("99999999999999999999x", "value out of range"),
    ("9x9999999999999999999999", "invalid syntax"),
])
def test_go_atoi_errors(text: str, error: str) -> None:
    with pytest.raises(go_compat.GoParseError) as caught:
        go_compat.go_atoi(text)
    assert str(caught.value) == f"strconv.Atoi: parsing {go_compat.go_quote(text)}: {error}"


@pytest.mark.parametrize(("version", "parsed"), [
    ("", (0, 1, 0)), ("1", (1, 0, 0)), ("1.2", (1, 2, 0)), ("1.2.3", (1, 2, 3)),
    ("-1.+2.03", (-1, 2, 3)),
])
def test_parse_version(version: str, parsed: tuple) -> None:
    assert skel.parse_version(version) == parsed


def test_error_json_omits_empty_details_and_wraps_uint() -> None:
    assert skel.encode_error_json(7, "") == b'{\n    "code": 7,\n    "msg": ""\n}'
    assert skel.encode_error_json(-1, "m", "d") == (b'{\n    "code": 18446744073709551615,\n'
                                                    b'    "msg": "m",\n    "details": "d"\n}')


DOCUMENTS = [
    '{"name":"a","x":[1,-2.5e3,true,false,null,"s\\u00e9\\ud800",{"k":[]},{}],"y":{}}',
    ' [ 1 , [ ] , { "a" : { "b" : null } } ] ', '"top"', "0", "null", '{"a":1,"a":2}',
]
BAD_DOCUMENTS = ["{", "[1,]", '{"a" 1}', '{"a":1,}', "[1 2]", "01", "tru", '"\\x"', "[-]",
                 '{"a":1}x', '{1:2}', "[", '"\x01"', "1.", ".5"]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_deep_fallback_parser_agrees_with_json(text: str) -> None:
    """The iterative parser (used beyond Python's recursion limit) decodes like the main one."""
    assert go_compat._decode_deep_document(text) == go_compat.decode_json_document(text.encode())


@pytest.mark.parametrize("text", BAD_DOCUMENTS)
def test_deep_fallback_parser_rejects_what_json_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        go_compat.decode_json_document(text.encode())
    with pytest.raises(ValueError):
        go_compat._decode_deep_document(text)
