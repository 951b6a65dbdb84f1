"""`check_seed`: the one check of an integer seed given to difsim from Python or a config.

`jax.random.key` takes a signed 64-bit integer: a seed of 2**63 or more used to surface as
a raw `OverflowError` (or a JAX `TypeError`) deep inside a fit or a sweep.
"""

from typing import Any

import numpy as np

MAX_SEED = 2**63 - 1


def is_seed(value: Any) -> bool:
    """Whether `value` is an integer from 0 to 2**63 - 1 (not a `bool`)."""
    return (
        not isinstance(value, bool)
        and isinstance(value, int | np.integer)
        and 0 <= int(value) <= MAX_SEED
    )


def check_seed(value: Any, name: str = "seed") -> int:
    """`value` as a seed of `jax.random.key`: an integer from 0 to 2**63 - 1.

    **Raises:** `ValueError` naming `name` (e.g. `"SimulatedMoments: seed"`) and the value.
    """
    if not is_seed(value):
        raise ValueError(
            f"{name} must be an integer from 0 to 2**63 - 1 (jax.random.key takes a signed "
            f"64-bit integer), got {value!r}"
        )
    return int(value)
