"""Parameter sweeps: sweep specifications, chunked and sharded execution, observables, the
resumable chunk store.
"""

from difsim._sweep._distributed import (
    maybe_initialize_from_env as maybe_initialize_from_env,
)
from difsim._sweep._observables import (
    plan_keep as plan_keep,
)
from difsim._sweep._spec import (
    AbstractSweep as AbstractSweep,
    GridSweep as GridSweep,
    LogUniform as LogUniform,
    Normal as Normal,
    RandomSweep as RandomSweep,
    Uniform as Uniform,
    ZipSweep as ZipSweep,
    check_keys as check_keys,
)
from difsim._sweep._store import (
    SweepOutputError as SweepOutputError,
)
from difsim._sweep._sweep import (
    parse_bytes as parse_bytes,
    run_sweep as run_sweep,
    sweep as sweep,
)
