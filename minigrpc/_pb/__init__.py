"""The protobuf messages of minigrpc's add-ons (health, reflection, rich status).

grpcio-health-checking, grpcio-reflection and googleapis-common-protos register their files in
protobuf's default descriptor pool, and one pool cannot hold two files that define the same
full name (``grpc.health.v1.HealthCheckRequest``, ``google.rpc.Status``).  So where such a
package is installed and loads on this protobuf, its module is the one used: code that imports
it too, in the same process, gets the very same classes.  minigrpc's own copies in this package
(written by ``proto/generate.py`` from ``proto/``) are loaded only where it is absent, or where its
generated code refuses this protobuf runtime (it checks the version before it registers
anything, so nothing half-registered is left behind).  So the modules here are imported only
through :func:`messages`: imported beside the add-on package, they would clash with it.

It may import: nothing else of minigrpc.
"""

import importlib
import types

__all__ = ["messages"]


def messages(installed: str, own: str) -> types.ModuleType:
    """The module ``installed`` (``grpc_health.v1.health_pb2``) if it imports, else ``own``
    (``minigrpc._pb.health_pb2``), which defines the same messages."""
    try:
        module = importlib.import_module(installed)
    except Exception:  # not installed (ImportError), or its gencode refuses this protobuf
        module = None
    # After install_as_grpc(), a missing add-on's name is minigrpc's stand-in (grpc_alias): that
    # is the module asking, not the add-on.
    if module is None or module.__name__ != installed:
        module = importlib.import_module(own)
    return module
