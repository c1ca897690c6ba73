"""Invert a learned forward model and differentiate through the inversion.

1. Train a small MLP ``x = f_theta(q)`` on the forward kinematics of a planar 2-link arm.
2. Invert it numerically for a batch of targets (damped Gauss-Newton, Jacobians from
   ``sequential_jacobian``: analytic per-layer rules, no autograd).
3. Wrap the solver with ``implicit_inverse`` (``forward_jacobian`` = ``sequential_jacobian``), so
   ``q*(x)`` is differentiable w.r.t. the target without backpropagating through the iterations.
4. Check that gradient against central finite differences of the re-solved inverse, and against
   the ``forward_fn`` variant (autograd Jacobian), then show gradients w.r.t. the model's weights.

Run from the repository root: ``PYTHONPATH=. python examples/invert_learned_model.py`` (seconds).
Exits 1 if a check fails.
"""

from __future__ import annotations

import sys
import time

import torch
from torch import Tensor, nn

from ik_layer.layer.implicit import implicit_inverse
from ik_layer.layer.jacobian import sequential_jacobian

DTYPE = torch.float64
LINKS = (1.0, 0.7)  # [m]
Q_LOW = torch.tensor([0.2, 0.4], dtype=DTYPE)  # training box [rad]: elbow bent, away from q2 = 0, pi
Q_HIGH = torch.tensor([1.4, 2.2], dtype=DTYPE)


def arm_fk(q: Tensor) -> Tensor:
    """The known function: planar 2-link arm tip, q (..., 2) [rad] -> x (..., 2) [m]."""
    l1, l2 = LINKS
    q1, q12 = q[..., 0], q[..., 0] + q[..., 1]
    return torch.stack(
        [
            l1 * torch.cos(q1) + l2 * torch.cos(q12),
            l1 * torch.sin(q1) + l2 * torch.sin(q12),
        ],
        -1,
    )


def sample_q(count: int, gen: torch.Generator) -> Tensor:
    return Q_LOW + (Q_HIGH - Q_LOW) * torch.rand(count, 2, generator=gen, dtype=DTYPE)


def train_forward_model(steps: int, gen: torch.Generator) -> tuple[nn.Sequential, float]:
    """Fit ``f_theta`` to ``arm_fk``; returns the model and its RMS error [m] on fresh samples."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)).to(DTYPE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    for _ in range(steps):
        q = sample_q(256, gen)
        loss = (model(q) - arm_fk(q)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    with torch.no_grad():
        q = sample_q(2048, gen)
        rms = (model(q) - arm_fk(q)).square().sum(-1).mean().sqrt().item()
    return model, rms


def damped_gauss_newton(model: nn.Sequential, x: Tensor, iterations: int = 40, damping: float = 1e-6) -> Tensor:
    """Solve ``model(q) = x`` for q (B, 2) from the middle of the training box."""
    q = ((Q_LOW + Q_HIGH) / 2).expand_as(x).clone()
    eye = torch.eye(2, dtype=x.dtype)
    for _ in range(iterations):
        jac = sequential_jacobian(model, q)  # (B, 2, 2)
        error = (model(q) - x).unsqueeze(-1)
        q = q - torch.linalg.solve(jac.mT @ jac + damping * eye, jac.mT @ error).squeeze(-1)
    return q


def main() -> int:
    torch.set_num_threads(1)  # small tensors: more threads only wait for each other (and for other processes)
    start = time.perf_counter()
    gen = torch.Generator().manual_seed(0)
    model, rms = train_forward_model(steps=1000, gen=gen)
    print(f"1. trained f_theta (2-64-64-2 tanh) on the 2-link arm: RMS error {rms * 1e3:.2f} mm")

    targets = model(sample_q(8, gen)).detach()  # reachable by the learned model

    def solve(x):
        return damped_gauss_newton(model, x)

    q_star = implicit_inverse(
        targets.requires_grad_(True),
        solve,
        forward_jacobian=lambda q: sequential_jacobian(model, q),
    )
    residual = (model(q_star) - targets).norm(dim=-1).max().item()
    print(f"2. inverted {len(targets)} targets by damped Gauss-Newton: max |f_theta(q*) - x| = {residual:.1e} m")
    truth_gap = (arm_fk(q_star) - targets).norm(dim=-1).max().item()
    print(f"   (the real arm at q* misses the target by {truth_gap * 1e3:.2f} mm: the model's error)")

    weights = torch.linspace(1.0, 2.0, 2 * len(targets), dtype=DTYPE).reshape(-1, 2)

    def row_loss(q):
        return (weights * torch.sin(q)).sum(-1)  # any function of each row's q*

    (grad_implicit,) = torch.autograd.grad(row_loss(q_star).sum(), targets)

    step = 1e-6
    grad_fd = torch.zeros_like(targets)
    with torch.no_grad():
        for j in range(2):
            shift = torch.zeros_like(targets)
            shift[:, j] = step
            # Each row's q* depends on its own target only: one shifted solve per coordinate gives
            # every row's finite difference at once.
            grad_fd[:, j] = (row_loss(solve(targets + shift)) - row_loss(solve(targets - shift))) / (2 * step)
    fd_gap = (grad_implicit - grad_fd).abs().max().item()
    print(f"3. dL/dx implicit vs finite differences of the re-solved inverse: max |diff| = {fd_gap:.1e}")

    q_auto = implicit_inverse(targets, solve, forward_fn=model)
    (grad_auto,) = torch.autograd.grad(row_loss(q_auto).sum(), targets)
    auto_gap = (grad_implicit - grad_auto).abs().max().item()
    print(f"4. forward_jacobian (sequential_jacobian) vs forward_fn (autograd): max |diff| = {auto_gap:.1e}")

    last = model[-1]
    q_params = implicit_inverse(
        targets.detach(),
        solve,
        forward_fn=lambda q, w, b: model[:-1](q) @ w.T + b,
        params=(last.weight, last.bias),
    )
    grad_w, grad_b = torch.autograd.grad(row_loss(q_params).sum(), (last.weight, last.bias))
    # The bias shifts the output like the target with the opposite sign: dL/db = -sum_rows dL/dx.
    bias_gap = (grad_b + grad_implicit.sum(0)).abs().max().item()
    print(
        f"5. dL/d(last layer) through the inversion: |dW| = {grad_w.norm():.3f}, |db| = {grad_b.norm():.3f}; "
        f"db vs -sum(dL/dx): max |diff| = {bias_gap:.1e}"
    )

    print(f"done in {time.perf_counter() - start:.1f} s")
    ok = (
        residual < 1e-9
        and fd_gap < 1e-6
        and auto_gap < 1e-10
        and bias_gap < 1e-10
        and bool(torch.isfinite(grad_w).all())
    )
    if not ok:
        print("FAILED: a check is out of tolerance", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
