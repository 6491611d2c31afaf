"""``ppsvm org kustomize``: an organisation's own Kubernetes overlay, written from its bundle.

A bundle (``ppsvm org join``) names its files as they lie beside its config; a pod sees them elsewhere. This
module writes, into ``BUNDLE/kubernetes/`` (or another directory), everything ``kubectl apply -k`` needs, with
no hand edit and no path outside that directory:

``base/ENTITY-OR-COORDINATOR/``
    A copy of the kustomize base that ships inside the package (``ppsvm/kubernetes/``, the only copy of the
    manifests): the overlay names it by a relative path, so the directory can be moved, copied to the host
    that runs ``kubectl``, or checked into a site's own repository.
``site/``
    The overlay: ``kustomization.yaml`` (``resources:``, never the deprecated ``bases:``), the Secret's files
    under the fixed names the base's probes use (``entity.pem``, ``entity.key``, ``column-block.secret``, ...:
    copies, so that kustomize, which reads no file outside the overlay, finds them), and the config with the
    pod's paths: the Secret's files beside it at ``/ppsvm/entity``, the release log on its claim at
    ``/var/lib/ppsvm/releases``, a data file under ``/data``. A file source (CSV, Parquet) gets the data
    volume (the base's component ``data/``: the claim ``ppsvm-entity-data``); a SQL source gets none, and its
    ``url_env`` variable comes from the site's Secret ``ppsvm-entity-db`` under the variable's own name.
``first-start/`` (an entity)
    The site overlay plus the one-off Job that creates the entity's empty release log: applied once, for the
    first rollout (the Deployment never creates a log, so a lost one stops the entity).

The directory is regenerated, never edited: run the command again after a change to the bundle. A site's
own changes (a storage class, a Service type, a pull secret) belong in an overlay of its own that lists
``site/`` under ``resources:``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from typing import Any

from ppsvm.config import federation_toml, load_entity_config, load_federation, toml_document
from ppsvm.data.partition import FEDERATION_FILE, ID_KEY_FILE
from ppsvm.data.sources import DataSource
from ppsvm.errors import ConfigError
from ppsvm.files import PRIVATE_MODE, PUBLIC_MODE, write_all
from ppsvm.onboarding import PARTY_FILE
from ppsvm.wire.certs import CA_FILE, CLIENT, COORDINATOR, ENTITY, Role

OVERLAY_DIR = "kubernetes"  # BUNDLE/kubernetes/ unless told otherwise
SITE, FIRST_START, BASE = "site", "first-start", "base"
README = "README.md"
DEFAULT_IMAGE = "ppsvm:local"  # what `docker build -t ppsvm:local .` makes from the project's Dockerfile
# The site's own Secret holding a SQL source's URL, one key per `url_env` variable (its name).
DB_SECRET = "ppsvm-entity-db"
DATA_CLAIM = "ppsvm-entity-data"
# Where the base's pods see things (ppsvm/kubernetes/*/: tests/unit/test_kustomize_overlay.py renders the base and
# checks that the config this module writes names exactly these places).
ENTITY_MOUNT = PurePosixPath("/ppsvm/entity")
RELEASES_MOUNT = PurePosixPath("/var/lib/ppsvm/releases")
DATA_MOUNT = PurePosixPath("/data")
ENTITY_PORT = 50051  # the container's and, unless the plan says otherwise, the Service's
CONFIG_NAME = {ENTITY: "entity.toml", COORDINATOR: FEDERATION_FILE}
SECRET_NAME = {ENTITY: "ppsvm-entity", COORDINATOR: "ppsvm-coordinator"}
ENTITY_WORKLOAD = "ppsvm-entity"  # the base's Deployment and Service
# The Secret's fixed file names: the base's probes and args name them.
ENTITY_CERT, ENTITY_KEY, COLUMN_BLOCK_SECRET = "entity.pem", "entity.key", "column-block.secret"
COORDINATOR_CERT, COORDINATOR_KEY = "coordinator.pem", "coordinator.key"
_MARKER = "# Written by `ppsvm org kustomize`"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PUBLIC_FILES = {CA_FILE, ENTITY_CERT, COORDINATOR_CERT}


def pair_secret_name(peer: str) -> str:
    """The Secret's name for the secret an entity shares with row-block peer ``peer``."""
    return f"pair-{peer}.secret"


