"""Per-organisation onboarding: every party makes its own keys, and ends with a directory of its own.

The steps, each run where its output is kept (``ppsvm org`` and ``ppsvm operator``):

1. ``org init``: a party (an entity, the coordinator, a prediction client) makes its TLS private key, a
   certificate signing request and, for an entity, an X25519 key for receiving shares. It sends
   ``NAME.request.json`` (public) to the operator; its private keys never leave its directory.
2. ``operator ca`` once, then ``operator publish``: the operator signs every request with the federation CA
   (the roles are its decision: the plan's entities get the entity role, the named coordinator and
   clients theirs) and publishes the federation file, the CA certificate, every certificate and
   ``enrolment.json`` (each entity's public share key and the groups).
3. ``org seal`` at each entity: one random share per group it belongs to (its column block; all entities
   for the record-id key), sealed to each other member (:mod:`ppsvm.wire.shares`); the operator relays them.
4. ``org join`` at each party: opens the shares sealed to it, derives its group secrets, and writes the
   rest of its bundle: CA certificate, its certificate, its config (an entity's) or the federation file
   (the coordinator's), a new release log, and a compose file that runs only its own service.

Afterwards a bundle holds its owner's key, certificate, the CA certificate, its secrets and config and a data
pointer, nothing of any other party's. ``ppsvm split --bundles`` runs the same steps
for every party of a split in one process: the demo's path.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppsvm.config import (
    FederationEntity,
    federation_toml,
    load_federation,
    release_log_name,
    toml_document,
)
from ppsvm.core.release_log import new_release_log_text
from ppsvm.data.partition import (
    FEDERATION_FILE,
    ID_KEY_FILE,
    pair_name,
    pair_secret_file_name,
    secret_file_name,
)
from ppsvm.errors import ConfigError
from ppsvm.files import PRIVATE_MODE, PUBLIC_MODE, write_all
from ppsvm.wire import shares
from ppsvm.wire.certs import (
    CA_FILE,
    CA_KEY_FILE,
    CLIENT,
    COORDINATOR,
    ENTITY,
    KeyPair,
    Pem,
    Role,
    certificate_file,
    check_party_name,
    key_file,
    new_ca,
    new_request,
    request_name,
    sign_request,
)

ENROLMENT_FILE = "enrolment.json"
PARTY_FILE = "party.json"
SHARE_KEY_FILE = "share.key"
OWN_SHARES_FILE = "own-shares.json"
SEALED_SUFFIX = ".sealed"
RECORD_IDS_GROUP = "record-ids"
_REQUEST_FORMAT = "ppsvm enrolment request 1"
_ENROLMENT_FORMAT = "ppsvm enrolment 1"
_IMAGE = "ppsvm:local"
_DOCKER_PAGE = "docs/how-to/docker-compose.md"
# Where an entity container sees a data file that lives outside its bundle (mounted read-only).
DATA_MOUNT = "/data"


def request_file(name: str) -> str:
    return f"{name}.request.json"


def column_block_group(column_block: int) -> str:
    return f"column-block-{column_block}"


# --- 1. a party's keys and request --------------------------------------------------------------


def init_party(out_dir: Path, name: str, role: Role, addresses: Sequence[str] = ()) -> Path:
    """Make ``name``'s private keys in ``out_dir`` and the public request to send to the operator.

    Returns
    -------
    Path
        ``out_dir/NAME.request.json``.

    Raises
    ------
    ConfigError
        ``out_dir`` already holds a party's keys (never overwritten: a lost key cannot be recovered).
    """
    check_party_name(name)
    if (out_dir / PARTY_FILE).exists() or (out_dir / key_file(name)).exists():
        raise ConfigError(f"{out_dir} already holds a party's keys; make a new directory for a new party")
    request = new_request(name, addresses)
    share_key = shares.ShareKey.new() if role == ENTITY else None
    document = {
        "format": _REQUEST_FORMAT,
        "name": name,
        "role": role,
        "csr": request.certificate.text.decode("ascii"),
        "share_key": share_key.public.hex() if share_key else None,
    }
    files: dict[str, tuple[str | bytes, int]] = {
        key_file(name): (request.key.text, PRIVATE_MODE),
        PARTY_FILE: (json.dumps({"name": name, "role": role}) + "\n", PUBLIC_MODE),
        request_file(name): (json.dumps(document, indent=2) + "\n", PUBLIC_MODE),
    }
    if share_key is not None:
        files[SHARE_KEY_FILE] = (share_key.private.hex() + "\n", PRIVATE_MODE)
    write_all(out_dir, files)
    return out_dir / request_file(name)


@dataclass(frozen=True)
class Request:
    """A party's request as the operator reads it."""

    name: str
    csr: bytes
    share_key: bytes | None
    source: Path


