"""``ppsvm reproduce sinc``: Fung & Mangasarian section 4, the 2-D sinc function and its Figures 3-6.

- :mod:`~ppsvm.experiments.sinc.problem`: the sinc surface, the two entities' regions and the sample;
- :mod:`~ppsvm.experiments.sinc.models`: the joint model over entity servers, each entity alone, the reference;
- :mod:`~ppsvm.experiments.sinc.report`: the figures and the Markdown;
- :mod:`~ppsvm.experiments.sinc.command`: the command (its options, the run, the parser; the setting in full).
"""

from ppsvm.experiments.sinc.command import add_parser

__all__ = ["add_parser"]
