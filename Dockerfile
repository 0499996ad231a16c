# hymt: Hunyuan-MT-7B behind a web page and an HTTP API, on whatever NVIDIA GPU the host has.
# CUDA 12.8 runtime: runs on drivers >= 570, which current consumer and data-centre drivers are.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04
FROM ${CUDA_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    HF_HOME=/opt/hf \
    HYMT_MODEL=/models \
    HYMT_RUN_DIR=/run/hymt \
    HYMT_LOG_DIR=/var/log/hymt \
    HYMT_COMPILE_CACHE_DIR=/var/cache/hymt/compile \
    HYMT_PORT=80

# Ubuntu's python3 of this release; security updates come with a rebuild, so no version pin.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

# A CUDA 12.8 build of torch (PyPI's default build needs a newer driver; its FlashAttention-2 kernels serve the
# engine's attention), then the pinned dependencies, bitsandbytes and torchao included. These layers change only
# when pyproject.toml does.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" torch==2.13.0
COPY pyproject.toml /src/pyproject.toml
RUN python3 -c "import tomllib; p = tomllib.load(open('/src/pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['gpu']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The model, baked before the code so that a code change does not download it again. Empty MODEL_ID: mount
# a checkpoint at /models instead.
ARG MODEL_ID=tencent/Hunyuan-MT-7B
RUN mkdir -p /models \
    && if [ -n "${MODEL_ID}" ]; then hf download "${MODEL_ID}" --local-dir /models \
         --include "*.json" "*.safetensors" "*.jinja" "*.txt" "*.model" "*.py" "*.tiktoken"; fi \
    && rm -rf /opt/hf

COPY app /src/app
COPY healthcheck /src/healthcheck
RUN pip install --no-cache-dir --no-deps /src
COPY rootfs /

RUN useradd --system --uid 10001 --home-dir /run/hymt hymt \
    && mkdir -p /run/hymt /var/log/hymt /var/cache/hymt/compile \
    && chown -R hymt /run/hymt /var/log/hymt /var/cache/hymt
# Docker lets an unprivileged user bind port 80 inside the container (net.ipv4.ip_unprivileged_port_start=0).
USER 10001

EXPOSE 80
# Loading 16 GB of weights (or quantizing them) takes minutes on a slow disk, and the first start compiles the
# decoding kernels (kept on the compile-cache volume for the next): a long start period.
HEALTHCHECK --interval=30s --timeout=10s --start-period=15m --retries=3 CMD ["hymt-probe"]
ENTRYPOINT ["/usr/local/bin/hymt-entrypoint"]