@dataclass(frozen=True)
class Overlay:
    """What :func:`write_overlay` wrote, and what the site provides before applying it.

    Attributes
    ----------
    directory : Path
        The overlay's directory (``site/``, ``base/`` and, for an entity, ``first-start/`` inside).
    role, name, namespace : str
        The party's role (entity or coordinator), its federation id, and the namespace of its objects.
    data_files : tuple of (str, Path)
        Each records file's name on the claim ``ppsvm-entity-data`` (read at ``/data/NAME``) and the path the
        bundle's config names; empty for a SQL source.
    environment : tuple of str
        The variables the entity reads from the site's Secret ``ppsvm-entity-db`` (a SQL source's ``url_env``).
    """

    directory: Path
    role: Role
    name: str
    namespace: str
    data_files: tuple[tuple[str, Path], ...] = ()
    environment: tuple[str, ...] = ()

    @property
    def party(self) -> str:
        """The party for messages: ``entity r0c0``, ``coordinator`` (or ``coordinator NAME``)."""
        return self.role if self.name == self.role else f"{self.role} {self.name}"

    def steps(self, where: str | None = None) -> list[str]:
        """The site's steps in order, as commands (``where``: how to name the directory; default its path)."""
        at = self.directory.as_posix() if where is None else where
        steps = [f"kubectl create namespace {self.namespace}   # once, if it does not exist"]
        if self.environment:
            literals = " ".join(f"--from-literal={variable}='<database URL>'" for variable in self.environment)
            steps.append(f"kubectl -n {self.namespace} create secret generic {DB_SECRET} {literals}")
        for claimed, host in self.data_files:
            steps.append(
                f"create the claim {DATA_CLAIM} in {self.namespace} over your storage and put the records file "
                f"{claimed} at its root (the bundle's config names {host}; the entity reads {DATA_MOUNT / claimed})"
            )
        if self.role == ENTITY:
            steps.append(f"kubectl apply -k {at}/{FIRST_START}   # the first rollout only: creates the release log")
        steps.append(f"kubectl apply -k {at}/{SITE}" + ("   # every later rollout" if self.role == ENTITY else ""))
        return steps


