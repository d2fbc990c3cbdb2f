# syntax=docker/dockerfile:1
# vlm-sidecar: build a wheel, install it with its runtime dependencies into a venv, and copy
# only that venv into a slim runtime that runs as a non-root numeric UID and never writes to
# its root filesystem (so readOnlyRootFilesystem: true works).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sidecar ./sidecar
# The wheel holds the package only; its runtime dependencies and the otel extra (the
# OpenTelemetry SDK, used only when OTEL_* asks for traces), never the dev extras, are
# resolved into the venv. pip compiles the bytecode now, so nothing is written at run time.
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/venv \
    && wheel="$(echo /wheels/vlm_sidecar-*.whl)" \
    && python -m pip --python /opt/venv/bin/python install --no-cache-dir "${wheel}[otel]"

FROM ${PYTHON_IMAGE} AS runtime
ARG UID=10001
LABEL org.opencontainers.image.title="vlm-sidecar" \
      org.opencontainers.image.description="Image-aware admission sidecar and Prometheus exporter for vLLM" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    HOME=/nonexistent
RUN groupadd --system --gid "${UID}" sidecar \
    && useradd --system --uid "${UID}" --gid "${UID}" --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin sidecar
COPY --from=build /opt/venv /opt/venv
USER ${UID}:${UID}
# 8080: traffic (to vLLM); 9090: /metrics, /healthz, /readyz.
EXPOSE 8080 9090
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SIDECAR_METRICS_PORT', '9090'), timeout=2)"]
ENTRYPOINT ["vlm-sidecar"]
CMD ["serve"]
