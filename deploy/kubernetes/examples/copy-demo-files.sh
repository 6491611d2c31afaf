#!/usr/bin/env sh
# Fill the example overlays from the compose demo's per-party bundles (docker/demo/<party>/, demo-only
# keys), each overlay with its own party's files only: kustomize reads a Secret's files only from
# inside the overlay's directory. The configs are the bundles' with the pod's paths:
#   entity.toml      = r0c0/r0c0.toml: the Secret's file names, records under /data, the release log
#                      on its claim at /var/lib/ppsvm/releases;
#   federation.toml  = coordinator/federation.toml: each entity at its Service in namespace ppsvm-<id>.
# Run it after docker/make-demo.sh; tests/unit/test_deploy_manifests.py checks the copies are current.
set -eu
cd "$(dirname "$0")/../../.."
PYTHON="${PYTHON:-.venv/bin/python}"
demo=docker/demo
out=deploy/kubernetes/examples
for name in ca.pem r0c0.pem r0c0.key column-block-0.secret record-ids.key pair-r0c0-r0c1.secret; do
    cp "$demo/r0c0/$name" "$out/r0c0/"
done
for name in ca.pem coordinator.pem coordinator.key; do
    cp "$demo/coordinator/$name" "$out/coordinator/"
done
chmod 600 "$out/r0c0/r0c0.key" "$out/r0c0/column-block-0.secret" "$out/r0c0/record-ids.key" \
    "$out/r0c0/pair-r0c0-r0c1.secret" "$out/coordinator/coordinator.key"
PYTHONPATH=. "$PYTHON" - <<'PY'
import dataclasses
import tomllib
from pathlib import Path

from ppsvm.config import federation_toml, load_federation, toml_document

demo, out = Path("docker/demo"), Path("deploy/kubernetes/examples")

config = tomllib.loads((demo / "r0c0/r0c0.toml").read_text(encoding="utf-8"))
entity, tls = config["entity"], config["tls"]
entity["data"] = "/data/" + entity["data"]
entity["secret_file"] = "column-block.secret"
entity["id_key_file"] = "record-ids.key"
# The secret r0c0 shares with its row-block peer r0c1 (secure aggregation), under the Secret's fixed name.
entity["pair_secrets"] = {peer: f"pair-{peer}.secret" for peer in entity.get("pair_secrets", {})}
tls.update(cert="entity.pem", key="entity.key")
privacy = config.setdefault("privacy", {})
privacy["release_log"] = f"/var/lib/ppsvm/releases/{entity['id']}.releases.jsonl"
tables = [("[entity]", entity), ("[privacy]", privacy), ("[tls]", tls)]
tables += [("[[schema.features]]", feature) for feature in config.get("schema", {}).get("features", [])]
unknown = set(config) - {"entity", "privacy", "tls", "schema"}
assert not unknown, f"docker/demo/r0c0/r0c0.toml has tables this script does not carry over: {unknown}"
comment = "ppsvm entity r0c0 in Kubernetes: docker/demo/r0c0/r0c0.toml with the pod's paths (copy-demo-files.sh)."
(out / "r0c0/entity.toml").write_text(toml_document(comment, tables), encoding="utf-8")

federation = load_federation(demo / "coordinator/federation.toml")
entities = [
    dataclasses.replace(e, address=f"ppsvm-entity.ppsvm-{e.id}.svc.cluster.local:50051") for e in federation.entities
]
names = {"ca": "ca.pem", "cert": "coordinator.pem", "key": "coordinator.key"}
(out / "coordinator/federation.toml").write_text(federation_toml(federation.task, entities, names), encoding="utf-8")
PY
echo "filled $out/r0c0 and $out/coordinator from $demo"