def read_request(path: Path) -> Request:
    """Parse ``NAME.request.json``; ConfigError naming the file if it is not one."""
    document = _read_json(path, _REQUEST_FORMAT, "an enrolment request (made by `ppsvm org init`)")
    csr = str(document.get("csr", "")).encode("ascii")
    name = str(document.get("name", ""))
    if request_name(csr) != name:
        raise ConfigError(f"{path}: the request names {name!r} but its signing request {request_name(csr)!r}")
    key = document.get("share_key")
    try:
        share_key = bytes.fromhex(key) if isinstance(key, str) else None
    except ValueError:
        raise ConfigError(f"{path}: share_key is not hex text") from None
    return Request(name, csr, share_key, path)


# --- 2. the operator ------------------------------------------------------------------------------


def init_operator(out_dir: Path, valid_days: int) -> None:
    """The federation CA in ``out_dir`` (``ca.key`` stays there; ``ca.pem`` is published)."""
    if (out_dir / CA_KEY_FILE).exists():
        raise ConfigError(f"{out_dir} already holds a federation CA ({CA_KEY_FILE}); it is never replaced")
    ca = new_ca(valid_days=valid_days)
    write_all(out_dir, {CA_KEY_FILE: (ca.key.text, PRIVATE_MODE), CA_FILE: (ca.certificate.text, PUBLIC_MODE)})


def publish(
    operator_dir: Path,
    plan: Path,
    requests: Iterable[Path],
    out_dir: Path,
    *,
    coordinator: str,
    clients: Sequence[str] = (),
    valid_days: int,
) -> dict[str, str]:
    """Sign every party's request and write what the operator publishes into ``out_dir``.

    Parameters
    ----------
    plan : Path
        The federation file the operator wrote: entity ids, addresses, grid cells, task.
    requests : paths of ``NAME.request.json``
        One per entity of the plan, one for ``coordinator``, one per client.

    Returns
    -------
    dict
        Group name -> the fingerprint its members compare out of band.

    Raises
    ------
    ConfigError
        A request is missing, extra, unreadable, or an entity's has no share key.
    """
    federation = load_federation(plan)
    ca = KeyPair(_read_pem(operator_dir / CA_KEY_FILE, True), _read_pem(operator_dir / CA_FILE, False))
    by_name: dict[str, Request] = {}
    for path in requests:
        request = read_request(path)
        if request.name in by_name:
            raise ConfigError(f"two requests for {request.name!r}: {by_name[request.name].source} and {path}")
        by_name[request.name] = request
    roles: dict[str, tuple[Role, ...]] = {e.id: (ENTITY,) for e in federation.entities}
    roles[coordinator] = (COORDINATOR, CLIENT)
    roles.update({client: (CLIENT,) for client in clients})
    missing = sorted(set(roles) - set(by_name))
    extra = sorted(set(by_name) - set(roles))
    if missing or extra:
        clients_named = [name for name in extra if by_name[name].share_key is None]  # made as a client (or coordinator)
        hint = (
            f" (prediction clients are named with --client: add {' '.join('--client ' + n for n in clients_named)})"
            if clients_named
            else ""
        )
        raise ConfigError(
            f"requests and plan differ: {'no request from ' + ', '.join(missing) if missing else ''}"
            f"{'; ' if missing and extra else ''}{'requests from parties the plan does not name: ' if extra else ''}"
            f"{', '.join(extra)}{hint}"
        )
    for entity in federation.entities:
        if by_name[entity.id].share_key is None:
            raise ConfigError(f"{by_name[entity.id].source}: an entity's request needs a share key (made as an entity)")
    files: dict[str, tuple[str | bytes, int]] = {CA_FILE: (ca.certificate.text, PUBLIC_MODE)}
    for name, granted in roles.items():
        try:
            certificate = sign_request(ca, by_name[name].csr, granted, valid_days=valid_days)
        except ConfigError as exc:
            raise ConfigError(f"{by_name[name].source}: {exc}") from exc
        files[certificate_file(name)] = (certificate.text, PUBLIC_MODE)
    groups = _groups(federation.entities)
    share_keys = {e.id: (by_name[e.id].share_key or b"").hex() for e in federation.entities}
    enrolment = {
        "format": _ENROLMENT_FORMAT,
        "coordinator": coordinator,
        "clients": list(clients),
        "share_keys": share_keys,
        "groups": groups,
    }
    files[ENROLMENT_FILE] = (json.dumps(enrolment, indent=2) + "\n", PUBLIC_MODE)
    tls = {"ca": CA_FILE, "cert": certificate_file(coordinator), "key": key_file(coordinator)}
    files[FEDERATION_FILE] = (federation_toml(federation.task, federation.entities, tls), PUBLIC_MODE)
    write_all(out_dir, files)
    return fingerprints(_Published(out_dir))


