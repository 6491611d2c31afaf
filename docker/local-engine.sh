#!/usr/bin/env bash
# A Docker engine and a python:3.11-slim base image on a Debian machine that reaches
# Debian's package archive and PyPI but no container registry (CI, air-gapped labs).
#
#   docker/local-engine.sh            # as root; safe to rerun; prints the base image tag
#
# With a registry at hand none of this is needed: install Docker as usual and
# `docker-compose up` pulls python:3.11-slim itself.
#
# What it does, each step only when missing:
#   1. installs docker.io, docker-compose (v1) and debootstrap from Debian;
#   2. starts dockerd (vfs storage, no iptables or default bridge: compose's own
#      networks still connect the containers), logging to /var/log/ppsvm-dockerd.log;
#   3. builds the base image ($PPSVM_BASE_IMAGE, default python:3.11-slim) from a
#      minimal Debian bookworm with python3, venv and pip, this machine's CA bundle,
#      and python/pip on /usr/local/bin as in the official image.
# The Dockerfile then builds with `--network host` (compose: `build: {network: host}`)
# so that pip reaches PyPI.
set -euo pipefail

image="${PPSVM_BASE_IMAGE:-python:3.11-slim}"
suite=bookworm
mirror=http://deb.debian.org/debian
say() { printf 'local-engine: %s\n' "$*" >&2; }
fail() { say "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "needs root (it installs packages and starts dockerd)"
# One run at a time: the test suite's docker tests may call it at once (apt's lock, a half-built image).
exec 9>/var/lock/ppsvm-local-engine.lock
flock 9

missing=()
for tool in dockerd docker-compose debootstrap; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || fail "missing ${missing[*]} and no apt-get to install them"
    say "installing docker.io docker-compose debootstrap (missing: ${missing[*]})"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose debootstrap >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    say "starting dockerd"
    # 9>&-: the daemon must not inherit the lock, or every later run of this script would wait for it for ever.
    setsid nohup dockerd --storage-driver=vfs --iptables=false --bridge=none \
        >/var/log/ppsvm-dockerd.log 2>&1 </dev/null 9>&- &
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || fail "dockerd did not answer within 60 s; see /var/log/ppsvm-dockerd.log"
fi

if ! docker image inspect "$image" >/dev/null 2>&1; then
    rootfs="$(mktemp -d /tmp/ppsvm-rootfs.XXXXXX)"
    chmod 0755 "$rootfs"  # mktemp makes it 0700: the image's / would shut out every non-root user (the pods')
    trap 'rm -rf "$rootfs"' EXIT
    say "building $image from Debian $suite (a few minutes; log in /tmp/ppsvm-debootstrap.log)"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        "$suite" "$rootfs" "$mirror" >/tmp/ppsvm-debootstrap.log 2>&1 \
        || fail "debootstrap failed; see /tmp/ppsvm-debootstrap.log"
    # The host's CA bundle, so pip inside builds trusts whatever proxy this machine trusts.
    cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
    # As in python:3.11-slim: pip may install into the system interpreter, and both live on /usr/local/bin.
    rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
    for name in python python3; do ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/$name"; done
    ln -sf /usr/bin/pip3 "$rootfs/usr/local/bin/pip"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' \
        --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
        - "$image" >/dev/null
fi
printf '%s\n' "$image"
