"""Bake-off: one fused Levenberg-Marquardt step per row in warp, numba, torch.compile and eager torch.

The step is the solver's inner work for one row (one target, one seed): forward kinematics of the
chain, the geometric Jacobian, the pose error ``[p_t - p; log(R_t R^T)]``, the damped normal
equations ``(J^T J + (mu |e|^2 + 1e-9) I) dq = J^T e`` and their solve (Cholesky; L D L^T in warp). Eager torch is the
reference (``Robot.kinematics`` + ``lie.pose_error`` + ``torch.linalg``); every candidate's ``dq`` and
cost are checked against it before anything is timed.

Candidates:

* ``warp``: one ``warp`` kernel, one thread per row, built from the engine's own functions
  (``ik_layer.engine.device.kernel.lm_functions``: FK, Jacobian, error, damped L D L^T solve); the same
  source compiles for CUDA. Launched from a recorded command (the arrays are bound once, as the
  engine's slot buffers are).
* ``numba``: the same algorithm as an ``@njit`` loop over rows (CPU only; CUDA would need a second
  source in ``numba.cuda``).
* ``compile``: ``torch.compile`` of the eager step (``--compile``; slow to build).
* ``eager``: the reference.

Printed per robot and batch size: microseconds per row-step and the ratio eager / candidate; the
first call's cost (compilation, or loading from the on-disk cache on a second run) is printed too.

    python bench/kernel_bakeoff.py --threads 1            # panda, ur5e, iiwa14; batch 1, 64, 1k, 10k
    python bench/kernel_bakeoff.py --quick                # small sizes, a few seconds after compilation
"""

# No `from __future__ import annotations`: warp reads the kernels' annotations as live types.
import math
import time
from collections.abc import Callable

import numba
import numpy as np
import torch
import warp as wp
from common import apply_threads_and_describe, benchmark_parser, markdown_table, time_call

import ik_layer
from ik_layer.engine.device.kernel import damping_floor, lm_functions
from ik_layer.model.chain import Layout
from ik_layer.model.lie import pose_error
from ik_layer.model.warp_chain import bind_chain, chain_struct, warp_types

Step = Callable[[], object]


# --------------------------------------------------------------------------- eager torch: the reference


def eager_step(robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor, mu: torch.Tensor):
    """``(dq (B, dof), cost (B,))`` of one damped Gauss-Newton step, in eager torch."""
    pose, jac = robot.kinematics(q, jacobian=True)
    e = pose_error(target, pose)
    cost = (e * e).sum(-1)
    eye = torch.eye(robot.dof, dtype=q.dtype, device=q.device)
    lhs = jac.transpose(-1, -2) @ jac + (mu * cost + damping_floor(q.dtype))[:, None, None] * eye
    factor, _ = torch.linalg.cholesky_ex(lhs)
    dq = torch.cholesky_solve(jac.transpose(-1, -2) @ e[..., None], factor)[..., 0]
    return dq, cost


# --------------------------------------------------------------------------- warp


def warp_step_kernel(layout: Layout, dtype: torch.dtype) -> wp.Kernel:
    """One step per row, from the engine's own warp functions (:func:`ik_layer.engine.device.kernel.lm_functions`);
    one end-effector frame, a fixed base."""
    fns = lm_functions(layout, dtype)
    evaluate, damped_solve = fns.evaluate, fns.damped_solve
    f, _, vec3, vec6, mat33 = warp_types(dtype)
    dof = layout.dof
    vecq = wp.types.vector(dof, f)
    floor = damping_floor(dtype)
    Chain = chain_struct(dtype)

    @wp.kernel(module="unique")
    def step(
        q: wp.array2d(dtype=f),
        target_rot: wp.array2d(dtype=mat33),
        target_pos: wp.array2d(dtype=vec3),
        mu: wp.array(dtype=f),
        chain: Chain,
        dq: wp.array2d(dtype=f),
        cost: wp.array(dtype=f),
    ):
        i = wp.tid()
        x = vecq()
        ones = vecq()
        for a in range(dof):
            x[a] = q[i, a]
            ones[a] = f(1.0)
        w = vec6(f(1.0), f(1.0), f(1.0), f(1.0), f(1.0), f(1.0))
        e, jac, err = evaluate(x, i, target_rot, target_pos, w, chain)
        y, _ok = damped_solve(jac, e, w, mu[i] * err + f(floor), ones, vecq(), 0, chain)
        for a in range(dof):
            dq[i, a] = y[a]
        cost[i] = err

    return step


