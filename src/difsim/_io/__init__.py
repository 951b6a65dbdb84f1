"""Outputs on disk and in memory: xarray conversion, netCDF attributes, atomic writes. Depends on
`_status` only.
"""

from difsim._io._atomic import (
    atomic_write as atomic_write,
    atomic_write_stream as atomic_write_stream,
    atomic_write_text as atomic_write_text,
)
from difsim._io._xarray import (
    attr_value as attr_value,
    difsim_version as difsim_version,
    to_xarray as to_xarray,
)
