"""Outputs on disk and in memory: xarray conversion, netCDF attributes, atomic writes, which
files may be written (ownership checks), one run per output (locks), and progress shown
while long work runs. Depends on `_status` only.
"""

from difsim._io._atomic import (
    atomic_write as atomic_write,
    atomic_write_stream as atomic_write_stream,
    atomic_write_text as atomic_write_text,
)
from difsim._io._lock import (
    OutputLockedError as OutputLockedError,
    lock_path as lock_path,
    output_lock as output_lock,
)
from difsim._io._ownership import (
    KIND_ATTR as KIND_ATTR,
    RUN_ATTR as RUN_ATTR,
    OutputError as OutputError,
    check_folder as check_folder,
    check_output as check_output,
    check_target as check_target,
    png_metadata as png_metadata,
    recorded as recorded,
)
from difsim._io._progress import (
    Progress as Progress,
    format_rate as format_rate,
    format_seconds as format_seconds,
    forward_fractions as forward_fractions,
    progress as progress,
    receiving as receiving,
)
from difsim._io._xarray import (
    attr_value as attr_value,
    difsim_version as difsim_version,
    to_xarray as to_xarray,
)