def _groups(entities: Sequence[FederationEntity]) -> dict[str, list[str]]:
    """Group name -> members: each column block's entities, every entity for the record-id key, and each pair of
    entities of one row block (the pair secrets of secure aggregation: a pair secret, not a row-block secret, so
    that a row-block member cannot unmask another's share on its own)."""
    groups = {
        column_block_group(j): sorted(e.id for e in entities if e.column_block == j)
        for j in sorted({e.column_block for e in entities})
    }
    groups[RECORD_IDS_GROUP] = sorted(e.id for e in entities)
    for i in sorted({e.row_block for e in entities}):
        members = sorted(e.id for e in entities if e.row_block == i)
        for a, b in itertools.combinations(members, 2):
            groups[pair_name(a, b)] = [a, b]
    return groups


class _Published:
    """What the operator published, as a party reads it."""

    def __init__(self, directory: Path):
        document = _read_json(
            directory / ENROLMENT_FILE, _ENROLMENT_FORMAT, "an enrolment file (published by `ppsvm operator publish`)"
        )
        self.coordinator: str = document["coordinator"]
        self.share_keys = {name: bytes.fromhex(key) for name, key in document["share_keys"].items()}
        self.groups: dict[str, list[str]] = document["groups"]
        self.federation = load_federation(directory / FEDERATION_FILE)

    def groups_of(self, name: str) -> dict[str, list[str]]:
        return {group: members for group, members in self.groups.items() if name in members}


def fingerprints(published: _Published, name: str | None = None) -> dict[str, str]:
    """Group -> fingerprint of its members' published share keys (only ``name``'s groups if given)."""
    groups = published.groups if name is None else published.groups_of(name)
    return {
        group: shares.group_fingerprint(group, {m: published.share_keys[m] for m in members})
        for group, members in groups.items()
    }


# --- 3. an entity seals its shares ---------------------------------------------------------------


def seal_shares(bundle: Path, published_dir: Path, outbox: Path) -> list[Path]:
    """Draw this entity's share of each of its groups and seal it to every other member, into ``outbox``.

    The shares themselves stay in the bundle (``own-shares.json``, mode 0600) until ``join``.
    """
    party = _party(bundle)
    if party["role"] != ENTITY:
        raise ConfigError(f"{bundle}: only entities hold group secrets; {party['name']} is a {party['role']}")
    name = party["name"]
    published = _Published(published_dir)
    own_key = _read_hex(bundle / SHARE_KEY_FILE)
    if published.share_keys.get(name) != shares.public_share_key(own_key):
        raise ConfigError(
            f"the operator published a share key for {name} that is not this bundle's: it was replaced on the way, "
            "or the bundle is not the one that made the request; do not go on, ask the operator"
        )
    if (bundle / OWN_SHARES_FILE).exists():
        own = {group: bytes.fromhex(text) for group, text in _read_json(bundle / OWN_SHARES_FILE).items()}
    else:
        own = {group: shares.new_share() for group in published.groups_of(name)}
        write_all(bundle, {OWN_SHARES_FILE: (json.dumps({g: s.hex() for g, s in own.items()}) + "\n", PRIVATE_MODE)})
    files: dict[str, tuple[str | bytes, int]] = {}
    for group, members in published.groups_of(name).items():
        for member in members:
            if member != name:
                text = shares.seal(
                    own[group], group=group, sender=name, recipient=member, recipient_key=published.share_keys[member]
                )
                files[f"{group}.{name}-to-{member}{SEALED_SUFFIX}"] = (text + "\n", PUBLIC_MODE)
    write_all(outbox, files)
    return sorted(outbox / filename for filename in files)


