# Two self-contained entry points for a fresh clone:
#   make demo   the main job
#   make test   the whole test suite (lint, types, unit, property, doc, differential)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
REF_PY := .venv-ref/bin/python
PIP_QUIET := -q --disable-pip-version-check

.PHONY: demo test test-fast lint typecheck differential ref-venv bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first: the CPU wheel on disk, so pip never pulls a multi-GB CUDA build.
	$(PY) -m pip install $(PIP_QUIET) torch==2.13.0
	$(PY) -m pip install $(PIP_QUIET) -e '.[dev,plot,minari,ray]'
	touch $@

ref-venv: .venv-ref/.installed
.venv-ref/.installed: scripts/make_ref_venv.sh
	bash scripts/make_ref_venv.sh

demo: $(VENV)/.installed
	$(PY) examples/ppo_cartpole.py

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check episodes tests examples benchmarks scripts
	$(VENV)/bin/ruff format --check episodes tests examples benchmarks
	$(VENV)/bin/mypy

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q

differential: $(VENV)/.installed .venv-ref/.installed
	$(REF_PY) -m pytest -q -p no:cacheprovider tests/differential

test: lint test-fast differential

bench: $(VENV)/.installed .venv-ref/.installed
	$(REF_PY) benchmarks/bench_episode.py
	$(REF_PY) benchmarks/bench_micro.py --quick
	$(REF_PY) benchmarks/bench_rollout.py
	$(REF_PY) benchmarks/bench_collect.py
	$(REF_PY) benchmarks/bench_runner.py
	$(REF_PY) benchmarks/bench_connectors.py --quick
	$(PY) benchmarks/bench_io.py --quick
	$(REF_PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_distributed.py --quick

clean:
	rm -rf $(VENV) .venv-ref .pytest_cache .mypy_cache .ruff_cache .hypothesis build
