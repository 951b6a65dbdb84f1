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


def mismatch(where: Any, output: Path, settings: dict[str, str], found: dict[str, Any]) -> str:
    """The message refusing to resume the store `where` (identity `found`) into `output`."""
    head = (
        f"{where} holds the unfinished chunks of a different sweep, so they cannot be "
        f"resumed into {output}"
    )
    tail = (
        "Choose a new output path, or pass overwrite=True (difsim run --overwrite) to "
        "discard those chunks"
    )
    before = _parse(found.get("settings"))
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
