"""``ppsvm org`` and ``ppsvm operator``: onboarding where every party keeps its own keys (ppsvm.onboarding)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ppsvm import onboarding
from ppsvm.kustomize import DEFAULT_IMAGE, write_overlay
from ppsvm.wire.certs import (
    CA_FILE,
    CA_KEY_FILE,
    DEFAULT_CLIENT_NAME,
    DEFAULT_COORDINATOR_NAME,
    DEFAULT_VALID_DAYS,
    ROLES,
)


def register(commands: Any) -> None:
    """Add the ``org`` and ``operator`` commands to the top-level subparsers."""
    org = commands.add_parser(
        "org",
        help="one organisation's side of onboarding: its own keys, shares and bundle",
        description="Each organisation runs these in its own directory; its private keys never leave it. "
        "Order: init (send the request to the operator), seal (send the sealed shares to the operator, who "
        "relays them), join (with what the operator published and relayed), and for Kubernetes kustomize (the "
        "party's own overlay). See docs/tutorials/deployment.md.",
    )
    steps = org.add_subparsers(dest="step", required=True, metavar="STEP")

    init = steps.add_parser("init", help="make this party's private keys and the request to send to the operator")
    init.add_argument("--name", required=True, help="this party's federation id (lowercase), e.g. r0c0")
    init.add_argument("--role", choices=ROLES, required=True, help="entity, coordinator or client")
    init.add_argument("--out", required=True, type=Path, help="a new directory: the party's bundle")
    init.add_argument(
        "--ip",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="an IP address the party serves on, added to its certificate (repeatable; ppsvm itself checks names)",
    )
    init.set_defaults(run=_init)

    seal = steps.add_parser("seal", help="an entity: draw its shares of its group secrets and seal them to the members")
    seal.add_argument("--bundle", required=True, type=Path, help="this entity's directory (from org init)")
    seal.add_argument("--published", required=True, type=Path, help="what the operator published")
    seal.add_argument(
        "--out", required=True, type=Path, help="directory for the sealed files (public: to the operator)"
    )
    seal.set_defaults(run=_seal)

    join = steps.add_parser("join", help="complete this party's bundle from what was published and relayed")
    join.add_argument("--bundle", required=True, type=Path, help="this party's directory (from org init)")
    join.add_argument("--published", required=True, type=Path, help="what the operator published")
    join.add_argument("--shares", type=Path, help="an entity: the directory of sealed shares the operator relayed")
    join.add_argument("--data", default="", help="an entity: its data file, as its config will name it")
    join.set_defaults(run=_join)

    kustomize = steps.add_parser(
        "kustomize",
        help="an entity or the coordinator: write its own Kubernetes overlay from its bundle (after join)",
        description="Writes BUNDLE/kubernetes/: site/ (the overlay: the bundle's files in a Secret, the config "
        "with the pod's paths, the data volume for a file source or the database URL from a Secret for a SQL "
        "one), first-start/ (an entity's first rollout: also creates its release log) and base/ (the manifests, "
        "named by a relative path). Run it again after changing the bundle's config; the directory is "
        "replaced. See docs/how-to/kubernetes.md.",
    )
    kustomize.add_argument("--bundle", required=True, type=Path, help="this party's directory (after org join)")
    kustomize.add_argument(
        "--out", type=Path, help="where to write the overlay (default BUNDLE/kubernetes; replaced if it exists)"
    )
    kustomize.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help="the ppsvm image, NAME[:TAG] or NAME@DIGEST (default %(default)s, what `docker build -t ppsvm:local .` "
        "makes; a cluster pulls from a registry: REGISTRY/ppsvm:VERSION)",
    )
    kustomize.add_argument("--namespace", help="the namespace of its objects (default ppsvm-NAME)")
    kustomize.set_defaults(run=_kustomize)

    operator = commands.add_parser(
        "operator",
        help="the federation operator's side: the CA, signing requests, publishing",
        description="The operator holds the federation CA key and sees only public material: requests "
        "(certificate signing requests and public share keys), certificates and sealed shares.",
    )
    actions = operator.add_subparsers(dest="action", required=True, metavar="ACTION")
    ca = actions.add_parser("ca", help=f"make the federation CA ({CA_KEY_FILE} stays here, {CA_FILE} is published)")
    ca.add_argument("--out", required=True, type=Path, help="the operator's directory")
    ca.add_argument("--days", type=int, default=DEFAULT_VALID_DAYS, help="validity in days (default %(default)s)")
    ca.set_defaults(run=_ca)

    publish = actions.add_parser("publish", help="sign every party's request and write what every party receives")
    publish.add_argument("--ca-dir", required=True, type=Path, help="the operator's directory (from operator ca)")
    publish.add_argument(
        "--plan", required=True, type=Path, help="the federation file: entities, addresses, grid cells, task"
    )
    publish.add_argument("--requests", required=True, nargs="+", type=Path, help="every NAME.request.json")
    publish.add_argument("--out", required=True, type=Path, help="directory to publish to every party")
    publish.add_argument(
        "--coordinator", default=DEFAULT_COORDINATOR_NAME, help="the coordinator's name (default %(default)s)"
    )
    publish.add_argument(
        "--client",
        action="append",
        default=[],
        help=f"a prediction client's name (repeatable; e.g. {DEFAULT_CLIENT_NAME})",
    )
    publish.add_argument("--days", type=int, default=DEFAULT_VALID_DAYS, help="validity in days (default %(default)s)")
    publish.set_defaults(run=_publish)


def _init(args: argparse.Namespace) -> int:
    request = onboarding.init_party(args.out, args.name, args.role, args.ip)
    print(f"made {args.name}'s private keys in {args.out} (mode 0600: they never leave it)")
    print(f"send {request} to the operator (it is public)")
    return 0


def _seal(args: argparse.Namespace) -> int:
    sealed = onboarding.seal_shares(args.bundle, args.published, args.out)
    print(
        f"sealed {len(sealed)} share(s) into {args.out}: send them to the operator to relay "
        "(only their recipients can open them)"
    )
    return 0


def _join(args: argparse.Namespace) -> int:
    groups = onboarding.join(args.bundle, args.published, args.shares, data=args.data)
    print(f"{args.bundle} is complete")
    for group, fingerprint in groups.items():
        print(f"  {group}: {fingerprint}  (read it to the other members out of band: all must see the same)")
    return 0


def _kustomize(args: argparse.Namespace) -> int:
    overlay = write_overlay(args.bundle, args.out, image=args.image, namespace=args.namespace)
    print(
        f"wrote {overlay.directory}, the Kubernetes overlay of {overlay.party} (namespace "
        f"{overlay.namespace}); its Secret holds private keys: keep it as private as the bundle. Then:"
    )
    for index, step in enumerate(overlay.steps(), start=1):
        print(f"  {index}. {step}")
    return 0


def _ca(args: argparse.Namespace) -> int:
    onboarding.init_operator(args.out, args.days)
    print(f"made the federation CA in {args.out}: publish {CA_FILE}; keep {CA_KEY_FILE} offline")
    return 0


def _publish(args: argparse.Namespace) -> int:
    groups = onboarding.publish(
        args.ca_dir,
        args.plan,
        args.requests,
        args.out,
        coordinator=args.coordinator,
        clients=args.client,
        valid_days=args.days,
    )
    print(f"published to {args.out}: every party receives the whole directory (nothing in it is secret)")
    for group, fingerprint in groups.items():
        print(f"  {group}: {fingerprint}")
    return 0