def warp_runner(robot: ik_layer.Robot, q, target, mu, dq, cost) -> Step:
    """A recorded launch of the warp step over the given (bound once) tensors."""
    kernel = warp_step_kernel(robot.chains.layout, robot.dtype)
    _, _, vec3, _, mat33 = warp_types(robot.dtype)
    chain = bind_chain(robot.chains)  # the engine's views of the chain
    rot, pos = target[:, None, :3, :3].contiguous(), target[:, None, :3, 3].contiguous()
    inputs = [
        wp.from_torch(q), wp.from_torch(rot, dtype=mat33), wp.from_torch(pos, dtype=vec3), wp.from_torch(mu),
        chain, wp.from_torch(dq), wp.from_torch(cost),
    ]  # fmt: skip
    command = wp.launch(kernel, dim=q.shape[0], inputs=inputs, device="cpu", record_cmd=True)
    return command.launch


# --------------------------------------------------------------------------- numba


@numba.njit(cache=True)
def _numba_so3_log(r: np.ndarray, out: np.ndarray) -> None:
    v0, v1, v2 = 0.5 * (r[2, 1] - r[1, 2]), 0.5 * (r[0, 2] - r[2, 0]), 0.5 * (r[1, 0] - r[0, 1])
    c = min(1.0, max(-1.0, 0.5 * (r[0, 0] + r[1, 1] + r[2, 2] - 1.0)))
    s2 = v0 * v0 + v1 * v1 + v2 * v2
    theta = math.atan2(math.sqrt(s2), c)
    if c >= 0.0:
        scale = theta / math.sqrt(s2) if s2 >= 1e-8 else 1.0 + s2 / 6.0
        out[0], out[1], out[2] = v0 * scale, v1 * scale, v2 * scale
        return
    col = 0
    for k in (1, 2):
        if r[k, k] > r[col, col]:
            col = k
    a = np.empty(3)
    for k in range(3):
        a[k] = 0.5 * (r[k, col] + r[col, k]) - (c if k == col else 0.0)
    norm = max(math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]), 1e-30)
    sign = 1.0 if a[0] * v0 + a[1] * v1 + a[2] * v2 >= 0.0 else -1.0
    for k in range(3):
        out[k] = sign * theta * a[k] / norm


