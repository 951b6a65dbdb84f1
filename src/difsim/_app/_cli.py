"""The `difsim` command line: `difsim run CONFIG`, `difsim models [NAME]`, `difsim solvers`.

Exit codes: 0 success; 1 the solve failed (partial output is still written); 2 invalid
config or command line, an output path that cannot or may not be written or is in use by
another run, or a run that needs more memory or disk than the machine has (message on
stderr, no traceback; checked before any work); 130 interrupted (Ctrl-C), 143 stopped
by SIGTERM (a batch scheduler's stop: handled as Ctrl-C, see `_signals`).
"""

import argparse
import importlib.metadata
import shlex
import sys
from collections.abc import Sequence

import jax
import numpy as np

from difsim._app._cache import cache_folder, enable_compile_cache
from difsim._app._console import (
    add_run_options,
    console_logging,
    exit_now,
    nan_hint,
    process_elapsed,
    run_rows,
)
from difsim._app._listing import print_models, print_solvers
from difsim._app._model_info import print_model
from difsim._app._run import RunResult, execute, final_state, status_message
from difsim._app._signals import EXIT_CODE, Terminated, sigterm_as_interrupt
from difsim._config import ConfigError, Experiment, load_config, parse_override
from difsim._io import (
    OutputError,
    difsim_version,
    format_rate,
    recording_command,
)
from difsim._resources import ResourceError
from difsim._status import Status
from difsim._sweep import SweepOutputError, maybe_initialize_from_env, stored_progress
from difsim._xla import tune_xla

_DOCS = "https://difsim.github.io/difsim/"  # where pyproject.toml's [project.urls] points

# No import here is deferred to speed up `difsim --help`: the console script imports the
# `difsim` package first, whose `__init__` imports jax and everything else anyway.


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="difsim",
        description="Differentiable simulation of ODE and PDE models with JAX.",
        epilog=f"Documentation: {docs_url()} (experiment configs: {docs_url()}configs/).",
    )
    parser.add_argument("--version", action="version", version=f"difsim {difsim_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run an experiment config (TOML)",
        description="Check CONFIG, simulate, write netCDF + PNG.",
    )
    run.add_argument("config", metavar="CONFIG", help="experiment config file (TOML)")
    _add_set(run)
    run.add_argument(
        "-o", "--output", metavar="PATH", help="netCDF output path (replaces [output] path)"
    )
    run.add_argument("--no-plot", dest="plot", action="store_false", help="skip the PNG")
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier difsim output of the same kind (for a sweep: of a "
        "different sweep, or its unfinished chunks); files difsim did not write are never "
        "replaced (the same as --set output.overwrite=true)",
    )
    add_run_options(run)

    check = commands.add_parser(
        "check",
        help="check a config and print it in full",
        description="Check CONFIG (no simulation) and print the "
        "complete config, defaults filled in, as TOML.",
    )
    check.add_argument("config", metavar="CONFIG", help="experiment config file (TOML)")
    _add_set(check)

    models = commands.add_parser(
        "models",
        help="list the models configs can name, or show one",
        description="List the zoo models; with NAME, show one: parameters with defaults "
        "and units, state variables, observables and its equations.",
    )
    models.add_argument("name", metavar="NAME", nargs="?", help="a model name to show")
    commands.add_parser("solvers", help="list solvers, step-size controllers and adjoints")
    return parser


def docs_url() -> str:
    """The documentation site, from the installed package's `Documentation` project URL
    (pyproject.toml `[project.urls]`: one place to change it); ends with "/"."""
    try:
        urls = importlib.metadata.metadata("difsim").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        urls = []
    found = dict(u.split(", ", 1) for u in urls if ", " in u).get("Documentation", _DOCS)
    return found.rstrip("/") + "/"


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set solver.rtol=1e-8 "
        "--set model.parameters.rho=20 (repeatable; values are TOML)",
    )


def console_main() -> None:
    """The `difsim` console script and `python -m difsim`: [`main`][] on `sys.argv`, then a
    fast exit (outputs are written and closed by then). The process is the command's own:
    it first tunes XLA for the ensemble engine ([`tune_xla`][]), which a library import
    leaves to its user."""
    tune_xla()
    try:
        code = main()
    except SystemExit as e:  # argparse: --help, --version, usage errors
        if not (e.code is None or isinstance(e.code, int)):
            raise
        code = e.code or 0
    exit_now(code)


