"""Benchmarks of issue 6: minigrpc beside grpcio and grpclib (``python -m bench``).

Not part of the installed package and not a test: ``make bench`` runs it and writes
docs/benchmarks.md.  See :mod:`bench.__main__` for the modes and :mod:`bench.peers` /
:mod:`bench.workloads` for what is measured and why it is fair.
"""
