"""``ppsvm reproduce table1``: Mangasarian & Wild's Table 1 and the scatter plots of their Figures 3 and 4.

- :mod:`~ppsvm.experiments.table1.command`: the runs per dataset, partition and fold, and the command (the setting
  in full);
- :mod:`~ppsvm.experiments.table1.report`: the summary over folds, the Markdown and the scatter plots.
"""

from ppsvm.experiments.table1.command import add_parser

__all__ = ["add_parser"]
