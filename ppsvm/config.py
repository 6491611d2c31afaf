"""Configuration files (TOML, read with the standard library's tomllib).

- An **entity config** is private to one data owner: where its records come from
  (a plain cell CSV as ``[entity] data``, or a ``[data]`` table naming a CSV, Parquet
  or SQL source) and their ``[schema]``, where its column-group secret comes from,
  where it listens, and the loudly named non-private override of the mbar guard.
- A **federation file** is the coordinator's view: entity ids, addresses and
  grid positions, task settings, and the coordinator's own TLS material. It
  never holds data paths or column-group secrets.

Both may carry a ``[tls]`` table (``ca``, ``cert``, ``key``: PEM files made by
``ppsvm certs``); an entity's also names the one ``coordinator`` identity it
accepts calls from.

Relative paths in an entity config are relative to the config file.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ppsvm.core.randomness import MIN_SECRET_BYTES
from ppsvm.data.schema import Schema, parse_schema
from ppsvm.data.sources import DataSource, cell_file, parse_data_table
from ppsvm.errors import ConfigError
from ppsvm.wire.certs import DEFAULT_COORDINATOR_NAME, check_party_name
from ppsvm.wire.tls import TlsFiles

# Settings a federation file's [task] table may hold; command-line flags override them.
TASK_KEYS = (
    "task", "kernel", "mbar", "nu", "mu", "class_weight", "engine", "dask_scheduler", "dask_workers", "dask_tls",
)  # fmt: skip

# The entity-side setting that disables privacy rule 3 (mbar < n_j); for benchmarks only.
NON_PRIVATE_OVERRIDE_KEY = "non_private_allow_mbar_at_least_features"
# The entity-side setting that lets it release SVM weights without DP noise; for benchmarks only.
NON_PRIVATE_WEIGHTS_KEY = "non_private_allow_unnoised_weights"
# The entity-side setting that serves DP mechanisms whose noise is drawn in floating point.
CONTINUOUS_NOISE_KEY = "allow_continuous_noise_mechanisms"
# The entity-side consent to release its kernel block on its own (not combined with its row block's by
# secure aggregation), where its measured reconstruction risk exceeds SINGLE_BLOCK_GAIN_KEY (privacy rule 8).
SINGLE_BLOCK_CONSENT_KEY = "consent_single_block_release"
# The largest measured gain of a colluding column-block peer (share of values recovered within 0.05 minus the
# best guess without any release) an entity accepts for a single-block release without that consent.
SINGLE_BLOCK_GAIN_KEY = "single_block_max_gain"
DEFAULT_SINGLE_BLOCK_MAX_GAIN = 0.05
# Which protocol an entity serves for its records (ppsvm.entity.guard enforces it per RPC).
ENTITY_MODES = ("random-kernel", "dp", "mixed")
DEFAULT_MAX_BASELINE_RELEASES = 8
# Releases one caller may make a minute (ppsvm.entity.guard's token bucket: a minute's worth at once, then this
# rate), each a log line of about 250 bytes: at most 2.4 GB of log a day at this default, against 12 GB measured
# without it (issue 27). Measured per entity on 2 loaded cores: a training makes a few (one per part, or per 20,000
# records when entities list them differently), scoring by id about 10 a second (1,000 for a million records), the
# prediction service one per batch, about 70 a second for a client asking record by record.
DEFAULT_MAX_RELEASES_PER_MINUTE = 6000
# The release log's file system must keep this much free for a release to be recorded (and answered).
DEFAULT_MIN_FREE_DISK_MB = 64


@dataclass(frozen=True)
class EntityConfig:
    """One data owner's settings (private to it).

    Attributes
    ----------
    id : str
    listen : str
        host:port to serve on; port 0 picks a free port.
    data : DataSource
        Where its records come from: ``[entity] data`` (a cell CSV with columns id, [label],
        [split], features) or the ``[data]`` table. A file source keeps its encoded cell beside it
        (``<file>.ppsvm-cache``) unless ``[entity] data_cache = false``.
    column_block : int
    secret_file : Path | None
    secret_env : str | None
        Exactly one of secret_file / secret_env names the column-group secret.
    non_private_override : bool
        Allow mbar >= n_j (breaks privacy rule 3); every output then says the run was not private.
    source : Path
        The config file this came from (for error messages).
    tls : TlsFiles | None
        The ``[tls]`` table; None when absent (plaintext then needs --insecure).
    coordinator_identity : str
        The certificate name of the only party allowed to call this entity.
    column_block_members : tuple of str
        Ids of every entity of its column block (itself included): the scaling
        of a kernel request must combine the signed ranges of exactly these.
    epsilon_total : float | None
        ``[privacy] epsilon_total``: the differential-privacy budget for its data;
        None refuses every DP release.
    release_log : Path
        ``[privacy] release_log``: the append-only log of every release, DP budget included
        (default ``<id>.releases.jsonl`` next to the config).
    mode : {"random-kernel", "dp", "mixed"}
        ``[privacy] mode``: which protocol it serves for its records (default "dp" when
        epsilon_total is set, else "random-kernel"); "mixed" serves both and voids the DP guarantee.
    max_baseline_releases : int
        ``[privacy] max_baseline_releases``: how many times it answers LocalBaseline in its life.
    max_releases_per_minute : int
        ``[privacy] max_releases_per_minute``: releases one caller may make a minute (one minute's worth at
        once, then that rate); beyond it a call is refused with when to retry, before anything is written. 0: no limit.
    min_free_disk_mb : int
        ``[privacy] min_free_disk_mb``: below this much free space on the release log's file system the entity
        records (hence answers) no release and its health check says NOT_SERVING. 0: no floor.
    non_private_weights : bool
        Allow releasing SVM weights without noise (NOT PRIVATE; benchmarks only).
    continuous_noise : bool
        ``[privacy] allow_continuous_noise_mechanisms``: serve the output-gamma and objective
        mechanisms, whose floating-point noise is not hardened against the floating-point attack.
    schema : Schema or None
        ``[schema]``: the declared features; None for a cell CSV (every column a number).
    scoring : DataSource | None
        ``[scoring]``: new records to score (never trained on), read with the same schema; a table or
        file that may grow while the entity runs.
    id_key_file : Path | None
    id_key_env : str | None
        At most one names the federation's record-id key: then its record ids leave it only as
        keyed pseudonyms (:func:`ppsvm.core.randomness.record_pseudonyms`). Neither: ids in clear.
    pair_secret_files : tuple of (str, Path)
        ``[entity] pair_secrets``: for each other entity of its row block, the file holding the secret the
        two share, from which the masks of secure aggregation derive (:mod:`ppsvm.core.aggregation`).
        Empty for an entity alone in its row block: its blocks can only leave on their own.
    single_block_consent : bool
        ``[privacy] consent_single_block_release``: release a block on its own even where its measured
        reconstruction risk exceeds ``single_block_max_gain``.
    single_block_max_gain : float
        ``[privacy] single_block_max_gain``.
    label_names : tuple of str or None
        The label values models predict for -1 and +1, (negative, positive): a ``[data]`` table's ``labels``, or
        for a cell CSV (labels -1/+1) ``[entity] label_names = [negative, positive]``; with three or more names,
        each class code's (labels 0 .. k-1, one per class); None: the label values themselves.
    """

    id: str
    listen: str
    data: DataSource
    column_block: int
    secret_file: Path | None
    secret_env: str | None
    non_private_override: bool
    source: Path
    tls: TlsFiles | None = None
    coordinator_identity: str = DEFAULT_COORDINATOR_NAME
    column_block_members: tuple[str, ...] = ()
    epsilon_total: float | None = None
    release_log: Path | None = None
    mode: str = "random-kernel"
    max_baseline_releases: int = DEFAULT_MAX_BASELINE_RELEASES
    max_releases_per_minute: int = DEFAULT_MAX_RELEASES_PER_MINUTE
    min_free_disk_mb: int = DEFAULT_MIN_FREE_DISK_MB
    non_private_weights: bool = False
    continuous_noise: bool = False
    schema: Schema | None = None
    id_key_file: Path | None = None
    id_key_env: str | None = None
    scoring: DataSource | None = None
    pair_secret_files: tuple[tuple[str, Path], ...] = ()
    single_block_consent: bool = False
    single_block_max_gain: float = DEFAULT_SINGLE_BLOCK_MAX_GAIN
    label_names: tuple[str, ...] | None = None

    def read_pair_secrets(self) -> dict[str, bytes]:
        """Row-block peer id -> the secret this entity shares with it (hex text in a file, decoded)."""
        return {peer: self._read_key(file, None, f"pair_secrets.{peer}") for peer, file in self.pair_secret_files}

    def read_secret(self) -> bytes:
        """The column-group secret: hex text from the file or environment variable, decoded."""
        return self._read_key(self.secret_file, self.secret_env, "secret")

    def read_id_key(self) -> bytes | None:
        """The record-id key, or None when the entity's ids travel in clear."""
        if self.id_key_file is None and self.id_key_env is None:
            return None
        return self._read_key(self.id_key_file, self.id_key_env, "id_key")

    def _read_key(self, file: Path | None, env: str | None, key: str) -> bytes:
        if file is not None:
            try:
                text = file.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"{self.source}: cannot read {key}_file {file}: {exc.strerror}") from exc
            origin = str(file)
        else:
            assert env is not None
            text = os.environ.get(env, "")
            if not text:
                raise ConfigError(f"{self.source}: environment variable {env} ({key}_env) is not set")
            origin = f"${env}"
        try:
            secret = bytes.fromhex(text.strip())
        except ValueError as exc:
            raise ConfigError(f"{self.source}: the {key.replace('_', ' ')} in {origin} is not hex text") from exc
        if len(secret) < MIN_SECRET_BYTES:
            raise ConfigError(
                f"{self.source}: the {key.replace('_', ' ')} in {origin} has {len(secret)} bytes; "
                f"at least {MIN_SECRET_BYTES} are needed"
            )
        return secret


