"""Type aliases shared across difsim's public signatures."""

from collections.abc import Sequence
from typing import Literal, TypeAlias

from jaxtyping import Array, ArrayLike, Float, Real

RealScalarLike: TypeAlias = float | int | Real[ArrayLike, ""]
Times: TypeAlias = Float[ArrayLike, " time"] | Sequence[float]
# What `simulate(save=...)` accepts (checked into a `SaveSpec`).
SaveLike: TypeAlias = Literal["final", "dense"] | int | Times | None
FloatArray: TypeAlias = Float[Array, "..."]