def write_overlay(
    bundle: Path,
    out: Path | None = None,
    *,
    image: str = DEFAULT_IMAGE,
    namespace: str | None = None,
    bases: Path | None = None,
) -> Overlay:
    """Write the Kubernetes overlay of the entity or coordinator whose bundle is ``bundle``.

    Parameters
    ----------
    bundle : Path
        The party's directory after ``ppsvm org join`` (its config as the organisation left it: a ``[data]``
        table written in place of ``data = "..."`` is carried over).
    out : Path or None
        Where to write; default ``bundle/kubernetes``. A directory that exists must be one this function
        wrote: it is replaced as a whole.
    image : str
        The ppsvm image, ``NAME[:TAG]`` or ``NAME@DIGEST`` (default ``ppsvm:local``).
    namespace : str or None
        The namespace of every object; default ``ppsvm-NAME``.
    bases : Path or None
        A directory holding the bases (``entity/``, ``coordinator/``) to name by a relative path instead of
        copying the package's into ``out/base`` (the repository's example overlays name ``ppsvm/kubernetes``).

    Returns
    -------
    Overlay

    Raises
    ------
    ConfigError
        Naming the file at fault: the bundle is not an entity's or coordinator's, its config does not load or
        names its secrets by environment variables, or ``out`` holds something else.
    """
    name, role = _party(bundle)
    namespace = _namespace(namespace if namespace is not None else f"ppsvm-{name.replace('.', '-')}", namespace)
    images = _image(image)
    out = bundle / OVERLAY_DIR if out is None else out
    _check_replaceable(out)
    if role == ENTITY:
        site = _entity_site(bundle / f"{name}.toml")
    else:
        site = _coordinator_site(bundle / FEDERATION_FILE)
    overlay = Overlay(out, role, name, namespace, site.data_files, site.environment)
    base = Path(os.path.relpath(bases / role, out / SITE)).as_posix() if bases is not None else f"../{BASE}/{role}"
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write_all(stage / SITE, {**site.files, **_site_kustomization(overlay, site, base, images)})
        if role == ENTITY:
            # first-start/ sits beside site/: the same relative path reaches the base.
            first_start = _first_start_kustomization(overlay, base, images)
            write_all(stage / FIRST_START, {"kustomization.yaml": (first_start, PUBLIC_MODE)})
        if bases is None:
            _copy_tree(resources.files("ppsvm") / OVERLAY_DIR / role, stage / BASE / role)
        write_all(stage, {README: (_readme(overlay), PUBLIC_MODE)})
        _replace(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return overlay


# --- an entity -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Site:
    """The site overlay's files, and what its kustomization adds for them."""

    files: dict[str, tuple[str | bytes, int]]
    data_files: tuple[tuple[str, Path], ...] = ()
    environment: tuple[str, ...] = ()
    service_port: int | None = None  # the plan's port, where it is not the container's


def _entity_site(path: Path) -> _Site:
    """The Secret's files of the entity configured by ``path``, its config rewritten with the pod's paths."""
    config = load_entity_config(path)  # every check the entity makes, naming the file and key at fault
    document = _read_toml(path)
    entity: dict[str, Any] = document["entity"]
    where = f"{path} [entity]"
    for env_key, file_key in (("secret_env", "secret_file"), ("id_key_env", "id_key_file")):
        if env_key in entity:
            raise ConfigError(
                f"{where}: {env_key!r}: the overlay carries the entity's secrets as files of its Secret; "
                f"name the file with {file_key!r} instead"
            )
    if config.tls is None or config.secret_file is None or config.release_log is None:
        raise ConfigError(f"{path}: no [tls] table: the pod's probes and its coordinator talk mutual TLS only")
    secrets = {
        CA_FILE: config.tls.ca,
        ENTITY_CERT: config.tls.cert,
        ENTITY_KEY: config.tls.key,
        COLUMN_BLOCK_SECRET: config.secret_file,
    }
    document["tls"].update(ca=CA_FILE, cert=ENTITY_CERT, key=ENTITY_KEY)
    entity["secret_file"] = COLUMN_BLOCK_SECRET
    if config.id_key_file is not None:
        secrets[ID_KEY_FILE] = config.id_key_file
        entity["id_key_file"] = ID_KEY_FILE
    if config.pair_secret_files:
        entity["pair_secrets"] = {peer: pair_secret_name(peer) for peer, _ in config.pair_secret_files}
        secrets |= {pair_secret_name(peer): file for peer, file in config.pair_secret_files}
    # The container listens on the base's port; the plan's port (the address the coordinator dials) is the
    # Service's.
    planned = _listen_port(str(entity.get("listen", "")))
    entity["listen"] = f"0.0.0.0:{ENTITY_PORT}"
    document.setdefault("privacy", {})["release_log"] = str(RELEASES_MOUNT / config.release_log.name)

    on_claim: dict[str, Path] = {}
    environment: list[str] = []
    if "data" in entity:
        entity["data"] = _claimed(config.data, on_claim, where)
    else:
        _source(document["data"], config.data, on_claim, environment, f"{path} [data]")
    if on_claim:
        # The data volume is read only: a cell cache could not be written beside the records.
        entity["data_cache"] = False
    if config.scoring is not None:
        _source(document["scoring"], config.scoring, on_claim, environment, f"{path} [scoring]")
    text = toml_document(
        f"ppsvm entity {config.id} in Kubernetes: {path.name} with the pod's paths, written by `ppsvm org kustomize` "
        "(edit the bundle's config and run it again).",
        _toml_tables(document, path),
    )
    files: dict[str, tuple[str | bytes, int]] = {CONFIG_NAME[ENTITY]: (text, PRIVATE_MODE)}
    files |= {name: (_read_bytes(file), _mode(name)) for name, file in secrets.items()}
    return _Site(
        files,
        tuple(sorted(on_claim.items())),
        tuple(dict.fromkeys(environment)),
        planned if planned not in (None, 0, ENTITY_PORT) else None,
    )


def _source(
    table: dict[str, Any], source: DataSource, on_claim: dict[str, Path], environment: list[str], where: str
) -> None:
    """Point a ``[data]`` or ``[scoring]`` table at the pod: its file under /data, or its URL variable noted."""
    if source.kind != "sql":
        table["path"] = _claimed(source, on_claim, where)
    elif source.url_env is not None:
        if not _VARIABLE.fullmatch(source.url_env):
            raise ConfigError(
                f"{where}: url_env {source.url_env!r} must be an environment variable's name (letters, digits, _): "
                f"it is also its key in the Secret {DB_SECRET}"
            )
        environment.append(source.url_env)


def _claimed(source: DataSource, on_claim: dict[str, Path], where: str) -> str:
    """The pod's path of a file source, on the data claim under the file's own name."""
    assert source.path is not None
    name = source.path.name
    if on_claim.setdefault(name, source.path) != source.path:
        raise ConfigError(
            f"{where}: {source.path} and {on_claim[name]} would both be {DATA_MOUNT / name} on the data claim; "
            "give them different names"
        )
    return str(DATA_MOUNT / name)


def _listen_port(listen: str) -> int | None:
    try:
        return int(listen.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


# --- the coordinator -------------------------------------------------------------------------------------------


def _coordinator_site(path: Path) -> _Site:
    """The coordinator's Secret files: its federation file naming the Secret's TLS files, and those files."""
    federation = load_federation(path)
    if federation.tls is None:
        raise ConfigError(f"{path}: no [tls] table: the coordinator dials its entities over mutual TLS only")
    names = {"ca": CA_FILE, "cert": COORDINATOR_CERT, "key": COORDINATOR_KEY}
    files: dict[str, tuple[str | bytes, int]] = {
        CONFIG_NAME[COORDINATOR]: (federation_toml(federation.task, federation.entities, names), PUBLIC_MODE)
    }
    for name, file in zip(names.values(), (federation.tls.ca, federation.tls.cert, federation.tls.key), strict=True):
        files[name] = (_read_bytes(file), _mode(name))
    return _Site(files)


# --- the kustomizations ----------------------------------------------------------------------------------------


def _site_kustomization(
    overlay: Overlay, site: _Site, base: str, images: Mapping[str, str]
) -> dict[str, tuple[str | bytes, int]]:
    """The site overlay's ``kustomization.yaml`` and its patch files."""
    lines = [
        f"{_MARKER} for ppsvm {overlay.party} from its bundle: do not edit, run the command again.",
        "# A site's own changes go in an overlay of its own that lists this directory under `resources:`.",
        f"namespace: {overlay.namespace}",
        "",
        "resources:",
        f"- {base}",
    ]
    if overlay.data_files:
        on_claim = ", ".join(name for name, _ in overlay.data_files)
        lines += [
            "",
            f"# Records from a file: the claim {DATA_CLAIM}, read only at {DATA_MOUNT} ({on_claim} at its root).",
        ]
        lines += ["components:", f"- {base}/data"]
    lines += ["", f"# Fixed file names: the base's args and probes, and {CONFIG_NAME[overlay.role]}, name them."]
    lines += ["secretGenerator:", f"- name: {SECRET_NAME[overlay.role]}", "  type: Opaque", "  files:"]
    lines += [f"  - {name}" for name in site.files]
    patches: dict[str, str] = {}
    if overlay.environment:
        lines += ["", f"# A SQL source's URL: from the site's Secret {DB_SECRET}, one key per variable."]
        patches["database-env.yaml"] = _database_env(overlay.environment)
    if site.service_port is not None:
        lines += ["", f"# The plan's address has port {site.service_port}: the Service answers there."]
        patches["service-port.yaml"] = _service_port(site.service_port)
    if patches:
        lines.append("patches:")
        for filename in patches:
            lines.append(f"- path: {filename}")
            if filename == "service-port.yaml":  # a JSON patch names its target
                lines += ["  target:", "    kind: Service", f"    name: {ENTITY_WORKLOAD}"]
    lines += ["", *_images_entry(images)]
    files: dict[str, tuple[str | bytes, int]] = {"kustomization.yaml": ("\n".join(lines) + "\n", PUBLIC_MODE)}
    return files | {filename: (text, PUBLIC_MODE) for filename, text in patches.items()}


def _images_entry(images: Mapping[str, str]) -> list[str]:
    """The ``images:`` entry pointing the bases' image ``ppsvm`` at the site's."""
    return ["images:", "- name: ppsvm", *(f"  {key}: {json.dumps(value)}" for key, value in images.items())]


def _first_start_kustomization(overlay: Overlay, base: str, images: Mapping[str, str]) -> str:
    return (
        f"{_MARKER} for ppsvm entity {overlay.name}: the first rollout only.\n"
        "# The site overlay and the Job that creates the entity's empty release log on its claim (it refuses to\n"
        "# replace one). Apply it once; every later rollout applies ../site alone, so that a lost log stops the\n"
        "# entity instead of being replaced by an empty one.\n"
        f"namespace: {overlay.namespace}\n"
        "\n"
        "resources:\n"
        f"- ../{SITE}\n"
        f"- {base}/first-start\n"
        "\n"
        "# The Job's image, the site's: the site's images: entry reaches only the site's own resources.\n"
        + "\n".join(_images_entry(images))
        + "\n"
    )


def _readme(overlay: Overlay) -> str:
    steps = "\n".join(
        f"{index}. `{step}`" if step.startswith("kubectl") else f"{index}. {step[0].upper()}{step[1:]}."
        for index, step in enumerate(overlay.steps("."), start=1)
    )
    return (
        f"{_MARKER} for ppsvm {overlay.party}: regenerated, never edited.\n"
        "\n"
        f"`site/` is the overlay (namespace `{overlay.namespace}`); its Secret holds the party's private key"
        + (" and secrets" if overlay.role == ENTITY else "")
        + ": keep this directory as private as the bundle. From this directory:\n"
        "\n"
        f"{steps}\n"
        "\n"
        "See docs/how-to/kubernetes.md.\n"
    )


def _database_env(variables: Sequence[str]) -> str:
    env = "".join(
        f"            - name: {variable}\n"
        "              valueFrom:\n"
        "                secretKeyRef:\n"
        f"                  name: {DB_SECRET}\n"
        f"                  key: {variable}\n"
        for variable in variables
    )
    return (
        f"# The entity's database URL, from the Secret {DB_SECRET} the site creates in this namespace.\n"
        "apiVersion: apps/v1\n"
        "kind: Deployment\n"
        "metadata:\n"
        f"  name: {ENTITY_WORKLOAD}\n"
        "spec:\n"
        "  template:\n"
        "    spec:\n"
        "      containers:\n"
        "      - name: entity\n"
        "        env:\n" + env
    )


def _service_port(port: int) -> str:
    # A JSON patch: a strategic merge would add a second port (Service ports merge by number, not by name).
    return (
        "# The port of the entity's address in the federation plan, where the coordinator dials it.\n"
        "- op: replace\n"
        "  path: /spec/ports/0/port\n"
        f"  value: {port}\n"
    )


# --- small helpers ---------------------------------------------------------------------------------------------


def _party(bundle: Path) -> tuple[str, Role]:
    """(name, role) of the party whose bundle this is: an entity or the coordinator."""
    path = bundle / PARTY_FILE
    try:
        party = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; is {bundle} a bundle made by `ppsvm org init`?") from exc
    role = party.get("role") if isinstance(party, dict) else None
    if role == CLIENT:
        raise ConfigError(
            f"{path}: {party['name']} is a prediction client: it serves nothing, there is nothing to deploy"
        )
    if role not in (ENTITY, COORDINATOR) or not isinstance(party.get("name"), str):
        raise ConfigError(f"{path}: not a party made by `ppsvm org init`")
    return party["name"], role


def _namespace(namespace: str, given: str | None) -> str:
    if not _DNS_LABEL.fullmatch(namespace):
        raise ConfigError(
            f"namespace {namespace!r} is not a Kubernetes namespace (lowercase letters, digits and '-', at most 63)"
            + ("; choose one with --namespace" if given is None else "")
        )
    return namespace


def _image(image: str) -> dict[str, str]:
    """The kustomize ``images:`` entry's fields for ``NAME[:TAG]`` or ``NAME@DIGEST``."""
    if not image or any(char.isspace() for char in image):
        raise ConfigError(f"image {image!r}: expected NAME[:TAG] or NAME@DIGEST, e.g. registry.example/ppsvm:0.1.0")
    if "@" in image:
        name, digest = image.split("@", 1)
        return {"newName": name, "digest": digest}
    name, colon, tag = image.rpartition(":")
    if colon and "/" not in tag:  # a colon after the last slash separates the tag (not a registry's port)
        return {"newName": name, "newTag": tag}
    return {"newName": image}


def _check_replaceable(out: Path) -> None:
    """Refuse to replace a directory this module did not write (a site's own overlay, a bundle)."""
    if not out.exists():
        return
    if out.is_dir() and not any(out.iterdir()):
        return
    try:
        ours = (out / README).read_text(encoding="utf-8").startswith(_MARKER)
    except OSError:
        ours = False
    if not ours:
        raise ConfigError(
            f"{out} exists and was not written by `ppsvm org kustomize`: choose another directory (--out)"
        )


def _replace(stage: Path, out: Path) -> None:
    """Put the staged directory at ``out``: the old overlay, if any, is removed only once the new one is there."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        os.replace(out, old / out.name)
    os.replace(stage, out)
    if old is not None:
        shutil.rmtree(old)


def _copy_tree(source: Traversable, target: Path) -> None:
    """Copy a directory of package data (the base), which may lie in a wheel or a zip."""
    files: dict[str, tuple[str | bytes, int]] = {}
    for item in source.iterdir():
        if item.is_dir():
            _copy_tree(item, target / item.name)
        elif item.name.endswith(".yaml"):
            files[item.name] = (item.read_bytes(), PUBLIC_MODE)
    write_all(target, files)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc


def _mode(name: str) -> int:
    return PUBLIC_MODE if name in _PUBLIC_FILES else PRIVATE_MODE


def _toml_tables(document: Mapping[str, Any], path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    """``document`` as the (header, table) pairs :func:`ppsvm.config.toml_document` writes: each table's plain
    values under ``[name]``, its tables of tables under ``[name.key]``, its arrays of tables as ``[[name.key]]``."""
    tables: list[tuple[str, Mapping[str, Any]]] = []

    def add(header: str, table: Mapping[str, Any]) -> None:
        plain = {k: v for k, v in table.items() if not _is_table(v) and not _is_array_of_tables(v)}
        if plain or not any(_is_table(v) or _is_array_of_tables(v) for v in table.values()):
            tables.append((f"[{header}]", plain))
        for key, value in table.items():
            if _is_table(value):
                add(f"{header}.{key}", value)
            elif _is_array_of_tables(value):
                for entry in value:
                    if any(_is_table(v) or _is_array_of_tables(v) for v in entry.values()):
                        raise ConfigError(f"{path} [[{header}.{key}]]: nested tables are not carried over")
                    tables.append((f"[[{header}.{key}]]", entry))

    for name, value in document.items():
        if isinstance(value, dict):  # at the top every table gets its header, a table of texts too
            add(name, value)
        elif _is_array_of_tables(value):
            tables += [(f"[[{name}]]", entry) for entry in value]
        else:
            raise ConfigError(f"{path}: {name!r} outside a table is not an entity config key")
    return tables


def _is_table(value: Any) -> bool:
    # A table of texts (pair_secrets, labels) stays inline; any other table gets a header of its own.
    return isinstance(value, dict) and not all(isinstance(v, str) for v in value.values())


def _is_array_of_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
