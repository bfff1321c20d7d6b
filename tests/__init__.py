"""minigrpc's test suite; a package so that ``tests.interop`` and ``tests.peers`` import by name."""
