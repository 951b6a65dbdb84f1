r"""Statistics over the Monte Carlo paths of a sweep, streamed chunk by chunk.

`keep = ["x_mean", "x_var", "x_q05", "x_q95"]` asks, at every saved time and every point
of the parameter spec, for statistics of state variable `x` over the paths:

- `mean`, `var` (unbiased, $n - 1$), `std`: from per-block counts, means and sums of
  squared deviations, merged in path order with the pairwise update of Chan, Golub &
  LeVeque (1979) — exact to rounding, and the same for every chunking, since blocks of
  `BLOCK` paths never straddle a chunk.
- `min`, `max`: exact.
- quantiles `qNN` (the digits after `q` are the decimals of the probability: `q05` = 0.05,
  `q5` = `median` = 0.5, `q975` = 0.975): from a histogram of `BINS` equal bins per point
  and save time, over the range of a pilot run (the first `PILOT` paths of each point)
  widened by a quarter of its width on each side, with counts below and above it kept.
  The quantile interpolates linearly within its bin, so its error is below half a bin
  width, `(range · 1.5) / BINS / 2` (about 0.1 % of the pilot's spread), well under the
  Monte Carlo error of any quantile for up to ~10^7 paths. A quantile that falls below or
  above the range is NaN (counted in the `quantiles_outside_range` attribute). Counts are
  integers: the histogram is exactly the same for every chunking.

Memory: one chunk of paths on the device, and per point `BINS` counts per save time and
variable on the host; never all paths.
"""

import dataclasses
import difflib
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from difsim._core import Model, State
from difsim._io import canonical_keep, kept_name, split_kept

BLOCK = 256  # paths per block of partial statistics
BINS = 4096  # histogram bins of a streamed quantile
PILOT = 1024  # paths per point whose range sets the histogram's
_WIDEN = 0.25  # the pilot range is widened by this fraction of its width on each side
MOMENTS = {
    "mean": "mean over the paths",
    "var": "variance over the paths (unbiased, n - 1)",
    "std": "standard deviation over the paths (square root of var)",
    "min": "minimum over the paths",
    "max": "maximum over the paths",
    "median": "median over the paths",
}
_QUANTILE = re.compile(r"q(\d+)")


def parse_statistic(stat: str) -> tuple[str, float | None]:
    """`("mean", None)`, …, or `("quantile", p)` for `median` and `q<digits>`; raises
    `ValueError` for anything else."""
    if stat == "median":
        return "quantile", 0.5
    if stat in MOMENTS:
        return stat, None
    match = _QUANTILE.fullmatch(stat)
    if match is not None:
        p = float("0." + match.group(1))
        if 0.0 < p < 1.0:
            return "quantile", p
    raise ValueError(stat)


def is_statistic(stat: str) -> bool:
    """Whether `stat` names a statistic over paths (`mean`, `q05`, …)."""
    try:
        parse_statistic(stat)
    except ValueError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class StatsPlan:
    """The statistics a Monte Carlo sweep keeps (hashable: a static argument).

    **Fields:** `entries`, `((name, var, kind, p), ...)` in the order asked (`kind` one of
    `mean`, `var`, `std`, `min`, `max`, `quantile`; `p` the probability of a quantile);
    `variables`, the state variables involved; `quantiles`, those needing a histogram.
    """

    entries: tuple[tuple[str, str, str, float | None], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e[0] for e in self.entries)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e[1] for e in self.entries))

    @property
    def quantiles(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e[1] for e in self.entries if e[2] == "quantile"))

    def describe(self) -> str:
        return "statistics over paths: " + " ".join(self.names)


def is_statistics(keep: Any) -> bool:
    """Whether `keep` asks for statistics over paths: a list with at least one `<var>_<stat>`
    name (the others are then checked as statistics too, by [`plan_statistics`][])."""
    if keep is None or isinstance(keep, str):
        return False
    try:
        return any(isinstance(k, str) and _split(k)[1] is not None for k in keep)
    except TypeError:
        return False