@dataclass(frozen=True)
class FederationEntity:
    """How the coordinator reaches one entity and where its cell sits in the grid."""

    id: str
    address: str
    row_block: int
    column_block: int


@dataclass(frozen=True)
class Federation:
    """The coordinator's view: entities and task settings from the federation file.

    Attributes
    ----------
    entities : tuple of FederationEntity
    task : dict
        The ``[task]`` table as written (keys: task, kernel, mbar, nu, mu, ...);
        command-line flags override it.
    source : Path
    tls : TlsFiles | None
        The coordinator's TLS material (``[tls]``); None when absent.
    insecure : bool
        Plaintext was asked for explicitly (``--insecure``); never read from the file.
    """

    entities: tuple[FederationEntity, ...]
    task: dict[str, Any]
    source: Path
    tls: TlsFiles | None = None
    insecure: bool = False

    @property
    def row_blocks(self) -> list[int]:
        return sorted({e.row_block for e in self.entities})

    @property
    def column_blocks(self) -> list[int]:
        return sorted({e.column_block for e in self.entities})

    def cell(self, row_block: int, column_block: int) -> FederationEntity:
        for entity in self.entities:
            if entity.row_block == row_block and entity.column_block == column_block:
                return entity
        raise ConfigError(f"{self.source}: no entity holds row block {row_block}, column block {column_block}")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc


