"""Cost and accuracy of the IK layer's implicit backward pass.

For reachable targets (FK of random configurations), measures on one process:
  * the forward solve (``ik_solve``) and the implicit backward (``q.backward``), as a ratio;
  * backprop through unrolled Gauss-Newton iterations (the alternative the layer avoids):
    its time and how far its gradient is from the implicit one.

Run: ``python bench/ik_backward.py [--batch 1000] [--robots ur5e panda] [--unrolled-iterations 30]``.
"""

from __future__ import annotations

import argparse
import time

import torch

import ik_layer
from ik_layer.model.lie import pose_error


def timed(fn) -> tuple[float, object]:
    """Median wall time of three calls [s] and the last result."""
    times, out = [], None
    for _ in range(3):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[1], out


def unrolled_gauss_newton(
    robot: ik_layer.Robot, target: torch.Tensor, q: torch.Tensor, iterations: int
) -> torch.Tensor:
    """Damped Gauss-Newton from ``q`` with autograd recording every iteration."""
    eye = torch.eye(robot.dof, dtype=q.dtype)
    for _ in range(iterations):
        pose, jac = robot.fk_jacobian(q)
        e = pose_error(target, pose)
        jt = jac.transpose(-1, -2)
        q = q + torch.linalg.solve(jt @ jac + 1e-6 * eye, (jt @ e[..., None])).squeeze(-1)
    return q


def run(name: str, batch: int, iterations: int, generator: torch.Generator) -> dict[str, float]:
    robot = ik_layer.load_robot(name)
    q_true = robot.random_q((batch,), generator=generator)
    target = robot.fk(q_true)
    cotangent = torch.randn(batch, robot.dof, dtype=torch.float64, generator=generator)
    leaf = target.clone().requires_grad_()

    t_forward, result = timed(lambda: ik_layer.ik_solve(robot, leaf, generator=generator))

    def backward() -> torch.Tensor:
        (grad,) = torch.autograd.grad(result.q, leaf, cotangent, retain_graph=True)
        return grad

    t_backward, implicit_grad = timed(backward)

    # Unrolled: start near the implicit solution so both reach the same root.
    start = (result.q + 0.05 * torch.randn(result.q.shape, dtype=torch.float64, generator=generator)).detach()

    def unrolled() -> torch.Tensor:
        q = unrolled_gauss_newton(robot, leaf, start, iterations)
        (grad,) = torch.autograd.grad(q, leaf, cotangent)
        return grad

    t_unrolled, unrolled_grad = timed(unrolled)
    ok = result.success
    diff = (unrolled_grad - implicit_grad)[ok].flatten(1).norm(dim=-1) / implicit_grad[ok].flatten(1).norm(dim=-1)
    return {
        "forward_ms": 1e3 * t_forward,
        "backward_ms": 1e3 * t_backward,
        "unrolled_ms": 1e3 * t_unrolled,
        "rel_diff_median": float(diff.median()),
        "success": float(ok.double().mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--robots", nargs="+", default=["ur5e", "panda"])
    parser.add_argument("--unrolled-iterations", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    print(
        f"batch {args.batch}, float64, CPU, {args.threads} thread(s); "
        f"unrolled: {args.unrolled_iterations} GN iterations\n"
    )
    print(
        "| robot | forward solve [ms] | implicit backward [ms] | backward / forward | unrolled fwd+bwd [ms] "
        "| unrolled / implicit backward | unrolled vs implicit grad (median rel. diff) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.robots:
        r = run(name, args.batch, args.unrolled_iterations, generator)
        print(
            f"| {name} | {r['forward_ms']:.1f} | {r['backward_ms']:.2f} | {r['backward_ms'] / r['forward_ms']:.1%} "
            f"| {r['unrolled_ms']:.1f} | {r['unrolled_ms'] / r['backward_ms']:.0f}x | {r['rel_diff_median']:.1e} |"
        )


if __name__ == "__main__":
    main()