def main(argv: Sequence[str] | None = None) -> int:
    """The `difsim` command on `argv` (default: `sys.argv[1:]`); returns the exit code."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    args.startup = process_elapsed()  # seconds from process start to here (imports)
    # Outputs record the command that made them (CF `history`); a scheduler's SIGTERM
    # stops the run as Ctrl-C does (`_signals`).
    with recording_command(shlex.join(["difsim", *argv])), sigterm_as_interrupt():
        return _main(parser, args)


def _main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command is None:
        parser.print_help()
        return 2
    experiment = None
    try:
        if args.command == "models":
            return print_models() if args.name is None else print_model(args.name)
        if args.command == "solvers":
            return print_solvers()
        if args.command == "run":
            # Before anything compiles: JAX decides once per process whether to use it.
            folder = cache_folder(args.compile_cache)
            args.cache = None if folder is None else enable_compile_cache(folder)
        overrides = dict(parse_override(text) for text in args.overrides)
        if getattr(args, "overwrite", False):
            overrides["output.overwrite"] = True
        experiment = load_config(args.config, overrides=overrides)
        if args.command == "check":
            print(experiment.to_toml(), end="")
            return 0
        with console_logging(args.quiet):
            return _run(experiment, args)
    except (ConfigError, OutputError, ResourceError) as e:
        # OutputError: an output path that cannot or may not be written, or one in use;
        # ResourceError: more memory or disk than the machine has (checked before solving).
        _error(e)
        return 2
    except KeyboardInterrupt as e:
        print(_interrupted(e, experiment, args), file=sys.stderr)
        return EXIT_CODE if isinstance(e, Terminated) else 130


def _interrupted(error: KeyboardInterrupt, experiment: Experiment | None, args) -> str:
    """The one line of an interrupted command: `difsim: interrupted (SIGTERM): 3 of 5
    chunks stored; run the same command to resume` (what a sweep stored, when it did)."""
    line = "difsim: interrupted" + (" (SIGTERM)" if isinstance(error, Terminated) else "")
    if experiment is None or experiment.sweep is None or args.command != "run":
        return line
    output = experiment.output.paths(args.output)[0]
    stored = "" if output is None else stored_progress(output, experiment.output.store)
    return f"{line}: {stored}; run the same command to resume" if stored else line


def _error(error: Exception) -> None:
    """Print `error` as one line on stderr: characters that would break or hide it (control
    characters, line and paragraph separators in a key or path) are escaped."""
    text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(error))
    print(f"difsim: error: {text}", file=sys.stderr)


def _run(experiment: Experiment, args: argparse.Namespace) -> int:
    progress = False if args.quiet else args.progress
    if experiment.sweep is not None:
        return _run_sweep(experiment, args, progress)
    if experiment.fit is not None:
        return _run_fit(experiment, args, progress)
    result = _execute(experiment, args, progress)
    _print_summary(_simulate_lines(experiment, result) + run_rows(args, result, "simulate"))
    if not result.status.ok:
        sys.stdout.flush()
        partial = (
            f"; partial output (NaN after the failure) in {result.output}" if result.output else ""
        )
        message = status_message(result.status, experiment, result.dataset.attrs)
        print(
            f"difsim: error: simulate({experiment.model.cls.__name__}) failed "
            f"[{result.status.name}]: {message}{partial}{nan_hint(args.cache)}",
            file=sys.stderr,
        )
        return 1
    return 0


def _simulate_lines(experiment: Experiment, result: RunResult) -> list[tuple[str, str]]:
    """The summary of one simulation, as `(key, value)` rows."""
    ds, model = result.dataset, experiment.model
    params = ", ".join(
        f"{p}={ds.attrs[p]:.6g}"
        for p in model.cls.parameter_names()
        if isinstance(ds.attrs.get(p), int | float)
    )
    steps = (
        f"{int(ds.num_steps)} ({ds.attrs['num_accepted_steps']} accepted, "
        f"{ds.attrs['num_rejected_steps']} rejected)"
    )
    t_last, last = final_state(ds)
    return [
        ("model", f"{model.name} ({model.cls.__name__})" + (f": {params}" if params else "")),
        ("solver", _solver_text(experiment)),
        (
            "time",
            f"{experiment.time.t0:g} to {experiment.time.t1:g}, {ds.sizes['time']} saved points",
        ),
        ("status", f"{result.status.name}: {status_message(result.status, experiment, ds.attrs)}"),
        ("steps", steps),
        (
            "final state",
            f"t={t_last:g}{'' if result.status.ok else ' (last before the failure)'}"
            f": " + ", ".join(f"{k}={v}" for k, v in last.items()),
        ),
    ]


def _solver_text(experiment: Experiment) -> str:
    """The summary's "solver" line of a simulation or a sweep."""
    spec = experiment.solver
    tol = (
        f"rtol={spec.rtol:g}, atol={spec.atol:g}"
        if spec.controller == "pid"
        else f"fixed step dt0={spec.dt0:g}"
    )
    return f"{spec.name}, {spec.controller} controller, {tol}, {spec.dtype}"


