# Two entry points on a fresh clone: `make demo` and `make test`. Each creates .venv as needed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# Let tox find every interpreter pyenv has (3.6 ... 3.13), whatever their patch versions: their
# bin directories go first on PATH (tox's discovery does not resolve pyenv's shims).
PYENV_BINS := $(shell command -v pyenv >/dev/null 2>&1 && for v in $$(pyenv versions --bare 2>/dev/null); do printf '%s:' "$$(pyenv root)/versions/$$v/bin"; done)

.PHONY: test demo dist bench bench-nodes bench-tool lint tox regen clean grpcio-unit h2spec robustness-attacks

$(STAMP): setup.cfg setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,lint]'
	touch $(STAMP)

# Two workers, each taking whole files (a file's servers and fixtures stay in one process): most
# tests wait on sockets and child processes, so one worker alone keeps a core idle half the time.
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile

demo: $(STAMP)
	$(PY) -m cni_client.demo

dist: $(STAMP)
	$(PY) tools/build_dist.py --output dist/antrea

bench: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	$(PY) -m bench

# Only the plugin's cold start on each node interpreter (bench/node_cold.py, about 2 minutes):
# replaces that section of docs/benchmarks.md and the README's table, keeps the rest.
bench-nodes: $(STAMP)
	$(PY) -m bench --only nodes

# Only the health probe's cold start on each interpreter (bench/tool_cold.py, under a minute):
# replaces that section of docs/benchmarks.md and the README's table, keeps the rest.
bench-tool: $(STAMP)
	$(PY) -m bench --only tool

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy minigrpc

tox: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check 'tox>=4'
	PATH='$(PYENV_BINS)'"$$PATH" $(PY) -m tox $(TOXFLAGS) $(if $(TOXENV),-e $(TOXENV),)

# grpc 1.51.1's own unit tests (tests/unit and tests_aio/unit), on minigrpc (no grpcio in that
# venv) and on grpcio, compared;
# fails below the target (tools/grpcio_unit_tests.py). The download is cached outside the repo.
grpcio-unit: $(STAMP)
	$(PY) tools/grpcio_unit_tests.py prepare
	$(MAKE) tox TOXENV=grpcio-unit-grpcio,grpcio-unit-minigrpc TOXFLAGS="-p 2 --parallel-no-spinner"
	$(PY) tools/grpcio_unit_tests.py report

# HTTP/2 conformance: h2spec (from PATH or $$H2SPEC; never fetched here: build it from a clone of
# its source with tools/build_h2spec.sh) against
# minigrpc's, grpc-go's and grpcio's servers side by side; fails when minigrpc fails a case that
# grpc-go passes without a reason listed in tools/h2spec_run.py (docs/h2spec.md). About 3 min.
h2spec: $(STAMP)
	$(PY) tools/h2spec_run.py $(H2SPECFLAGS)

# Attacks (floods, rapid reset, memory) against minigrpc's server on CPython and PyPy and grpcio's,
# with legitimate calls throughout; rewrites the measured section of docs/robustness.md. ~8 min.
robustness-attacks: $(STAMP)
	$(PY) tools/attack_report.py $(ATTACKFLAGS)

regen: $(STAMP)
	$(PY) proto/generate.py

clean:
	rm -rf $(VENV) .tox dist build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
