"""The gRPC interop test service (grpc-wire.md §9): generated messages and a grpcio-API servicer."""
