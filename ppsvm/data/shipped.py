"""The datasets that ship with ppsvm (ppsvm/data/bundled, provenance in its SOURCES.md) and how to read each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ppsvm.data.dataset import DatasetOptions

SHIPPED_DATA = Path(__file__).resolve().parent / "bundled"


@dataclass(frozen=True)
class ShippedDataset:
    """A file in ppsvm/data/bundled with the options that turn it into features and +-1 labels."""

    key: str
    title: str
    file: str
    options: DatasetOptions

    @property
    def path(self) -> Path:
        return SHIPPED_DATA / self.file


WDBC = ShippedDataset("wdbc", "WDBC", "wdbc.data", DatasetOptions(label=1, positive="M", drop=(0,), id_column=0))

# Mangasarian & Wild's Table 1 datasets, in the paper's order.
TABLE1_DATASETS = {
    dataset.key: dataset
    for dataset in (
        # Disease present is num 1-4; the paper's 297 rows are those without "?".
        ShippedDataset(
            "cleveland",
            "Cleveland Heart",
            "processed.cleveland.data",
            DatasetOptions(label=13, negative="0", missing="drop"),
        ),
        ShippedDataset("ionosphere", "Ionosphere", "ionosphere.data", DatasetOptions(label=34, positive="g")),
        WDBC,
        # Zeros stand for some missing values; the papers used the file as it is, and so do we.
        ShippedDataset("pima", "Pima Indians", "pima-indians-diabetes.data", DatasetOptions(label=8, positive="1")),
        ShippedDataset("bupa", "Bupa Liver", "bupa.data", DatasetOptions(label=6, positive="2")),
    )
}