def _get(table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = ...) -> Any:
    if key not in table:
        if default is ...:
            raise ConfigError(f"{where}: missing required key {key!r}")
        return default
    value = table[key]
    # bool is an int subclass: do not accept true where a number is meant.
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        raise ConfigError(f"{where}: {key!r} must be {_kind_name(kind)}, got {value!r}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(
        {"str": "a string", "int": "an integer", "bool": "true or false", "list": "a list", "dict": "a table"}.get(
            k.__name__, k.__name__
        )
        for k in _as_tuple(kind)
    )


def load_entity_config(path: str | Path) -> EntityConfig:
    """Read and validate an entity config file.

    Raises
    ------
    ConfigError
        Naming the file and key at fault.
    """
    path = Path(path)
    document = _read_toml(path)
    table = document.get("entity")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: missing [entity] table")
    where = f"{path} [entity]"
    base = path.parent
    secret_file = _get(table, "secret_file", str, where, None)
    secret_env = _get(table, "secret_env", str, where, None)
    if (secret_file is None) == (secret_env is None):
        raise ConfigError(f"{where}: set exactly one of 'secret_file' or 'secret_env' (the column-group secret)")
    privacy = _table(document, "privacy", path)
    allowed = (
        NON_PRIVATE_OVERRIDE_KEY,
        NON_PRIVATE_WEIGHTS_KEY,
        CONTINUOUS_NOISE_KEY,
        "epsilon_total",
        "release_log",
        "mode",
        "max_baseline_releases",
        "max_releases_per_minute",
        "min_free_disk_mb",
        SINGLE_BLOCK_CONSENT_KEY,
        SINGLE_BLOCK_GAIN_KEY,
    )
    unknown = sorted(set(privacy) - set(allowed))
    if unknown:  # a misspelt privacy setting must not silently fall back to its default
        raise ConfigError(f"{path} [privacy]: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    column_block = _get(table, "column_block", int, where)
    if column_block < 0:
        raise ConfigError(f"{where}: 'column_block' must be >= 0, got {column_block}")
    entity_id = check_party_name(_get(table, "id", str, where))
    epsilon_total = _epsilon_total(privacy, path)
    members = _get(table, "column_block_members", list, where, [entity_id])
    if not all(isinstance(m, str) for m in members) or entity_id not in members or len(set(members)) != len(members):
        raise ConfigError(
            f"{where}: 'column_block_members' must list the ids of every entity of its column block once, "
            f"{entity_id!r} included; got {members!r}"
        )
    data, schema = _data_and_schema(document, table, path)
    id_key_file = _get(table, "id_key_file", str, where, None)
    id_key_env = _get(table, "id_key_env", str, where, None)
    if id_key_file is not None and id_key_env is not None:
        raise ConfigError(f"{where}: set at most one of 'id_key_file' or 'id_key_env' (the record-id key)")
    return EntityConfig(
        id=entity_id,
        listen=_get(table, "listen", str, where, "127.0.0.1:0"),
        data=data,
        schema=schema,
        id_key_file=base / id_key_file if id_key_file is not None else None,
        id_key_env=id_key_env,
        scoring=_scoring(document, path),
        column_block=column_block,
        secret_file=base / secret_file if secret_file is not None else None,
        secret_env=secret_env,
        non_private_override=_get(privacy, NON_PRIVATE_OVERRIDE_KEY, bool, f"{path} [privacy]", False),
        source=path,
        tls=_tls_table(document, path, ("coordinator",)),
        coordinator_identity=check_party_name(
            _get(_table(document, "tls", path), "coordinator", str, f"{path} [tls]", DEFAULT_COORDINATOR_NAME)
        ),
        column_block_members=tuple(members),
        epsilon_total=epsilon_total,
        release_log=base / _get(privacy, "release_log", str, f"{path} [privacy]", release_log_name(entity_id)),
        mode=_mode(privacy, epsilon_total, path),
        max_baseline_releases=_max_baselines(privacy, path),
        max_releases_per_minute=_count_at_least_zero(
            privacy, "max_releases_per_minute", DEFAULT_MAX_RELEASES_PER_MINUTE, path
        ),
        min_free_disk_mb=_count_at_least_zero(privacy, "min_free_disk_mb", DEFAULT_MIN_FREE_DISK_MB, path),
        non_private_weights=_get(privacy, NON_PRIVATE_WEIGHTS_KEY, bool, f"{path} [privacy]", False),
        continuous_noise=_get(privacy, CONTINUOUS_NOISE_KEY, bool, f"{path} [privacy]", False),
        pair_secret_files=_pair_secrets(table, entity_id, where, base),
        single_block_consent=_get(privacy, SINGLE_BLOCK_CONSENT_KEY, bool, f"{path} [privacy]", False),
        single_block_max_gain=_single_block_gain(privacy, path),
        label_names=_label_names(table, data, where),
    )


def _label_names(table: dict[str, Any], data: DataSource, where: str) -> tuple[str, ...] | None:
    """How the models should name the labels: (negative, positive) from ``[data] labels`` or ``[entity]
    label_names``, or with three or more ``label_names`` each class code's name."""
    names = _get(table, "label_names", list, where, None)
    declared = data.labels if data.labels is None or len(data.labels) > 2 else (data.labels[1], data.labels[0])
    if names is None:
        return declared
    if len(names) < 2 or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise ConfigError(
            f"{where}: label_names must be two different texts [negative, positive], or three or more (the names of "
            f"class codes 0, 1, 2, ...), got {names!r}"
        )
    if declared is not None and tuple(names) != declared:
        raise ConfigError(
            f"{where}: label_names {names!r} differ from the [data] table's labels ("
            + (f"negative {declared[0]!r}, positive {declared[1]!r}" if len(declared) == 2 else repr(list(declared)))
            + "); keep one of them"
        )
    return tuple(names)


def _pair_secrets(table: dict[str, Any], entity_id: str, where: str, base: Path) -> tuple[tuple[str, Path], ...]:
    pairs = _get(table, "pair_secrets", dict, where, {})
    for peer, file in pairs.items():
        if peer == entity_id or not isinstance(file, str):
            raise ConfigError(
                f"{where}: 'pair_secrets' maps each other entity of its row block to a secret file, got {peer!r} = "
                f"{file!r}"
            )
        check_party_name(peer)
    return tuple((peer, base / file) for peer, file in sorted(pairs.items()))


def _single_block_gain(privacy: dict[str, Any], path: Path) -> float:
    value = _get(privacy, SINGLE_BLOCK_GAIN_KEY, (int, float), f"{path} [privacy]", DEFAULT_SINGLE_BLOCK_MAX_GAIN)
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise ConfigError(f"{path} [privacy]: {SINGLE_BLOCK_GAIN_KEY!r} must be a number in [0, 1], got {value!r}")
    return float(value)


def _data_and_schema(document: dict[str, Any], table: dict[str, Any], path: Path) -> tuple[DataSource, Schema | None]:
    """``[entity] data`` (a cell CSV) or the ``[data]`` table, and the ``[schema]`` table."""
    where = f"{path} [entity]"
    if ("data" in table) == ("data" in document):
        raise ConfigError(
            f"{where}: set exactly one of 'data' (a cell CSV) or a [data] table (a CSV, Parquet or SQL source); "
            "missing required key 'data'"
            if "data" not in table
            else f"{where}: set exactly one of 'data' (a cell CSV) or a [data] table, not both"
        )
    if "data" in table:
        source = cell_file(path.parent / _get(table, "data", str, where))
    else:
        source = parse_data_table(_table(document, "data", path), f"{path} [data]", path.parent)
    schema = parse_schema(document["schema"], str(path)) if "schema" in document else None
    if schema is None and not source.cell_format:
        raise ConfigError(f"{path}: a {source.kind} source needs a [schema] declaring its features")
    # The encoded cell is kept beside a data file (not a database's) unless the owner wants no second copy.
    if source.kind != "sql" and _get(table, "data_cache", bool, where, True):
        source = replace(source, cache=True)
    return source, schema


def _scoring(document: dict[str, Any], path: Path) -> DataSource | None:
    """The ``[scoring]`` table: a source like ``[data]``, without labels or a split."""
    if "scoring" not in document:
        return None
    source = parse_data_table(_table(document, "scoring", path), f"{path} [scoring]", path.parent)
    if source.label_column is not None or source.split_column is not None or source.labels is not None:
        raise ConfigError(f"{path} [scoring]: a scoring source holds new records to score: no label, split or labels")
    if "schema" not in document:  # a [data] source has one already (_data_and_schema); a cell CSV may not
        raise ConfigError(f"{path} [scoring]: needs the [schema] its records are encoded with")
    return source


def release_log_name(entity_id: str) -> str:
    """The release log's default file name, next to the entity's config."""
    return f"{entity_id}.releases.jsonl"


def _mode(privacy: dict[str, Any], epsilon_total: float | None, path: Path) -> str:
    default = "dp" if epsilon_total is not None else "random-kernel"
    mode = _get(privacy, "mode", str, f"{path} [privacy]", default)
    if mode not in ENTITY_MODES:
        raise ConfigError(f"{path} [privacy]: 'mode' must be one of {', '.join(ENTITY_MODES)}, got {mode!r}")
    if mode != "random-kernel" and epsilon_total is None:
        raise ConfigError(f"{path} [privacy]: mode {mode!r} serves DP releases and needs 'epsilon_total'")
    return mode


def _max_baselines(privacy: dict[str, Any], path: Path) -> int:
    value = _get(privacy, "max_baseline_releases", int, f"{path} [privacy]", DEFAULT_MAX_BASELINE_RELEASES)
    if value < 0:
        raise ConfigError(f"{path} [privacy]: 'max_baseline_releases' must be >= 0, got {value}")
    return value


def _count_at_least_zero(privacy: dict[str, Any], key: str, default: int, path: Path) -> int:
    value = _get(privacy, key, int, f"{path} [privacy]", default)
    if value < 0:
        raise ConfigError(f"{path} [privacy]: {key!r} must be >= 0 (0: no limit), got {value}")
    return value


def _epsilon_total(privacy: dict[str, Any], path: Path) -> float | None:
    value = _get(privacy, "epsilon_total", (int, float), f"{path} [privacy]", None)
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{path} [privacy]: 'epsilon_total' must be a finite number >= 0, got {value!r}")
    return None if value is None else float(value)


def _table(document: dict[str, Any], name: str, path: Path) -> dict[str, Any]:
    table = document.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{name}] must be a table")
    return table


