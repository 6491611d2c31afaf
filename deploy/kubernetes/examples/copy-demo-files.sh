#!/usr/bin/env sh
# Write the example overlays from the compose demo's per-party bundles (docker/demo/<party>/, demo-only keys)
# with `ppsvm org kustomize`'s own code (ppsvm.kustomize.write_overlay), each overlay holding its own party's
# files only. Two differences from what an organisation gets in BUNDLE/kubernetes/:
#   - the overlays name the repository's bases (ppsvm/kubernetes/) by a relative path instead of carrying a copy;
#   - coordinator/site/federation.toml addresses each entity at its Service in namespace ppsvm-<id> (the compose
#     demo's plan addresses them by their compose service names).
# Run it after docker/make-demo.sh; tests/unit/test_deploy_manifests.py checks the overlays are current.
set -eu
cd "$(dirname "$0")/../../.."
PYTHON="${PYTHON:-.venv/bin/python}"
PYTHONPATH=. "$PYTHON" - <<'PY'
import dataclasses
import shutil
from pathlib import Path

from ppsvm.config import federation_toml, load_federation
from ppsvm.kustomize import write_overlay

demo, out, bases = Path("docker/demo"), Path("deploy/kubernetes/examples"), Path("ppsvm/kubernetes")
for party in ("r0c0", "coordinator"):
    shutil.rmtree(out / party, ignore_errors=True)
    write_overlay(demo / party, out / party, bases=bases)

path = out / "coordinator/site/federation.toml"
federation = load_federation(path)
entities = [
    dataclasses.replace(e, address=f"ppsvm-entity.ppsvm-{e.id}.svc.cluster.local:50051") for e in federation.entities
]
names = {"ca": "ca.pem", "cert": "coordinator.pem", "key": "coordinator.key"}
path.write_text(federation_toml(federation.task, entities, names), encoding="utf-8")
PY
echo "wrote deploy/kubernetes/examples/r0c0 and deploy/kubernetes/examples/coordinator from docker/demo"
