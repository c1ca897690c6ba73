"""Benchmark: gradients through an iterative solver, implicit (``implicit_inverse``) vs unrolled.

The solver is Gauss-Newton with minimum-norm steps on a planar arm (``q`` (B, n) [rad] -> tip
(B, 2) [m]), at batch 1k, for 5 / 10 / 30 / 100 iterations, on a square 2-link arm and a
redundant 3-link arm:

* ``unrolled``: the iterations run under autograd; backward replays all of them.
* ``implicit``: the iterations run once under ``no_grad``; backward is one damped solve and one
  VJP of ``f(q) - x`` (``implicit_inverse`` with ``forward_fn``). Its time includes that solve.

Printed: both times, the autograd memory the unrolled version keeps alive (saved tensors, via
``torch.autograd.graph.saved_tensors_hooks``), and the max difference of the two gradients of the
same loss w.r.t. the targets. On the square arm they agree to round-off once the solver has
converged. On the redundant arm they differ by design: where the unrolled solver's limit moves
along the self-motion manifold depends on its path and start, while ``implicit_inverse`` returns
the minimum-norm derivative ``J^+``.

Run: ``python bench/implicit_vs_unrolled.py`` (a few seconds; ``--threads 1`` on a shared CPU).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from common import apply_threads_and_describe, benchmark_parser, markdown_table
from torch import Tensor

from ik_layer.layer.implicit import implicit_inverse


def arm(q: Tensor, links: Tensor) -> Tensor:
    """Planar arm tip: q (B, n) [rad] -> (B, 2) [m]."""
    angles = torch.cumsum(q, -1)
    tip = [(links * torch.cos(angles)).sum(-1), (links * torch.sin(angles)).sum(-1)]
    return torch.stack(tip, -1)


def arm_jacobian(q: Tensor, links: Tensor) -> Tensor:
    """Analytic d tip / d q: (B, 2, n); joint i moves links i..n."""
    angles = torch.cumsum(q, -1)
    dx = -(links * torch.sin(angles)).flip(-1).cumsum(-1).flip(-1)
    dy = (links * torch.cos(angles)).flip(-1).cumsum(-1).flip(-1)
    return torch.stack([dx, dy], -2)


def gauss_newton(x: Tensor, start: Tensor, links: Tensor, iterations: int, damping: float = 1e-9) -> Tensor:
    """Minimum-norm Gauss-Newton steps ``q -= J^T (J J^T + damping I)^-1 (f(q) - x)``."""
    q = start
    eye = torch.eye(2, dtype=x.dtype)
    for _ in range(iterations):
        jac = arm_jacobian(q, links)
        error = (arm(q, links) - x).unsqueeze(-1)
        q = q - (jac.mT @ torch.linalg.solve(jac @ jac.mT + damping * eye, error)).squeeze(-1)
    return q


def loss(q: Tensor) -> Tensor:
    return torch.sin(q).sum()


def time_call(fn: Callable[[], object], repeats: int = 5) -> float:
    """Median wall time of one ``fn()`` [ms]."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def saved_bytes(fn: Callable[[], Tensor]) -> int:
    """Bytes of tensors autograd saves for backward while ``fn`` runs."""
    total = 0

    def pack(tensor: Tensor) -> Tensor:
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn()
    return total


PROBLEMS = {
    "2-link (square)": torch.tensor([1.0, 0.8], dtype=torch.float64),
    "3-link (redundant)": torch.tensor([1.0, 0.8, 0.5], dtype=torch.float64),
}


def bench_problem(label: str, links: Tensor, batch: int) -> list[list[str]]:
    dof = len(links)
    gen = torch.Generator().manual_seed(0)
    # Bent arms (joints 2.. in [0.5, 1.5] rad, far from the straight-arm singularity), solved from
    # a warm start 0.2 rad away, as when tracking.
    q_true = torch.rand(batch, dof, generator=gen, dtype=torch.float64) + 0.5
    q_true[:, 0] -= 0.5
    start = q_true + 0.2 * torch.randn(batch, dof, generator=gen, dtype=torch.float64)
    targets = arm(q_true, links)

    def solve(x: Tensor, iterations: int) -> Tensor:
        return gauss_newton(x, start, links, iterations)

    rows = []
    for iterations in (5, 10, 30, 100):
        x = targets.clone().requires_grad_(True)

        def unrolled(iters: int = iterations, x: Tensor = x) -> Tensor:
            return torch.autograd.grad(loss(solve(x, iters)), x)[0]

        def implicit(iters: int = iterations, x: Tensor = x) -> Tensor:
            q = implicit_inverse(x, lambda t: solve(t, iters), forward_fn=lambda q: arm(q, links))
            return torch.autograd.grad(loss(q), x)[0]

        diff = (unrolled() - implicit()).abs().max().item()
        with torch.no_grad():
            error = arm(solve(targets, iterations), links) - targets
        residual = error.norm(dim=-1).max().item()
        t_unrolled, t_implicit = time_call(unrolled), time_call(implicit)
        saved = saved_bytes(lambda iters=iterations, x=x: solve(x, iters)) / 2**20
        rows.append([
            label, str(iterations), f"{residual:.1e}", f"{t_unrolled:.1f}", f"{t_implicit:.1f}",
            f"{t_unrolled / t_implicit:.1f}x", f"{saved:.1f}", f"{diff:.1e}",
        ])  # fmt: skip
        print(
            f"  {iterations:>3} iterations: unrolled {t_unrolled:7.1f} ms, "
            f"implicit {t_implicit:7.1f} ms, max |grad diff| {diff:.1e}"
        )
    return rows


def main() -> None:
    parser = benchmark_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    print(apply_threads_and_describe(args.threads))
    rows = []
    for label, links in PROBLEMS.items():
        print(label)
        rows += bench_problem(label, links, args.batch)
    header = ["arm", "iterations", "max residual [m]", "unrolled [ms]", "implicit [ms]", "unrolled / implicit",
              "unrolled saved [MiB]", "max abs grad diff"]  # fmt: skip
    print(f"\nForward + backward of d loss / d x through Gauss-Newton, batch {args.batch:,}, float64\n")
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
