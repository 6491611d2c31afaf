#!/usr/bin/env sh
# Regenerate docker/demo/: the 2 x 2 checkerboard split of WDBC that docker-compose.yml mounts.
#
#   docker/make-demo.sh          # from the repository root; replaces docker/demo/
#
# `ppsvm split` gives every entity the same host with consecutive ports; in compose
# each entity is its own service listening on 50051, so the federation file is
# rewritten to address entity r<i>c<j> as r<i>c<j>:50051 (its service name).
# The entity configs keep the split's `listen` values; compose overrides them with
# --listen 0.0.0.0:50051.
#
# The column-block secrets and TLS keys written here are fresh random demo
# material (mode 0600), committed so the demo runs as is: fine for a demo and
# nothing else.
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
export PYTHONPATH=.
"$PYTHON" -m ppsvm split ppsvm/data/bundled/wdbc.data --rows 2 --cols 2 --out docker/demo --overwrite \
  --label 1 --positive M --drop 0 --id-column 0 --host 0.0.0.0 --seed 0
"$PYTHON" - <<'PY'
import dataclasses
from pathlib import Path

from ppsvm.config import federation_toml, load_federation

path = Path("docker/demo/federation.toml")
federation = load_federation(path)
entities = [dataclasses.replace(e, address=f"{e.id}:50051") for e in federation.entities]
tls = {"ca": "ca.pem", "cert": "coordinator.pem", "key": "coordinator.key"}  # as split wrote them, relative
path.write_text(federation_toml(federation.task, entities, tls), encoding="utf-8")
print(f"rewrote {path}: entities at their compose service names, port 50051")
PY
# The entities start their release logs inside their containers (--new-release-log in
# docker-compose.yml), so the empty ones the split wrote are not part of the demo.
rm -f docker/demo/r*c*.releases.jsonl
