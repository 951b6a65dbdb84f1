"""Progress of long work: a bar on a terminal, log lines elsewhere (docs: "Progress and logging").

Every long task (a sweep's trajectories, a fit's steps, a PDE solve's model time) reports
through one [`Progress`][] object, made by [`progress`][]:

- on a terminal (stderr is a TTY) or in a notebook: a tqdm bar, redrawn in place;
- anywhere else (a batch job, a pipe, CI): a line on the `difsim.progress` logger every
  `DIFSIM_PROGRESS_INTERVAL` seconds (default 10) with done/total, percentage, elapsed
  time, rate and time left, and a last line when the task ends if it logged any. Without
  any logging configuration (no handler anywhere) the lines go to stderr directly;
  configure the logger to send them elsewhere, or set its level to WARNING to drop them.

Compiled solves report fractions of a piece of work from inside the program (a host
callback, [`forward_fractions`][]): the task that is running registers itself with
[`receiving`][], so the fractions move its position between two host updates.
"""

import abc
import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

logger = logging.getLogger("difsim.progress")

INTERVAL_ENV = "DIFSIM_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 10.0  # seconds between log lines


def log_interval() -> float:
    """Seconds between two progress log lines: `DIFSIM_PROGRESS_INTERVAL`, default 10."""
    text = os.environ.get(INTERVAL_ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise ValueError(f"{INTERVAL_ENV} must be a number of seconds >= 0, got {text!r}")
    return value


def interactive() -> bool:
    """Whether progress is drawn as a bar: stderr is a terminal, or a notebook kernel runs."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        tty = False
    return tty or "ipykernel" in sys.modules


def format_seconds(seconds: float) -> str:
    """`"4.2 s"`, `"3:05"` (minutes:seconds) or `"1:02:03"`."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    s = int(round(seconds))
    hours, rest = divmod(s, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_rate(per_second: float, one: str, many: str) -> str:
    """`"1,234 trajectories/s"`, or for slow work `"23.4 s per trajectory"` (never "0/s")."""
    if not per_second > 0 or not math.isfinite(per_second):
        return f"- {many}/s"
    if per_second >= 1:
        return f"{per_second:,.3g} {many}/s" if per_second < 1000 else f"{per_second:,.0f} {many}/s"
    return f"{format_seconds(1 / per_second)} per {one}"


class Progress(abc.ABC):
    """Where a long task is: `done` of `total` (trajectories, steps, model time).

    **Arguments:** `total`; `what` (the task, e.g. `"sweep"`); `one`/`many` (the unit,
    singular and plural); `initial` (already done, e.g. resumed); `position` (optional,
    for a quantity that is not a count: `done -> text`, e.g. model time `t0 + done`, shown
    after `label`, e.g. `"t = "`); `upper_bound` (the task may end early, e.g. a converging
    fit: its time left is "at most").
    """

    def __init__(self, total: float, *, what: str, one: str, many: str, initial: float = 0,
                 position: Callable[[float], str] | None = None, label: str = "",
                 upper_bound: bool = False):  # fmt: skip
        self.total, self.what, self.one, self.many = float(total), what, one, many
        self.done = self.counted = float(initial)  # shown; completed (without fractions)
        self.position, self.label, self.upper_bound = position, label, upper_bound
        self.note_text = ""
        self.start = time.perf_counter()
        # Rates are measured from the first update on, so one-off costs before it (JIT
        # compilation) do not make later estimates pessimistic.
        self._first: tuple[float, float] | None = None
        self._piece = (self.counted, 0.0)  # (start, length) of the piece now running
        self._lock = threading.Lock()
        self.closed = False

    def update(self, done: float) -> None:
        """Move to `done` units completed (never backwards)."""
        with self._lock:
            self.counted = max(self.counted, float(done))
            self._piece = (self.counted, 0.0)  # a piece ends where the host counts
            self._move(self.counted)

    def advance(self, n: float = 1) -> None:
        """Move on by `n` units completed."""
        self.update(self.counted + n)

    def note(self, text: str) -> None:
        """A short status shown with the position (e.g. `"loss 1.2e-3"`)."""
        self.note_text = text

    def running(self, length: float) -> None:
        """The next `length` units run as one piece (a compiled chunk), which may report
        fractions of itself ([`fraction`][])."""
        with self._lock:
            self._piece = (self.counted, float(length))

    def fraction(self, f: float) -> None:
        """The running piece is a fraction `f` (0..1) done: the display moves, the count of
        completed units does not."""
        with self._lock:
            start, length = self._piece
            if length > 0 and math.isfinite(f):
                self._move(start + min(max(f, 0.0), 1.0) * length)

    def _move(self, position: float) -> None:
        if self.closed or position <= self.done:
            return
        now = time.perf_counter()
        if self._first is None:
            self._first = (now, position)
        self.done = min(position, self.total)
        self._show(now)

    def finish(self, done: float | None = None, message: str = "") -> None:
        """The task ended at `done` (default: its total, or where it is if it ended early);
        `message` says how (e.g. `"converged"`). Closes the display."""
        with self._lock:
            if self.closed:
                return
            if done is not None:
                self.done = self.counted = float(done)
            self.closed = True
            self._finish(message)

    def close(self) -> None:
        """Close without claiming completion (an error or an interruption)."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self._finish(None)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- shared text
    def rate(self, now: float) -> float:
        """Units per second since the first update; NaN before a second one (the time to
        the first includes one-off costs such as compiling, so says little)."""
        if self._first is not None and self.done > self._first[1] and now > self._first[0]:
            return (self.done - self._first[1]) / (now - self._first[0])
        return math.nan

    def position_text(self, done: float) -> str:
        if self.position is not None:
            return self.position(done)
        return f"{math.floor(done):,}"  # counts: whole ones (the percentage has the rest)

    def where(self) -> str:
        """`"512 of 4,096 trajectories"` (completed ones: a chunk's fractions show in the
        percentage only), `"t = 900 of 2000 s"`."""
        total = f"{self.position_text(self.total)} {self.many}".rstrip()
        done = self.done if self.position is not None else self.counted
        return f"{self.label}{self.position_text(done)} of {total}"

    def percent(self) -> float:
        return 100 * self.done / self.total if self.total > 0 else 100.0

    def status_line(self, now: float) -> str:
        """One line: where the task is, how fast it goes and how long it still needs."""
        parts = [f"{self.where()} ({self.percent():.0f}%)"]
        if self.note_text:
            parts.append(self.note_text)
        parts.append(f"{format_seconds(now - self.start)} elapsed")
        rate = self.rate(now)
        if self.position is None and rate > 0:
            parts.append(format_rate(rate, self.one, self.many))
        if rate > 0 and self.done < self.total:
            left = format_seconds((self.total - self.done) / rate)
            parts.append(f"{'at most' if self.upper_bound else 'about'} {left} left")
        return f"{self.what}: " + ", ".join(parts)

    @abc.abstractmethod
    def _show(self, now: float) -> None:
        """Display the new position (called under the lock)."""

    @abc.abstractmethod
    def _finish(self, message: str | None) -> None:
        """Close the display; `message` is `None` when the task did not complete."""


class NoProgress(Progress):
    """Shows nothing (progress turned off, or a process that does not report)."""

    def _show(self, now: float) -> None:
        pass

    def _finish(self, message: str | None) -> None:
        pass


def emit(text: str) -> None:
    """One progress line: to the `difsim.progress` logger, or, with no logging configured
    at all (no handler, no level set on `difsim` or `difsim.progress`), straight to stderr:
    a library should not configure logging for its user, but must not go silent either."""
    if logger.hasHandlers():
        logger.info(text)
        return
    levels = [logging.getLogger(n).level for n in ("difsim.progress", "difsim")]
    level = next((lv for lv in levels if lv != logging.NOTSET), logging.NOTSET)
    if level <= logging.INFO and not logger.disabled:
        print(f"difsim: {text}", file=sys.stderr, flush=True)


class LogProgress(Progress):
    """Log lines ([`emit`][]): at most one per `interval` seconds, and a last one at the
    end if any was written (short tasks stay quiet)."""

    def __init__(self, *args, interval: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.interval = interval
        self._last = self.start
        self.lines = 0

    def _show(self, now: float) -> None:
        # At the end the last line (`_finish`) says it all.
        if now - self._last >= self.interval and self.done < self.total:
            self._last = now
            self.lines += 1
            emit(self.status_line(now))

    def _finish(self, message: str | None) -> None:
        if not self.lines:
            return
        elapsed = format_seconds(time.perf_counter() - self.start)
        if message is None:
            emit(f"{self.what}: stopped at {self.where()} after {elapsed}")
        elif self.done < self.total:  # ended early (a converged fit)
            done = f"{self.label}{self.position_text(self.done)} {self.many}".rstrip()
            emit(f"{self.what}: {message or 'done'} after {done} in {elapsed}")
        else:
            emit(f"{self.what}: {message or 'done'}, {self.where()} in {elapsed}")


class BarProgress(Progress):
    """A tqdm bar on stderr (a notebook widget in a notebook)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from tqdm.auto import tqdm  # paid only when a bar is shown

        counted = self.position is None
        if counted:  # tqdm's own "n/total [elapsed<left, rate, note]"
            fmt, unit = None, f" {self.many}"
        else:  # not a count: the position itself ("t = 412.5 of 2000 s") in the label
            fmt, unit = "{desc} {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]", ""
        self.bar = tqdm(total=_plain(self.total), initial=_plain(self.done), desc=self.what,
                        unit=unit, unit_scale=counted and self.total >= 1e4, bar_format=fmt,
                        file=sys.stderr, smoothing=0.1, dynamic_ncols=True)  # fmt: skip
        self._label()

    def _label(self) -> None:
        if self.position is not None:
            self.bar.set_description_str(f"{self.what}: {self.where()}", refresh=False)
        self.bar.set_postfix_str(self.note_text, refresh=False)

    def _show(self, now: float) -> None:
        self._label()
        # Whole counts as ints ("32/64", not "32.0/64"); fractions of a chunk as they are.
        self.bar.update(_plain(self.done) - self.bar.n)

    def _finish(self, message: str | None) -> None:
        if message is not None:
            # Ended early (a converged fit): the bar's end is where it stopped, so it
            # closes full rather than stuck at "12/256".
            self.bar.total = self.bar.n = _plain(self.done)
            if message:
                self.note_text = ", ".join(t for t in (message, self.note_text) if t)
        self._label()
        self.bar.refresh()
        self.bar.close()


def _plain(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def progress(
    total: float,
    *,
    what: str,
    one: str,
    many: str,
    show: bool | None = None,
    initial: float = 0,
    position: Callable[[float], str] | None = None,
    label: str = "",
    upper_bound: bool = False,
) -> Progress:
    """A [`Progress`][] for a task of `total` units: a bar where one can be drawn
    ([`interactive`][]), log lines elsewhere, nothing with `show=False`. `show=None` and
    `True` both show it; the callers decide what their default means."""
    kwargs = dict(what=what, one=one, many=many, initial=initial, position=position,
                  label=label, upper_bound=upper_bound)  # fmt: skip
    if show is False:
        return NoProgress(total, **kwargs)
    if interactive():
        return BarProgress(total, **kwargs)
    return LogProgress(total, interval=log_interval(), **kwargs)


# ------------------------------------------------------------------ fractions from programs
_receivers: list[Progress] = []


@contextlib.contextmanager
def receiving(task: Progress) -> Iterator[Progress]:
    """Within this block, fractions reported by compiled programs move `task`'s running
    piece ([`Progress.running`][])."""
    _receivers.append(task)
    try:
        yield task
    finally:
        _receivers.remove(task)


class FractionSink:
    """Where a compiled solve's progress callbacks go: the task receiving them, or a task
    of its own (model time from `t0` to `t1`) when none is ([`forward_fractions`][])."""

    def __init__(self, what: str, t0: float, t1: float, units: str | None):
        self.task = _receivers[-1] if _receivers else None
        self.own = self.task is None
        if self.own:
            # "1" is CF's dimensionless unit: nothing to show after the number.
            unit = "" if units in (None, "", "1") else units
            self.task = progress(
                t1 - t0, what=what, one="time unit", many=unit, label="t = ",
                position=lambda done: f"{t0 + done:.6g}",
            )  # fmt: skip
            self.task.running(t1 - t0)

    def fraction(self, f: float) -> None:
        self.task.fraction(f)

    def close(self) -> None:
        if self.own:
            self.task.finish(self.task.total)


def forward_fractions(what: str, t0: float, t1: float, units: str | None) -> FractionSink:
    """The host end of a solve's progress callbacks (opened when the solve starts)."""
    return FractionSink(what, t0, t1, units)