TLS_FILE_KEYS = ("ca", "cert", "key")


def _tls_table(document: dict[str, Any], path: Path, extra_keys: tuple[str, ...] = ()) -> TlsFiles | None:
    """The [tls] table's PEM paths (relative to the config file), or None when there is no table."""
    if "tls" not in document:
        return None
    table = _table(document, "tls", path)
    where = f"{path} [tls]"
    unknown = sorted(set(table) - set(TLS_FILE_KEYS) - set(extra_keys))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(TLS_FILE_KEYS + extra_keys)}"
        )
    ca, cert, key = (path.parent / _get(table, name, str, where) for name in TLS_FILE_KEYS)
    return TlsFiles(ca=ca, cert=cert, key=key, source=path)


FEDERATION_TABLES = ("task", "tls", "entity")
FEDERATION_ENTITY_KEYS = ("id", "address", "row_block", "column_block")
# What only an entity's own config may hold: the federation file is the coordinator's, and is shared.
_PRIVATE_KEYS = ("data", "secret", "secret_file", "secret_env", "secrets")


def _refuse_private_keys(table: dict[str, Any], where: str) -> None:
    for key in _PRIVATE_KEYS:
        if key in table:
            raise ConfigError(
                f"{where}: {key!r} does not belong in the federation file (keep it in the entity's own config)"
            )