@numba.njit(cache=True)
def _numba_step(q, trot, tpos, mu, prot, prk, prk2, ppos, slide, axis, rev, cols, tip_rot, tip_pos, dq, cost):
    rows, dof = q.shape
    rot, tmp, local = np.empty((3, 3)), np.empty((3, 3)), np.empty((3, 3))
    pos, tp, lg = np.empty(3), np.empty(3), np.empty(3)
    tr, dr = np.empty((3, 3)), np.empty((3, 3))
    jac, org, e = np.empty((6, dof)), np.empty((3, dof)), np.empty(6)
    h, y = np.empty((dof, dof)), np.empty(dof)
    for i in range(rows):
        rot[:] = 0.0
        rot[0, 0] = rot[1, 1] = rot[2, 2] = 1.0
        pos[:] = 0.0
        jac[:] = 0.0
        for j in range(cols.shape[0]):
            c = cols[j]
            qj = q[i, c]
            s, vers = math.sin(qj), 1.0 - math.cos(qj)
            for a in range(3):
                for b in range(3):
                    local[a, b] = prot[j, a, b] + s * prk[j, a, b] + vers * prk2[j, a, b]
            for a in range(3):
                for b in range(3):
                    pos[a] += rot[a, b] * (ppos[j, b] + qj * slide[j, b])
            for a in range(3):
                for b in range(3):
                    tmp[a, b] = rot[a, 0] * local[0, b] + rot[a, 1] * local[1, b] + rot[a, 2] * local[2, b]
            rot[:] = tmp
            for a in range(3):
                jac[3 + a, c] = rot[a, 0] * axis[j, 0] + rot[a, 1] * axis[j, 1] + rot[a, 2] * axis[j, 2]
                org[a, c] = pos[a]
        for a in range(3):
            tp[a] = pos[a] + rot[a, 0] * tip_pos[0] + rot[a, 1] * tip_pos[1] + rot[a, 2] * tip_pos[2]
            for b in range(3):
                tr[a, b] = rot[a, 0] * tip_rot[0, b] + rot[a, 1] * tip_rot[1, b] + rot[a, 2] * tip_rot[2, b]
        for j in range(cols.shape[0]):
            c = cols[j]
            w0, w1, w2 = jac[3, c], jac[4, c], jac[5, c]
            if rev[j]:
                l0, l1, l2 = tp[0] - org[0, c], tp[1] - org[1, c], tp[2] - org[2, c]
                jac[0, c], jac[1, c], jac[2, c] = w1 * l2 - w2 * l1, w2 * l0 - w0 * l2, w0 * l1 - w1 * l0
            else:
                jac[0, c], jac[1, c], jac[2, c] = w0, w1, w2
                jac[3, c] = jac[4, c] = jac[5, c] = 0.0
        for a in range(3):
            e[a] = tpos[i, a] - tp[a]
            for b in range(3):
                dr[a, b] = trot[i, a, 0] * tr[b, 0] + trot[i, a, 1] * tr[b, 1] + trot[i, a, 2] * tr[b, 2]
        _numba_so3_log(dr, lg)
        e[3], e[4], e[5] = lg[0], lg[1], lg[2]
        err = 0.0
        for a in range(6):
            err += e[a] * e[a]
        damping = mu[i] * err + 1e-9  # damping_floor(float64)
        for a in range(dof):
            t = 0.0
            for k in range(6):
                t += jac[k, a] * e[k]
            y[a] = t
            for b in range(a + 1):
                t = 0.0
                for k in range(6):
                    t += jac[k, a] * jac[k, b]
                h[a, b] = t
            h[a, a] += damping
        for a in range(dof):
            s = h[a, a]
            for b in range(a):
                s -= h[a, b] * h[a, b]
            d = math.sqrt(max(s, 1e-300))
            h[a, a] = d
            for r in range(a + 1, dof):
                t = h[r, a]
                for b in range(a):
                    t -= h[r, b] * h[a, b]
                h[r, a] = t / d
        for a in range(dof):
            t = y[a]
            for b in range(a):
                t -= h[a, b] * y[b]
            y[a] = t / h[a, a]
        for a in range(dof - 1, -1, -1):
            t = y[a]
            for b in range(a + 1, dof):
                t -= h[b, a] * y[b]
            y[a] = t / h[a, a]
        dq[i] = y
        cost[i] = err


def numba_runner(robot: ik_layer.Robot, q, target, mu, dq, cost) -> Step:
    """The numba step over numpy views of the given tensors (float64 only)."""
    views = [x.contiguous().numpy() for x in (q, target[:, :3, :3], target[:, :3, 3], mu)]
    chains = robot.chains
    chain = [
        getattr(chains, name).numpy()
        for name in ("place_rot", "place_rot_k", "place_rot_k2", "place_pos", "slide", "axis", "revolute")
    ]
    chain += [chains.cols.numpy(), chains.tip[0, :3, :3].contiguous().numpy(), chains.tip[0, :3, 3].numpy()]
    args = (*views, *chain, dq.numpy(), cost.numpy())
    return lambda: _numba_step(*args)


