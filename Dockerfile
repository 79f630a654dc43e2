# The worker's own image: cloudrunner and its Python dependencies on the local Debian base.
#
# No registry is reachable and HTTPS to PyPI fails inside containers here, so the Python
# packages come in as wheels built on the host (network-free and reproducible):
#
#   bash scripts/build-worker-image
#
# which runs `pip wheel . -w build/wheels` and then builds this file with build/ as context.
# The worker talks to the host's engine through its socket, and the workspace is mounted at
# the same absolute path inside the worker as on the host (hook containers are siblings that
# bind-mount it by host path); see deploy/compose.yaml.
ARG BASE=cloudrunner/base:bookworm
FROM ${BASE}

ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv git ca-certificates \
 && rm -rf /var/lib/apt/lists/*

COPY wheels/ /tmp/wheels/
RUN python3 -m venv /opt/cloudrunner \
 && /opt/cloudrunner/bin/pip install --no-index --find-links /tmp/wheels cloudrunner \
 && rm -rf /tmp/wheels
COPY images/ /opt/cloudrunner/images/
ENV CLOUDRUNNER_IMAGES_DIR=/opt/cloudrunner/images

ENV PATH=/opt/cloudrunner/bin:$PATH
ENTRYPOINT ["cloudrunner"]
CMD ["--help"]
