# ppsvm: one image for entities and the coordinator (`ppsvm entity ...`, `ppsvm coordinator ...`).
#
#   docker build --network host -t ppsvm .
#   docker build --network host --build-arg BASE_IMAGE=python:3.12-slim -t ppsvm .
#
# No data, configs or secrets are baked in: each container gets only its own files
# as read-only bind mounts (see docker-compose.yml).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src

# Runtime dependencies first, read from pyproject.toml, so that a code change
# does not reinstall numpy, scipy, cvxpy and grpcio (the slow layer).
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The project itself (no test extras). README.m[d] copies the readme when it exists.
COPY pyproject.toml README.m[d] ./
COPY common ./common
COPY entity ./entity
COPY coordinator ./coordinator
RUN pip install --no-deps . \
    && cd / && rm -rf /src \
    && ppsvm --version

WORKDIR /ppsvm
# Runs as root: `ppsvm split` writes cells, entity configs and secrets with mode
# 0600, and the bind-mounted files keep their host owner (root here), so a
# non-root user in the container could not read them. To run as another user,
# chown the mounted files to that user's uid on the host.
CMD ["ppsvm", "--help"]
