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

    ```python
    class Pendulum(ds.Model):
        ...
        @ds.observable(units="rad/s", description="mean angular velocity")
        def mean_omega(self, ts, ys):
            return (ys["theta"][-1] - ys["theta"][0]) / (ts[-1] - ts[0])
    ```

    The method receives the saved times `ts` (shape `(time,)`) and the saved states `ys`
    (`{name: (time, *var_shape)}`) of **one** trajectory (sweeps `vmap` it) and returns a
    scalar or an array of fixed shape. It must be traceable by JAX (no Python `if` on
    values). `self` is the model of that trajectory, swept values included.
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
