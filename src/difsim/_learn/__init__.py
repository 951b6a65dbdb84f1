"""Learning from trained models: equation discovery (sparse regression of a learned term on a
library of candidate terms). Depends on `_core` and `_io` only.
"""

from difsim._learn._discover import discover as discover
from difsim._learn._discovery import Discovery as Discovery
from difsim._learn._library import (
    AbstractLibrary as AbstractLibrary,
    FunctionLibrary as FunctionLibrary,
    PolynomialLibrary as PolynomialLibrary,
)
