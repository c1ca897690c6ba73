# ik-layer HTTP service. Two stages: `build` installs everything into /opt/venv with
# docker/install.sh (the same script CI runs on the CPU), `runtime` copies only that venv onto a
# clean slim Python image and runs the server as an unprivileged user.
#
#   GPU (default): docker build -t ik-layer .
#                  docker run --gpus all -p 8000:8000 ik-layer
#   CPU:           docker build --build-arg DEVICE=cpu -t ik-layer:cpu .
#                  docker run -p 8000:8000 ik-layer:cpu
#
# The CUDA torch wheel bundles the CUDA runtime libraries, so no CUDA base image is needed: the host
# needs only the NVIDIA driver and the NVIDIA Container Toolkit. Configure with IK_LAYER_*
# variables, e.g. -e IK_LAYER_ROBOTS=panda,ur5e -e IK_LAYER_DTYPE=float32 -e IK_LAYER_DEVICE=cuda.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
# cpu | cuda: which torch wheel to install
ARG DEVICE=cuda
ARG TORCH_VERSION=2.13.0
# wheel flavour on the PyTorch CUDA index (DEVICE=cuda)
ARG CUDA_TAG=cu130
# auto: the PyTorch index for DEVICE; empty: the default index (PyPI); else that index URL
ARG TORCH_INDEX_URL=auto
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY ik_layer ik_layer
COPY server server
COPY robots robots
COPY deploy deploy
COPY docker/install.sh docker/install.sh
RUN DEVICE="$DEVICE" TORCH_VERSION="$TORCH_VERSION" CUDA_TAG="$CUDA_TAG" TORCH_INDEX_URL="$TORCH_INDEX_URL" \
    PYTHON=/opt/venv/bin/python PROJECT_DIR=/src bash docker/install.sh \
 && find /opt/venv -name __pycache__ -type d -prune -exec rm -rf {} +

FROM python:${PYTHON_VERSION}-slim AS runtime
ARG DEVICE=cuda
LABEL org.opencontainers.image.title="ik-layer" \
      org.opencontainers.image.description="Batched differentiable inverse kinematics over HTTP" \
      ik-layer.device="${DEVICE}"
RUN groupadd --system --gid 10001 ik \
 && useradd --system --uid 10001 --gid ik --home-dir /home/ik --create-home --shell /usr/sbin/nologin ik
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    IK_LAYER_DEVICE=auto \
    IK_LAYER_PORT=8000
USER 10001:10001
WORKDIR /home/ik
EXPOSE 8000
# No curl in slim images: probe /health with the venv's Python (503 until the robots are warmed up).
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('IK_LAYER_PORT', '8000'), timeout=4)"]
CMD ["python", "-m", "ik_layer.server", "--host", "0.0.0.0"]
