"""``ppsvm audit``: which privacy conditions hold for a federation, and what each party can learn.

The audit asks the live entities what they publish about themselves (Metadata,
over the same mutual-TLS channels training uses) and, when given, reads entity
config files locally, as a data owner auditing its own settings would. It
changes nothing and requests no kernel.
"""

from __future__ import annotations

import datetime
import stat
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ppsvm.config import SINGLE_BLOCK_CONSENT_KEY, SINGLE_BLOCK_GAIN_KEY, EntityConfig, Federation
from ppsvm.coordinator.federation import Session
from ppsvm.core.privacy import single_block_exposure
from ppsvm.data.sources import read_source
from ppsvm.errors import PpsvmError
from ppsvm.wire.certs import certificate_identity

OK, WARN, FAIL = "ok", "warning", "FAIL"


@dataclass(frozen=True)
class Finding:
    """One checked condition: its status (ok, warning, FAIL), the rule it concerns, and plain words."""

    status: str
    topic: str
    text: str


def audit(
    federation: Federation, entity_configs: Sequence[EntityConfig] = (), deadline: float = 30.0
) -> dict[str, Any]:
    """Check a federation's privacy conditions.

    Parameters
    ----------
    federation : Federation
        The coordinator's view (its ``insecure`` flag says whether plaintext was asked for).
    entity_configs : sequence of EntityConfig
        Entity configs available locally (optional): their secrets, TLS and guard settings are checked too.

    Returns
    -------
    dict
        ``findings`` (list of Finding as dicts), ``learns`` (party -> plain words), ``ok`` (no FAIL).
    """
    findings: list[Finding] = []
    findings += _transport(federation)
    n_features: dict[int, int] = {}
    only_dp = False
    try:
        with Session(federation, deadline) as session:
            metadata = session.load_metadata()  # also checks ids, widths, key-check values and feature fingerprints
        findings.append(
            Finding(
                OK,
                "identity",
                f"all {len(metadata)} entities answered as the ids the federation file names"
                + (", each proving it with a certificate from the federation CA" if not federation.insecure else ""),
            )
        )
        findings.append(
            Finding(
                OK,
                "secrets",
                "every column block's entities hold the same column-group secret (key-check values agree)",
            )
        )
        findings.append(
            Finding(
                OK,
                "features",
                "every column block's entities list the same feature columns in the same order "
                "(keyed fingerprints agree)",
            )
        )
        # Entities that all serve the DP protocol release no kernel block: rule 3 and the kernel-block parties do
        # not apply.
        only_dp = all(meta.mode == "dp" for meta in metadata.values())
        for j in [] if only_dp else federation.column_blocks:
            members = session.column_block(j)
            n_features[j] = metadata[members[0].id].n_features
            overridden = [e.id for e in members if metadata[e.id].non_private_override]
            if overridden:
                findings.append(
                    Finding(
                        FAIL,
                        "rule 3",
                        f"column block {j}: {', '.join(overridden)} allow mbar >= n_j = {n_features[j]} "
                        "(non-private override): a run may pin records down; its output is labelled NOT PRIVATE",
                    )
                )
            else:
                findings.append(
                    Finding(
                        OK,
                        "rule 3",
                        f"column block {j}: every entity refuses mbar >= n_j = {n_features[j]}; "
                        f"at most {n_features[j] - 1} random points per record",
                    )
                )
        findings += [_guard(entity_id, meta) for entity_id, meta in metadata.items()]
    except PpsvmError as error:
        findings.append(Finding(FAIL, "entities", f"the live check failed: {error}"))
    for config in entity_configs:
        findings += _entity_config(config, federation)
    return {
        "findings": [asdict(f) for f in findings],
        "learns": _dp_parties_learn() if only_dp else _what_each_party_learns(n_features),
        "ok": all(f.status != FAIL for f in findings),
    }


