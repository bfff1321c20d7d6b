"""``python -m minigrpc`` (and the ``minigrpc`` console script): a gRPC command line.

Four commands, for an operator poking a service on a node and for a person learning gRPC:

* ``list TARGET [SERVICE]`` and ``describe TARGET [SYMBOL]`` ask the server's reflection
  service (gRPC's doc/server-reflection.md, v1 and then v1alpha);
* ``call TARGET METHOD -d JSON`` makes one call of any shape, its requests and responses in
  protobuf's JSON mapping;
* ``health TARGET [SERVICE]`` asks ``grpc.health.v1.Health/Check`` (gRPC's
  doc/health-checking.md) and exits with grpc_health_probe's codes, for Kubernetes exec probes.

``--trace`` shows every HTTP/2 frame of the conversation (:mod:`minigrpc.net.trace`'s format).

One module per concern: :mod:`~minigrpc.cli.main` (dispatch, and the one place an error becomes
an exit), :mod:`~minigrpc.cli.arguments` (the command line), :mod:`~minigrpc.cli.exits` (exit
codes and the tool's error), :mod:`~minigrpc.cli.connect` (channels, TLS, the connect timeout),
:mod:`~minigrpc.cli.probe` (the health probe, without protobuf), :mod:`~minigrpc.cli.schema`
(where descriptors come from), :mod:`~minigrpc.cli.known_protos` (the protos the tool carries),
:mod:`~minigrpc.cli.render` (descriptors as proto text), :mod:`~minigrpc.cli.jsoncodec`
(JSON in and out) and :mod:`~minigrpc.cli.commands` (list, describe, call).

Nothing here is imported by ``import minigrpc``; and ``health`` loads neither protobuf nor the
channel machinery on a plaintext target, so that a probe starts almost as fast as the
interpreter (docs/benchmarks.md).

It may import: :mod:`minigrpc` (the public API), :mod:`minigrpc.reflection`,
:mod:`minigrpc.health` and :mod:`minigrpc._pb`.
"""
