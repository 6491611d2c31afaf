"""Kubernetes manifests (issue 13): the bases (ppsvm/kubernetes/, shipped in the wheel) rendered offline with
`kubectl kustomize`, no cluster.

Each example overlay under deploy/kubernetes/examples/ is what `ppsvm org kustomize` writes for the compose demo's
bundles (docker/demo/), and renders with their real files; the objects are what the README promises: probes that
ask the gRPC health service with ``ppsvm health``, the Secret's files mounted where the config names them, the
release log and the model on claims, resource requests, Prometheus annotations, and no secret of another party in
any party's render. An organisation's own overlay, from a bundle: tests/unit/test_kustomize_overlay.py.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from ppsvm.config import EntityConfig, load_entity_config, load_federation
from ppsvm.core.release_log import ReleaseLog
from ppsvm.kustomize import write_overlay

REPO = Path(__file__).resolve().parents[2]
BASES = REPO / "ppsvm" / "kubernetes"
EXAMPLES = REPO / "deploy" / "kubernetes" / "examples"
DEMO = REPO / "docker" / "demo"
KUBECTL = shutil.which("kubectl")
# `resources:` naming directories and `components:` need kustomize 4 (kubectl 1.21); Debian 12's kubectl is 1.20.
OLDEST_KUBECTL = (1, 21)


def kubectl_version() -> tuple[int, int] | None:
    """kubectl's client version (major, minor), or None where it is missing or does not say."""
    if KUBECTL is None:
        return None
    try:
        result = subprocess.run(
            [KUBECTL, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60, check=True
        )
        client = json.loads(result.stdout)["clientVersion"]
        return int(client["major"]), int(client["minor"].rstrip("+"))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        return None


KUBECTL_VERSION = kubectl_version()
needs_kubectl = pytest.mark.skipif(
    KUBECTL_VERSION is None or KUBECTL_VERSION < OLDEST_KUBECTL,
    reason="kubectl is not installed, so the manifests cannot be rendered "
    "(Debian: apt-get install kubernetes-client; .ci/run installs it when run as root)"
    if KUBECTL is None
    else f"{KUBECTL} does not say its version (kubectl version --client -o json)"
    if KUBECTL_VERSION is None
    else f"kubectl {KUBECTL_VERSION[0]}.{KUBECTL_VERSION[1]} cannot render the overlays (`resources:` naming "
    "directories and `components:` need kubectl 1.21 or later, with kustomize 4)",
)

# What each example overlay may hold: its own party's files and nothing else (copies from its bundle
# docker/demo/<party>/ under the Secret's names, and its config with the pod's paths).
EXAMPLE_FILES = {
    "r0c0": {
        "README.md",
        "first-start/kustomization.yaml",
        "site/kustomization.yaml",
        "site/entity.toml",
        "site/ca.pem",
        "site/entity.pem",
        "site/entity.key",
        "site/column-block.secret",
        "site/record-ids.key",
        "site/pair-r0c1.secret",
    },
    "coordinator": {
        "README.md",
        "site/kustomization.yaml",
        "site/federation.toml",
        "site/ca.pem",
        "site/coordinator.pem",
        "site/coordinator.key",
    },
}
# The Secret each one generates: key in the Secret -> the file of the party's bundle it must hold.
ENTITY_SECRET = {
    "ca.pem": "ca.pem",
    "entity.pem": "r0c0.pem",
    "entity.key": "r0c0.key",
    "column-block.secret": "column-block-0.secret",
    "record-ids.key": "record-ids.key",
    "pair-r0c1.secret": "pair-r0c0-r0c1.secret",
}
COORDINATOR_SECRET = {"ca.pem": "ca.pem", "coordinator.pem": "coordinator.pem", "coordinator.key": "coordinator.key"}


def render(directory: Path) -> tuple[str, list[dict[str, Any]]]:
    """``kubectl kustomize directory``: the YAML text and its objects; a warning (``bases`` deprecated, ...) fails."""
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    assert not result.stderr.strip(), f"kubectl kustomize {directory} warns:\n{result.stderr}"
    return result.stdout, [document for document in yaml.safe_load_all(result.stdout) if document]


@functools.cache
def rendered(example: str) -> tuple[str, list[dict[str, Any]]]:
    return render(EXAMPLES / example / "site")


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def secret_files(secret: dict[str, Any]) -> dict[str, bytes]:
    return {key: base64.b64decode(value) for key, value in secret.get("data", {}).items()}


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = pod_spec(workload)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def main_container(workload: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec(workload)["containers"]
    return container


def mounts(workload: dict[str, Any], container: dict[str, Any]) -> dict[str, tuple[PurePosixPath, dict[str, Any]]]:
    """Volume name -> (mount path, the volume), for the volumes ``container`` mounts."""
    volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
    return {
        m["name"]: (PurePosixPath(m["mountPath"]), volumes[m["name"]] | {"mount": m}) for m in container["volumeMounts"]
    }


def container_port(container: dict[str, Any], name: str) -> int:
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == name]
    return int(port)


def flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, f"{name} once in {args}"
    return args[args.index(name) + 1]


def in_container(path: Path, written_at: Path, mounted_at: PurePosixPath) -> PurePosixPath:
    """Where a path a config names lies in the container: relative names resolve beside the mounted config."""
    return mounted_at / path.relative_to(written_at) if path.is_relative_to(written_at) else PurePosixPath(path)


def secret_mount_files(workload: dict[str, Any], secret: dict[str, Any]) -> dict[PurePosixPath, bytes]:
    """Container path -> content of every file of ``secret`` that the main container mounts."""
    files = {}
    for path, volume in mounts(workload, main_container(workload)).values():
        if volume.get("secret", {}).get("secretName") == secret["metadata"]["name"]:
            assert volume["mount"].get("readOnly") is True
            files |= {path / key: content for key, content in secret_files(secret).items()}
    return files


def pem_bodies(path: Path) -> list[str]:
    """The base64 lines of a PEM file (what a leaked key would show, however it was re-wrapped)."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("-----")]


def assert_not_in(render_text: str, objects: list[dict[str, Any]], private: Path) -> None:
    """No part of ``private`` (a demo key or column-block secret) is in the render, in clear or in a Secret."""
    decoded = "\n".join(
        content.decode("utf-8", "replace")
        for o in objects
        if o["kind"] in ("Secret", "ConfigMap")
        for content in (secret_files(o) if o["kind"] == "Secret" else {}).values()
    )
    raw = private.read_bytes()
    pieces = pem_bodies(private) if private.suffix == ".key" else [raw.decode("utf-8").strip()]
    for piece in pieces:
        assert piece not in render_text and piece not in decoded, f"{private.name} leaks into the render"
    assert base64.b64encode(raw).decode() not in render_text, f"{private.name} leaks into the render"


def private_demo_files(allowed: set[str]) -> list[Path]:
    """Every key and secret in the demo's bundles but the ``allowed`` ones (compared by content)."""
    files = sorted([*DEMO.glob("*/*.key"), *DEMO.glob("*/*.secret")])
    # 4 entities' TLS keys, the coordinator's, the client's, the record-id key, 2 column-block secrets, 2 pair secrets
    assert len({f.read_bytes() for f in files}) == 11, files
    allowed_contents = {(DEMO / name).read_bytes() for name in allowed}
    return [f for f in files if f.read_bytes() not in allowed_contents]


def test_example_overlays_hold_only_their_own_partys_current_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each example is `ppsvm org kustomize`'s output for its demo bundle, naming the repository's bases (and the
    coordinator's federation file addressing the entities at their Services: copy-demo-files.sh)."""
    assert {p.name for p in EXAMPLES.iterdir() if p.is_dir()} == set(EXAMPLE_FILES)
    monkeypatch.chdir(REPO)  # the bundles by relative paths, as copy-demo-files.sh names them
    for example, names in EXAMPLE_FILES.items():
        held = {p.relative_to(EXAMPLES / example).as_posix() for p in (EXAMPLES / example).rglob("*") if p.is_file()}
        assert held == names, example
        fresh = tmp_path / example
        write_overlay(Path("docker/demo") / example, fresh, bases=Path("ppsvm/kubernetes"))
        here = Path(os.path.relpath(BASES, fresh / "site")).as_posix()
        there = Path(os.path.relpath(BASES, EXAMPLES / example / "site")).as_posix()
        for name in names - {"site/federation.toml"}:
            expected = (fresh / name).read_bytes().replace(here.encode(), there.encode())
            assert (EXAMPLES / example / name).read_bytes() == expected, (
                f"examples/{example}/{name} is not what `ppsvm org kustomize` writes for docker/demo/{example}: "
                "run deploy/kubernetes/examples/copy-demo-files.sh"
            )


@needs_kubectl
@pytest.mark.parametrize("example", sorted(EXAMPLE_FILES))
def test_every_example_renders_with_the_demo_image(example: str) -> None:
    _, objects = rendered(example)
    assert objects
    workloads = [o for o in objects if o["kind"] in ("Deployment", "Job")]
    assert workloads
    for workload in workloads:
        for container in containers(workload):
            assert container["image"] == "ppsvm:local"  # the base's `ppsvm` under the overlay's images: entry


@needs_kubectl
def test_entity_objects_and_single_writer() -> None:
    _, objects = rendered("r0c0")
    assert sorted(o["kind"] for o in objects) == ["Deployment", "PersistentVolumeClaim", "Secret", "Service"]
    deployment = only(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    service = only(objects, "Service")
    (port,) = service["spec"]["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("grpc", 50051, "grpc")
    container = main_container(deployment)
    assert container_port(container, "grpc") == 50051
    args = container["args"]
    assert args[:2] == ["ppsvm", "entity"] and flag(args, "--listen") == "0.0.0.0:50051"
    assert "--new-release-log" not in args  # a lost log must stop the entity, not start a new one
    assert {o["metadata"]["namespace"] for o in objects} == {"ppsvm-r0c0"}


@needs_kubectl
def test_entity_config_names_the_mounted_files_and_the_release_log_claim(tmp_path: Path) -> None:
    _, objects = rendered("r0c0")
    deployment, secret = only(objects, "Deployment"), only(objects, "Secret")
    files = secret_mount_files(deployment, secret)
    config_path = PurePosixPath(flag(main_container(deployment)["args"], "--config"))
    assert config_path in files
    written = tmp_path / "entity.toml"
    written.write_bytes(files[config_path])
    config = load_entity_config(written)
    where = functools.partial(in_container, written_at=tmp_path, mounted_at=config_path.parent)
    assert config.tls is not None and config.secret_file is not None and config.release_log is not None
    for named in (config.tls.ca, config.tls.cert, config.tls.key, config.secret_file):
        assert where(named) in files, f"{named.name}: not a file of the mounted Secret"
    assert config.id_key_file is not None and where(config.id_key_file) in files
    assert files[where(config.tls.key)] == (DEMO / "r0c0/r0c0.key").read_bytes()
    assert files[where(config.secret_file)] == (DEMO / "r0c0/column-block-0.secret").read_bytes()

    volumes = mounts(deployment, main_container(deployment))
    releases_at, releases = volumes["releases"]
    claim = only(objects, "PersistentVolumeClaim")["metadata"]["name"]
    assert releases["persistentVolumeClaim"]["claimName"] == claim
    assert not releases["mount"].get("readOnly")
    assert where(config.release_log).parent == releases_at  # the log and its .head file, on the claim
    data_at, data = volumes["data"]
    assert data["mount"]["readOnly"] is True
    assert config.data.path is not None and where(config.data.path).is_relative_to(data_at)
    # The compose demo's r0c0 config but for its paths (`ppsvm org kustomize` writes it from the bundle's).
    assert without_paths(config) == without_paths(load_entity_config(DEMO / "r0c0/r0c0.toml"))
    assert config.data.cache is False  # the data volume is read only: no cache beside the records
    assert config.data.path.name == "r0c0.csv"


def without_paths(config: EntityConfig) -> EntityConfig:
    return dataclasses.replace(
        config,
        data=dataclasses.replace(config.data, path=None, cache=False),
        secret_file=None,
        id_key_file=None,
        pair_secret_files=tuple((peer, Path()) for peer, _ in config.pair_secret_files),
        source=Path(),
        tls=None,
        release_log=None,
    )


@needs_kubectl
def test_entity_secret_holds_its_own_key_and_column_block_secret_only() -> None:
    text, objects = rendered("r0c0")
    files = secret_files(only(objects, "Secret"))
    assert set(files) == {"entity.toml", *ENTITY_SECRET}
    for key, demo_name in ENTITY_SECRET.items():
        assert files[key] == (DEMO / "r0c0" / demo_name).read_bytes(), key
    own = {"r0c0/r0c0.key", "r0c0/column-block-0.secret", "r0c0/record-ids.key", "r0c0/pair-r0c0-r0c1.secret"}
    for private in private_demo_files(own):
        assert_not_in(text, objects, private)
    for cell in DEMO.glob("*/*.csv"):  # records live on the data volume, in no manifest
        record = cell.read_text(encoding="utf-8").splitlines()[1]
        assert record not in text and all(record not in c.decode() for c in files.values())


@needs_kubectl
def test_coordinator_objects_mounts_and_federation(tmp_path: Path) -> None:
    text, objects = rendered("coordinator")
    assert sorted(o["kind"] for o in objects) == [
        "Deployment",
        "Job",
        "PersistentVolumeClaim",
        "Secret",
        "Service",
    ]
    secret = only(objects, "Secret")
    files = secret_files(secret)
    assert set(files) == {"federation.toml", *COORDINATOR_SECRET}
    for key, demo_name in COORDINATOR_SECRET.items():
        assert files[key] == (DEMO / "coordinator" / demo_name).read_bytes(), key
    claim = only(objects, "PersistentVolumeClaim")["metadata"]["name"]
    job, serve = only(objects, "Job"), only(objects, "Deployment")
    train_args, serve_args = main_container(job)["args"], main_container(serve)["args"]
    assert train_args[:3] == ["ppsvm", "coordinator", "train"] and serve_args[:3] == ["ppsvm", "coordinator", "serve"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    model = PurePosixPath(flag(train_args, "--model-out"))
    assert PurePosixPath(flag(serve_args, "--model")) == model
    for workload, writes in ((job, True), (serve, False)):
        mounted = secret_mount_files(workload, secret)
        federation_path = PurePosixPath(flag(main_container(workload)["args"], "--federation"))
        assert federation_path in mounted
        written = tmp_path / "federation.toml"
        written.write_bytes(mounted[federation_path])
        federation = load_federation(written)
        assert federation.tls is not None
        where = functools.partial(in_container, written_at=tmp_path, mounted_at=federation_path.parent)
        for named in (federation.tls.ca, federation.tls.cert, federation.tls.key):
            assert where(named) in mounted, f"{named.name}: not a file of the mounted Secret"
        model_at, volume = mounts(workload, main_container(workload))["model"]
        assert volume["persistentVolumeClaim"]["claimName"] == claim and model.parent == model_at
        assert bool(volume["mount"].get("readOnly")) is not writes
    # The demo's federation with each entity at its Service: same parties, grid, task and TLS names.
    demo = load_federation(DEMO / "coordinator/federation.toml")
    assert [(e.id, e.row_block, e.column_block) for e in federation.entities] == [
        (e.id, e.row_block, e.column_block) for e in demo.entities
    ]
    assert federation.task == demo.task
    assert [e.address for e in federation.entities] == [
        f"ppsvm-entity.ppsvm-{e.id}.svc.cluster.local:50051" for e in demo.entities
    ]
    service = only(objects, "Service")
    (port,) = service["spec"]["ports"]
    assert (port["name"], port["targetPort"]) == ("grpc", "grpc")
    assert flag(serve_args, "--listen") == f"0.0.0.0:{container_port(main_container(serve), 'grpc')}"
    # No entity's key, no column-block secret, not the record-id key, not the client's key.
    for private in private_demo_files({"coordinator/coordinator.key"}):
        assert_not_in(text, objects, private)


@needs_kubectl
@pytest.mark.parametrize("example", sorted(EXAMPLE_FILES))
def test_servers_are_probed_with_ppsvm_health_over_their_own_tls(example: str) -> None:
    _, objects = rendered(example)
    servers = [o for o in objects if o["kind"] == "Deployment"]
    assert servers
    for server in servers:
        container = main_container(server)
        mounted = secret_mount_files(server, only(objects, "Secret"))
        for probe_name in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container[probe_name]
            command = probe["exec"]["command"]
            assert command[:3] == ["ppsvm", "health", f"127.0.0.1:{container_port(container, 'grpc')}"], probe_name
            for option in ("--ca", "--cert", "--key"):
                assert PurePosixPath(flag(command, option)) in mounted, f"{probe_name} {option}"
            assert float(flag(command, "--timeout")) < probe["timeoutSeconds"], probe_name
            assert probe["periodSeconds"] >= 10 and probe["failureThreshold"] >= 2, probe_name
        # The server's own certificate and key: the identity it checks itself with.
        command = container["livenessProbe"]["exec"]["command"]
        cert = mounted[PurePosixPath(flag(command, "--cert"))]
        assert cert in ((DEMO / "r0c0/r0c0.pem").read_bytes(), (DEMO / "coordinator/coordinator.pem").read_bytes())
        # A slow start (reading a large cell) is the startup probe's to wait for, not liveness's.
        startup = container["startupProbe"]
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 300


@needs_kubectl
@pytest.mark.parametrize("example", sorted(EXAMPLE_FILES))
def test_resources_security_and_metrics(example: str) -> None:
    _, objects = rendered(example)
    for workload in (o for o in objects if o["kind"] in ("Deployment", "Job")):
        name = workload["metadata"]["name"]
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["automountServiceAccountToken"] is False
        for container in containers(workload):
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]) and "memory" in resources["limits"], name
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]
        annotations = workload["spec"]["template"]["metadata"].get("annotations", {})
        if workload["kind"] == "Job":  # a training run ends: no endpoint to scrape, none promised
            assert not any(key.startswith("prometheus.io/") for key in annotations), name
            continue
        metrics = container_port(main_container(workload), "metrics")
        assert annotations == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(metrics),
            "prometheus.io/path": "/metrics",
        }, name


@needs_kubectl
@pytest.mark.parametrize(("example", "command"), [("r0c0", ["entity"]), ("coordinator", ["coordinator", "serve"])])
def test_servers_serve_metrics_on_the_annotated_port_once_ppsvm_offers_it(example: str, command: list[str]) -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "ppsvm", *command, "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    _, objects = rendered(example)
    container = main_container(only(objects, "Deployment"))
    if "--metrics-port" in help_text:
        assert flag(container["args"], "--metrics-port") == str(container_port(container, "metrics"))
        assert flag(container["args"], "--metrics-host") == "0.0.0.0"  # scraped from outside the pod
    else:
        assert "--metrics-port" not in container["args"]


@needs_kubectl
def test_first_start_job_creates_the_release_log_once(tmp_path: Path) -> None:
    """The one-off Job of the base's first-start/, which the overlay's first-start/ adds to the site: same Secret
    and claim as the entity, and its script works."""
    _, objects = render(EXAMPLES / "r0c0" / "first-start")
    assert {o["metadata"]["namespace"] for o in objects} == {"ppsvm-r0c0"}
    deployment, job, secret = only(objects, "Deployment"), only(objects, "Job"), only(objects, "Secret")
    # The site's images: entry reaches only the site's resources: the Job once ran the base's bare `ppsvm`.
    assert main_container(job)["image"] == main_container(deployment)["image"] == "ppsvm:local"
    assert secret_mount_files(job, secret) == secret_mount_files(deployment, secret)
    entity_volumes = mounts(deployment, main_container(deployment))
    job_volumes = mounts(job, main_container(job))
    assert job_volumes["releases"][0] == entity_volumes["releases"][0]
    claim = job_volumes["releases"][1]["persistentVolumeClaim"]["claimName"]
    assert claim == entity_volumes["releases"][1]["persistentVolumeClaim"]["claimName"]
    command = main_container(job)["command"]
    assert command[:2] == ["python", "-c"]
    config_path = PurePosixPath(command[3])
    assert config_path == PurePosixPath(flag(main_container(deployment)["args"], "--config"))

    # Run its script here on the same config, the release log moved from the claim to tmp_path.
    config_text = secret_mount_files(job, secret)[config_path].decode("utf-8")
    log_dir = str(entity_volumes["releases"][0])
    assert tomllib.loads(config_text)["privacy"]["release_log"].startswith(log_dir + "/")
    config = tmp_path / "entity.toml"
    config.write_text(config_text.replace(log_dir, (tmp_path / "releases").as_posix()), encoding="utf-8")
    (tmp_path / "releases").mkdir()
    script = [sys.executable, "-c", command[2], str(config)]
    first = subprocess.run(script, capture_output=True, text=True, timeout=60, check=False)
    assert first.returncode == 0, first.stderr
    log = tmp_path / "releases" / "r0c0.releases.jsonl"
    assert ReleaseLog(log, "r0c0").count == 0
    again = subprocess.run(script, capture_output=True, text=True, timeout=60, check=False)
    assert again.returncode != 0 and "already exists" in again.stderr
    assert ReleaseLog(log, "r0c0").count == 0
