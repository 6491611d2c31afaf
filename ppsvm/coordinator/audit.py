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

from ppsvm.config import EntityConfig, Federation
from ppsvm.coordinator.federation import Session
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
        for j in federation.column_blocks:
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
        "learns": _what_each_party_learns(n_features),
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
                "start (restore it; only an entity that never served starts a new one)",
            )
        )
    return found


def _what_each_party_learns(n_features: dict[int, int]) -> dict[str, str]:
    widths = ", ".join(f"n_{j} = {n}" for j, n in sorted(n_features.items())) or "unknown (entities not reached)"
    return {
        "coordinator": (
            "record ids, labels, each entity's per-feature min and max and block shapes, and kernel blocks K(A_ij, "
            f"B_j') with mbar < n_j columns ({widths}) under one pinned view of B_j per entity (kernel, width, "
            "scaling), for the entity's whole life; never a row, never B_j, never the column-group secrets. It cannot "
            "choose B_j, cannot send a matrix to compute a kernel against, and cannot choose the scaling (ranges are "
            "tagged under the secret, and the first kernel release pins it). With mbar < n_j a kernel row leaves at "
            "least n_j - mbar directions of each record undetermined even for someone who also knew B_j "
            "(benchmarks/attacks.py). From a DP-mode entity: only noised weights and noised error counts, each "
            "charged to its budget (docs/threat-model.md)."
        ),
        "column-block peers": (
            "they share the secret, so they know B_j; they never receive each other's kernel blocks. If one also "
            "obtained a peer's kernel block (e.g. by colluding with the coordinator), with mbar < n_j it could not "
            "pin the peer's records down, but it would learn their components in about mbar directions; with mbar >= "
            "n_j it would recover them exactly."
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
