# The worker's image: `cloudrunner serve` on a Python 3.11 runtime, installed from this
# source tree.
#
#   docker build -t cloudrunner/worker .                      # where PyPI is reachable
#   bash scripts/build-worker-image                            # here: no registry, offline pip
#
# BASE_IMAGE is any Debian bookworm image: the official Python slim image by default, or a
# plain Debian without Python (the local cloudrunner/base:bookworm here), in which case both
# stages install Debian's python3 (3.11) with apt-get. The build stage makes a venv in
# /opt/cloudrunner and installs the package into it; the runtime stage copies the venv and
# adds only what the worker runs (python3, git for clones, ssh for ssh clones, tini as PID 1).
#
# Offline builds: when build/wheelhouse/ exists in the context, pip installs from it alone
# (PIP_NO_INDEX=1): scripts/build-worker-image fills it on the host with `pip wheel` (the
# dependencies and the build backend), because HTTPS to PyPI fails inside containers here.
# The image has no Docker CLI: the worker talks to the engine through the docker SDK, over
# a mounted socket (deploy/compose.yaml) or a Docker-in-Docker sidecar (deploy/kubernetes/).
#
# The compiled per-event client, cloudrunner-hook, is built on the host (Go, static, no Go
# in the image) and copied in from build/cloudrunner-hook: scripts/build-worker-image runs
# `bash client/build --host build/cloudrunner-hook` first; for a plain `docker build`, run
# that yourself (for another architecture, copy client/dist/cloudrunner-hook-linux-ARCH
# there after `bash client/build`).
ARG BASE_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------- build
FROM ${BASE_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1
# hadolint ignore=DL3008
RUN if python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then \
      echo "build: using the base image's $(python3 --version)"; \
    else \
      apt-get update \
      && apt-get install -y --no-install-recommends python3 python3-venv \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && python3 -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
 && python3 -m venv /opt/cloudrunner

# The wildcard makes the wheelhouse optional: pyproject.toml always matches, so the COPY
# never fails, and pip ignores it among the wheels.
COPY pyproject.toml build/wheelhous[e] /wheelhouse/
# The build hook (hatch_build.py) puts the image recipes (this file too) into the package
# and stamps the commit (CLOUDRUNNER_COMMIT: there is no .git here; `cloudrunner images
# worker` passes it); no Go here, so the wheel built is the pure one and the client is
# copied in below.
ARG CLOUDRUNNER_COMMIT=unknown
COPY pyproject.toml README.md hatch_build.py Dockerfile /src/
COPY cloudrunner/ /src/cloudrunner/
COPY launcher/ /src/launcher/
COPY images/ /src/images/
RUN if ls /wheelhouse/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1; fi \
 && CLOUDRUNNER_WHEEL_ARCH=pure CLOUDRUNNER_COMMIT="$CLOUDRUNNER_COMMIT" \
    /opt/cloudrunner/bin/pip install --no-cache-dir --find-links /wheelhouse /src \
 && /opt/cloudrunner/bin/cloudrunner --version

# ---------------------------------------------------------------------------- runtime
FROM ${BASE_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
# $packages is a list of words on purpose
# hadolint ignore=DL3008,SC2086
RUN packages="git ca-certificates openssh-client tini"; \
    if ! python3 -c 'import sys; assert sys.version_info >= (3, 11)' >/dev/null 2>&1; then \
      packages="$packages python3"; \
    fi \
 && apt-get update \
 && apt-get install -y --no-install-recommends $packages \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && groupadd --system --gid 10010 cloudrunner \
 && useradd --system --uid 10010 --gid 10010 --home-dir /var/lib/cloudrunner \
      --shell /usr/sbin/nologin cloudrunner \
 && install -d -o 10010 -g 10010 -m 0700 /var/lib/cloudrunner \
 && install -d -o 10010 -g 10010 -m 0750 /var/log/cloudrunner \
 && install -d -m 0755 /etc/cloudrunner /etc/cursor

COPY --from=build /opt/cloudrunner /opt/cloudrunner
COPY build/cloudrunner-hook /opt/cloudrunner/bin/cloudrunner-hook
COPY images/ /opt/cloudrunner/images/
ENV PATH=/opt/cloudrunner/bin:$PATH \
    CLOUDRUNNER_IMAGES_DIR=/opt/cloudrunner/images \
    CLOUDRUNNER_STATE_DIR=/var/lib/cloudrunner

LABEL org.opencontainers.image.title="cloudrunner worker" \
      org.opencontainers.image.description="Containerised executor for Cursor-style agent hooks"

# Non-root. The engine's socket still has to be reachable: give the container the socket's
# group (compose: group_add) or run the engine beside it (Kubernetes: the dind sidecar).
USER 10010:10010
WORKDIR /var/lib/cloudrunner

# Answers while the process serves (the compiled client: no Python start every 30 s);
# `cloudrunner-hook health --ready` also checks the engine.
# The socket is $CLOUDRUNNER_SOCKET or $CLOUDRUNNER_STATE_DIR/cloudrunner.sock, so set the
# state directory through the environment, not only in a settings file.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["cloudrunner-hook", "health"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "cloudrunner", "serve"]
