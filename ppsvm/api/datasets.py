"""The datasets that ship with ppsvm, as arrays (or pandas objects) ready for the estimators."""

from __future__ import annotations

from typing import Any

from ppsvm.data.dataset import load_dataset as read_dataset
from ppsvm.data.shipped import TABLE1_DATASETS
from ppsvm.errors import ConfigError

__all__ = ["load_dataset"]


def load_dataset(name: str, *, as_frame: bool = False) -> tuple[Any, Any]:
    """One of the bundled UCI datasets (Mangasarian & Wild's Table 1), read as the reproductions read it.

    Parameters
    ----------
    name : {"wdbc", "cleveland", "ionosphere", "pima", "bupa"}
    as_frame : bool, default=False
        Return a pandas DataFrame (columns named after the file's column numbers, index the record
        ids) and a Series; needs pandas, which ppsvm does not depend on.

    Returns
    -------
    X : ndarray of float, shape (m, n), or DataFrame
    y : ndarray of float, shape (m,), or Series
        +1 for the positive class (e.g. WDBC's malignant), -1 otherwise.
    """
    shipped = TABLE1_DATASETS.get(name)
    if shipped is None:
        raise ConfigError(f"no dataset {name!r} ships with ppsvm; choose one of {', '.join(TABLE1_DATASETS)}")
    dataset = read_dataset(shipped.path, shipped.options)
    if not as_frame:
        return dataset.X, dataset.y
    import pandas as pd

    index = pd.Index(dataset.ids, name="id")
    return pd.DataFrame(dataset.X, columns=list(dataset.feature_names), index=index), pd.Series(
        dataset.y, index=index, name="label"
    )
