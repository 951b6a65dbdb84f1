"""Plots of labelled outputs (xarray Datasets): time series, sweeps, field snapshots and
animations.
"""

from difsim._plot._field import (
    animate as animate,
    plot_snapshots as plot_snapshots,
)
from difsim._plot._plot import (
    plot as plot,
)
