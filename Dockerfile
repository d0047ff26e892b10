# syntax=docker/dockerfile:1.7
# One Dockerfile, one slim non-root image per role:
#   docker build --target producer -t ocrq-producer .
#   docker build --target consumer -t ocrq-consumer .
# vLLM runs from the upstream image (vllm/vllm-openai); see docker-compose.yml and k8s/.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: the ocrq wheel; each role's venv installs it with that role's extra ----------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README* ./
COPY shared/ shared/
COPY producer/ producer/
COPY consumer/ consumer/
COPY ocrq/ ocrq/
COPY fakevllm/ fakevllm/
RUN pip wheel --no-deps --wheel-dir /wheels .

# The producer's extra has no PDF renderer, OCR engine or model; neither extra has the
# embedded Redis of `ocrq up` (Kubernetes and compose run a real one). See pyproject.toml.
FROM build AS producer-venv
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install "$(ls /wheels/ocrq-*.whl)[producer]"

FROM build AS consumer-venv
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install "$(ls /wheels/ocrq-*.whl)[worker]"

# ---- runtime base: no compilers, no pip cache, a fixed non-root user ----------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 10001 ocrq \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin ocrq
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
WORKDIR /tmp

# ---- producer: the HTTP API ----------------------------------------------------------------
FROM runtime AS producer
COPY --from=producer-venv /opt/venv /opt/venv
# The ZIP spool (OCRQ_SPOOL_DIR): a volume mounted here starts out owned by the image's user.
RUN mkdir -p /var/spool/ocrq && chown 10001:10001 /var/spool/ocrq && chmod 0700 /var/spool/ocrq
USER 10001:10001
EXPOSE 8000
CMD ["ocrq", "producer", "--host", "0.0.0.0", "--port", "8000"]

# ---- consumer: the worker, with PyMuPDF and the local CPU OCR engine -----------------------
FROM runtime AS consumer
# OpenCV (pulled in by RapidOCR) loads libGL and glib at import.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=consumer-venv /opt/venv /opt/venv
# The document spool (OCRQ_DOCUMENT_SPOOL_DIR, documents read from an object store over
# OCRQ_SPOOL_SHM_MAX_MB): a volume mounted here starts out owned by the image's user.
RUN mkdir -p /var/spool/ocrq-documents && chown 10001:10001 /var/spool/ocrq-documents \
 && chmod 0700 /var/spool/ocrq-documents
USER 10001:10001
EXPOSE 9100
CMD ["ocrq", "worker"]
