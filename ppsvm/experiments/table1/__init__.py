"""``ppsvm reproduce table1``: Mangasarian & Wild's Table 1 and the scatter plots of their Figures 3 and 4.

- :mod:`~ppsvm.experiments.table1.command`: the runs per dataset, partition and fold, and the command (the setting
  in full);
- :mod:`~ppsvm.experiments.table1.report`: the summary over folds, the Markdown and the scatter plots.

From Python, on the shipped datasets or on your own::

    from pathlib import Path
    from ppsvm.data.dataset import DatasetOptions
    from ppsvm.experiments.table1 import Table1Options, UserDataset, run

    data = UserDataset(Path("visits.csv"), DatasetOptions(label="outcome", positive="sick", header=True), "clinic")
    paths = run(Table1Options(data=data, out=Path("results")))  # results/table1-clinic.md, .json, figures
"""

from ppsvm.experiments.table1.command import Table1Options, UserDataset, add_parser, run

__all__ = ["Table1Options", "UserDataset", "add_parser", "run"]
