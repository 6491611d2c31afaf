"""A new organisation's entity, from its bundle to SERVING, out of its rendered Kubernetes overlay (issue 30).

No cluster can run here, so this test plays one node's kubelet with docker. The organisation's bundle is made by
the onboarding steps (tests/unit/test_onboarding.py's helper, as tests/unit/test_kustomize_overlay.py makes
its bundles), its records put beside its config as the walk-through does; ``ppsvm org kustomize --bundle r0c0/``
writes the overlay and prints the steps; the overlay alone is copied to the "host that runs kubectl" and
rendered there with ``kubectl kustomize``. Then, following the printed steps with nothing edited: the records
file it names goes on the data claim, the first-start Job runs to completion and creates the release log on
its claim, and the entity Deployment's pod runs until its own readiness probe command, exec'd in the container,
answers SERVING.

The emulation (:class:`Kubelet`) materialises what the kubelet would: a Secret's keys as files (``items``,
``defaultMode``, the group ``fsGroup``), a claim as one host directory for every pod that mounts it, an
``emptyDir`` as a fresh directory, each volume re-owned to ``fsGroup`` as the kubelet does; env from values and
Secret or ConfigMap keys; the user, group, supplementary ``fsGroup``, read-only root filesystem, dropped
capabilities, no privilege escalation, memory and CPU limits; ``command``/``args`` as Kubernetes maps them onto
the image's entrypoint; the image by its rendered name, which must be the one the overlay was given (the node
pulls nothing). It refuses any field of a pod template it does not emulate, so a new manifest feature
fails here until it is emulated, rather than passing unseen. Not emulated (and so not tested): scheduling,
restarts, the Service and the cluster network (the pod has only its loopback, which is all its probes use).

Needs root (it starts the Docker engine with docker/local-engine.sh and sets volume ownership as the kubelet
does), kubectl 1.21 or later and the image build's network access to PyPI; skipped with the reason otherwise.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_deploy_manifests import KUBECTL_VERSION, OLDEST_KUBECTL, only, render
from tests.unit.test_onboarding import _onboard

pytestmark = [pytest.mark.docker, pytest.mark.long]

REPO = Path(__file__).resolve().parents[2]
ENGINE_SCRIPT = REPO / "docker" / "local-engine.sh"
WDBC = REPO / "ppsvm" / "data" / "bundled" / "wdbc.data"
# What docker-compose.yml builds (`image: ppsvm:local`, `build: {network: host, args: {BASE_IMAGE: ...}}`).
BUILT_IMAGE = "ppsvm:local"
BASE_IMAGE = "python:3.11-slim"
ENGINE_TIMEOUT_S = 900
BUILD_TIMEOUT_S = 3600  # the first build installs numpy, scipy, cvxpy and grpcio from PyPI
JOB_TIMEOUT_S = 300
READY_TIMEOUT_S = 300  # a 2-core machine shared with other work: each probe is a Python process
PROBE_TIMEOUT_S = 60  # one probe command's run, far above the manifests' timeoutSeconds for the same reason
CONTAINER_LABEL = "org.ppsvm.test=kustomize-pod"
# `ppsvm org kustomize --image`, as in docs/how-to/kubernetes.md's second example: the site registry's image.
SITE_IMAGE = "registry.example/ppsvm:0.1.0"


class NotEmulated(AssertionError):
    """A pod template asks for something :class:`Kubelet` does not emulate: emulate it, do not ignore it."""


# --- the kubelet -----------------------------------------------------------------------------------------------


def _known(table: Mapping[str, Any], keys: Collection[str], where: str) -> None:
    """Refuse any key of ``table`` outside ``keys``."""
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise NotEmulated(f"{where}: {unknown} not emulated (only {sorted(keys)})")


def _quantity(value: str | int | float, where: str) -> float:
    """A Kubernetes quantity as a number: ``250m`` -> 0.25, ``2`` -> 2, ``1Gi`` -> 2**30, ``64M`` -> 64e6."""
    text = str(value)
    suffixes = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3}
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T|m)?", text)
    if match is None:
        raise NotEmulated(f"{where}: quantity {text!r} not understood")
    number, suffix = match.groups()
    return float(number) * (suffixes[suffix] if suffix else 1)


def _set_ownership(directory: Path, fs_group: int | None, read_only: bool) -> None:
    """What the kubelet does to a volume for ``fsGroup`` (SetVolumeOwnership): every file and directory gets the
    group, group read (and write unless read only), directories also group execute and setgid."""
    if fs_group is None:
        return
    mask = 0o440 if read_only else 0o660
    for path in [directory, *directory.rglob("*")]:
        if path.is_symlink():
            continue
        os.chown(path, -1, fs_group)
        extra = mask | (0o110 | 0o2000 if path.is_dir() else 0)
        path.chmod(path.stat().st_mode & 0o7777 | extra)


@dataclass(frozen=True)
class PodRun:
    """One pod's container as docker runs it."""

    name: str  # the docker container's name
    workload: str  # Kind/name of the workload whose template it runs
    container: dict[str, Any]  # the rendered container spec (its probes)


