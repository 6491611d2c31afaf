"""``ppsvm reproduce TARGET``: each target module adds its own parser (options, defaults, help)."""

from __future__ import annotations

import argparse

from ppsvm.experiments.report import INSTALL_HINT


def register(subparsers: argparse._SubParsersAction, *, with_targets: bool = True) -> None:
    """Add ``reproduce``; its targets only ``with_targets``.

    The target modules import plotting, statistics and dataset code that an entity or a
    training run never needs: ``ppsvm`` adds them only when the command line asks for
    ``reproduce``, so every other command starts in half the time.
    """
    parser = subparsers.add_parser(
        "reproduce",
        help="regenerate the papers' tables and figures (Markdown, JSON, PNG)",
        description=(
            "Regenerate a paper's table or figures on the datasets shipped with ppsvm (table1 and sinc over real "
            "gRPC entity servers with mutual TLS; dp with ppsvm.DpHybridClassifier, whose entities are simulated in "
            "the process with their release guard) and write TARGET.md, TARGET.json (exact settings, seeds, "
            f"software versions) and PNG figures into --out. Needs matplotlib: {INSTALL_HINT}."
        ),
    )
    targets = parser.add_subparsers(dest="target", required=True, metavar="TARGET")
    if with_targets:
        try:
            from ppsvm.experiments import dp, sinc, table1
        except ImportError as missing:
            # Without the reproduce extra: what to install, not a traceback (or another extra's hint).
            cause: BaseException | None = missing
            while cause is not None and not getattr(cause, "name", None):
                cause = cause.__cause__
            name = getattr(cause, "name", None) or "scikit-learn and matplotlib"
            raise SystemExit(f"ppsvm: error: ppsvm reproduce needs {name}: {INSTALL_HINT}") from None

        for module in (table1, sinc, dp):
            module.add_parser(targets)