def _run_sweep(experiment: Experiment, args: argparse.Namespace, progress: bool) -> int:
    try:
        # Started as one of several processes (DIFSIM_* variables, or srun): join them
        # before any JAX computation, so the sweep is sharded over every process's devices.
        maybe_initialize_from_env()
    except ValueError as e:
        _error(e)
        return 2
    try:
        result = _execute(experiment, args, progress)
    except SweepOutputError as e:
        _error(e)
        return 2
    if jax.process_index() != 0:
        print(
            f"difsim: process {jax.process_index()} of {jax.process_count()} computed its "
            "share of the sweep; process 0 writes the output and prints the summary"
        )
        return 0
    _print_summary(_sweep_lines(experiment, result) + run_rows(args, result, "sweep"))
    report = result.report
    failed = {c: n for c, n in report.status_counts.items() if not Status(c).ok}
    if failed:
        sys.stdout.flush()
        worst = Status(max(failed, key=failed.get))
        print(
            f"difsim: warning: {sum(failed.values())} of {report.n_points} trajectories "
            f"failed (NaN values, see the status variable); {worst.name}: "
            f"{status_message(worst, experiment)}" + nan_hint(args.cache),
            file=sys.stderr,
        )
    return 1 if not result.status.ok else 0


def _sweep_lines(experiment: Experiment, result: RunResult) -> list[tuple[str, str]]:
    """The summary of a sweep (on the writing process), as `(key, value)` rows."""
    report, sweep, dataset = result.report, experiment.sweep, result.dataset
    model, tspec = experiment.model, experiment.time
    keys = ", ".join(sweep.entries)
    # A Monte Carlo sweep keeping statistics has no per-path status: its points' path counts.
    per = None if dataset is None else dataset.get("status", dataset.get("n_paths"))
    sizes = [] if per is None else list(per.shape)
    if "status" not in (dataset if dataset is not None else {}) and sweep.monte_carlo:
        sizes.append(sweep.samples)
    shape = f" ({' x '.join(map(str, sizes))})" if len(sizes) > 1 else ""
    if sweep.monte_carlo:
        keys = f"{keys or 'no keys'}, {sweep.samples} Monte Carlo paths each"
    fixed = ", ".join(
        f"{p}={dataset.attrs[p]:.6g}"
        for p in model.cls.parameter_names()
        if dataset is not None and isinstance(dataset.attrs.get(p), int | float)
    )
    counts = report.status_counts
    statuses = ", ".join(f"{Status(c).name} {n}" for c, n in sorted(counts.items())) or "-"
    computed = len(report.computed)
    rate = report.computed_points / max(report.wall_time, 1e-9)
    speed = f", {format_rate(rate, 'trajectory', 'trajectories')}" if computed else ""
    return [
        ("model", f"{model.name} ({model.cls.__name__})" + (f": {fixed}" if fixed else "")),
        ("sweep", f"{sweep.kind} over {keys}: {report.n_points} trajectories{shape}"),
        ("solver", _solver_text(experiment)),
        ("time", f"{tspec.t0:g} to {tspec.t1:g}, save {_save_text(tspec.save)}"),
        ("keep", " ".join(sweep.keep) if isinstance(sweep.keep, tuple) else sweep.keep),
        (
            "chunks",
            f"{report.n_chunks} of {report.chunk_size} trajectories on {report.n_devices} device"
            f"{'s' if report.n_devices > 1 else ''}: {computed} computed, "
            f"{report.reused} reused",
        ),
        ("status", statuses),
        ("computed", f"{report.computed_points} trajectories in {report.wall_time:.2f} s{speed}"),
    ]


def _run_fit(experiment: Experiment, args: argparse.Namespace, progress: bool) -> int:
    result = _execute(experiment, args, progress)
    res, spec, fit, model = result.fit, experiment.solver, experiment.fit, experiment.model
    fixed = ", ".join(
        f"{p}={float(getattr(res.model, p)):.6g}"
        for p in model.cls.parameter_names()
        if p not in res.parameters and np_scalar(getattr(res.model, p))
    )
    obs = res.problem.data
    lines = [
        ("model", f"{model.name} ({model.cls.__name__})" + (f": {fixed}" if fixed else "")),
        (
            "data",
            f"{fit.data}: {', '.join(obs.names)} over {obs.coord!r}, "
            f"{obs.num_observations} observations, noise {fit.noise}",
        ),
        ("solver", f"{spec.name}, rtol={spec.rtol:g}, atol={spec.atol:g}, {spec.dtype}"),
    ]
    summary = result.output and result.output.with_suffix(".json")
    _print_summary(lines + run_rows(args, result, "fit", (result.output, summary, result.plot)))
    print()
    print(res.summary())
    if not res.ok:
        sys.stdout.flush()
        print(
            f"difsim: error: fit({model.cls.__name__}) ended {res.status}: {res.message}"
            + nan_hint(args.cache),
            file=sys.stderr,
        )
        return 1
    return 0


def np_scalar(value) -> bool:
    return np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.number)


def _execute(experiment: Experiment, args: argparse.Namespace, progress: bool) -> RunResult:
    return execute(experiment, output=args.output, plot=args.plot, progress=progress)


def _save_text(save) -> str:
    if save == "final":
        return "final"
    return f"{save} points" if isinstance(save, int) else f"{len(save)} times"


def _print_summary(lines: list[tuple[str, str]]) -> None:
    """Print `(key, value)` rows with the keys right-aligned in one column."""
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"{key:>{width}}  {value}")
