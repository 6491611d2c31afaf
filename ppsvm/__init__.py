"""ppsvm: privacy-preserving SVMs over checkerboard-partitioned data via random kernels.

The Python API (``from ppsvm import RandomKernelClassifier, Federation, ...``) is imported on first
use, so ``import ppsvm`` stays light and an entity process never loads it (nor scikit-learn).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_API = {
    "Client": "ppsvm.api.client",
    "RandomKernelClassifier": "ppsvm.api.estimators",
    "RandomKernelRegressor": "ppsvm.api.estimators",
    "DpHybridClassifier": "ppsvm.api.dp_estimator",
    "Federation": "ppsvm.api.federation",
    "load_dataset": "ppsvm.api.datasets",
}
__all__ = [
    "Client",
    "DpHybridClassifier",
    "Federation",
    "RandomKernelClassifier",
    "RandomKernelRegressor",
    "__version__",
    "load_dataset",
]

if TYPE_CHECKING:
    from ppsvm.api.client import Client
    from ppsvm.api.datasets import load_dataset
    from ppsvm.api.dp_estimator import DpHybridClassifier
    from ppsvm.api.estimators import RandomKernelClassifier, RandomKernelRegressor
    from ppsvm.api.federation import Federation


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'ppsvm' has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
