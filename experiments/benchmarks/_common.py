"""Shared helpers for difsim benchmarks: machine/version records, timing, tables, HLO sizes.

Benchmarks here run on shared machines (a colleague's test-suite may be running next to
them), so the helpers favour robust statistics: medians over interleaved repeats, with the
minimum alongside as the least-disturbed estimate, and the load average recorded.
"""

import collections
import datetime
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax

import difsim

# A benchmark's process is difsim's own, as `difsim run`'s is: XLA:CPU compiles the engine's
# loops as single kernels (`difsim.tune_xla`; `DIFSIM_XLA_TUNING=0` measures without).
difsim.tune_xla()

VERSIONED = ("jax", "jaxlib", "diffrax", "equinox", "numpy", "scipy", "difsim")


# ------------------------------------------------------------------ machine and versions
def _cpu_model() -> str:
    """`model name` from /proc/cpuinfo, with family/model numbers (VMs often hide the rest)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if not line.strip():
                break  # first processor only
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def machine_info() -> dict[str, Any]:
    """CPU model, core count, RAM, OS, load average and JAX backend of this machine."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    ram = _ram_gib()
    return {
        "cpu": _cpu_model(),
        "nproc": usable,
        "ram_gib": None if ram is None else round(ram, 1),
        "os": platform.platform(),
        "loadavg": load_average(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def load_average() -> tuple[float, float, float] | None:
    """1-, 5- and 15-minute load averages (`None` where the OS has none)."""
    try:
        return tuple(round(x, 2) for x in os.getloadavg())
    except OSError:
        return None


def versions(packages: Sequence[str] = VERSIONED) -> dict[str, str]:
    """`{package: version}` for Python and `packages` ("absent" when not installed)."""
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def today() -> str:
    return datetime.date.today().isoformat()


def command_line() -> str:
    """The command that produced this run, relative to the repository root when possible."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(Path.cwd())
    except ValueError:
        pass
    return " ".join(["python", str(script), *sys.argv[1:]])


# ------------------------------------------------------------------ timing
# After a program that ran on XLA:CPU's thread pool, the pool's threads spin for a few
# milliseconds before they sleep (measured 2026-11-28: ~5 ms of CPU). Timed right away, the
# next call would be charged for them: a 5 ms Lorenz solve read 8.6-9.7 ms of CPU after a
# diffrax gradient, 4.7-5.1 ms after a 50 ms pause.
SETTLE_S = 0.02


def time_call(fn: Callable, *args, settle: float = SETTLE_S) -> tuple[float, float]:
    """`(wall, cpu)` seconds of one `fn(*args)`, waiting for every output to be computed.

    CPU time is this process's, all threads: unlike wall time it hardly grows when other
    processes compete for the cores, so it is the steadier figure on a busy machine. It
    runs on for `settle` seconds after the call (not counted in `wall`): the CPU that XLA's
    pool threads spend winding down after `fn` is `fn`'s, not the next call's.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn(*args))
    wall = time.perf_counter() - wall
    if settle:
        time.sleep(settle)
    return wall, time.process_time() - cpu


def interleaved(
    fns: Mapping[str, Callable], args: tuple, repeats: int, settle: float = SETTLE_S
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Time each function `repeats` times, interleaving them (a, b, c, b, c, a, ...).

    The starting function rotates every round, so a burst of load from another process
    hits every contender alike and none always runs right after a particular other one.
    `settle`: as [`time_call`][]'s.

    **Returns:** `(wall, cpu)`, each `{name: [seconds per repeat]}`.
    """
    names = list(fns)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            w, c = time_call(fns[name], *args, settle=settle)
            wall[name].append(w)
            cpu[name].append(c)
    return wall, cpu


class Stats:
    """Median / minimum / maximum of a list of timings (seconds)."""

    def __init__(self, samples: Sequence[float]):
        self.samples = list(samples)
        self.median = statistics.median(self.samples)
        self.min = min(self.samples)
        self.max = max(self.samples)

    def as_dict(self) -> dict[str, Any]:
        return dict(median=self.median, min=self.min, max=self.max, samples=self.samples)


def time_process(
    cmd: Sequence[str],
    *,
    cwd: Path | str | None = None,
    watch: Path | None = None,
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Run `cmd` in a fresh process; wall seconds until it exits (and until `watch` exists).

    **Returns:** `{"exit_s", "file_s" (None if `watch` never appeared), "returncode",
    "stderr_tail"}`.
    """
    # stderr goes to a file, not a pipe: a chatty child could fill a pipe and stall.
    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        file_s = None
        # Poll rather than wait() so the moment the output file appears is caught too.
        while proc.poll() is None:
            if watch is not None and file_s is None and watch.exists():
                file_s = time.perf_counter() - start
            if time.perf_counter() - start > timeout:
                proc.kill()
                proc.wait()
                break
            time.sleep(0.005)
        exit_s = time.perf_counter() - start
        err.seek(0)
        stderr = err.read()
    if watch is not None and file_s is None and watch.exists():
        file_s = exit_s
    return dict(
        exit_s=exit_s, file_s=file_s, returncode=proc.returncode, stderr_tail=stderr[-2000:]
    )


def run_worker(tree: Path, worker: str, *args: Any, one_device: bool = False) -> dict:
    """Run the Python source `worker` with `args` in a fresh CPU-only process that imports
    difsim from the source tree `tree` (a checkout of some revision); return the JSON object
    it prints last. `one_device`: drop `XLA_FLAGS`, one CPU device as `difsim run` gets."""
    env = dict(os.environ, PYTHONPATH=str(tree), JAX_PLATFORMS="cpu")
    if one_device:
        env.pop("XLA_FLAGS", None)
    done = subprocess.run(
        [sys.executable, "-c", worker, *map(str, args)],
        env=env, check=True, capture_output=True, text=True, cwd=tree,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ compiled-code size
def aot_phases(fn: Callable, *args) -> tuple[dict[str, float], dict[str, float], Any]:
    """Time the ahead-of-time phases of a `jax.jit` function on `args`.

    **Returns:** `(wall, cpu, compiled)`: seconds for `trace` (Python: building the jaxpr),
    `lower` (jaxpr to StableHLO) and `compile` (XLA), and the compiled executable. Clear
    JAX's caches first (`jax.clear_caches()`) to time a cold compile.
    """
    wall, cpu = {}, {}
    obj = fn
    for phase, step in (("trace", lambda f: f.trace(*args)), ("lower", lambda t: t.lower()),
                        ("compile", lambda lo: lo.compile())):  # fmt: skip
        w, c = time.perf_counter(), time.process_time()
        obj = step(obj)
        wall[phase], cpu[phase] = time.perf_counter() - w, time.process_time() - c
    return wall, cpu, obj


def hlo_host_callbacks(hlo: str) -> int:
    """Host callbacks in optimised HLO text: how `equinox` runtime errors (`throw=True`)
    are compiled; zero means no check survived dead-code elimination."""
    return len(re.findall(r"custom_call_target=\"[^\"]*callback[^\"]*\"", hlo))


def _computations(hlo: str) -> dict[str, list[str]]:
    comps: dict[str, list[str]] = {}
    current = None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{$", line)
        if head:
            current = head.group(1)
            comps[current] = []
        elif line.startswith("}"):
            current = None
        elif current is not None and " = " in line:
            comps[current].append(line)
    return comps


def hlo_while_bodies(hlo: str) -> list[int]:
    """Instruction counts of every `while` body in optimised HLO text, fused code included.

    Per-step overhead shows up here: the ODE step loop is a `while`, so an extra operation
    per right-hand-side evaluation adds to its body's count (outermost loop first).
    """
    comps = _computations(hlo)

    def size(name: str, seen: set[str]) -> int:
        if name in seen or name not in comps:
            return 0
        seen.add(name)
        total = len(comps[name])
        for line in comps[name]:
            for callee in re.findall(r"(?:calls|to_apply|body|condition)=%([\w.\-]+)", line):
                total += size(callee, seen)
        return total

    bodies = re.findall(r"while\(.*?body=%([\w.\-]+)", hlo)
    return sorted((size(body, set()) for body in bodies), reverse=True)


def hlo_op_histogram(hlo: str) -> collections.Counter:
    """Opcode counts over all computations of optimised HLO text."""
    counter: collections.Counter = collections.Counter()
    for lines in _computations(hlo).values():
        for line in lines:
            op = re.search(r" = [^ ]+ ([a-z][\w\-]*)\(", line)
            if op:
                counter[op.group(1)] += 1
    return counter


# ------------------------------------------------------------------ tables
def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], markdown: bool) -> str:
    """A plain-text (aligned) or Markdown table of already formatted cells."""
    cells = [[str(c) for c in row] for row in rows]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    lines = [fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*row) for row in cells]
    return "\n".join(lines)


def seconds(x: float | None) -> str:
    """Compact human formatting of a duration in seconds."""
    if x is None:
        return "n/a"
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1.0:
        return f"{x * 1e3:.1f} ms"
    if x < 120:
        return f"{x:.2f} s"
    return f"{x / 60:.1f} min"


def write_reports(report: dict, markdown: Path | None, json_path: Path | None, text: str) -> None:
    """Write the Markdown table `text` and/or the raw `report` as JSON, where asked."""
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(text + "\n")
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=1, default=str))
