"""These modules are protoc output, not tests: ``test_pb2_grpc.py`` only looks like a test file.

They are imported by ``tests/interop/nogrpcio_suite.py``, on minigrpc's ``grpc`` alias;
collecting them here would import them on the suite process's grpcio instead.
"""

collect_ignore_glob = ["*"]