def _split(name: str) -> tuple[str, str | None]:
    var, stat = split_kept(name)
    try:
        parse_statistic(stat)
    except ValueError:
        return name, None
    return var, stat


def plan_statistics(keep: Any, cls: type[Model], state: State) -> StatsPlan:
    """Check `keep` (statistics over the paths) against model class `cls` and its state.

    **Raises:** `ValueError` naming the first bad entry and listing what is available.
    """
    names = list(state.names)
    keep = canonical_keep(keep, is_statistic)
    if isinstance(keep, str) or not keep:
        raise ValueError(f"keep must be a non-empty list of statistics, got {keep!r}")
    entries, seen = [], set()
    for name in keep:
        var, stat = _split(name) if isinstance(name, str) else (name, None)
        if stat is None or var not in names:
            choices = [kept_name(v, s) for v in names for s in ("mean", "var", "q05", "q95")]
            close = difflib.get_close_matches(str(name), choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"keep: {name!r} is not a statistic over the paths of {cls.__name__}{hint}; "
                f"write '<var>_<stat>' with <var> one of {', '.join(map(repr, names))} and "
                f"<stat> one of {', '.join(MOMENTS)} or a quantile 'qNN' (q05 = 0.05, q975 = "
                "0.975)"
            )
        if name in seen:
            raise ValueError(f"keep: {name!r} is listed twice")
        seen.add(name)
        kind, p = parse_statistic(stat)
        if kind == "quantile" and np.ndim(state[var]) != 0:
            raise ValueError(
                f"keep: {name!r}: streamed quantiles need a scalar state variable, and "
                f"{var!r} has shape {np.shape(state[var])}; keep its mean/var/min/max"
            )
        entries.append((name, var, kind, p))
    return StatsPlan(tuple(entries))


