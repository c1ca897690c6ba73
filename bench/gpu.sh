#!/usr/bin/env bash
# One prepared GPU benchmark run, bounded to < 9.5 minutes: set up if needed, then
#   1. FK + Jacobian and IK throughput (bench/ik_gpu.py: panda, float32, batch 1k/10k/100k/1M as far
#      as memory and the time budget allow; success re-verified with float64 FK), then IK again with the
#      LM kernel's eager Jacobian (--jacobian eager: the default lazy one against it, on the same targets) and
#      through the engine's scheduler (--path scheduled: against one launch per solve, on the same targets),
#   2. HTTP server load (bench/server_load.py --device $DEVICE --quick, IK_LAYER_DTYPE=$DTYPE),
#   3. collision-aware IK against plain IK (bench/collision.py: panda, $DTYPE, $COLLISION_BATCH targets per
#      scene, table / shelf / bin with self-collision; every success checked by Pinocchio and coal on the CPU),
#   4. small batches on the device against the CPU beside it (bench/small_batches.py: batch 1..1024),
# printing solves/s and success. Every step has its own timeout; the exit status is non-zero if a
# step failed or timed out (the others still run). Results: $OUT_DIR/ik_gpu.json and *.log.
#
#   DEVICE=cuda       cuda (default) or cpu (smoke test: DEVICE=cpu BATCHES=100,1000 bench/gpu.sh)
#   DTYPE=float32     solver dtype
#   BATCHES=1000,10000,100000,1000000
#   ROBOT=panda
#   PYTHON            interpreter (default: .venv/bin/python if present, else python3)
#   OUT_DIR           where results go (default: bench/out/gpu, or $OUT when set, as on the device tool)
#   SERVER_CLIENTS=1,8,64   clients of the server-load step; SKIP_SERVER=1 skips it
#   COLLISION_BATCH=100000  targets per scene of the collision step; SKIP_COLLISION=1 skips it
#   SKIP_SMALL=1            skips the small-batch step
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DEVICE="${DEVICE:-cuda}"
DTYPE="${DTYPE:-float32}"
BATCHES="${BATCHES:-1000,10000,100000,1000000}"
ROBOT="${ROBOT:-panda}"
SERVER_CLIENTS="${SERVER_CLIENTS:-1,8,64}"
COLLISION_BATCH="${COLLISION_BATCH:-100000}"
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
OUT_DIR="${OUT_DIR:-${OUT:-bench/out/gpu}}"
mkdir -p "$OUT_DIR"
START=$SECONDS
status=0
step() { echo; echo "== bench/gpu.sh [$((SECONDS - START)) s]: $*"; }
run_step() { # name timeout_s command...
    local name=$1 limit=$2 rc
    shift 2
    timeout --signal=INT --kill-after=10 "$limit" "$@" 2>&1 | tee "$OUT_DIR/$name.log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        echo "bench/gpu.sh: step $name failed (exit $rc$([ "$rc" -eq 124 ] && echo ", timed out after $limit s"))" >&2
        status=1
    fi
}

# --- setup (only what is missing) ---------------------------------------------------------------
step "setup ($PYTHON)"
deps_ok() { "$PYTHON" -c 'import torch, pinocchio, ik_layer.server, fastapi, uvicorn, pydantic_settings, prometheus_client, httpx' 2>/dev/null; }
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    # no torch at all: the image's install step (CUDA wheel unless DEVICE=cpu)
    timeout 240 env DEVICE="$DEVICE" PYTHON="$PYTHON" PIP_FLAGS=-q bash docker/install.sh || status=1
fi
if ! deps_ok; then # torch present: keep it, add the rest
    timeout 180 "$PYTHON" -m pip install -q -e '.[server]' httpx || status=1
fi
deps_ok || { echo "bench/gpu.sh: dependencies missing after setup" >&2; exit 1; }
"$PYTHON" - "$DEVICE" <<'PY' || exit 1
import sys, torch
dev = sys.argv[1]
print(f"torch {torch.__version__}, cuda build {torch.version.cuda}, cuda available {torch.cuda.is_available()}")
if dev == "cuda":
    if not torch.cuda.is_available():
        sys.exit("bench/gpu.sh: DEVICE=cuda but torch sees no CUDA device")
    p = torch.cuda.get_device_properties(0)
    print(f"GPU: {p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs")
PY
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# --- 1. FK/Jacobian + IK ------------------------------------------------------------------------
step "FK/Jacobian + IK: $ROBOT, $DTYPE, batches $BATCHES on $DEVICE"
batch_flags=()
IFS=, read -r -a batch_list <<<"$BATCHES"
for b in "${batch_list[@]}"; do batch_flags+=(--batch "$b"); done
run_step ik_gpu 150 "$PYTHON" bench/ik_gpu.py --device "$DEVICE" --dtype "$DTYPE" --robot "$ROBOT" \
    "${batch_flags[@]}" --budget-s 110 --json "$OUT_DIR/ik_gpu.json"
# The LM kernel's other Jacobian (eager, the host store's) on the same targets, IK only: which suits the GPU
run_step ik_gpu_eager 60 "$PYTHON" bench/ik_gpu.py --device "$DEVICE" --dtype "$DTYPE" --robot "$ROBOT" \
    "${batch_flags[@]}" --budget-s 40 --no-fk --jacobian eager --json "$OUT_DIR/ik_gpu_eager.json"
# The same targets through the scheduler (blocks of iterations) instead of one launch per solve: which suits the GPU
run_step ik_gpu_scheduled 60 "$PYTHON" bench/ik_gpu.py --device "$DEVICE" --dtype "$DTYPE" --robot "$ROBOT" \
    "${batch_flags[@]}" --budget-s 40 --no-fk --path scheduled --json "$OUT_DIR/ik_gpu_scheduled.json"

# --- 2. server load -----------------------------------------------------------------------------
if [ "${SKIP_SERVER:-0}" != 1 ]; then
    step "server load on $DEVICE ($DTYPE), clients $SERVER_CLIENTS"
    left=$((285 - (SECONDS - START)))
    if [ "$left" -lt 40 ]; then
        echo "bench/gpu.sh: skipping server load, only $left s left of the 5-minute budget" >&2
    else
        IK_LAYER_DTYPE="$DTYPE" run_step server_load "$left" "$PYTHON" bench/server_load.py --device "$DEVICE" \
            --quick --robot "$ROBOT" --clients "$SERVER_CLIENTS"
    fi
fi

# --- 3. collision-aware IK ----------------------------------------------------------------------
if [ "${SKIP_COLLISION:-0}" != 1 ]; then
    step "collision-aware IK: $ROBOT, $DTYPE, $COLLISION_BATCH targets per scene on $DEVICE"
    run_step collision 200 "$PYTHON" bench/collision.py --device "$DEVICE" --dtype "$DTYPE" --robots "$ROBOT" \
        --batch "$COLLISION_BATCH" --repeats 3 --runs plain scene
fi

# --- 4. small batches: the device or the CPU -------------------------------------------------------
if [ "${SKIP_SMALL:-0}" != 1 ]; then
    step "small batches: $ROBOT, $DTYPE on $DEVICE against the CPU"
    run_step small_batches 45 "$PYTHON" bench/small_batches.py --device "$DEVICE" --dtype "$DTYPE" --robot "$ROBOT" \
        --calls 11
fi

step "done in $((SECONDS - START)) s (results in $OUT_DIR)"
exit $status