def _transport(federation: Federation) -> list[Finding]:
    if federation.insecure or federation.tls is None:
        return [
            Finding(
                FAIL,
                "transport",
                "plaintext (--insecure or no [tls] table): anyone on the network path sees the kernel "
                "blocks, ids and labels, and any process can call the entities",
            )
        ]
    try:
        _, cert, _ = federation.tls.read()
    except PpsvmError as error:
        return [Finding(FAIL, "transport", str(error))]
    name, expires = certificate_identity(cert)
    days = (expires - datetime.datetime.now(datetime.UTC)).days
    status = WARN if days < 30 else OK
    return [
        Finding(
            status,
            "transport",
            f"mutual TLS; the coordinator is {name!r}, its certificate expires in {days} days ({expires:%Y-%m-%d})",
        )
    ]


def _guard(entity_id: str, meta: Any) -> Finding:
    """One entity's release guard as it reports itself: its mode, pinned view of B_j, releases and budget."""
    pinned = meta.pinned_basis or "none yet (the first kernel release pins one)"
    budget = (
        f"epsilon spent {meta.epsilon_spent:g} of {meta.epsilon_total:g}"
        if meta.epsilon_total
        else "no DP budget (DP releases refused)"
    )
    text = (
        f"{entity_id}: serves the {meta.mode} protocol; {meta.releases} releases in its log; pinned basis view: "
        f"{pinned}; {budget}"
    )
    if meta.mode == "mixed":
        return Finding(
            FAIL,
            "guard",
            text + ". It serves random-kernel and DP releases for the same records (its own "
            "opt-in): labels, ranges and kernel blocks are not DP, so no epsilon-DP "
            "guarantee holds for its records",
        )
    return Finding(OK, "guard", text)


def _entity_config(config: EntityConfig, federation: Federation) -> list[Finding]:
    where = f"{config.id} ({config.source})"
    found: list[Finding] = []
    if config.tls is None:
        found.append(Finding(WARN, "transport", f"{where}: no [tls] table; it can only run with --insecure"))
    else:
        found.append(Finding(OK, "transport", f"{where}: accepts calls only from {config.coordinator_identity!r}"))
    if config.secret_file is not None and config.secret_file.exists():
        mode = stat.S_IMODE(config.secret_file.stat().st_mode)
        if mode & 0o077:
            found.append(
                Finding(
                    WARN,
                    "rule 2",
                    f"{where}: its secret file {config.secret_file} is readable by others (mode {mode:o})",
                )
            )
    members = set(config.column_block_members)
    expected = {e.id for e in federation.entities if e.column_block == config.column_block}
    if federation.entities and members != expected:
        found.append(
            Finding(
                FAIL,
                "scaling",
                f"{where}: column_block_members {sorted(members)} differ from the federation's column "
                f"block {config.column_block} {sorted(expected)}: its kernel requests will be refused",
            )
        )
    found.append(_combination(config, where))
    if config.non_private_override:
        found.append(Finding(FAIL, "rule 3", f"{where}: the non-private override is on"))
    if config.mode == "mixed":
        found.append(
            Finding(
                FAIL,
                "rule 7",
                f'{where}: [privacy] mode = "mixed" serves both protocols for the same '
                "records: its DP releases carry no guarantee",
            )
        )
    if config.non_private_weights:
        found.append(
            Finding(
                FAIL,
                "rule 7",
                f"{where}: it may release SVM weights without noise (non_private_allow_unnoised_weights)",
            )
        )
    if config.continuous_noise:
        found.append(
            Finding(
                WARN,
                "rule 7",
                f"{where}: it serves DP mechanisms with floating-point noise "
                "(allow_continuous_noise_mechanisms), not hardened against the floating-point attack",
            )
        )
    if config.release_log is not None and not config.release_log.exists():
        found.append(
            Finding(
                FAIL,
                "guard",
                f"{where}: its release log {config.release_log} is missing: the entity will not "
                "start. Put back its latest copy (an older one would give back spent budget, and coordinators refuse "
                "a log that went backwards); only an entity that never served starts a new one",
            )
        )
    return found


