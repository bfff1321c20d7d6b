"""Entry point of the plugin: ``python -m cni_client`` and the ``antrea-cni`` console script.

The runtime executes this with no arguments (CNI SPEC.md, "Execution Protocol"); :func:`main` wires
the Antrea commands into the generic CNI shell (:mod:`cni_client.skel`) the way the Go
``cmd/antrea-cni`` wires ``pkg/cni`` into ``skel.PluginMainFuncs``.
"""

import posix  # not os: see cni_client.skel
import sys

from cni_client import __version__
from cni_client.skel import CmdArgs, CniError, CniFuncs, plugin_main

#: Antrea's code for "the plugin would configure its own netns".
ERR_SAME_NETNS = 8
_OWN_NETNS = "/proc/self/ns/net"


def ensure_foreign_netns(args: CmdArgs) -> None:
    """Refuse to work on the plugin's own network namespace (docs/cni-plugin-behaviour.md, "Where
    cni_client deliberately differs from the Go plugin").

    The Go plugin checks this *after* the RPC, so a successful result and an error JSON end up
    together on stdout.  We check first, so the runtime gets something it can parse: no RPC, one
    error JSON.  As in Go, ``CNI_NETNS_OVERRIDE`` = ``true`` (any case) or ``1`` skips it, and so
    does a netns that cannot be opened (a DEL may even have none)."""
    if args.netns_override.lower() in ("true", "1") or not args.netns:
        return
    try:
        target = posix.stat(args.netns)
        own = posix.stat(_OWN_NETNS)
    except (OSError, ValueError):
        return
    if (target.st_dev, target.st_ino) == (own.st_dev, own.st_ino):
        raise CniError(ERR_SAME_NETNS,
                       "plugin's netns and netns from CNI_NETNS should not be the same")


def cmd_add(args: CmdArgs) -> bytes:
    ensure_foreign_netns(args)
    from cni_client import client

    return client.request(client.ACTION_ADD, args)


def cmd_check(args: CmdArgs) -> bytes:
    from cni_client import client

    return client.request(client.ACTION_CHECK, args)


def cmd_del(args: CmdArgs) -> bytes:
    ensure_foreign_netns(args)
    from cni_client import client

    return client.request(client.ACTION_DEL, args)


def cmd_status(args: CmdArgs) -> bytes:
    """STATUS (config >= 1.1.0): ask whether the agent can take ADDs (a deliberate improvement on
    the Go plugin's no-op, which always succeeds)."""
    from cni_client import client

    client.probe_agent()
    return b""


def cmd_gc(args: CmdArgs) -> bytes:
    """GC is a successful no-op: the agent has no GC RPC and collects its own leaks."""
    return b""


CNI_FUNCS = CniFuncs(add=cmd_add, check=cmd_check, delete=cmd_del, status=cmd_status, gc=cmd_gc)


def about_text() -> str:
    """The first stderr line when CNI_COMMAND is empty; nothing parses it."""
    return (f"Antrea CNI {__version__} {sys.platform}/{posix.uname().machine}"
            f" python{sys.version.split()[0]}")


def main() -> int:
    return plugin_main(CNI_FUNCS, about_text())


if __name__ == "__main__":
    sys.exit(main())
