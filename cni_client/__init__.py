"""antrea-cni in pure Python: the CNI plugin that forwards ADD/CHECK/DEL to antrea-agent.

Importing the package must stay cheap: the runtime starts the plugin for every pod, and the
VERSION probe and the env/stdin checks never need gRPC (docs/cni-plugin-behaviour.md).  So nothing
is imported here; :mod:`cni_client.client` pulls in minigrpc and protobuf only when an RPC runs.
"""

__version__ = "0.1.0"
