"""Outputs on disk and in memory: xarray conversion, netCDF attributes, atomic writes, which
files may be written (ownership checks), one run per output (locks), and progress shown
while long work runs. Depends on `_status` only.
"""

from difsim._io._atomic import (
    atomic_write as atomic_write,
    atomic_write_stream as atomic_write_stream,
    atomic_write_text as atomic_write_text,
    remove_leftovers as remove_leftovers,
)
from difsim._io._cf import (
    CONVENTIONS as CONVENTIONS,
    cf_attrs as cf_attrs,
    difsim_version as difsim_version,
    history_line as history_line,
    parameter_attr as parameter_attr,
    per_time as per_time,
    recording_command as recording_command,
    time_attrs as time_attrs,
    versions as versions,
)
from difsim._io._event_vars import (
    EVENT_DIM as EVENT_DIM,
    event_variables as event_variables,
    t_end_attrs as t_end_attrs,
)
from difsim._io._lock import (
    OutputLockedError as OutputLockedError,
    lock_path as lock_path,
    output_lock as output_lock,
)
from difsim._io._meta import (
    PLOT_PHASE as PLOT_PHASE,
    PLOT_PHASE_ASPECT as PLOT_PHASE_ASPECT,
    PLOT_TIME_SCALE as PLOT_TIME_SCALE,
    ROLE as ROLE,
    WRAP_PERIOD as WRAP_PERIOD,
    coord_attrs as coord_attrs,
    model_title as model_title,
    param_attrs as param_attrs,
    plot_attrs as plot_attrs,
    var_attrs as var_attrs,
)
from difsim._io._names import (
    canonical_keep as canonical_keep,
    kept_name as kept_name,
    split_kept as split_kept,
    warn_deprecated as warn_deprecated,
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
from difsim._io._parameters import (
    PARAMETER_ROLE as PARAMETER_ROLE,
    fixed_variables as fixed_variables,
)
from difsim._io._progress import (
    Progress as Progress,
    format_rate as format_rate,
    format_seconds as format_seconds,
    forward_fractions as forward_fractions,
    progress as progress,
    receiving as receiving,
)
from difsim._io._provenance import (
    code_text as code_text,
    environment as environment,
    environment_attrs as environment_attrs,
    value_digest as value_digest,
    versions_text as versions_text,
)
from difsim._io._text import plain_text as plain_text
from difsim._io._xarray import (
    attr_value as attr_value,
    to_xarray as to_xarray,
)
