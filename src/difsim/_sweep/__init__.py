"""Parameter sweeps: sweep specifications, chunked and sharded execution, observables, the
resumable chunk store.

The config layer checks a `[sweep]` section with the same functions the sweep uses
(`check_keys`, `plan_keep`, `parse_bytes`, `check_chunk_size`) and hands the sweep a
[`SweepOptions`][], whose values are then not parsed again.
"""

from difsim._sweep._chunking import (
    bytes_per_trajectory as bytes_per_trajectory,
    choose_chunk_size as choose_chunk_size,
)
from difsim._sweep._distributed import (
    maybe_initialize_from_env as maybe_initialize_from_env,
)
from difsim._sweep._distributions import (
    AbstractDistribution as AbstractDistribution,
    LogUniform as LogUniform,
    Normal as Normal,
    Uniform as Uniform,
)
from difsim._sweep._interrupted import (
    stored_progress as stored_progress,
)
from difsim._sweep._keys import (
    check_keys as check_keys,
    sweepable_keys as sweepable_keys,
)
from difsim._sweep._layout import (
    OutputLayout as OutputLayout,
)
from difsim._sweep._observables import (
    plan_keep as plan_keep,
    respell_keep as respell_keep,
)
from difsim._sweep._options import (
    DEFAULT_MEMORY_BUDGET as DEFAULT_MEMORY_BUDGET,
    SweepOptions as SweepOptions,
    check_chunk_size as check_chunk_size,
    parse_bytes as parse_bytes,
)
from difsim._sweep._samples import (
    MAX_PATHS as MAX_PATHS,
    PATH_DIM as PATH_DIM,
    check_paths as check_paths,
)
from difsim._sweep._spec import (
    AbstractSweep as AbstractSweep,
    GridSweep as GridSweep,
    RandomSweep as RandomSweep,
    ZipSweep as ZipSweep,
)
from difsim._sweep._statistics import (
    is_statistics as is_statistics,
    plan_statistics as plan_statistics,
)
from difsim._sweep._store import (
    SweepOutputError as SweepOutputError,
)
from difsim._sweep._sweep import (
    SweepReport as SweepReport,
    run_sweep as run_sweep,
    sweep as sweep,
)
