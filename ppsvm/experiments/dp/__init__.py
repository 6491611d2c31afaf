"""``ppsvm reproduce dp``: Li, Xiong, Ohno-Machado & Jiang 2014, Figures 3-9 on UCI Adult.

The paper's section 5 on IPUMS census extracts (US and Brazil; we have neither, so UCI Adult stands in), in two
parts. Figures 3 and 4 (section 5.2): AUC against epsilon; the claims checked are that the hybrid DP RBF SVM (rho
learned on a few public records) beats PrivateSVM (rho drawn at random) at every epsilon, stays close to the
non-private SVM, and beats SVMs trained on the public records alone; besides, the time to learn rho against public
records and D (our addition). Figures 5-9 (sections 5.3-5.5), by the paper's 10-fold cross-validation: AUC against
the dimensionality of nested attribute subsets and against the sampling rate of the training records, with
boxplots of the two DP methods, and the hybrid model's time against both.

The reproduction is a client of ppsvm's public API: every model is fitted with
:class:`ppsvm.DpHybridClassifier`, whose simulated entities run the code and the release guard of
``ppsvm entity serve`` and whose training is that of ``ppsvm coordinator train``. The Markdown it writes
states every decision the paper left open, with the values used. The modules:

- :mod:`~ppsvm.experiments.dp.setting`: the parts, splits, presets, options and resolved settings;
- :mod:`~ppsvm.experiments.dp.runs`: Figures 3-4, the models of one repetition and the time to learn rho;
- :mod:`~ppsvm.experiments.dp.cv`: Figures 5-9, the folds, public draws, subsamples and the models of one fold;
- :mod:`~ppsvm.experiments.dp.stats`: means and quartiles over splits, the claims as paired verdicts;
- :mod:`~ppsvm.experiments.dp.report`, :mod:`~ppsvm.experiments.dp.cv_report` and
  :mod:`~ppsvm.experiments.dp.figures`: the two reports and the PNGs;
- :mod:`~ppsvm.experiments.dp.command`: the command, from data to files.
"""

from ppsvm.experiments.dp.command import add_parser, run

__all__ = ["add_parser", "run"]