def _combination(config: EntityConfig, where: str) -> Finding:
    """Privacy rule 8: are its kernel blocks combined with its row block's, and if not, what a peer would recover."""
    if config.pair_secret_files:
        peers = ", ".join(peer for peer, _ in config.pair_secret_files)
        return Finding(
            OK,
            "rule 8",
            f"{where}: its kernel blocks reach the coordinator only combined with those of {peers} (secure "
            "aggregation); its block on its own (the product basis) needs its consent",
        )
    if len(config.column_block_members) < 2:
        return Finding(OK, "rule 8", f"{where}: no other entity knows its B_j; its blocks leave on their own")
    try:
        cell = read_source(config.data, config.schema)
        risk = single_block_exposure(cell.X_train, config.read_secret()).describe()
    except PpsvmError as error:
        risk = f"not measured ({error})"
    consent = (
        f"it consents ([privacy] {SINGLE_BLOCK_CONSENT_KEY} = true): its records are exposed to a peer helping the "
        "coordinator"
        if config.single_block_consent
        else f"it refuses every block on its own if that gain is above {config.single_block_max_gain:g} "
        f"([privacy] {SINGLE_BLOCK_GAIN_KEY})"
    )
    return Finding(
        FAIL if config.single_block_consent else WARN,
        "rule 8",
        f"{where}: no row-block peer to combine its kernel blocks with, and its column-block peers know B_j. "
        f"Measured at its largest private mbar: {risk}; {consent}",
    )


def _dp_parties_learn() -> dict[str, str]:
    """What each party learns from a federation whose entities all serve the DP protocol."""
    return {
        "coordinator": (
            "each entity's block shapes and guard state (Metadata), and only noised releases: DP weights, noised "
            "held-out error counts and noised score histograms, each charged to the entity's budget "
            "(docs/threat-model.md); no record id, label, range or kernel block"
        ),
        "other entities": "nothing from the protocol but the released model.",
        "network observers": "with mutual TLS, the parties' addresses and traffic volume only.",
    }


def _what_each_party_learns(n_features: dict[int, int]) -> dict[str, str]:
    widths = ", ".join(f"n_{j} = {n}" for j, n in sorted(n_features.items())) or "unknown (entities not reached)"
    return {
        "coordinator": (
            "record ids, labels, each entity's per-feature min and max and block shapes, and for each row block "
            f"the combination of its entities' kernel blocks (the sum of K(A_ij, B_j') for linear kernels, of the "
            f"log-kernels for Gaussian ones) with mbar < n_j columns ({widths}), by secure aggregation: each "
            "entity's reply is masked with pair secrets it shares with its row-block peers, so no single block is "
            "readable. A block reaches it on its own only where nothing can be combined (a horizontal split, an "
            "entity alone in its row block, the product basis), and then only within the entity's measured risk or "
            "with its consent. It never sees a row, B_j or the secrets, cannot choose B_j or the scaling, and each "
            "entity serves one pinned view (kernel, width, scaling, largest mbar) for life. From a DP-mode entity: "
            "only noised weights and noised error counts, each charged to its budget (docs/threat-model.md)."
        ),
        "column-block peers": (
            "they share the secret, so they know B_j. A block on its own is not private against them: with B_j, "
            "the [0, 1] box and the values of their own records they reconstruct it (measured, docs/threat-model.md), "
            "whatever mbar < n_j is. So a single block leaves only with its entity's consent; combined with its row "
            "block's, the other blocks (under secrets they do not hold) hide it."
        ),
        "row-block peers": (
            "a peer that colludes with the coordinator subtracts its own share and sees the rest of its row block "
            "under B_j's it does not know: the papers' case against the coordinator alone, unless it also knows "
            "records of that block (the known-sample attack, docs/threat-model.md)."
        ),
        "other entities": "nothing from the protocol but the final model (u, gamma, kernel, mbar, scaling).",
        "network observers": "with mutual TLS, the parties' addresses and traffic volume only.",
    }


def format_report(report: dict[str, Any]) -> str:
    """The audit as text: one line per finding, then what each party can learn."""
    lines = ["privacy audit", ""]
    for finding in report["findings"]:
        lines.append(f"[{finding['status']:>7}] {finding['topic']}: {finding['text']}")
    lines += ["", "what each party can learn:"]
    for party, text in report["learns"].items():
        lines.append(f"- {party}: {text}")
    lines += [
        "",
        "verdict: " + ("every checked condition holds" if report["ok"] else "some conditions FAIL (see above)"),
    ]
    return "\n".join(lines)
