#!/usr/bin/env sh
# Regenerate docker/demo/: per-organisation bundles for the 2 x 2 checkerboard split of WDBC that
# docker-compose.yml mounts, made by the same onboarding steps organisations run apart (`ppsvm org`,
# `ppsvm operator`; docs/tutorials/deployment.md).
#
#   docker/make-demo.sh          # from the repository root; replaces docker/demo/
#
# The split is written to a temporary directory first, and its federation file rewritten to
# address entity r<i>c<j> as r<i>c<j>:50051 (its compose service name): that is the operator's
# plan, so every entity's config listens on port 50051. Each party's directory then holds only
# its own key, certificate, secrets and config. The operator's CA key is deleted: nobody can mint
# another identity this demo federation trusts.
#
# The keys and secrets written here are fresh random demo material (mode 0600), committed so the
# demo runs as is: fine for a demo and nothing else.
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
export PYTHONPATH=.
SPLIT="$(mktemp -d)"
trap 'rm -rf "$SPLIT"' EXIT
"$PYTHON" -m ppsvm split ppsvm/data/bundled/wdbc.data --rows 2 --cols 2 --out "$SPLIT" --overwrite \
  --label 1 --positive M --drop 0 --id-column 0 --host 0.0.0.0 --seed 0 >/dev/null
rm -rf docker/demo
SPLIT="$SPLIT" "$PYTHON" - <<'PY'
import dataclasses
import os
from pathlib import Path

from ppsvm.config import federation_toml, load_federation
from ppsvm.onboarding import bundle_split

split = Path(os.environ["SPLIT"])
path = split / "federation.toml"
federation = load_federation(path)
entities = [dataclasses.replace(e, address=f"{e.id}:50051") for e in federation.entities]
path.write_text(federation_toml(federation.task, entities), encoding="utf-8")
for group, fingerprint in bundle_split(
    split, Path("docker/demo"), coordinator="coordinator", client="client", valid_days=3650
).items():
    print(f"{group}: {fingerprint}")
PY
rm -rf docker/demo/operator
# The entities start their release logs inside their containers (--new-release-log in
# docker-compose.yml), so the new ones in the bundles are not part of the demo.
rm -f docker/demo/r*c*/r*c*.releases.jsonl
echo "wrote docker/demo/: one directory per party, plus published/"
# The Kubernetes example overlays hold copies of their own party's files (kustomize reads only inside an overlay).
PYTHON="$PYTHON" deploy/kubernetes/examples/copy-demo-files.sh
