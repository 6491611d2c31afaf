"""``ppsvm reproduce TARGET``: each target module adds its own parser (options, defaults, help)."""

from __future__ import annotations

import argparse

from coordinator.reproduce import dp, sinc, table1
from coordinator.reproduce.report import INSTALL_HINT


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce",
        help="regenerate the papers' tables and figures (Markdown, JSON, PNG)",
        description=(
            "Regenerate a paper's table or figures on the datasets shipped with ppsvm (table1 and sinc over real "
            "gRPC entity servers with mutual TLS; dp in one process with the functions entities and coordinator "
            "call) and write TARGET.md, TARGET.json (exact settings, seeds, software versions) and PNG figures "
            f"into --out. Needs matplotlib: {INSTALL_HINT}."
        ),
    )
    targets = parser.add_subparsers(dest="target", required=True, metavar="TARGET")
    for module in (table1, sinc, dp):
        module.add_parser(targets)

