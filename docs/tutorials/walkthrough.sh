#!/usr/bin/env bash
# Onboarding end to end on one machine, as docs/tutorials/deployment.md describes it: two hospitals that
# each hold some of the same patients' columns, a coordinator, a prediction client and an operator, each
# working in a directory of its own as it would on its own host. Run it from a clone's root;
# tests/integration/test_walkthrough.py runs this file as it is.
set -euo pipefail
PORT=${PORT:-50071}  # north listens on PORT, south on PORT + 1, the prediction service on PORT + 2
DATA=${DATA:-ppsvm/data/bundled/wdbc.data}
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT

# Stand-in exports: the two hospitals' columns of WDBC (yours: your own files, see the own-data tutorial).
ppsvm -q split "$DATA" --rows 1 --cols 2 --label 1 --positive M --drop 0 --id-column 0 --out exports
cp exports/r0c0.csv north.csv && cp exports/r0c1.csv south.csv  # each hospital's own file

# 1. Each party makes its keys and a request (only the request leaves).
ppsvm org init --name north --role entity --out north/
ppsvm org init --name south --role entity --out south/
ppsvm org init --name coordinator --role coordinator --out coordinator/
ppsvm org init --name client --role client --out client/

# 2. The operator: a CA, the plan, and the certificates and public keys for everyone.
ppsvm operator ca --out op/
cat > plan.toml <<PLAN
[task]
task = "classify"
kernel = "gaussian"

[[entity]]
id = "north"
address = "127.0.0.1:$PORT"
row_block = 0
column_block = 0

[[entity]]
id = "south"
address = "127.0.0.1:$((PORT + 1))"
row_block = 0
column_block = 1
PLAN
ppsvm operator publish --ca-dir op/ --plan plan.toml --requests */*.request.json --client client --out published/

# 3. Each hospital seals its shares of the group secrets to the others; the operator relays them.
ppsvm org seal --bundle north/ --published published/ --out relay/
ppsvm org seal --bundle south/ --published published/ --out relay/

# 4. Everyone joins. The hospitals read each group's fingerprint to each other by telephone: they must agree.
#    The data file sits in the bundle here (one outside it is mounted read-only at /data by compose.yml).
cp north.csv north/ && cp south.csv south/
ppsvm org join --bundle north/ --published published/ --shares relay/ --data north.csv
ppsvm org join --bundle south/ --published published/ --shares relay/ --data south.csv
ppsvm org join --bundle coordinator/ --published published/
ppsvm org join --bundle client/ --published published/

# 5. Each hospital starts its entity from its bundle (its compose.yml does the same in a container).
(cd north && ppsvm entity --config north.toml) &
(cd south && ppsvm entity --config south.toml) &
serving() {  # address, name: wait up to a minute for the server to answer SERVING
    for _ in $(seq 60); do
        ppsvm -q health "$1" --ca client/ca.pem --cert client/client.pem --key client/client.key --name "$2" \
            --timeout 2 && return 0
        sleep 1
    done
    return 1
}
serving "127.0.0.1:$PORT" north && serving "127.0.0.1:$((PORT + 1))" south

# 6. The coordinator trains, evaluates on the held-out records, and serves the model.
ppsvm coordinator train --federation coordinator/federation.toml --model-out coordinator/model.json
ppsvm coordinator evaluate --federation coordinator/federation.toml --model coordinator/model.json
(ppsvm coordinator serve --federation coordinator/federation.toml --model coordinator/model.json \
    --listen "127.0.0.1:$((PORT + 2))") &

# 7. A clinician's application scores patients by their ids, with the client bundle; the hospital's
#    record-id key turns its own ids into the pseudonyms the entities know them by.
tail -n +2 north.csv | grep ',test,' | cut -d, -f1 | head -5 > ids.txt
serving "127.0.0.1:$((PORT + 2))" coordinator
ppsvm predict --server "127.0.0.1:$((PORT + 2))" --bundle client/ --ids ids.txt --id-key north/record-ids.key \
    --out predictions.csv
cat predictions.csv
