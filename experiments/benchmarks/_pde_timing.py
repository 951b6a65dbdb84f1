"""How bench_pde.py times its contenders: interleaved steady repeats after a first call
with JAX's caches cleared, fresh processes timed until their result file exists, and the
rows of the report."""

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
from _common import Stats, interleaved, time_process
from _pde_problems import max_error

HERE = Path(__file__).resolve().parent


def time_contenders(calls: dict[str, Callable], repeats: int) -> tuple[dict, dict, dict]:
    """First call (caches cleared) and interleaved steady repeats of argument-less calls.

    **Returns:** `(first_s, steady Stats, results)`.
    """
    first, results = {}, {}
    for key, call in calls.items():
        jax.clear_caches()  # each first call compiles from scratch
        start = time.perf_counter()
        results[key] = np.asarray(call())
        first[key] = time.perf_counter() - start
    for call in calls.values():  # clear_caches dropped the earlier executables: recompile
        jax.block_until_ready(call())
    wall, _ = interleaved(calls, (), repeats)
    return first, {k: Stats(v) for k, v in wall.items()}, results


def run_fresh(cmd: list[str], result: Path, timeout: float = 1800.0) -> dict:
    """Launch `cmd`; wall seconds until `result` exists, and the child's own timings."""
    out = time_process(cmd, cwd=HERE, watch=result, timeout=timeout)
    if out["returncode"] != 0 or out["file_s"] is None:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out['returncode']}):\n{out['stderr_tail']}")
    own = json.loads(result.with_suffix(".json").read_text())
    return dict(result_s=out["file_s"], exit_s=out["exit_s"], **own)


def fresh_run(spec: dict, tmp: Path, initial: np.ndarray | None) -> tuple[dict, np.ndarray]:
    """Run one library on one problem in a fresh process (see `_pde_refs.py`)."""
    name = f"{spec['lib']}_{spec['case']}_{spec['n']}_{spec.get('solver', spec.get('scheme'))}"
    name += f"_{spec['dt']}".replace(".", "p")
    result = tmp / f"{name}.npy"
    spec = dict(spec, result=str(result))
    if initial is not None:
        np.save(tmp / f"{name}_y0.npy", initial)
        spec["initial"] = str(tmp / f"{name}_y0.npy")
    spec_path = tmp / f"{name}.spec.json"
    spec_path.write_text(json.dumps(spec))
    script = "bench_pde.py" if spec["lib"] == "difsim" else "_pde_refs.py"
    extra = ["--child"] if spec["lib"] == "difsim" else []
    out = run_fresh([sys.executable, str(HERE / script), *extra, str(spec_path)], result)
    return out, np.load(result)


def rows_of(first: dict, steady: dict, results: dict, refs: dict, case: str, meta: dict) -> list:
    rows = []
    for key, (name, dt, steps, ref_key) in meta.items():
        rows.append(
            dict(
                contender=name,
                dt=dt,
                steps=steps,
                error=max_error(results[key], refs[ref_key], case),
                steady=steady[key].as_dict(),
                steps_per_s=steps / steady[key].median,
                first_call_s=first[key],
            )
        )
    return rows
