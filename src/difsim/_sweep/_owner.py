"""Whose results a sweep's output file and store hold, and what to say when they are another
sweep's: the settings of each are compared and what differs is named."""

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger("difsim")


def file_info(path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """`(sweep_hash, settings)` stored in a sweep's netCDF file (`None` if absent)."""
    try:
        import h5netcdf  # lazily: h5py costs ~0.2 s to import, and only outputs need it

        with h5netcdf.File(path, "r") as f:
            found, text = f.attrs.get("sweep_hash"), f.attrs.get("sweep_settings")
    except Exception:  # not an HDF5/netCDF file at all
        return None, None
    settings = _parse(text)
    return (found if isinstance(found, str) else None), settings


def _parse(text: Any) -> dict[str, Any] | None:
    try:
        settings = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        settings = None
    return settings if isinstance(settings, dict) else None


def differences(now: dict[str, str], before: dict[str, Any]) -> str:
    """`key: before -> now` for every setting that differs (the chunk size only when both
    record one: a finished file does not, chunking is not part of the result)."""
    if "chunk_size" not in before:
        now = {k: v for k, v in now.items() if k != "chunk_size"}
    return "; ".join(
        f"{k}: {_short(before.get(k, '(absent)'))} -> {_short(now.get(k, '(absent)'))}"
        for k in sorted(set(before) | set(now))
        if before.get(k) != now.get(k)
    )


# Settings entries that say what computed the numbers rather than which numbers they are
# (`_provenance`): when only these differ, the sweep is the same but its code is not.
RUNNER = ("code", "versions", "xla", "devices")


def changed(now: dict[str, str], before: dict[str, Any] | None) -> str | None:
    """What changed in the code or where it runs, when nothing else did: `"the code of
    Decay (decay.py) changed"`, `"the versions changed (jax 0.10.2 -> 0.10.3)"`, ...;
    `None` when some other setting differs too (a different sweep), or `before` is
    unreadable."""
    if before is None:
        return None
    if "chunk_size" not in before:  # a finished file records none (as `differences`)
        now = {k: v for k, v in now.items() if k != "chunk_size"}
    differ = [k for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]
    if not differ or any(k not in RUNNER for k in differ):
        return None
    return "; ".join(_change(k, before.get(k), now.get(k)) for k in RUNNER if k in differ)


def _change(key: str, before: Any, now: Any) -> str:
    if key == "code":
        model = str(now).rpartition(" sha256:")[0]
        if before is None:
            return f"the code of {model} was not recorded (an earlier difsim)"
        return f"the code of {model} changed"
    if key == "versions":
        old, new = str(before).split(", "), str(now).split(", ")
        moved = [f"{a} -> {b}" for a, b in zip(old, new) if a != b]
        return f"the versions changed ({'; '.join(moved) or f'{_short(before)} -> {now}'})"
    if key == "xla":
        return f"XLA_FLAGS changed ({_short(before)!r} -> {_short(now)!r})"
    return f"the devices changed ({before} -> {now})"


def different_result(output: Path, now: dict[str, str], before: dict[str, Any] | None) -> str:
    """The message refusing to reuse or replace the finished `output` (settings `before`)
    of a sweep with settings `now`."""
    what = changed(now, before)
    if what is not None:
        return (
            f"{what} since {output} was computed; refusing to reuse or replace it. Pass "
            "overwrite=True (difsim run --overwrite) to recompute it, or choose a new "
            "output path"
        )
    detail = f" (what differs: {differences(now, before)})" if before else ""
    return (
        f"{output} exists and holds the result of a different sweep{detail}; refusing to "
        "replace it. Choose a new output path, or pass overwrite=True (difsim run "
        "--overwrite) to replace it"
    )


def mismatch(where: Any, output: Path, settings: dict[str, str], found: dict[str, Any]) -> str:
    """The message refusing to resume the store `where` (identity `found`) into `output`."""
    before = _parse(found.get("settings"))
    what = changed(settings, before)
    if what is not None:
        return (
            f"{what} since the unfinished chunks in {where} were computed, so they cannot "
            f"be resumed into {output}. Pass overwrite=True (difsim run --overwrite) to "
            "discard them and recompute, or choose a new output path"
        )
    head = (
        f"{where} holds the unfinished chunks of a different sweep, so they cannot be "
        f"resumed into {output}"
    )
    tail = (
        "Choose a new output path, or pass overwrite=True (difsim run --overwrite) to "
        "discard those chunks"
    )
    if before is None:
        return f"{head} (its settings are missing or unreadable). {tail}"
    return f"{head}; what differs: {differences(settings, before)}. {tail}"


def legacy_warning(output: Path) -> None:
    """Say so when `output` has unfinished chunks in the folder format of difsim before the
    zarr store (`<output>.chunks/`): this version does not resume them."""
    old = output.with_name(output.name + ".chunks")
    if (old / "manifest.json").is_file():
        logger.warning(
            "%s holds unfinished chunks in the chunk-file format of an earlier difsim; they "
            "are not resumed (the sweep starts over in a zarr store): delete that folder",
            old,
        )


def _short(text: Any, n: int = 120) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 3] + "..."
