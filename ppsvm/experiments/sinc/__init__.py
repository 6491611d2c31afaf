"""``ppsvm reproduce sinc``: Fung & Mangasarian Section 4.1, the 2-D sinc function and its Figures 1-6.

- :mod:`~ppsvm.experiments.sinc.problem`: the function (4.16), the grids E1 and E2, (4.17), the readings of mu;
- :mod:`~ppsvm.experiments.sinc.models`: Algorithm 3.1 over gRPC entities, each entity alone, all data revealed;
- :mod:`~ppsvm.experiments.sinc.report`: the figures, the comparison of the error measures, the Markdown;
- :mod:`~ppsvm.experiments.sinc.command`: the command (its options, the run, the parser).
"""

from ppsvm.experiments.sinc.command import add_parser

__all__ = ["add_parser"]
