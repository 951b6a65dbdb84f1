"""Model-defined observables: methods marked with `@observable` that sweeps keep by name."""

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class ObservableInfo:
    """Metadata of a model-defined observable: `units` and `description` (or `None`)."""

    units: str | None = None
    description: str | None = None


def observable(
    fn: Callable | None = None, *, units: str | None = None, description: str | None = None
) -> Any:
    """Mark a model method as an observable that sweeps can keep by name.

    The method receives the saved times `ts` (shape `(time,)`) and the saved states `ys`
    (`{name: (time, *var_shape)}`) of **one** trajectory (sweeps `vmap` it) and returns a
    scalar or an array of fixed shape. It must be traceable by JAX (no Python `if` on
    values). `self` is the model of that trajectory, swept values included.

    **Example:**

    ```python
    import numpy as np

    import difsim as ds


    class Decay(ds.Model):
        k: float = ds.param(1.0, units="1/s")
        state = ds.State(y=ds.Var(1.0))

        def rhs(self, t, s):
            return {"y": -self.k * s.y}

        @ds.observable(units="1", description="fraction lost over the run")
        def lost(self, ts, ys):
            return 1.0 - ys["y"][-1] / ys["y"][0]


    k = np.array([0.5, 1.0, 2.0])
    out = ds.sweep(Decay(), ds.GridSweep({"k": k}), t0=0.0, t1=1.0, save=11, keep=["lost"],
                   rtol=1e-6, atol=1e-6, progress=False)  # fmt: skip
    assert out["lost"].attrs["long_name"] == "fraction lost over the run"
    assert np.allclose(out["lost"], 1.0 - np.exp(-k), rtol=1e-4)
    ```
    """

    def mark(f: Callable) -> Callable:
        if not callable(f):
            raise TypeError(f"@observable decorates a method, got {f!r}")
        f.__difsim_observable__ = ObservableInfo(units, description)
        return f

    return mark(fn) if fn is not None else mark


def model_observables(cls: type) -> dict[str, ObservableInfo]:
    """The observables model class `cls` defines (inherited ones included)."""
    out: dict[str, ObservableInfo] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            info = getattr(value, "__difsim_observable__", None)
            if isinstance(info, ObservableInfo):
                out[name] = info
    return out