@dataclass
class Kubelet:
    """One node's kubelet for pod templates of rendered Deployments and Jobs, with docker.

    Attributes
    ----------
    root : Path
        Where each pod's volumes are materialised (``root/PODNAME/VOLUME``) and claims provisioned.
    images : dict
        An image name the manifests may use -> the local image it stands for. The node has no registry: any
        other image would be pulled, and fails.
    claims : dict
        claimName -> host directory: the node's persistent volumes. A claim of the rendered objects is
        provisioned on first use; a claim the site creates itself (the data claim) is added by the caller.
    runs : list of PodRun
        Every container started, for :meth:`report` and :meth:`remove_all`.
    """

    root: Path
    images: dict[str, str]
    claims: dict[str, Path] = field(default_factory=dict)
    runs: list[PodRun] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # image names this kubelet added (removed by remove_all)

    POD_KEYS = frozenset(
        {
            "automountServiceAccountToken",
            "enableServiceLinks",
            "securityContext",
            "affinity",  # scheduling: one node here
            "restartPolicy",  # restarts are not emulated: a container that exits fails the test
            "containers",
            "volumes",
        }
    )
    CONTAINER_KEYS = frozenset(
        {
            "name",
            "image",
            "imagePullPolicy",
            "command",
            "args",
            "workingDir",
            "env",
            "ports",  # no port is published: the probes run inside the pod
            "startupProbe",
            "readinessProbe",
            "livenessProbe",
            "resources",
            "securityContext",
            "volumeMounts",
        }
    )

    def start(self, workload: dict[str, Any], objects: list[dict[str, Any]]) -> PodRun:
        """Start the single container of ``workload``'s pod template (a Deployment or a Job), detached.

        ``objects`` are the API objects of the namespace: the Secrets and ConfigMaps its volumes and env name,
        the claims it mounts.
        """
        kind, name = workload["kind"], workload["metadata"]["name"]
        where = f"{kind}/{name}"
        if kind not in ("Deployment", "Job"):
            raise NotEmulated(f"{where}: only a Deployment's or a Job's pod template is emulated")
        pod: dict[str, Any] = workload["spec"]["template"]["spec"]
        _known(pod, self.POD_KEYS, f"{where} pod spec")
        if pod.get("automountServiceAccountToken") is not False or pod.get("enableServiceLinks") is not False:
            raise NotEmulated(f"{where}: a service account token or Service environment variables (not emulated)")
        (container,) = pod["containers"]
        _known(container, self.CONTAINER_KEYS, f"{where} container {container['name']}")
        pod_name = f"{name}-{uuid.uuid4().hex[:8]}"
        docker_name = f"ppsvm-kpod-{pod_name}"
        command = ["docker", "run", "--detach", "--name", docker_name, "--label", CONTAINER_LABEL]
        command += ["--hostname", pod_name, "--network", "none", "--restart", "no"]
        command += self._security(pod, container, where)
        command += self._resources(container.get("resources", {}), where)
        environment, env_flags = self._env(container.get("env", []), objects, where)
        command += env_flags
        volumes = self._volumes(pod, pod_name, objects, where)
        command += self._mounts(container.get("volumeMounts", []), volumes, where)
        if "workingDir" in container:
            command += ["--workdir", container["workingDir"]]
        command += self._process(container, where)
        run = PodRun(docker_name, where, container)
        self.runs.append(run)  # removed afterwards even if it was created and could not start
        started = subprocess.run(
            command, env={**os.environ, **environment}, capture_output=True, text=True, timeout=120
        )
        assert started.returncode == 0, f"{where}: docker run failed: {started.stderr}\n{self.report()}"
        return run

    def run_to_completion(self, job: dict[str, Any], objects: list[dict[str, Any]]) -> str:
        """Run a Job's pod once (restartPolicy Never) and return its log; fail with the report if it fails."""
        if job["spec"]["template"]["spec"].get("restartPolicy") != "Never":
            raise NotEmulated(f"Job/{job['metadata']['name']}: only restartPolicy Never is emulated")
        run = self.start(job, objects)
        waited = subprocess.run(["docker", "wait", run.name], capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        assert waited.stdout.strip() == "0", f"{run.workload} exited {waited.stdout.strip()}:\n{self.report()}"
        return _logs(run.name)

    def wait_serving(self, run: PodRun, probe_name: str, timeout: float = READY_TIMEOUT_S) -> str:
        """Exec the container's own ``probe_name`` command until it succeeds; its output (one SERVING line)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.probe(run, probe_name)
            if answer.returncode == 0:
                return answer.stdout
            if not _running(run.name):
                raise AssertionError(f"{run.workload} stopped before it was ready:\n{self.report()}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{run.workload}: its {probe_name} did not succeed within {timeout:.0f} s; the last answer: "
                    f"{answer.stdout}{answer.stderr}\n{self.report()}"
                )
            time.sleep(2)

    def probe(self, run: PodRun, probe_name: str) -> subprocess.CompletedProcess[str]:
        """Run one of the container's probes as the kubelet does: its exec command inside the container."""
        probe = run.container[probe_name]
        where = f"{run.workload} {probe_name}"
        _known(probe, {"exec", "periodSeconds", "timeoutSeconds", "failureThreshold", "initialDelaySeconds"}, where)
        _known(probe["exec"], {"command"}, where)
        try:
            return subprocess.run(
                ["docker", "exec", run.name, *probe["exec"]["command"]],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(exc.cmd, 1, "", f"timed out after {PROBE_TIMEOUT_S} s")

    def report(self) -> str:
        """Every container's state and its log's end (what a failing wait does not show by itself)."""
        parts = []
        for run in self.runs:
            state = subprocess.run(
                ["docker", "inspect", "--format", "{{json .State}}", run.name],
                capture_output=True,
                text=True,
                timeout=60,
            )
            parts.append(f"--- {run.workload} ({run.name}) {state.stdout.strip()[-3000:]}\n{_logs(run.name)[-3000:]}")
        return "\n".join(parts) or "(no containers)"

    def remove_all(self) -> None:
        """Remove every container this kubelet started and every image name it added."""
        for run in self.runs:
            subprocess.run(["docker", "rm", "-f", "-v", run.name], capture_output=True, timeout=120)
        for tag in self.tags:
            subprocess.run(["docker", "image", "rm", tag], capture_output=True, timeout=120)

    # --- the container's process and security ------------------------------------------------------------

    def _process(self, container: dict[str, Any], where: str) -> list[str]:
        """Image and process: ``command`` replaces the image's entrypoint, ``args`` its CMD (Kubernetes' rule)."""
        command, args = list(container.get("command", [])), list(container.get("args", []))
        if any("$(" in word for word in command + args):
            raise NotEmulated(f"{where}: $(VAR) expansion in command or args")
        policy = container.get("imagePullPolicy")
        if policy not in ("IfNotPresent", "Never"):
            raise NotEmulated(f"{where}: imagePullPolicy {policy!r} (no registry here: IfNotPresent or Never)")
        image = container["image"]
        if image not in self.images:
            raise AssertionError(f"{where}: image {image!r} would be pulled (ErrImagePull): the node has {self.images}")
        if image != self.images[image] and image not in self.tags:
            subprocess.run(["docker", "tag", self.images[image], image], check=True, capture_output=True, timeout=60)
            self.tags.append(image)
        if command:
            return ["--entrypoint", command[0], image, *command[1:], *args]
        return [image, *args]

    def _security(self, pod: dict[str, Any], container: dict[str, Any], where: str) -> list[str]:
        """User, groups, root filesystem, capabilities and privilege escalation, pod and container contexts."""
        pod_context = pod.get("securityContext", {})
        _known(pod_context, {"runAsNonRoot", "runAsUser", "runAsGroup", "fsGroup", "seccompProfile"}, f"{where} pod")
        if pod_context.get("seccompProfile", {"type": "RuntimeDefault"}) != {"type": "RuntimeDefault"}:
            raise NotEmulated(f"{where}: seccomp profile {pod_context['seccompProfile']} (docker's default only)")
        context = container.get("securityContext", {})
        _known(
            context,
            {"allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities", "runAsUser", "runAsGroup"},
            f"{where} container",
        )
        user = context.get("runAsUser", pod_context.get("runAsUser"))
        group = context.get("runAsGroup", pod_context.get("runAsGroup"))
        if user is None:
            raise NotEmulated(f"{where}: no runAsUser (the image's user is not looked up)")
        if pod_context.get("runAsNonRoot") and user == 0:
            raise AssertionError(f"{where}: runAsNonRoot with runAsUser 0: the kubelet refuses to start it")
        flags = ["--user", f"{user}" if group is None else f"{user}:{group}"]
        if "fsGroup" in pod_context:
            flags += ["--group-add", str(pod_context["fsGroup"])]
        if context.get("readOnlyRootFilesystem"):
            flags.append("--read-only")
        if context.get("allowPrivilegeEscalation") is False:
            flags += ["--security-opt", "no-new-privileges"]
        capabilities = context.get("capabilities", {})
        _known(capabilities, {"drop", "add"}, f"{where} capabilities")
        flags += [flag for name in capabilities.get("drop", []) for flag in ("--cap-drop", name)]
        flags += [flag for name in capabilities.get("add", []) for flag in ("--cap-add", name)]
        return flags

    def _resources(self, resources: dict[str, Any], where: str) -> list[str]:
        """Limits as docker's (memory without swap, as on a node); requests only schedule, and there is one node."""
        _known(resources, {"requests", "limits"}, f"{where} resources")
        for table in resources.values():
            _known(table, {"cpu", "memory"}, f"{where} resources")
            for name, value in table.items():
                _quantity(value, f"{where} resources {name}")
        limits = resources.get("limits", {})
        flags = []
        if "memory" in limits:
            memory = str(int(_quantity(limits["memory"], where)))
            flags += ["--memory", memory, "--memory-swap", memory]
        if "cpu" in limits:
            flags += ["--cpus", str(_quantity(limits["cpu"], where))]
        return flags

    def _env(
        self, env: list[dict[str, Any]], objects: list[dict[str, Any]], where: str
    ) -> tuple[dict[str, str], list[str]]:
        """The container's variables (values, Secret and ConfigMap keys), as values for docker's environment and
        ``--env NAME`` flags (so that no secret value is on docker's command line)."""
        values: dict[str, str] = {}
        for variable in env:
            _known(variable, {"name", "value", "valueFrom"}, f"{where} env")
            name = variable["name"]
            if "value" in variable:
                values[name] = variable["value"]
                continue
            source = variable["valueFrom"]
            _known(source, {"secretKeyRef", "configMapKeyRef"}, f"{where} env {name}")
            ((kind_key, ref),) = source.items()
            _known(ref, {"name", "key"}, f"{where} env {name}")
            kind = "Secret" if kind_key == "secretKeyRef" else "ConfigMap"
            files = _object_files(_named(objects, kind, ref["name"], where))
            assert ref["key"] in files, f"{where} env {name}: {kind} {ref['name']} has no key {ref['key']!r}"
            values[name] = files[ref["key"]].decode("utf-8")
        return values, [flag for name in values for flag in ("--env", name)]

    # --- volumes -----------------------------------------------------------------------------------------

    def _volumes(
        self, pod: dict[str, Any], pod_name: str, objects: list[dict[str, Any]], where: str
    ) -> dict[str, Path]:
        """Each volume of the pod as a host directory, owned as the kubelet leaves it."""
        fs_group = pod.get("securityContext", {}).get("fsGroup")
        directories = {}
        for volume in pod.get("volumes", []):
            name = volume["name"]
            kinds = set(volume) - {"name"}
            at = f"{where} volume {name}"
            if len(kinds) != 1 or not kinds <= {"secret", "configMap", "persistentVolumeClaim", "emptyDir"}:
                raise NotEmulated(f"{at}: {sorted(kinds)} (secret, configMap, persistentVolumeClaim, emptyDir only)")
            (kind,) = kinds
            source = volume[kind]
            if kind in ("secret", "configMap"):
                directory = self._projected(source, kind, objects, self.root / pod_name / name, fs_group, at)
            elif kind == "persistentVolumeClaim":
                _known(source, {"claimName", "readOnly"}, at)
                claim = source["claimName"]
                if claim not in self.claims:
                    _named(objects, "PersistentVolumeClaim", claim, at)  # provisioned only if the render has it
                    self.claims[claim] = self.root / "claims" / claim
                    self.claims[claim].mkdir(parents=True)
                directory = self.claims[claim]
                _set_ownership(directory, fs_group, read_only=bool(source.get("readOnly")))
            else:
                _known(source, {"sizeLimit", "medium"}, at)  # sizeLimit: enforced by eviction, not emulated
                if source.get("medium", ""):
                    raise NotEmulated(f"{at}: emptyDir medium {source['medium']!r}")
                directory = self.root / pod_name / name
                directory.mkdir(parents=True)
                directory.chmod(0o777)
                _set_ownership(directory, fs_group, read_only=False)
            directories[name] = directory
        return directories

    def _projected(
        self,
        source: dict[str, Any],
        kind: str,
        objects: list[dict[str, Any]],
        directory: Path,
        fs_group: int | None,
        where: str,
    ) -> Path:
        """A Secret's or ConfigMap's keys as files (``items`` choose and rename them), mode ``defaultMode`` or the
        item's, owned by root and ``fsGroup``."""
        name_key = "secretName" if kind == "secret" else "name"
        _known(source, {name_key, "defaultMode", "items"}, where)
        files = _object_files(_named(objects, "Secret" if kind == "secret" else "ConfigMap", source[name_key], where))
        default_mode = source.get("defaultMode", 0o644)
        items = source.get("items", [{"key": key, "path": key} for key in files])
        directory.mkdir(parents=True)
        for item in items:
            _known(item, {"key", "path", "mode"}, f"{where} items")
            assert item["key"] in files, f"{where}: no key {item['key']!r}"
            target = directory / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[item["key"]])
            target.chmod(item.get("mode", default_mode))
        _set_ownership(directory, fs_group, read_only=True)
        return directory

    def _mounts(self, mounts: list[dict[str, Any]], volumes: dict[str, Path], where: str) -> list[str]:
        """``--mount`` flags: a volume (or its ``subPath``) bound at ``mountPath``, read only where declared."""
        flags = []
        for mount in mounts:
            _known(mount, {"name", "mountPath", "readOnly", "subPath"}, f"{where} volumeMounts")
            source = volumes[mount["name"]] / mount.get("subPath", "")
            assert source.exists(), f"{where}: {mount['name']} has no subPath {mount.get('subPath')!r}"
            assert "," not in str(source) + mount["mountPath"], "a comma would split docker's --mount option"
            spec = f"type=bind,source={source},target={mount['mountPath']}"
            flags += ["--mount", spec + (",readonly" if mount.get("readOnly") else "")]
        return flags


def _named(objects: list[dict[str, Any]], kind: str, name: str, where: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{where}: no {kind} {name} in the namespace (the site creates it before the rollout)"
    return found[0]


def _object_files(obj: dict[str, Any]) -> dict[str, bytes]:
    """A Secret's or ConfigMap's keys and their bytes (``data`` base64 for a Secret, ``stringData`` as text)."""
    _known(obj, {"apiVersion", "kind", "metadata", "type", "data", "stringData", "binaryData"}, obj["kind"])
    if obj["kind"] == "Secret":
        files = {key: base64.b64decode(value) for key, value in obj.get("data", {}).items()}
        return files | {key: value.encode("utf-8") for key, value in obj.get("stringData", {}).items()}
    files = {key: value.encode("utf-8") for key, value in obj.get("data", {}).items()}
    return files | {key: base64.b64decode(value) for key, value in obj.get("binaryData", {}).items()}


def _running(name: str) -> bool:
    state = subprocess.run(
        ["docker", "inspect", "--format", "{{.State.Running}}", name], capture_output=True, text=True, timeout=60
    )
    return state.stdout.strip() == "true"


def _logs(name: str) -> str:
    log = subprocess.run(["docker", "logs", "--tail", "40", name], capture_output=True, text=True, timeout=60)
    return log.stdout + log.stderr


# --- fixtures --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """``ppsvm:local`` built as docker-compose.yml builds it, on the engine docker/local-engine.sh starts.

    Skips, saying why, without kubectl 1.21+, root, or an engine; removes ppsvm's superseded (dangling) builds
    afterwards, as tests/integration/test_docker_compose.py does.
    """
    if KUBECTL_VERSION is None or KUBECTL_VERSION < OLDEST_KUBECTL:
        pytest.skip(f"no kubectl {'.'.join(map(str, OLDEST_KUBECTL))} or later to render the overlay")
    if os.geteuid() != 0:
        pytest.skip("needs root: it starts the Docker engine and owns volumes to fsGroup as the kubelet does")
    if not ENGINE_SCRIPT.is_file():
        pytest.skip(f"no Docker engine: the engine script {ENGINE_SCRIPT} is missing")
    for attempt in range(3):  # test_docker_compose.py may run the same script at once (apt's lock, dockerd's pid)
        try:
            engine = subprocess.run(
                ["bash", str(ENGINE_SCRIPT)], capture_output=True, text=True, timeout=ENGINE_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"no Docker engine: {ENGINE_SCRIPT} did not finish within {ENGINE_TIMEOUT_S} s")
        if engine.returncode == 0 or attempt == 2:
            break
        time.sleep(30 * (attempt + 1))
    if engine.returncode != 0:
        pytest.skip(f"no Docker engine: {ENGINE_SCRIPT} exited {engine.returncode}: {engine.stderr.strip()[-2000:]}")
    try:
        build = subprocess.run(
            ["docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "-t", BUILT_IMAGE, "."],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
        assert build.returncode == 0, f"docker build failed:\n{(build.stdout + build.stderr)[-5000:]}"
        yield BUILT_IMAGE
    finally:
        subprocess.run(
            ["docker", "image", "prune", "-f", "--filter", "label=org.ppsvm.image"], capture_output=True, timeout=300
        )


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory of the test's own (bundles with private keys, the node's volumes), removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="ppsvm-kustomize-pod-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def kubelet(image: str, workdir: Path) -> Iterator[Kubelet]:
    """The node: the built image under the name the site's overlay gives it (its registry's, pulled by a cluster)."""
    node = Kubelet(workdir / "node", images={SITE_IMAGE: image})
    try:
        yield node
    finally:
        node.remove_all()


def _ppsvm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ppsvm", *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


# --- the test --------------------------------------------------------------------------------------------------


def test_a_new_entity_serves_from_its_rendered_overlay_with_no_hand_edit(kubelet: Kubelet, workdir: Path) -> None:
    # The organisation's bundle, by the onboarding steps; its records (the walk-through's stand-in export: a
    # cell of WDBC) beside its config, which names them `cell.csv` (`org join --data cell.csv`).
    root = _onboard(workdir / "organisations")
    exports = workdir / "exports"
    options = ["--rows", "2", "--cols", "3", "--label", "1", "--positive", "M", "--drop", "0", "--id-column", "0"]
    split = _ppsvm("-q", "split", str(WDBC), *options, "--out", str(exports), cwd=workdir)
    assert split.returncode == 0, split.stderr
    shutil.copyfile(exports / "r0c0.csv", root / "r0c0" / "cell.csv")

    # Step 5 of docs/tutorials/deployment.md, as docs/how-to/kubernetes.md writes it.
    done = _ppsvm("org", "kustomize", "--bundle", "r0c0/", "--image", SITE_IMAGE, cwd=root)
    assert done.returncode == 0, done.stderr
    # The overlay alone goes to the host that runs kubectl, and is rendered there.
    kubectl_host = workdir / "kubectl-host" / "r0c0-kubernetes"
    shutil.copytree(root / "r0c0" / "kubernetes", kubectl_host)
    _, first_start = render(kubectl_host / "first-start")
    _, site = render(kubectl_host / "site")

    # The printed steps: the records file it names on the claim the site creates, first-start/, then site/.
    steps = done.stdout
    claimed = re.search(
        r"create the claim (\S+) .* the records file (\S+) at its root \(the bundle's config names (\S+);", steps
    )
    assert claimed is not None, steps
    claim, name, records = claimed.groups()
    data = workdir / "site-storage" / claim
    data.mkdir(parents=True)
    shutil.copyfile(root / records, data / name)
    kubelet.claims[claim] = data
    assert steps.index("apply -k r0c0/kubernetes/first-start") < steps.index("apply -k r0c0/kubernetes/site")

    job = only(first_start, "Job")
    job_log = kubelet.run_to_completion(job, first_start)
    assert "entity r0c0: started release log /var/lib/ppsvm/releases/r0c0.releases.jsonl" in job_log, job_log
    releases = kubelet.claims[only(first_start, "PersistentVolumeClaim")["metadata"]["name"]]
    assert (releases / "r0c0.releases.jsonl").is_file()

    # Every later rollout applies site/ alone: its Deployment is first-start's (the same Secret, the same claim).
    deployment = only(site, "Deployment")
    assert deployment == only(first_start, "Deployment")
    entity = kubelet.start(deployment, site)
    ready = kubelet.wait_serving(entity, "readinessProbe")
    assert ": SERVING (" in ready, ready
    for probe in ("startupProbe", "livenessProbe"):
        answer = kubelet.probe(entity, probe)
        assert answer.returncode == 0 and ": SERVING (" in answer.stdout, f"{probe}: {answer}\n{kubelet.report()}"
