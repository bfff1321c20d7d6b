"""grpcio-tools output of several releases (tools/generate_stubs.py), run by nogrpcio_suite.py."""
