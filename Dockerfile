# ppsvm: one image for entities and the coordinator (`ppsvm entity ...`, `ppsvm coordinator ...`).
#
#   docker build --network host -t ppsvm .
#   docker build --network host --build-arg BASE_IMAGE=python:3.12-slim -t ppsvm .
#
# No data, configs or secrets are baked in: each container gets only its own files
# as read-only bind mounts (see docker-compose.yml).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
# Lets `docker image prune --filter label=org.ppsvm.image` remove only ppsvm's own superseded builds.
LABEL org.ppsvm.image=ppsvm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# Runtime dependencies first, read from pyproject.toml, so that a code change
# does not reinstall numpy, scipy, cvxpy and grpcio (the slow layer).
COPY pyproject.toml /tmp/deps/
RUN python -c "import tomllib; print('\\n'.join(tomllib.load(open('/tmp/deps/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/deps/requirements.txt \
    && pip install -r /tmp/deps/requirements.txt \
    && rm -rf /tmp/deps

# The project itself (no test extras). README.m[d] copies the readme when it exists.
# /src is new here: the classic builder fails ("layer does not exist", moby#37965)
# after a COPY that changes nothing, such as copying pyproject.toml over itself.
COPY pyproject.toml LICENSE README.m[d] /src/
COPY ppsvm /src/ppsvm
RUN pip install --no-deps /src \
    && rm -rf /src \
    && ppsvm --version

WORKDIR /ppsvm
# Runs as root: `ppsvm split` writes cells, entity configs and secrets with mode
# 0600, and the bind-mounted files keep their host owner (root here), so a
# non-root user in the container could not read them. To run as another user,
# chown the mounted files to that user's uid on the host.
CMD ["ppsvm", "--help"]
