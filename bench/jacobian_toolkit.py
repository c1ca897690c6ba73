"""Benchmark: per-sample Jacobians of an MLP and of a small residual, rules vs autograd strategies.

Part 1, an MLP 6 -> 256 -> 256 -> 7 (tanh; float32 and float64) and a small 2 -> 64 -> 64 -> 2
at batch 1k, CPU:

* ``sequential_jacobian``: analytic per-layer rules chained after one stored forward pass.
* ``vmap(jacrev)``:        ``torch.func.vmap(torch.func.jacrev(row_fn))``.
* ``sum trick``:           ``batch_jacobian`` default: Jacobian of the sum over the batch, the 7
  cotangents in one batched backward (``is_grads_batched``).
* ``per-output backward``: the sum trick with one Python ``autograd.grad`` per output (seed 002).
* ``per-sample``:          ``torch.autograd.functional.jacobian`` on each row in a Python loop.

Part 2, ``batch_jacobian``'s two strategies (``sum`` / ``vmap``) on the MLP and on a 3-link arm
residual (3 -> 2), the size implicit gradients differentiate, at batch 1 / 1k / 10k.

Every method is checked against ``sequential_jacobian`` first (max |diff| printed).
Run: ``python bench/jacobian_toolkit.py`` (under a minute). Times: median [us] per call. On a
shared CPU pass ``--threads 1``: OpenMP threads spinning against other processes can make each
small op cost milliseconds and the ranking meaningless.

Reading the figures: the large MLP is FLOP-bound. Any exact method does about ``min(in, out)``
passes through the 256 x 256 layer per sample, so the analytic chain and batched autograd land
within ~20% of each other; the rules win where per-call overhead matters (the small MLP), need no
autograd tape, and every batched method is 10-200x faster than a per-sample Python loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from common import apply_threads_and_describe, benchmark_parser, markdown_table, time_call
from torch import Tensor, nn

from ik_layer.layer.jacobian import JacobianStrategy, batch_jacobian, sequential_jacobian

BIG = (6, 256, 256, 7)
SMALL = (2, 64, 64, 2)  # the learned forward map of examples/invert_learned_model.py


def mlp(widths: tuple[int, ...], dtype: torch.dtype) -> nn.Sequential:
    """Linear layers of the given widths with tanh between them, frozen."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for fan_in, fan_out in itertools.pairwise(widths):
        layers += [nn.Linear(fan_in, fan_out), nn.Tanh()]
    return nn.Sequential(*layers[:-1]).to(dtype).requires_grad_(False)


def label(widths: tuple[int, ...]) -> str:
    return "MLP " + "-".join(map(str, widths))


def arm_residual(q: Tensor) -> Tensor:
    """Tip of a planar 3-link arm minus a fixed target: (..., 3) -> (..., 2)."""
    links = torch.tensor([1.0, 0.8, 0.5], dtype=q.dtype)
    angles = torch.cumsum(q, -1)
    tip = torch.stack([(links * torch.cos(angles)).sum(-1), (links * torch.sin(angles)).sum(-1)], -1)
    return tip - 0.5


def vmap_jacrev(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    return torch.func.vmap(torch.func.jacrev(lambda row: fn(row.unsqueeze(0)).squeeze(0)))


def per_output_backward(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        y = fn(x)
        rows = [torch.autograd.grad(y[:, i].sum(), x, retain_graph=True)[0] for i in range(y.shape[-1])]
    return torch.stack(rows, -2)


def per_sample(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    return torch.stack([torch.autograd.functional.jacobian(fn, row) for row in x])


def bench_mlp(widths: tuple[int, ...], batch: int, dtype: torch.dtype, budget_s: float) -> list[list[str]]:
    model = mlp(widths, dtype)
    x = torch.randn(batch, widths[0], dtype=dtype, generator=torch.Generator().manual_seed(1))
    methods: dict[str, Callable[[], Tensor]] = {
        "sequential_jacobian": lambda: sequential_jacobian(model, x),
        "vmap(jacrev)": lambda: vmap_jacrev(model)(x),
        "sum trick (batch_jacobian)": lambda: batch_jacobian(model, x),
        "per-output backward": lambda: per_output_backward(model, x),
        "per-sample loop": lambda: per_sample(model, x),
    }
    reference = methods["sequential_jacobian"]()
    rows = []
    times: dict[str, float] = {}
    for name, fn in methods.items():
        diff = (fn() - reference).abs().max().item()
        times[name] = time_call(fn, budget_s, repeats=3 if name == "per-sample loop" else 5)
        ratio = times[name] / times["sequential_jacobian"]
        dtype_name = str(dtype).removeprefix("torch.")
        rows.append(
            [
                label(widths),
                name,
                dtype_name,
                f"{times[name]:,.0f}",
                f"{ratio:.2f}x",
                f"{diff:.1e}",
            ]
        )
        print(f"  {name:<28} {times[name]:>12,.0f} us  ({ratio:.1f}x)  max|diff| {diff:.1e}")
    return rows


def bench_strategies(batches: list[int], budget_s: float) -> list[list[str]]:
    cases = [
        (label(BIG), mlp(BIG, torch.float32), 6, torch.float32),
        ("arm residual 3->2", arm_residual, 3, torch.float64),
    ]
    rows = []
    for name, fn, width, dtype in cases:
        for batch in batches:
            x = torch.randn(batch, width, dtype=dtype, generator=torch.Generator().manual_seed(2))
            times = {}
            for strategy in JacobianStrategy:
                times[strategy] = time_call(
                    lambda f=fn, t=x, s=strategy: batch_jacobian(f, t, strategy=s),
                    budget_s,
                )
            diff = (batch_jacobian(fn, x) - batch_jacobian(fn, x, strategy="vmap")).abs().max().item()
            t_sum, t_vmap = times[JacobianStrategy.SUM], times[JacobianStrategy.VMAP]
            rows.append(
                [
                    name,
                    f"{batch:,}",
                    f"{t_sum:,.0f}",
                    f"{t_vmap:,.0f}",
                    f"{t_vmap / t_sum:.1f}x",
                    f"{diff:.1e}",
                ]
            )
            print(f"  {name:<18} batch {batch:>6}: sum {t_sum:>10,.0f} us  vmap {t_vmap:>10,.0f} us")
    return rows


def main() -> None:
    parser = benchmark_parser(__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.4, help="seconds of timing per measurement")
    args = parser.parse_args()
    print(apply_threads_and_describe(args.threads) + "\n")
    mlp_rows = []
    for widths, dtype in [
        (BIG, torch.float32),
        (BIG, torch.float64),
        (SMALL, torch.float32),
    ]:
        print(f"{label(widths)} (tanh), {dtype}, batch 1,000")
        mlp_rows += bench_mlp(widths, 1000, dtype, args.budget)
    print("\nbatch_jacobian strategies")
    strategy_rows = bench_strategies([1, 1000, 10_000], args.budget / 2)
    print("\nPer-sample Jacobians of the MLP at batch 1k (time per call; ratio vs sequential_jacobian)\n")
    print(
        markdown_table(
            ["model", "method", "dtype", "time [us]", "vs sequential", "max abs diff"],
            mlp_rows,
        )
    )
    print("\nbatch_jacobian: sum trick vs vmap(jacrev) (ratio > 1: sum is faster)\n")
    print(
        markdown_table(
            [
                "function",
                "batch",
                "sum [us]",
                "vmap [us]",
                "vmap / sum",
                "max abs diff",
            ],
            strategy_rows,
        )
    )


if __name__ == "__main__":
    main()
