"""The benchmark scripts still import: they reach into private modules (to time the engine's
parts), which move when the code is reorganised, and a script that fails to import is
only noticed at the next benchmark run otherwise."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py"))

# Import every script in one fresh process (their module-level code sets JAX flags), without
# running `main`; the PDE comparison's optional libraries (the `bench` extra) may be absent.
LOADER = """
import importlib.util, sys
sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    spec = importlib.util.spec_from_file_location(name[:-3], f"{sys.argv[1]}/{name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name[:-3]] = module
    spec.loader.exec_module(module)
    print("imported", name)
"""


def test_every_benchmark_script_imports():
    assert {"bench_simulate.py", "bench_sweep.py", "bench_fit.py", "bench_ensemble.py"} <= set(
        SCRIPTS
    )
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(BENCHMARKS), *SCRIPTS],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if "No module named 'exponax'" in done.stderr or "No module named 'pde'" in done.stderr:
        pytest.skip("the bench extra (exponax, py-pde) is not installed")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("imported") == len(SCRIPTS)
