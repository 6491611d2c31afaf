"""An organisation's own Kubernetes overlay from its bundle (issue 30 item 3): ``ppsvm org kustomize``.

Bundles are made by the onboarding steps (tests/unit/test_onboarding.py's helper); each overlay is copied away
from its bundle before it is rendered with ``kubectl kustomize``, so a path outside the overlay, or an absolute
one, fails. The rendered objects are read back: the Secret's entity.toml, with the pod's paths mapped into a
temporary directory holding the mounted files, loads with the entity's own loader and names exactly what the pod
mounts; a file source has the data claim, a SQL source none and its URL from a Secret.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from ppsvm import kustomize
from ppsvm.config import load_entity_config, load_federation
from ppsvm.errors import ConfigError

from .test_deploy_manifests import (
    flag,
    main_container,
    mounts,
    needs_kubectl,
    only,
    pod_spec,
    render,
    secret_files,
    secret_mount_files,
)
from .test_onboarding import ENTITIES, _onboard

REPO = Path(__file__).resolve().parents[2]
SQL_TABLES = """
[data]
source = "sql"
url_env = "HOSPITAL_DB"
table = "patients"
label = "diagnosis"

[[schema.features]]
name = "age"
type = "number"
low = 0.0
high = 120.0

[[schema.features]]
name = "sex"
type = "category"
categories = ["f", "m"]
"""
CSV_TABLES = """
[data]
source = "csv"
path = "{path}"
label = "diagnosis"
labels = {{ positive = "M", negative = "B" }}

[scoring]
source = "sql"
url_env = "SCORING_DB"
query = "SELECT id, age FROM new_patients"

[[schema.features]]
name = "age"
type = "number"
"""


def _with_source(bundle: Path, tables: str) -> None:
    """The bundle's config with a [data] table in place of ``data = "..."``, as the own-data tutorial says."""
    config = bundle / f"{bundle.name}.toml"
    lines = [line for line in config.read_text(encoding="utf-8").splitlines() if not line.startswith("data = ")]
    config.write_text("\n".join(lines) + "\n" + tables, encoding="utf-8")
    load_entity_config(config)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Joined bundles: r0c0 a cell CSV (``org join --data cell.csv``), r0c2 a SQL source, r1c0 a CSV file outside
    its bundle with a SQL scoring source."""
    root = _onboard(tmp_path_factory.mktemp("kustomize"))
    _with_source(root / "r0c2", SQL_TABLES)
    _with_source(root / "r1c0", CSV_TABLES.format(path=root / "exports" / "north.csv"))
    return root


def _overlay_elsewhere(bundle: Path, tmp_path: Path, **options: Any) -> Path:
    """Write the bundle's overlay, then copy it alone to another directory (nothing else of the bundle)."""
    overlay = kustomize.write_overlay(bundle, **options)
    assert overlay.directory == bundle / "kubernetes"
    moved = tmp_path / "elsewhere" / "overlay"
    shutil.copytree(overlay.directory, moved)
    for kustomization in moved.rglob("kustomization.yaml"):
        assert str(bundle) not in kustomization.read_text(encoding="utf-8"), kustomization
    return moved


def _pod_files(objects: list[dict[str, Any]], root: Path) -> tuple[Path, dict[PurePosixPath, bytes]]:
    """Write each file of the Secret the entity mounts where the pod sees it, under ``root``; its config there,
    with the pod's absolute paths moved under ``root`` too."""
    deployment, secret = only(objects, "Deployment"), only(objects, "Secret")
    files = secret_mount_files(deployment, secret)
    for path, content in files.items():
        (root / path.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.relative_to("/")).write_bytes(content)
    config_path = PurePosixPath(flag(main_container(deployment)["args"], "--config"))
    config = root / config_path.relative_to("/")
    # Every absolute path the config names (a mount's: the data, the release log) moves under root.
    text = config.read_text(encoding="utf-8").replace(' = "/', f' = "{root.as_posix()}/')
    config.write_text(text, encoding="utf-8")
    return config, files


def _in_pod(path: Path, root: Path) -> PurePosixPath:
    return PurePosixPath("/") / path.relative_to(root).as_posix()


