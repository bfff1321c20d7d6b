"""The gRPC interop test service (gRPC's doc/interop-test-descriptions.md): generated messages and
a grpcio-API servicer."""