# --------------------------------------------------------------------------- the bake-off


def bench(name: str, dtype: torch.dtype, batches: list[int], budget_s: float, compile_step: bool) -> list[list[str]]:
    """Agreement with eager torch, then microseconds per row-step for every candidate and batch size."""
    robot = ik_layer.load_robot(name, dtype=dtype)
    gen = torch.Generator().manual_seed(0)
    rows = []
    compiled = torch.compile(eager_step, dynamic=False) if compile_step else None
    for batch in batches:
        q = robot.random_q((batch,), generator=gen)
        target = robot.fk(robot.random_q((batch,), generator=gen))
        mu = torch.full((batch,), 1e-2, dtype=dtype)
        dq_ref, cost_ref = eager_step(robot, q, target, mu)
        runners: dict[str, Step] = {"eager": lambda: eager_step(robot, q, target, mu)}
        outputs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        first: dict[str, float] = {}
        candidates = [("warp", warp_runner)] + ([("numba", numba_runner)] if dtype == torch.float64 else [])
        for label, make in candidates:
            dq, cost = torch.zeros_like(q), torch.zeros_like(mu)
            start = time.perf_counter()
            runners[label] = make(robot, q, target, mu, dq, cost)
            runners[label]()
            first[label] = time.perf_counter() - start
            outputs[label] = (dq, cost)
        if compiled is not None:
            start = time.perf_counter()
            outputs["compile"] = compiled(robot, q, target, mu)
            first["compile"] = time.perf_counter() - start
            runners["compile"] = lambda: compiled(robot, q, target, mu)
        tol = 1e-9 if dtype == torch.float64 else 2e-3
        scale = 1 + dq_ref.abs().max().item()
        for label, (dq, cost) in outputs.items():
            diff = max((dq - dq_ref).abs().max().item(), (cost - cost_ref).abs().max().item()) / scale
            if not diff <= tol:
                raise SystemExit(f"{label} disagrees with eager torch on {name} {dtype}: {diff:.1e} > {tol:.0e}")
        times = {label: time_call(run, budget_s) / batch for label, run in runners.items()}
        firsts = ", ".join(f"{label} {seconds:.2f} s" for label, seconds in first.items())
        print(f"{name} {dtype} batch {batch:>6}: " + "  ".join(f"{k} {v:.3f} us" for k, v in times.items())
              + f"  (first call: {firsts})", flush=True)  # fmt: skip
        for label, us in times.items():
            if label != "eager":
                rows.append([name, str(dtype).removeprefix("torch."), f"{batch:,}", label, f"{us:.3f}",
                             f"{times['eager']:.3f}", f"{times['eager'] / us:.1f}x"])  # fmt: skip
    return rows


def main() -> None:
    parser = benchmark_parser(__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="panda only, batch 1 and 1k, short timings")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile (builds for minutes)")
    args = parser.parse_args()
    print(apply_threads_and_describe(args.threads) + f", warp {wp.config.version}, numba {numba.__version__}\n")
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    robots = ["panda"] if args.quick else ["panda", "ur5e", "iiwa14"]
    batches = [1, 1000] if args.quick else [1, 64, 1000, 10_000]
    budget = 0.05 if args.quick else 0.5
    rows = []
    for name in robots:
        for dtype in (torch.float64, torch.float32):
            rows += bench(name, dtype, batches, budget, args.compile)
    header = ["robot", "dtype", "batch", "kernel", "us / row-step", "eager us / row-step", "eager / kernel"]
    print("\nOne LM step (FK, Jacobian, pose error, normal equations, damped solve) per row, CPU\n")
    print(markdown_table(header, rows, text_columns=4))


if __name__ == "__main__":
    main()
