#!/usr/bin/env bash
# Install ik-layer and its server extra into the current Python: torch first (CPU or CUDA wheel),
# then the project (Pinocchio comes from its PyPI wheel, `pin`, as a project dependency).
#
# The Dockerfile runs this script, and docker/check.sh (CI) runs it on the CPU into a fresh venv,
# so the image's install steps are the ones tested.
#
#   DEVICE=cpu|cuda        which torch wheel (default: cpu)
#   TORCH_VERSION=2.13.0   torch release to install (pinned)
#   CUDA_TAG=cu130         wheel flavour on the PyTorch CUDA index (DEVICE=cuda only)
#   TORCH_INDEX_URL        unset or "auto": the PyTorch index for DEVICE
#                          (https://download.pytorch.org/whl/cpu or .../whl/$CUDA_TAG);
#                          empty: pip's default index (PyPI or whatever pip is configured with;
#                          PyPI's Linux x86_64 torch wheel is itself CUDA-enabled);
#                          anything else: that index
#   PYTHON=python3         interpreter whose environment receives the packages
#   PROJECT_DIR            the source tree to install (default: this script's repository)
#   EXTRAS=server          the project's extras ("" for the library alone)
#   PIP_FLAGS              extra pip flags (e.g. --no-cache-dir in the image)
set -euo pipefail

DEVICE="${DEVICE:-cpu}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
CUDA_TAG="${CUDA_TAG:-cu130}"
PYTHON="${PYTHON:-python3}"
PROJECT_DIR="${PROJECT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
EXTRAS="${EXTRAS-server}"
read -r -a pip_flags <<<"${PIP_FLAGS:-}"

case "$DEVICE" in
cpu) default_index="https://download.pytorch.org/whl/cpu" ;;
cuda) default_index="https://download.pytorch.org/whl/${CUDA_TAG}" ;;
*)
    echo "docker/install.sh: DEVICE must be cpu or cuda, not '$DEVICE'" >&2
    exit 2
    ;;
esac

index="${TORCH_INDEX_URL-auto}"
[ "$index" = auto ] && index="$default_index"
index_flags=()
[ -n "$index" ] && index_flags=(--index-url "$index")

pip() { "$PYTHON" -m pip "$@"; }

echo "docker/install.sh: torch==$TORCH_VERSION for $DEVICE from ${index:-the default index}" >&2
pip install "${pip_flags[@]}" "${index_flags[@]}" "torch==$TORCH_VERSION"
# The project and the rest from the default index; torch is already there and satisfies its pin.
spec="$PROJECT_DIR"
[ -n "$EXTRAS" ] && spec="$PROJECT_DIR[$EXTRAS]"
pip install "${pip_flags[@]}" "$spec"

# Check the installed package, not a source tree in the working directory.
cd /
"$PYTHON" - "$DEVICE" <<'PY'
import sys

import ik_layer
import pinocchio
import torch

device = sys.argv[1]
print(f"docker/install.sh: torch {torch.__version__} (cuda build: {torch.version.cuda}), "
      f"pinocchio {pinocchio.__version__}, robots {ik_layer.builtin_robots()}", file=sys.stderr)
if device == "cuda" and torch.version.cuda is None:
    sys.exit("docker/install.sh: DEVICE=cuda but the installed torch is a CPU-only build")
PY
