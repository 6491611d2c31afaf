"""``ppsvm entity``: run one data owner's server."""

from __future__ import annotations

import argparse
import json

from common.config import EntityConfig, load_entity_config
from common.errors import ConfigError
from entity.ledger import PrivacyLedger
from entity.server import serve_entity


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "entity",
        help="serve one data owner's private cell",
        description=(
            "Serve one cell A_ij over gRPC. The entity publishes only kernel blocks K(A_ij, B_j') against its "
            "own secret random matrix B_j, record ids, labels, per-feature min/max and shapes. It refuses "
            "mbar >= n_j unless its config sets [privacy] non_private_allow_mbar_at_least_features = true. "
            "Mutual TLS is on by default: only the coordinator identity named in the config's [tls] table may call. "
            "Prints 'listening on HOST:PORT' once it accepts calls; stops cleanly on SIGINT/SIGTERM."
        ),
    )
    parser.add_argument("--config", required=True, help="the entity's TOML config (private to it)")
    parser.add_argument("--listen", help="HOST:PORT to serve on, overriding the config (port 0 picks a free port)")
    parser.add_argument("--insecure", action="store_true",
                        help="serve plaintext without TLS and accept any caller (trusted networks only; logged as a warning)")
    parser.add_argument("--budget", action="store_true",
                        help="print the privacy-budget ledger (what was spent, when and on what) and exit")
    parser.add_argument("--json", action="store_true", help="with --budget: print the ledger summary as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = load_entity_config(args.config)
    if args.budget:
        return show_budget(config, as_json=args.json)
    return serve_entity(config, args.listen, insecure=args.insecure)


def show_budget(config: EntityConfig, *, as_json: bool) -> int:
    if config.epsilon_total is None or config.ledger is None:
        raise ConfigError(f"{config.source}: no privacy budget configured ([privacy] epsilon_total); DP releases are refused")
    ledger = PrivacyLedger(config.ledger, config.epsilon_total, entity_id=config.id)
    print(json.dumps(ledger.summary()) if as_json else ledger.report())
    return 0