# ---------------------------------------------------------------- on the device
def block_partials(values: dict[str, jax.Array], valid: jax.Array, block: int) -> dict:
    """Per-block `n`, and per variable `mean`, `m2`, `min`, `max` over the lanes of each
    block of `block` consecutive lanes. `values[var]`: `(lanes, time, *shape)`; `valid`:
    `(lanes,)`, false for padding and failed paths (their values are ignored)."""
    lanes = valid.shape[0]
    mask = valid.reshape(lanes // block, block)
    n = jnp.sum(mask, axis=1)
    out: dict[str, jax.Array] = {"n": n}
    for var, x in values.items():
        x = x.reshape(lanes // block, block, *x.shape[1:])
        m = mask.reshape(mask.shape + (1,) * (x.ndim - 2))
        safe = jnp.where(m, x, 0)
        count = jnp.maximum(n, 1).astype(x.dtype).reshape((-1,) + (1,) * (x.ndim - 2))
        mean = jnp.sum(safe, axis=1) / count
        dev = jnp.where(m, x - mean[:, None], 0)
        out[f"{var}/mean"] = mean
        out[f"{var}/m2"] = jnp.sum(dev * dev, axis=1)
        out[f"{var}/min"] = jnp.min(jnp.where(m, x, jnp.inf), axis=1)
        out[f"{var}/max"] = jnp.max(jnp.where(m, x, -jnp.inf), axis=1)
    return out


def histogram(x: jax.Array, valid: jax.Array, segment: jax.Array, lo, hi, n_segments: int):
    """Counts `(n_segments, time, BINS + 2)` (int32) of `x` `(lanes, time)` in `BINS` equal
    bins of `[lo, hi]` per segment and time (`lo`, `hi`: `(n_segments, time)`), with the
    counts below the range first and above it last; lanes not `valid` are not counted."""
    lanes, n_time = x.shape
    lo, hi = lo[segment], hi[segment]
    scaled = jnp.floor((x - lo) / (hi - lo) * BINS)
    scaled = jnp.where(jnp.isfinite(scaled), scaled, -1.0)
    index = jnp.clip(scaled, -1, BINS).astype(jnp.int32) + 1
    counts = jnp.zeros((n_segments, n_time, BINS + 2), jnp.int32)
    rows = jnp.broadcast_to(segment[:, None], (lanes, n_time))
    cols = jnp.broadcast_to(jnp.arange(n_time)[None, :], (lanes, n_time))
    weight = jnp.broadcast_to(valid[:, None], (lanes, n_time)).astype(jnp.int32)
    return counts.at[rows, cols, index].add(weight)


# ---------------------------------------------------------------- on the host
@dataclasses.dataclass
class Accumulator:
    """Running statistics of one parameter point (numpy, float64): count `n`, per variable
    `mean`, `m2`, `min`, `max` `(time, *shape)`, and for quantiles `hist` `(time, BINS +
    2)` over `[lo, hi]` `(time,)`."""

    n: int = 0
    mean: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    m2: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    min: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    max: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    hist: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    lo: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    hi: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def merge_block(self, n: int, partial: dict[str, np.ndarray]) -> None:
        """Add one block of `n` paths (`partial[var]` = `(mean, m2, min, max)`): Chan's
        pairwise update, in the order the blocks come."""
        if n == 0:
            return
        total = self.n + n
        for var, (mean, m2, lo, hi) in partial.items():
            mean, m2 = np.asarray(mean, np.float64), np.asarray(m2, np.float64)
            if self.n == 0:
                self.mean[var], self.m2[var] = mean, m2
                self.min[var], self.max[var] = np.asarray(lo), np.asarray(hi)
                continue
            delta = mean - self.mean[var]
            self.mean[var] = self.mean[var] + delta * (n / total)
            self.m2[var] = self.m2[var] + m2 + delta * delta * (self.n * n / total)
            self.min[var] = np.minimum(self.min[var], lo)
            self.max[var] = np.maximum(self.max[var], hi)
        self.n = total

    def result(self, kind: str, var: str, p: float | None) -> np.ndarray | None:
        """One statistic, `(time, *shape)`; NaN where it is undefined (a variance of one
        path, a quantile outside the histogram's range); `None` without any path."""
        if self.n == 0:
            return None
        if kind == "mean":
            return self.mean[var]
        if kind in ("var", "std"):
            var_ = self.m2[var] / (self.n - 1) if self.n > 1 else np.full_like(self.m2[var], np.nan)
            return var_ if kind == "var" else np.sqrt(var_)
        if kind in ("min", "max"):
            return getattr(self, kind)[var].astype(np.float64)
        return quantile(self.hist[var], self.lo[var], self.hi[var], p)


def quantile(hist: np.ndarray, lo: np.ndarray, hi: np.ndarray, p: float) -> np.ndarray:
    """The `p`-quantile per time from counts `(time, BINS + 2)` over `[lo, hi]` `(time,)`:
    where the empirical distribution function, linear within each bin, reaches `p`."""
    total = hist.sum(axis=1)
    cum = np.cumsum(hist, axis=1)  # cum[:, k]: counts up to and including column k
    target = p * total
    k = np.argmax(cum >= target[:, None], axis=1)  # first column reaching the target
    rows = np.arange(hist.shape[0])
    below = np.where(k > 0, cum[rows, np.maximum(k - 1, 0)], 0)
    inside = hist[rows, k]
    frac = np.where(inside > 0, (target - below) / np.maximum(inside, 1), 0.5)
    width = (hi - lo) / BINS
    value = lo + width * ((k - 1) + frac)
    outside = (k == 0) | (k == BINS + 1) | (total == 0)
    return np.where(outside, np.nan, value)


def pilot_range(lo: np.ndarray, hi: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The histogram range from a pilot run's `[lo, hi]`: widened by `_WIDEN` of its width
    on each side, and to a tiny interval around a value every pilot path shares."""
    width = hi - lo
    tiny = np.maximum(np.abs(lo), 1.0) * np.finfo(dtype).eps * 64
    pad = np.maximum(_WIDEN * width, tiny)
    return lo - pad, hi + pad
