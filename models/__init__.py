"""The difsim model zoo: classic ODE systems with literature defaults.

`MODELS` is the explicit name → class table that configs use (`[model] name = "lorenz"`).
"""

from difsim.models._lorenz import Lorenz as Lorenz

MODELS: dict[str, type] = {
    "lorenz": Lorenz,
}