@needs_kubectl
def test_a_cell_csv_entity_renders_from_a_copy_and_names_what_the_pod_mounts(bundles: Path, tmp_path: Path) -> None:
    bundle = bundles / "r0c0"
    moved = _overlay_elsewhere(bundle, tmp_path)
    _, objects = render(moved / "site")
    assert sorted(o["kind"] for o in objects) == ["Deployment", "PersistentVolumeClaim", "Secret", "Service"]
    assert {o["metadata"]["namespace"] for o in objects} == {"ppsvm-r0c0"}
    deployment = only(objects, "Deployment")
    assert main_container(deployment)["image"] == "ppsvm:local"

    root = tmp_path / "pod"
    config_file, files = _pod_files(objects, root)
    config = load_entity_config(config_file)
    original = load_entity_config(bundle / "r0c0.toml")
    assert config.tls is not None and original.tls is not None
    assert config.secret_file is not None and config.id_key_file is not None and config.release_log is not None
    named = [config.tls.ca, config.tls.cert, config.tls.key, config.secret_file, config.id_key_file]
    named += [file for _, file in config.pair_secret_files]
    assert {_in_pod(path, root) for path in named} | {_in_pod(config_file, root)} == set(files)
    # The Secret's files are the bundle's: its key, its column block's secret, its pair secrets.
    assert config.tls.key.read_bytes() == original.tls.key.read_bytes()
    assert config.read_secret() == original.read_secret() and config.read_id_key() == original.read_id_key()
    assert config.read_pair_secrets() == original.read_pair_secrets() and len(config.pair_secret_files) == 2

    volumes = mounts(deployment, main_container(deployment))
    releases_at, releases = volumes["releases"]
    assert releases["persistentVolumeClaim"]["claimName"] == only(objects, "PersistentVolumeClaim")["metadata"]["name"]
    assert not releases["mount"].get("readOnly")
    assert _in_pod(config.release_log, root) == releases_at / "r0c0.releases.jsonl"
    # The places ppsvm.kustomize writes into configs are the base's mounts.
    assert _in_pod(config_file, root).parent == kustomize.ENTITY_MOUNT and releases_at == kustomize.RELEASES_MOUNT
    data_at, data = volumes["data"]
    assert data["persistentVolumeClaim"]["claimName"] == kustomize.DATA_CLAIM and data["mount"]["readOnly"] is True
    assert config.data.path is not None and _in_pod(config.data.path, root) == data_at / "cell.csv"
    assert data_at == kustomize.DATA_MOUNT
    assert config.data.cache is False  # nothing can be written beside records on a read-only volume
    assert not any("env" in container for container in pod_spec(deployment)["containers"])
    # Everything else as the bundle's config says.
    assert (config.id, config.column_block, config.column_block_members) == (
        original.id,
        original.column_block,
        original.column_block_members,
    )
    assert config.coordinator_identity == original.coordinator_identity and config.mode == original.mode


@needs_kubectl
def test_a_sql_entity_has_no_data_claim_and_its_url_from_a_secret(bundles: Path, tmp_path: Path) -> None:
    moved = _overlay_elsewhere(bundles / "r0c2", tmp_path)
    text, objects = render(moved / "site")
    deployment = only(objects, "Deployment")
    assert "data" not in mounts(deployment, main_container(deployment))
    assert "ppsvm-entity-data" not in text
    assert [v["name"] for v in pod_spec(deployment)["volumes"]] == ["entity", "releases", "tmp"]
    (env,) = main_container(deployment)["env"]
    assert env == {
        "name": "HOSPITAL_DB",
        "valueFrom": {"secretKeyRef": {"name": kustomize.DB_SECRET, "key": "HOSPITAL_DB"}},
    }
    config = load_entity_config(_pod_files(objects, tmp_path / "pod")[0])
    assert config.data.kind == "sql" and config.data.url_env == "HOSPITAL_DB" and config.data.table == "patients"
    assert config.schema is not None and [f.name for f in config.schema.features] == ["age", "sex"]
    assert config.schema.features[1].categories == ("f", "m")
    # The first rollout's Job needs no database: it only creates the log.
    _, first = render(moved / "first-start")
    assert "env" not in main_container(only(first, "Job"))


