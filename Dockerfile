# hymt: Hunyuan-MT-7B behind a web page and an HTTP API, on whatever NVIDIA GPU the host has.
# CUDA 13.0 runtime (drivers >= 580) with torch 2.11.0's CUDA 13.0 build: the versions the committed standard run
# measured (bench/results/standard.json's environment; tests/unit/test_pins.py fails when they part).
# CUDA_IMAGE is the base: the tests build on a local Debian image standing in for it (tests/system/test_image.py).
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu24.04

# A checkpoint directory on disk, baked instead of MODEL_ID's download:
#   docker build --build-context model=/path/to/checkpoint --build-arg MODEL_ID= .
# Without that context this stage is empty and nothing is copied from it.
FROM scratch AS model

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
    HYMT_DATA_DIR=/data \
    HYMT_PORT=80

# Ubuntu's python3 of this release, and the fonts a translated PDF is drawn in (every script of the 38 languages);
# security updates come with a rebuild, so no version pin.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates libcap2-bin \
       fonts-noto-core fonts-droid-fallback \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

# torch's CUDA 13.0 build (its FlashAttention-2 kernels serve the engine's attention), then the pinned dependencies,
# bitsandbytes and humming-kernels included. These layers change only when pyproject.toml does. The image test, which
# has no GPU, builds with the CPU wheel its tests run (TORCH_VERSION and TORCH_INDEX_URL as build arguments).
ARG TORCH_VERSION=2.11.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu130
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"
COPY pyproject.toml /src/pyproject.toml
RUN python3 -c "import tomllib; p = tomllib.load(open('/src/pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['gpu'] + p['optional-dependencies']['postgres']))" \
    > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The model, baked before the code so that a code change does not download it again. Empty MODEL_ID: mount
# a checkpoint at /models instead.
ARG MODEL_ID=tencent/Hunyuan-MT-7B
# Mode 0755: the image runs as uid 10001, which must read files a checkpoint may have kept private (0600).
COPY --from=model --chmod=0755 / /models/
RUN mkdir -p /models \
    && if [ -n "${MODEL_ID}" ]; then hf download "${MODEL_ID}" --local-dir /models \
         --include "*.json" "*.safetensors" "*.jinja" "*.txt" "*.model" "*.py" "*.tiktoken"; fi \
    && rm -rf /opt/hf /models/.cache

COPY app /src/app
COPY healthcheck /src/healthcheck
# humming's headers dated by their contents, not by when pip wrote them: its compiled kernels in the compile cache's
# volume stay valid for the next image while humming-kernels' version does (app/hymt/engine/humming_cache.py).
RUN pip install --no-cache-dir --no-deps /src \
    && python3 -m hymt.engine.humming_cache
COPY rootfs /

# --no-log-init and an existing home keep useradd quiet (a system uid above SYS_UID_MAX is warned about otherwise).
RUN mkdir -p /run/hymt /var/log/hymt /var/cache/hymt/compile /data \
    && useradd --uid 10001 --no-create-home --no-log-init --home-dir /run/hymt --shell /usr/sbin/nologin hymt \
    && chown -R hymt /run/hymt /var/log/hymt /var/cache/hymt /data \
    && cp /usr/bin/setpriv /usr/local/bin/hymt-bind \
    && setcap cap_net_bind_service=+p /usr/local/bin/hymt-bind
# Port 80 as uid 10001 under any runtime: only Docker opens ports below 1024 to every user inside a container
# (net.ipv4.ip_unprivileged_port_start=0); podman, host networking and Kubernetes do not. hymt-bind (setpriv with
# the one capability) hands the server CAP_NET_BIND_SERVICE as an ambient capability (rootfs/usr/local/bin/hymt-serve).
USER 10001

EXPOSE 80
# Loading 16 GB of weights (or quantizing them) takes minutes on a slow disk, and the first start compiles the
# decoding kernels (kept on the compile-cache volume for the next): a long start period.
HEALTHCHECK --interval=30s --timeout=10s --start-period=15m --retries=3 CMD ["hymt-probe"]
ENTRYPOINT ["/usr/local/bin/hymt-entrypoint"]
