"""What an interrupted sweep left to resume from, for the command line's last line
(`difsim: interrupted: 3 of 5 chunks stored; run the same command to resume`)."""

import os
from pathlib import Path

import numpy as np

from difsim._sweep import _zarr_layout as zl
from difsim._sweep._location import StoreLocation
from difsim._sweep._mc_state import state_path


def stored_progress(output: str | os.PathLike, store: str | os.PathLike | None = None) -> str:
    """`"3 of 5 chunks stored"` (the chunks marked done in the sweep's zarr store),
    `"its progress saved in x.nc.mcstate.npz"` (a Monte Carlo sweep's statistics), or `""`
    when nothing is stored (or it cannot be read: the resume will say)."""
    output = Path(output)
    if state_path(output).is_file():
        return f"its progress saved in {state_path(output).name}"
    try:
        location = StoreLocation.of(output, store)
        if not location.exists():
            return ""
        group = zl.open_group(location, read_only=True)
        found = zl.identity(group)
        if found is None:
            return ""
        done = int(np.count_nonzero(np.asarray(group[zl.SUMS][...]).any(axis=1)))
        total = -(-int(found["points"]) // int(found["chunk_size"]))
    except Exception:  # half-created, another program's, unreachable: say nothing
        return ""
    return f"{done} of {total} chunks stored"