def load_federation(path: str | Path) -> Federation:
    """Read and validate a federation file: unique ids and addresses, a complete r x s grid.

    Raises
    ------
    ConfigError
        Naming the file and the entity or key at fault.
    """
    path = Path(path)
    document = _read_toml(path)
    _refuse_private_keys(document, str(path))
    unknown = sorted(set(document) - set(FEDERATION_TABLES))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) or table(s) {', '.join(unknown)}; allowed: {', '.join(FEDERATION_TABLES)}"
        )
    entries = document.get("entity")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: no [[entity]] entries")
    entities = []
    for index, entry in enumerate(entries):
        where = f"{path} [[entity]] #{index + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(
                f"{where}: each entity must be a table ([[entity]] with id, address, row_block, column_block)"
            )
        entity = FederationEntity(
            id=check_party_name(_get(entry, "id", str, where)),
            address=_get(entry, "address", str, where),
            row_block=_get(entry, "row_block", int, where),
            column_block=_get(entry, "column_block", int, where),
        )
        if entity.row_block < 0 or entity.column_block < 0:
            raise ConfigError(f"{where}: row_block and column_block must be >= 0")
        _refuse_private_keys(entry, where)
        unknown = sorted(set(entry) - set(FEDERATION_ENTITY_KEYS))
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(FEDERATION_ENTITY_KEYS)}"
            )
        entities.append(entity)
    _check_unique(path, [e.id for e in entities], "entity id")
    _check_unique(path, [e.address for e in entities], "address")
    _check_unique(path, [(e.row_block, e.column_block) for e in entities], "grid cell (row_block, column_block)")
    rows = sorted({e.row_block for e in entities})
    cols = sorted({e.column_block for e in entities})
    if rows != list(range(len(rows))) or cols != list(range(len(cols))):
        raise ConfigError(f"{path}: row blocks {rows} and column blocks {cols} must each be numbered 0, 1, 2, ...")
    if len(entities) != len(rows) * len(cols):
        held = {(e.row_block, e.column_block) for e in entities}
        missing = [(i, j) for i in rows for j in cols if (i, j) not in held]
        raise ConfigError(
            f"{path}: the checkerboard is incomplete; no entity holds (row_block, column_block) {missing}"
        )
    task = _table(document, "task", path)
    unknown = sorted(set(task) - set(TASK_KEYS))
    if unknown:
        raise ConfigError(f"{path} [task]: unknown setting(s) {', '.join(unknown)}; allowed: {', '.join(TASK_KEYS)}")
    if "dask_tls" in task:  # a directory, relative to the federation file like [tls]'s files
        task["dask_tls"] = path.parent / _get(task, "dask_tls", str, f"{path} [task]")
    return Federation(tuple(entities), dict(task), path, tls=_tls_table(document, path))


