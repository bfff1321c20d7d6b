"""gRPC's health-checking service (gRPC's doc/health-checking.md) without grpcio.

The same modules as grpcio-health-checking, under ``minigrpc.health.v1``: ``health``
(:class:`~minigrpc.health.v1.health.HealthServicer`), ``health_pb2`` and ``health_pb2_grpc``.
After ``minigrpc.install_as_grpc()``, ``grpc_health.v1.*`` imports resolve to them where
grpcio-health-checking is not installed.

It may import: :mod:`minigrpc` (the public API), :mod:`minigrpc.aio`, :mod:`minigrpc.protocol`
and :mod:`minigrpc._pb`.
"""
