"""jfsm: Jump Forward agent memory, as a state-machine spec and a reference engine.

The public API is curated in `__all__`; everything else is internal.
"""

from jfsm.errors import (
    CompressionPending,
    InvalidInput,
    InvalidTransition,
    JfsmError,
    QuotaExceeded,
    StoreCorrupted,
    StoreLocked,
    TransportError,
)
from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.spec import constants
from jfsm.text import canonical_length, canonical_text, count

__version__ = "0.1.0"

__all__ = [
    "CompressionPending",
    "InvalidInput",
    "InvalidTransition",
    "JfsmError",
    "Projection",
    "QuotaExceeded",
    "StoreCorrupted",
    "StoreImage",
    "StoreLocked",
    "TransportError",
    "__version__",
    "canonical_length",
    "canonical_text",
    "constants",
    "count",
]