def _check_unique(path: Path, values: list[Any], what: str) -> None:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ConfigError(f"{path}: {what} {value!r} appears more than once")
        seen.add(value)


def toml_string(text: str) -> str:
    """Quote `text` as a TOML basic string (escapes quotes, backslashes, control characters)."""
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _toml_value(value: str | int | float | bool | list[str] | dict[str, str]) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(toml_string(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_string(k)} = {toml_string(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    return toml_string(value) if isinstance(value, str) else str(value)


def toml_document(comment: str, tables: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """A TOML file from (header, table) pairs; header "[x]" is a table, "[[x]]" an array entry.

    The text is parsed back with tomllib and compared with the input, so a
    quoting mistake fails here rather than in a process reading the file later.
    """
    lines = [f"# {comment}"]
    expected: dict[str, Any] = {}
    for index, (header, table) in enumerate(tables):
        if index:
            lines.append("")
        lines.append(header)
        for key, value in table.items():
            lines.append(f"{key} = {_toml_value(value)}")
        *parents, name = header.strip("[]").split(".")  # "[[schema.features]]" nests under schema
        into = expected
        for parent in parents:
            into = into.setdefault(parent, {})
        if header.startswith("[["):
            into.setdefault(name, []).append(dict(table))
        else:
            into[name] = dict(table)
    text = "\n".join(lines) + "\n"
    if tomllib.loads(text) != expected:
        raise AssertionError(f"generated TOML does not parse back to its input:\n{text}")
    return text


def federation_toml(
    task: dict[str, str | int], entities: Sequence[FederationEntity], tls: dict[str, str] | None = None
) -> str:
    """The text of a federation file for ``entities`` with the given ``[task]`` and ``[tls]`` tables."""
    tables: list[tuple[str, dict[str, str | int]]] = [("[task]", dict(task))]
    if tls is not None:
        tables.append(("[tls]", dict(tls)))
    tables += [
        ("[[entity]]", {"id": e.id, "address": e.address, "row_block": e.row_block, "column_block": e.column_block})
        for e in entities
    ]
    return toml_document("ppsvm federation: the coordinator's view (no data, no secrets).", tables)


def federation_at_addresses(planned: Federation, addresses: Sequence[str]) -> str:
    """``planned``'s federation file with each entity (in order) at the given address.

    For processes started on free ports; TLS paths become absolute so the text can be written anywhere.
    """
    if len(addresses) != len(planned.entities):
        raise ValueError(f"{len(addresses)} addresses for {len(planned.entities)} entities")
    entities = [
        FederationEntity(e.id, a, e.row_block, e.column_block) for e, a in zip(planned.entities, addresses, strict=True)
    ]
    tls = None
    if planned.tls is not None:
        tls = {
            "ca": str(planned.tls.ca.resolve()),
            "cert": str(planned.tls.cert.resolve()),
            "key": str(planned.tls.key.resolve()),
        }
    return federation_toml(planned.task, entities, tls)
