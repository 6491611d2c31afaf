"""``ppsvm reproduce dp``: Li, Xiong, Ohno-Machado & Jiang 2014, Figures 3 and 4 on UCI Adult.

The paper's claims checked here: the hybrid DP RBF SVM (rho learned on a few public records) beats
PrivateSVM (rho drawn at random) at every epsilon and stays close to the non-private SVM; it also beats
SVMs trained on the public records alone. Figure 4 (our reading; the paper's PDF is not available here):
the time to learn rho against the number of public records and D.

The reproduction is a client of ppsvm's public API: every model is fitted with
:class:`ppsvm.DpHybridClassifier`, whose simulated entities run the code and the release guard of
``ppsvm entity serve`` and whose training is that of ``ppsvm coordinator train``. The Markdown it writes
states every decision the paper left open, with the values used. The modules:

- :mod:`~ppsvm.experiments.dp.setting`: the split, presets, options and resolved settings;
- :mod:`~ppsvm.experiments.dp.runs`: the models of one repetition and the time to learn rho;
- :mod:`~ppsvm.experiments.dp.stats`: means over repetitions and the claims as paired verdicts;
- :mod:`~ppsvm.experiments.dp.report` and :mod:`~ppsvm.experiments.dp.figures`: dp.md and the two PNGs;
- :mod:`~ppsvm.experiments.dp.command`: the command, from data to files.
"""

from ppsvm.experiments.dp.command import add_parser, run

__all__ = ["add_parser", "run"]
