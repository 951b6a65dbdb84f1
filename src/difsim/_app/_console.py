"""What `difsim run` shows besides its results: difsim's log messages on stderr (progress
lines among them), and the summary's last rows: outputs, compilation cache and how long the
whole run took, start-up included.
"""

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator

import jax

_IMPORTED = time.perf_counter()  # fallback start where the process's own is unknown


def process_elapsed() -> float:
    """Seconds since this process started (Linux: from /proc, so Python's start-up and
    every import count), else since difsim's command line was imported."""
    try:
        with open("/proc/self/stat", "rb") as f:
            # Field 22 (starttime, clock ticks since boot) counted after the command name,
            # which is in parentheses and may itself contain spaces.
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        return max(uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return time.perf_counter() - _IMPORTED


class _BarSafeHandler(logging.StreamHandler):
    """Writes through tqdm on a terminal, so a line does not break a progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 (logging must never raise)
            self.handleError(record)


@contextlib.contextmanager
def console_logging(quiet: bool) -> Iterator[None]:
    """Within the block, difsim's messages (INFO and above; WARNING and above when `quiet`)
    go to stderr as `difsim: message`; the logger is left as it was afterwards."""
    logger = logging.getLogger("difsim")
    tty = getattr(sys.stderr, "isatty", lambda: False)()
    handler = _BarSafeHandler(sys.stderr) if tty else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("difsim: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_rows(args, result, what: str, outputs=None) -> list[tuple[str, str]]:
    """The summary's last rows: outputs written, the compilation cache (`args.cache`), and
    the wall time of the whole run: from the process's start (`args.startup`: seconds
    until the command line was parsed) to now, so writing and plotting count too."""
    paths = outputs or (result.output, result.plot)
    written = ", ".join(str(p) for p in paths if p) or "(none: give [output] path or --output)"
    rows = [("output", written)]
    if args.cache is not None:
        rows.append(("compile cache", args.cache.summary()))
    total = process_elapsed()
    rest = max(total - args.startup - result.wall_time, 0.0)
    rows.append((
        "wall time",
        f"{total:.2f} s in all: start-up {args.startup:.2f} s, {what} {result.wall_time:.2f} s "
        f"(including compilation), config and outputs {rest:.2f} s",
    ))  # fmt: skip
    return rows


def nan_hint(cache) -> str:
    """Why a failure may have no message of its own (see `_app/_cache.py`)."""
    if cache is None or not cache.checks_as_nan:
        return ""
    return (
        " (with the compilation cache on, checks inside the compiled solve give NaN "
        "instead of their error: rerun with --no-compile-cache to see it)"
    )


def exit_now(code: int) -> None:
    """End the `difsim` process with `code` once everything is written, skipping Python's
    teardown of every module and of XLA's client: ~0.5 s of CPU (1-2 s of wall time on a
    busy machine) after the summary that no one waits for. Not in a multi-process run,
    whose processes must leave the coordinator in order."""
    jax.effects_barrier()  # host callbacks (progress) have run
    logging.shutdown()  # handlers flushed
    sys.stdout.flush()
    sys.stderr.flush()
    if jax.distributed.is_initialized():
        sys.exit(code)
    os._exit(code)


def add_run_options(run: argparse.ArgumentParser) -> None:
    """Progress, messages and the compilation cache of `difsim run`."""
    run.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show progress (default: yes; a bar on a terminal, a log line every 10 s "
        "otherwise, DIFSIM_PROGRESS_INTERVAL to change; PDE models also report model time "
        "from inside each solve, and --no-progress keeps those programs cacheable)",
    )
    run.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress and no informational messages on stderr (warnings and errors "
        "still; the summary goes to stdout)",
    )
    cache = run.add_mutually_exclusive_group()
    cache.add_argument(
        "--compile-cache",
        metavar="DIR",
        help="keep compiled programs in DIR (default: DIFSIM_COMPILE_CACHE, else "
        "~/.cache/difsim/jax), so a rerun skips compiling",
    )
    cache.add_argument(
        "--no-compile-cache",
        dest="compile_cache",
        action="store_const",
        const=False,
        help="compile everything afresh, storing nothing",
    )