# --- 4. a party joins -----------------------------------------------------------------------------


def join(
    bundle: Path,
    published_dir: Path,
    inbox: Path | None,
    *,
    data: str = "",
    extra_tables: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> dict[str, str]:
    """Complete ``bundle`` from what was published and the shares sealed to it (entities).

    Parameters
    ----------
    inbox : Path or None
        Where the relayed sealed shares are (files for other members are passed over); None for a
        coordinator or client, which hold no group secret.
    data : str
        An entity's data source as its config names it (a CSV path relative to the bundle, or see the
        docs/tutorials/own-data.md for Parquet and SQL sources).
    extra_tables : (header, table) pairs
        More tables for the entity's config (e.g. its ``[[schema.features]]``).

    Returns
    -------
    dict
        Group -> fingerprint, for the members to compare out of band.
    """
    party = _party(bundle)
    name, role = party["name"], party["role"]
    published = _Published(published_dir)
    files: dict[str, tuple[str | bytes, int]] = {
        CA_FILE: (_read_pem(published_dir / CA_FILE, False).text, PUBLIC_MODE),
        certificate_file(name): (_read_pem(published_dir / certificate_file(name), False).text, PUBLIC_MODE),
    }
    if role == ENTITY:
        if inbox is None:
            raise ConfigError("an entity joins with the sealed shares the operator relayed (--shares)")
        entity = next((e for e in published.federation.entities if e.id == name), None)
        if entity is None:
            raise ConfigError(f"the published federation has no entity {name!r}")
        for group, secret in _group_secrets(bundle, name, published, inbox).items():
            if group == RECORD_IDS_GROUP:
                filename = ID_KEY_FILE
            elif group == column_block_group(entity.column_block):
                filename = secret_file_name(entity.column_block)
            else:
                filename = pair_secret_file_name(*published.groups[group])
            files[filename] = (secret.hex() + "\n", PRIVATE_MODE)
        mount, data = _data_mount(bundle, data)
        files[f"{name}.toml"] = (_entity_config(entity, published, data, extra_tables), PRIVATE_MODE)
        if not (bundle / release_log_name(name)).exists():
            files[release_log_name(name)] = (new_release_log_text(name), PRIVATE_MODE)
        environment = [table["url_env"] for header, table in extra_tables if header == "[data]" and "url_env" in table]
        files["compose.yml"] = (_entity_compose(name, _port(entity.address), mount, environment), PUBLIC_MODE)
    elif role == COORDINATOR:
        files[FEDERATION_FILE] = ((published_dir / FEDERATION_FILE).read_text(encoding="utf-8"), PUBLIC_MODE)
        addresses = [e.address for e in published.federation.entities]
        files["compose.yml"] = (_coordinator_compose(name, addresses), PUBLIC_MODE)
    write_all(bundle, files)
    # The shares and the key that opened them did their work: nothing in the bundle can make them again.
    for leftover in (OWN_SHARES_FILE, SHARE_KEY_FILE):
        (bundle / leftover).unlink(missing_ok=True)
    return fingerprints(published, name) if role == ENTITY else {}


def _group_secrets(bundle: Path, name: str, published: _Published, inbox: Path) -> dict[str, bytes]:
    if not (bundle / OWN_SHARES_FILE).exists():
        raise ConfigError(
            f"{bundle} has no shares of its own: run `ppsvm org seal` first (or it has joined already: "
            "its shares are deleted then, and a new secret needs new shares from every member)"
        )
    own_key = _read_hex(bundle / SHARE_KEY_FILE)
    own = {group: bytes.fromhex(text) for group, text in _read_json(bundle / OWN_SHARES_FILE).items()}
    received: dict[str, dict[str, bytes]] = {group: {name: share} for group, share in own.items()}
    for path in sorted(inbox.glob(f"*{SEALED_SUFFIX}")):
        text = path.read_text(encoding="utf-8")
        if shares.sealed_header(text, str(path)).recipient != name:
            continue
        header, share = shares.open_sealed(text, own_key, origin=str(path))
        members = published.groups.get(header.group, [])
        if header.sender not in members or name not in members:
            raise ConfigError(f"{path}: {header.sender} is not a fellow member of group {header.group!r}")
        if received.setdefault(header.group, {}).setdefault(header.sender, share) != share:
            raise ConfigError(f"{path}: a second, different share from {header.sender} for {header.group}")
    secrets = {}
    for group, members in published.groups_of(name).items():
        missing = sorted(set(members) - set(received.get(group, {})))
        if missing:
            raise ConfigError(f"group {group}: no share yet from {', '.join(missing)} in {inbox}")
        secrets[group] = shares.group_secret(group, received[group])
    return secrets


def _entity_config(
    entity: FederationEntity, published: _Published, data: str, extra_tables: Sequence[tuple[str, Mapping[str, Any]]]
) -> str:
    members = sorted(e.id for e in published.federation.entities if e.column_block == entity.column_block)
    peers = sorted(e.id for e in published.federation.entities if e.row_block == entity.row_block and e != entity)
    table: dict[str, Any] = {
        "id": entity.id,
        "listen": f"0.0.0.0:{_port(entity.address)}",
        "data": data,
        "column_block": entity.column_block,
        "secret_file": secret_file_name(entity.column_block),
        "id_key_file": ID_KEY_FILE,
        "column_block_members": members,
    }
    if peers:
        table["pair_secrets"] = {peer: pair_secret_file_name(entity.id, peer) for peer in peers}
    tls = {"ca": CA_FILE, "cert": certificate_file(entity.id), "key": key_file(entity.id)}
    tables: list[tuple[str, Mapping[str, Any]]] = [
        ("[entity]", table),
        ("[tls]", {**tls, "coordinator": published.coordinator}),
    ]
    return toml_document(
        f"ppsvm entity {entity.id}: private to this data owner; never give this file to the coordinator.",
        [*tables, *extra_tables],
    )


def _port(address: str) -> int:
    """The port of a federation address (HOST:PORT): the one an entity listens on."""
    return int(address.rsplit(":", 1)[1])


def _data_mount(bundle: Path, data: str) -> tuple[str | None, str]:
    """Where an entity's data file is seen from its container: a path inside the bundle as it is (the bundle is
    mounted at /ppsvm); any other file's directory mounted read-only at DATA_MOUNT, and the config names the file
    there. Returns (the host directory to mount or None, the path the config names)."""
    if not data:
        return None, data
    path = Path(data) if Path(data).is_absolute() else (bundle / data)
    try:
        path.resolve().relative_to(bundle.resolve())
    except ValueError:
        return str(path.resolve().parent), f"{DATA_MOUNT}/{path.name}"
    return None, data


def _entity_compose(name: str, port: int, data_mount: str | None = None, environment: Sequence[str] = ()) -> str:
    health = ["ppsvm", "health", f"127.0.0.1:{port}", "--timeout", "3"]
    health += ["--ca", f"/ppsvm/{CA_FILE}", "--cert", f"/ppsvm/{certificate_file(name)}"]
    health += ["--key", f"/ppsvm/{key_file(name)}"]
    volumes = ["./:/ppsvm", *([f"{data_mount}:{DATA_MOUNT}:ro"] if data_mount else [])]
    return (
        f"# ppsvm entity {name}, this organisation's service only: `docker-compose up -d` in this directory.\n"
        f"# The image: build it once from a ppsvm checkout, `docker build -t {_IMAGE} .` ({_DOCKER_PAGE}).\n"
        "# The directory is mounted read-write: the release log beside the config must outlive the container.\n"
        + (f"# The data file's directory {data_mount} is mounted read-only at {DATA_MOUNT}.\n" if data_mount else "")
        + (f"# Set {', '.join(environment)} in the shell that runs docker-compose.\n" if environment else "")
        + f"# Open TCP port {port} to the coordinator's address only.\n"
        'version: "2.4"\n'
        "services:\n"
        f"  {name}:\n"
        f"    image: {_IMAGE}\n"
        f'    command: ["ppsvm", "entity", "--config", "/ppsvm/{name}.toml"]\n'
        f'    ports: ["{port}:{port}"]\n'
        f"    volumes: {json.dumps(volumes)}\n"
        + (f"    environment: {json.dumps(list(environment))}\n" if environment else "")
        + "    working_dir: /ppsvm\n"
        "    restart: unless-stopped\n"
        "    healthcheck:\n"
        f"      test: {json.dumps(['CMD', *health])}\n"
        "      interval: 10s\n"
        "      timeout: 5s\n"
        "      retries: 3\n"
        "      start_period: 60s\n"
    )


def _coordinator_compose(name: str, addresses: Sequence[str]) -> str:
    return (
        f"# ppsvm coordinator {name}: train once with `docker-compose run --rm train`; the model: ./model.json.\n"
        f"# The image: build it once from a ppsvm checkout, `docker build -t {_IMAGE} .` ({_DOCKER_PAGE}).\n"
        f"# It only dials out, to the entities at {', '.join(addresses)}; it needs no open port.\n"
        'version: "2.4"\n'
        "services:\n"
        "  train:\n"
        f"    image: {_IMAGE}\n"
        '    command: ["ppsvm", "coordinator", "train", "--federation", "/ppsvm/federation.toml",'
        ' "--model-out", "/ppsvm/model.json"]\n'
        "    volumes: ['./:/ppsvm']\n"
        "    working_dir: /ppsvm\n"
    )


# --- the demo's path: every party's steps in one process -----------------------------------------


def bundle_split(split_dir: Path, out_dir: Path, *, coordinator: str, client: str, valid_days: int) -> dict[str, str]:
    """Per-organisation bundles for a split, made by the same four steps as across organisations.

    Each entity's bundle gets its cell, its schema and its new release log from ``split_dir``; every key and
    secret is made afresh by the steps (the split's own are not copied). ``out_dir`` ends with one directory
    per party plus ``operator/`` (the CA key) and ``published/``.

    Returns
    -------
    dict
        Group -> fingerprint.
    """
    federation = load_federation(split_dir / FEDERATION_FILE)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"{out_dir} is not empty; bundles are written into a new directory")
    parties: dict[str, Role] = {e.id: ENTITY for e in federation.entities}
    parties[coordinator] = COORDINATOR
    parties[client] = CLIENT
    requests = [init_party(out_dir / name, name, role) for name, role in parties.items()]
    init_operator(out_dir / "operator", valid_days)
    plan = out_dir / "operator" / "plan.toml"
    plan.write_text(federation_toml(federation.task, federation.entities), encoding="utf-8")
    published = out_dir / "published"
    publish(
        out_dir / "operator",
        plan,
        requests,
        published,
        coordinator=coordinator,
        clients=[client],
        valid_days=valid_days,
    )
    with tempfile.TemporaryDirectory(prefix="ppsvm-relay-") as relay:
        for entity in federation.entities:
            seal_shares(out_dir / entity.id, published, Path(relay))
        for entity in federation.entities:
            cell = f"{entity.id}.csv"
            shutil.copy2(split_dir / cell, out_dir / entity.id / cell)
            split_config = tomllib.loads((split_dir / f"{entity.id}.toml").read_text(encoding="utf-8"))
            schema = [("[[schema.features]]", f) for f in split_config.get("schema", {}).get("features", [])]
            join(out_dir / entity.id, published, Path(relay), data=cell, extra_tables=schema)
    for name, role in parties.items():
        if role != ENTITY:
            join(out_dir / name, published, None)
    return fingerprints(_Published(published))


# --- small readers -------------------------------------------------------------------------------


def _party(bundle: Path) -> dict[str, str]:
    party = _read_json(bundle / PARTY_FILE)
    if party.get("role") not in (ENTITY, COORDINATOR, CLIENT):
        raise ConfigError(f"{bundle / PARTY_FILE}: not a party made by `ppsvm org init`")
    return party


def _read_json(path: Path, format_name: str | None = None, what: str = "a JSON object") -> dict[str, Any]:
    """A JSON object from ``path`` (with ``"format": format_name`` when given); ConfigError naming the file."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if not isinstance(document, dict) or (format_name is not None and document.get("format") != format_name):
        raise ConfigError(f"{path}: not {what}")
    return document


def _read_hex(path: Path) -> bytes:
    try:
        return bytes.fromhex(path.read_text(encoding="utf-8").strip())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}; was this bundle made by `ppsvm org init`?") from exc
    except ValueError:
        raise ConfigError(f"{path}: not hex text") from None


def _read_pem(path: Path, secret: bool) -> Pem:
    try:
        return Pem(path.read_bytes(), secret)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
