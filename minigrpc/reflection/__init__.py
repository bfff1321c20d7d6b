"""gRPC server reflection (gRPC's doc/server-reflection.md) without grpcio.

``minigrpc.reflection.v1alpha.reflection`` has grpcio-reflection's API (``SERVICE_NAME``,
``ReflectionServicer``, ``enable_server_reflection``); ``minigrpc.reflection.v1.reflection``
the same for the ``grpc.reflection.v1`` service, which grpcio-reflection does not ship.
``enable_server_reflection`` of either serves both versions, so that tools asking for v1 first
(grpcurl, grpc-go's client) and grpcio's v1alpha client all find it.  Both versions answer from
one implementation, :mod:`minigrpc.reflection.servicer`.  The client side, grpcio-reflection's
``ProtoReflectionDescriptorDatabase``, is :mod:`minigrpc.reflection.descriptor_database`.

It may import: :mod:`minigrpc` (the public API), :mod:`minigrpc.aio`, :mod:`minigrpc.protocol`
and :mod:`minigrpc._pb`.
"""
