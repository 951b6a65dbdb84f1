# Two commands set up a fresh machine (see README.md):
#   make run   — create .venv, install difsim, run the Lorenz example (netCDF + PNG in runs/)
#   make test  — create .venv, install difsim with its dev extra, run the test-suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.difsim-installed

.PHONY: run test lint wheel-check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/difsim run experiments/lorenz.toml

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check src models solvers tests experiments
	$(VENV)/bin/ruff format --check src models solvers tests experiments

# Build the wheel, install it (non-editable) into a throw-away venv, import every module:
# catches packages missing from pyproject's list, which editable installs would hide.
wheel-check: $(STAMP)
	rm -rf build/wheel-check && mkdir -p build/wheel-check
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir build/wheel-check .
	$(PYTHON) -m venv build/wheel-check/venv
	build/wheel-check/venv/bin/pip install --quiet build/wheel-check/difsim-*.whl
	cd build/wheel-check && venv/bin/python -c "import difsim, difsim.models, difsim.solvers, difsim._cli; print('wheel ok:', difsim.__version__, sorted(difsim.models.MODELS))"

bench: $(STAMP)
	$(PY) experiments/benchmarks/bench_simulate.py

clean:
	rm -rf $(VENV) build dist runs .pytest_cache
