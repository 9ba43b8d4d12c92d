# shardsync's container image: the package and its dependencies in a virtualenv, on a slim Python base.
#   docker build -t shardsync:0.1.0 .
# The build stage installs the locked dependencies, then the source tree (the only network use is PyPI, at
# build time); the final stage copies the virtualenv and runs as 65532:65532 with nothing to write outside
# /tmp, so it works with readOnlyRootFilesystem (deploy/base mounts an emptyDir at /tmp).
# tests/deploy/test_image.py repeats the build stage's COPY and RUN steps in a fresh venv, since CI has no
# container engine, and checks that requirements.lock pins every dependency pyproject.toml names. After a
# change of those dependencies, regenerate it with pip-tools:
#   pip-compile --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links \
#     --output-file requirements.lock pyproject.toml
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY shardsync/ shardsync/
# The dependencies come from requirements.lock (every version pinned, every file's hash checked), so two
# builds install the same thing; the package itself goes on top without resolving anything again.
RUN python -m venv /opt/shardsync \
    && /opt/shardsync/bin/pip install --no-cache-dir --disable-pip-version-check --require-hashes \
       -r requirements.lock \
    && /opt/shardsync/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps .

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="shardsync" \
      org.opencontainers.image.description="Kubernetes DNS controller: N active replicas sharding DNS zones, external-dns compatible" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
COPY --from=build /opt/shardsync /opt/shardsync
# Bytecode was compiled at install time; nothing is written at run time, and HOME points at the /tmp mount.
ENV PATH=/opt/shardsync/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 65532:65532
EXPOSE 7979
ENTRYPOINT ["shardsync"]
CMD ["run"]
