# Two commands set up a fresh machine (see README.md):
#   make run   — create .venv, install difsim, run the Lorenz example (netCDF + PNG in runs/)
#   make test  — create .venv, install difsim with its dev extra, run the test-suite, then
#                build the documentation site strictly (every snippet runs in the tests)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.difsim-installed

.PHONY: run test docs lint lint-imports wheel-check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/difsim run experiments/lorenz.toml

# The test-suite (every code block of README.md and docs/*.md runs or is checked there),
# then the docs site built strictly: a broken link or cross-reference fails `make test`.
test: $(STAMP)
	$(PY) -m pytest
	$(MAKE) --no-print-directory docs

# The documentation site (mkdocs.yml): concept pages, API reference, examples. --strict turns
# every warning (a broken link or cross-reference, a missing page) into an error. The site
# works offline: its math and diagram renderers are pinned npm packages, fetched once with
# `npm pack` into build/vendor/ and copied into the site (docs/tools/vendor.py);
# docs/tools/check_offline.py fails if a page loads anything from another host, and
# docs/tools/check_math.py if a formula does not typeset with the bundled MathJax (Node).
SITE ?= build/site
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir $(SITE)
	$(PY) docs/tools/check_offline.py $(SITE)
	$(PY) docs/tools/check_math.py $(SITE)

lint: $(STAMP)
	$(VENV)/bin/ruff check src models solvers tests experiments
	$(VENV)/bin/ruff format --check src models solvers tests experiments
	$(MAKE) lint-imports

# The layer contracts in pyproject's [tool.importlinter] (src/difsim/models and
# src/difsim/solvers link to the top-level folders, so import-linter sees the installed tree).
lint-imports: $(STAMP)
	$(VENV)/bin/lint-imports

# Build the wheel, install it (non-editable) into a throw-away venv, import every module:
# catches packages missing from pyproject's list, which editable installs would hide.
wheel-check: $(STAMP)
	rm -rf build/wheel-check && mkdir -p build/wheel-check
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir build/wheel-check .
	$(PYTHON) -m venv build/wheel-check/venv
	build/wheel-check/venv/bin/pip install --quiet build/wheel-check/difsim-*.whl
	cd build/wheel-check && venv/bin/python -c "import importlib, pkgutil, difsim; mods = [m.name for m in pkgutil.walk_packages(difsim.__path__, 'difsim.') if not m.name.endswith('__main__')]; [importlib.import_module(m) for m in mods]; print('wheel ok:', difsim.__version__, len(mods), 'modules in', sorted(m for m in mods if m.count('.') == 1 and m.split('.')[1] not in ('__main__', '_status')))"

bench: $(STAMP)
	$(PY) experiments/benchmarks/bench_simulate.py

clean:
	rm -rf $(VENV) build dist runs .pytest_cache