@needs_kubectl
def test_a_csv_table_outside_the_bundle_and_a_sql_scoring_source(bundles: Path, tmp_path: Path) -> None:
    overlay = kustomize.write_overlay(bundles / "r1c0")
    assert overlay.data_files == (("north.csv", bundles / "exports" / "north.csv"),)
    assert overlay.environment == ("SCORING_DB",)
    _, objects = render(_overlay_elsewhere(bundles / "r1c0", tmp_path) / "site")
    deployment = only(objects, "Deployment")
    data_at, _ = mounts(deployment, main_container(deployment))["data"]
    config = load_entity_config(_pod_files(objects, tmp_path / "pod")[0])
    assert config.data.path is not None and config.data.path.name == "north.csv"
    assert str(config.data.path).endswith(f"{data_at}/north.csv") and config.data.labels == ("M", "B")
    assert config.scoring is not None and config.scoring.url_env == "SCORING_DB"
    assert [e["name"] for e in main_container(deployment)["env"]] == ["SCORING_DB"]


@needs_kubectl
def test_the_service_answers_on_the_plan_s_port(bundles: Path, tmp_path: Path) -> None:
    """r0c1's address in the plan ends in :50050; the container listens on the base's 50051."""
    planned = int(next(e.address for e in ENTITIES if e.id == "r0c1").rsplit(":", 1)[1])
    assert planned != kustomize.ENTITY_PORT
    _, objects = render(_overlay_elsewhere(bundles / "r0c1", tmp_path) / "site")
    (port,) = only(objects, "Service")["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (planned, "grpc")
    args = main_container(only(objects, "Deployment"))["args"]
    config = tomllib.loads(secret_files(only(objects, "Secret"))["entity.toml"].decode())
    assert flag(args, "--listen") == config["entity"]["listen"] == f"0.0.0.0:{kustomize.ENTITY_PORT}"


@needs_kubectl
def test_the_first_rollout_adds_the_job_with_the_same_secret_and_claim(bundles: Path, tmp_path: Path) -> None:
    moved = _overlay_elsewhere(bundles / "r0c0", tmp_path)
    _, site = render(moved / "site")
    _, objects = render(moved / "first-start")
    assert sorted(o["kind"] for o in objects) == sorted(["Job", *(o["kind"] for o in site)])
    job, deployment, secret = only(objects, "Job"), only(objects, "Deployment"), only(objects, "Secret")
    assert only(site, "Secret")["metadata"]["name"] == secret["metadata"]["name"]  # the same generated Secret
    assert secret_mount_files(job, secret) == secret_mount_files(deployment, secret)
    claims = [mounts(w, main_container(w))["releases"][1]["persistentVolumeClaim"] for w in (job, deployment)]
    assert claims[0] == claims[1] and {o["metadata"]["namespace"] for o in objects} == {"ppsvm-r0c0"}


@needs_kubectl
def test_the_coordinator_overlay(bundles: Path, tmp_path: Path) -> None:
    moved = _overlay_elsewhere(bundles / "coordinator", tmp_path, image="registry.example:5000/ppsvm@sha256:abc")
    assert not (moved / "first-start").exists()
    _, objects = render(moved / "site")
    secret = only(objects, "Secret")
    files = secret_files(secret)
    assert set(files) == {"federation.toml", "ca.pem", "coordinator.pem", "coordinator.key"}
    assert files["coordinator.key"] == (bundles / "coordinator" / "coordinator.key").read_bytes()
    written = tmp_path / "federation.toml"
    written.write_bytes(files["federation.toml"])
    federation, original = load_federation(written), load_federation(bundles / "coordinator" / "federation.toml")
    assert federation.entities == original.entities and federation.task == original.task
    assert federation.tls is not None and {
        p.name for p in (federation.tls.ca, federation.tls.cert, federation.tls.key)
    } == {
        "ca.pem",
        "coordinator.pem",
        "coordinator.key",
    }
    for workload in (o for o in objects if o["kind"] in ("Deployment", "Job")):
        assert main_container(workload)["image"] == "registry.example:5000/ppsvm@sha256:abc"


def test_options_rewriting_and_refusals(bundles: Path, tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    overlay = kustomize.write_overlay(bundles / "r0c0", out, image="registry.example/ppsvm:0.1.0", namespace="north")
    assert overlay.namespace == "north" and overlay.directory == out
    text = (out / "site" / "kustomization.yaml").read_text(encoding="utf-8")
    assert "bases:" not in text and "\nresources:\n- ../base/entity\n" in text and "namespace: north" in text
    assert 'newName: "registry.example/ppsvm"' in text and 'newTag: "0.1.0"' in text
    assert (out / "site" / "entity.key").stat().st_mode & 0o077 == 0
    # Again: replaced as a whole (a file left in it is gone).
    (out / "site" / "stale.yaml").write_text("x", encoding="utf-8")
    kustomize.write_overlay(bundles / "r0c0", out)
    assert not (out / "site" / "stale.yaml").exists() and "namespace: ppsvm-r0c0" in (
        out / "site" / "kustomization.yaml"
    ).read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match=r"was not written by `ppsvm org kustomize`"):
        kustomize.write_overlay(bundles / "r0c0", bundles / "r0c1")
    with pytest.raises(ConfigError, match="prediction client: it serves nothing"):
        kustomize.write_overlay(bundles / "client")
    with pytest.raises(ConfigError, match="not a Kubernetes namespace"):
        kustomize.write_overlay(bundles / "r0c0", tmp_path / "bad", namespace="North_Site")
    with pytest.raises(ConfigError, match="NAME@DIGEST"):
        kustomize.write_overlay(bundles / "r0c0", tmp_path / "bad", image="ppsvm local")
    assert not (tmp_path / "bad").exists()


def test_a_secret_by_environment_variable_is_refused_naming_the_file(tmp_path: Path) -> None:
    root = _onboard(tmp_path / "fed")
    config = root / "r0c0" / "r0c0.toml"
    text = config.read_text(encoding="utf-8").replace('secret_file = "column-block-0.secret"', 'secret_env = "S"')
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{config} \[entity\]: 'secret_env': .* 'secret_file' instead"):
        kustomize.write_overlay(root / "r0c0")
    assert not (root / "r0c0" / "kubernetes").exists()


def test_the_bases_ship_in_the_wheel() -> None:
    """Every file of ppsvm/kubernetes/ matches pyproject's package data (a new manifest must be in the wheel)."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    patterns = patterns["package-data"]["ppsvm"]
    files = [
        p.relative_to(REPO / "ppsvm").as_posix() for p in (REPO / "ppsvm" / "kubernetes").rglob("*") if p.is_file()
    ]
    assert {"kubernetes/entity/kustomization.yaml", "kubernetes/coordinator/kustomization.yaml"} <= set(files)
    assert all(any(fnmatch.fnmatch(f, p) and f.count("/") == p.count("/") for p in patterns) for f in files), files


def test_cli_org_kustomize(bundles: Path, tmp_path: Path) -> None:
    def ppsvm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ppsvm", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "COLUMNS": "100"},
        )

    org = ppsvm("org", "--help")
    assert org.returncode == 0 and "kustomize" in org.stdout
    usage = ppsvm("org", "kustomize", "--help")
    assert usage.returncode == 0
    for option in ("--bundle", "--out", "--image", "--namespace", "docs/how-to/kubernetes.md"):
        assert option in usage.stdout, option
    bundle = tmp_path / "r0c2"
    shutil.copytree(bundles / "r0c2", bundle)
    shutil.rmtree(bundle / "kubernetes", ignore_errors=True)
    done = ppsvm("org", "kustomize", "--bundle", str(bundle), "--image", "registry.example/ppsvm:0.1.0")
    assert done.returncode == 0, done.stderr
    assert f"wrote {bundle / 'kubernetes'}, the Kubernetes overlay of entity r0c2" in done.stdout
    assert f"create secret generic {kustomize.DB_SECRET} --from-literal=HOSPITAL_DB=" in done.stdout
    assert f"kubectl apply -k {bundle / 'kubernetes'}/first-start" in done.stdout
    assert f"kubectl apply -k {bundle / 'kubernetes'}/site" in done.stdout
    site = yaml.safe_load((bundle / "kubernetes" / "site" / "kustomization.yaml").read_text(encoding="utf-8"))
    assert site["images"] == [{"name": "ppsvm", "newName": "registry.example/ppsvm", "newTag": "0.1.0"}]
    assert site["resources"] == ["../base/entity"] and "components" not in site
    refused = ppsvm("org", "kustomize", "--bundle", str(bundles / "client"))
    assert refused.returncode != 0 and "prediction client" in refused.stderr and "Traceback" not in refused.stderr
