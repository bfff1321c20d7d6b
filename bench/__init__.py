"""Benchmarks: minigrpc beside grpcio and grpclib, against the project's performance targets
(``python -m bench``).

Not part of the installed package and not a test: ``make bench`` runs it and writes
docs/benchmarks.md.  See :mod:`bench.__main__` for the modes and :mod:`bench.peers` /
:mod:`bench.workloads` for what is measured and why it is fair.
"""
