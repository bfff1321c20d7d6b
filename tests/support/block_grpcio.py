"""A pytest plugin (``-p tests.support.block_grpcio``) that makes grpcio unimportable in its
process.

``tests/interop/test_grpc_alias.py`` runs ``tests/interop/nogrpcio_suite.py`` in a subprocess with
it, so that
the suite proves, on a machine where grpcio *is* installed, what the ``nogrpcio`` tox
environment proves on one where it is not: generated code runs on
``minigrpc.install_as_grpc()`` and nothing reaches grpcio.  Only grpcio's own packages are
blocked (``grpc`` and ``grpc_tools``); grpcio-health-checking and grpcio-status are pure Python
add-ons that must load on the alias.  With ``MINIGRPC_TEST_BLOCK_ADDONS=1`` in the environment,
those add-ons, grpcio-reflection and googleapis-common-protos' ``google.rpc`` are blocked too:
a machine with none of them, where minigrpc's own add-ons serve their names.
"""

import importlib.abc
import importlib.machinery
import os
import sys
import types
from typing import Optional, Sequence

#: The environment variable that blocks the add-on packages too.
BLOCK_ADDONS_ENV = "MINIGRPC_TEST_BLOCK_ADDONS"

BLOCKED = ("grpc", "grpc_tools")
ADDONS = ("grpc_health", "grpc_reflection", "grpc_status", "google.rpc")


def _blocked(fullname: str) -> bool:
    if fullname.partition(".")[0] in BLOCKED:
        return True
    return os.environ.get(BLOCK_ADDONS_ENV) == "1" and any(
        fullname == name or fullname.startswith(name + ".") for name in ADDONS
    )


class GrpcioBlocker(importlib.abc.MetaPathFinder):
    """The first finder: ``grpc`` and ``grpc_tools`` (and their submodules) are not found."""

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]],
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if _blocked(fullname):
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (blocked by tests.support.block_grpcio)",
                name=fullname,
            )
        return None


def _install() -> None:
    for name in list(sys.modules):
        if _blocked(name):
            raise RuntimeError(
                f"{name} was imported before tests.support.block_grpcio could block it")
    if not any(isinstance(finder, GrpcioBlocker) for finder in sys.meta_path):
        sys.meta_path.insert(0, GrpcioBlocker())


_install()
