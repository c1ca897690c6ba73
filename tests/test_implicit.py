"""The implicit-gradient ladder: gradcheck, closed forms, finite differences, unrolled solvers, edge cases."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from ik_layer.exceptions import IKLayerError, NonFiniteError, ShapeError
from ik_layer.layer.implicit import damped_pseudo_inverse, implicit_inverse, implicit_root

F64 = torch.float64
TOL = {"rtol": 1e-10, "atol": 1e-10}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- toy problems and their solvers -------------------------------------------------------------


def cubic(y: Tensor, a: Tensor | float = 1.0, b: Tensor | float = 1.0) -> Tensor:
    """Elementwise ``a y^3 + b y``: strictly increasing for a, b > 0."""
    return a * y**3 + b * y


def bisect_cubic(x: Tensor, a: Tensor | float = 1.0, b: Tensor | float = 1.0, steps: int = 200) -> Tensor:
    """Invert :func:`cubic` by bisection on a bracket that always holds the root (no gradients)."""
    bound = x.abs() / min(float(torch.as_tensor(b).min()), 1.0) + 1.0
    lo, hi = -bound, bound.clone()
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        above = cubic(mid, a, b) > x
        hi = torch.where(above, mid, hi)
        lo = torch.where(above, lo, mid)
    return 0.5 * (lo + hi)


def swirl(y: Tensor) -> Tensor:
    """A 2-D nonlinear map with det J >= 3/4 everywhere: (..., 2) -> (..., 2)."""
    return torch.stack(
        [
            y[..., 0] + 0.5 * torch.sin(y[..., 1]),
            y[..., 1] + 0.5 * torch.tanh(y[..., 0]),
        ],
        -1,
    )


def swirl_jacobian(y: Tensor) -> Tensor:
    one = torch.ones_like(y[..., 0])
    rows = [
        torch.stack([one, 0.5 * torch.cos(y[..., 1])], -1),
        torch.stack([0.5 / torch.cosh(y[..., 0]) ** 2, one], -1),
    ]
    return torch.stack(rows, -2)


def newton(
    fn: Callable[[Tensor], Tensor],
    jac: Callable[[Tensor], Tensor],
    x: Tensor,
    steps: int = 12,
) -> Tensor:
    """Plain batched Newton from y = x (recorded by autograd when grad mode is on)."""
    y = x
    for _ in range(steps):
        y = y - torch.linalg.solve(jac(y), fn(y) - x)
    return y


LINKS = torch.tensor([1.0, 0.8, 0.5], dtype=F64)


def arm(q: Tensor) -> Tensor:
    """Planar 3-link arm tip position: q (..., 3) [rad] -> (..., 2) [m]; redundant (m < n)."""
    angles = torch.cumsum(q, -1)
    return torch.stack([(LINKS * torch.cos(angles)).sum(-1), (LINKS * torch.sin(angles)).sum(-1)], -1)


def arm_ik(x: Tensor, steps: int = 60) -> Tensor:
    """Minimum-norm Gauss-Newton steps from a fixed bent start (converges for reachable x)."""
    q = torch.tensor([0.3, 0.6, 0.4], dtype=x.dtype).expand(*x.shape[:-1], 3)
    for _ in range(steps):
        jac = torch.func.vmap(torch.func.jacrev(arm))(q.reshape(-1, 3)).reshape(*q.shape[:-1], 2, 3)
        q = q - (torch.linalg.pinv(jac) @ (arm(q) - x).unsqueeze(-1)).squeeze(-1)
    return q


def _rows_of_jacobian(y: Tensor, x: Tensor) -> Tensor:
    """dy_b/dx_b (..., n, m) of a row-wise graph, one backward per output feature."""
    rows = [torch.autograd.grad(y[..., j].sum(), x, retain_graph=True)[0] for j in range(y.shape[-1])]
    return torch.stack(rows, -2)


# --- rung 1: gradcheck --------------------------------------------------------------------------


def test_gradcheck_cubic_by_bisection() -> None:
    x = torch.randn(6, generator=_gen(0), dtype=F64).mul(3.0).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: implicit_inverse(t, bisect_cubic, forward_fn=cubic), (x,))


def test_gradcheck_swirl_by_newton_with_leading_dims() -> None:
    x = torch.randn(2, 3, 2, generator=_gen(1), dtype=F64).requires_grad_(True)

    def layer(t: Tensor) -> Tensor:
        return implicit_inverse(t, lambda u: newton(swirl, swirl_jacobian, u), forward_fn=swirl)

    assert layer(x).shape == (2, 3, 2)
    assert torch.autograd.gradcheck(layer, (x,))


def test_gradcheck_params_of_the_forward_map() -> None:
    x = torch.randn(5, generator=_gen(2), dtype=F64).requires_grad_(True)
    a = torch.tensor(0.7, dtype=F64, requires_grad=True)
    b = torch.tensor(1.3, dtype=F64, requires_grad=True)

    def layer(t: Tensor, a_: Tensor, b_: Tensor) -> Tensor:
        return implicit_inverse(t, lambda u: bisect_cubic(u, a_, b_), forward_fn=cubic, params=(a_, b_))

    assert torch.autograd.gradcheck(layer, (x, a, b))


# --- rung 2: closed forms -----------------------------------------------------------------------


def test_swirl_gradient_is_inverse_jacobian() -> None:
    x = torch.randn(2, 3, 2, generator=_gen(3), dtype=F64).requires_grad_(True)
    y = implicit_inverse(x, lambda u: newton(swirl, swirl_jacobian, u), forward_fn=swirl)
    expected = torch.linalg.inv(swirl_jacobian(y.detach()))
    torch.testing.assert_close(_rows_of_jacobian(y, x), expected, **TOL)


def test_params_gradient_closed_form_and_broadcast() -> None:
    x = torch.randn(4, 3, generator=_gen(4), dtype=F64)
    a = torch.tensor([0.5, 1.0, 2.0], dtype=F64, requires_grad=True)  # broadcast over the batch
    b = torch.tensor(1.5, dtype=F64, requires_grad=True)
    y = implicit_inverse(
        x,
        lambda u: bisect_cubic(u, a.detach(), b.detach()),
        forward_fn=cubic,
        params=(a, b),
    )
    grad_a, grad_b = torch.autograd.grad(y.sum(), (a, b))
    yd = y.detach()
    slope = 3 * a.detach() * yd**2 + b.detach()  # df/dy
    # dy/dp = -(df/dy)^-1 df/dp, with df/da = y^3 and df/db = y; gradients reduce to each param's shape.
    torch.testing.assert_close(grad_a, (-(yd**3) / slope).sum(0), **TOL)
    torch.testing.assert_close(grad_b, (-yd / slope).sum(), **TOL)
    assert grad_a.shape == a.shape and grad_b.shape == b.shape


def test_params_gradient_matches_finite_differences_of_the_solver() -> None:
    x = torch.tensor([0.3, -1.2, 2.5], dtype=F64)
    a = torch.tensor(0.8, dtype=F64, requires_grad=True)
    y = implicit_inverse(x, lambda u: bisect_cubic(u, a.detach()), forward_fn=cubic, params=(a,))
    (grad,) = torch.autograd.grad(y.square().sum(), a)
    step = 1e-6
    plus = bisect_cubic(x, a.detach() + step).square().sum()
    minus = bisect_cubic(x, a.detach() - step).square().sum()
    torch.testing.assert_close(grad, (plus - minus) / (2 * step), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(("cond", "tol"), [(1.0, 1e-10), (1e2, 1e-10), (1e3, 1e-9)])
def test_linear_map_gives_the_exact_inverse(cond: float, tol: float) -> None:
    # At cond(A) = 1e3, cond(A^T A) = 1e6 and float64 round-off (~eps * 1e6) is the limit, not the damping.
    gen = _gen(5)
    u, _ = torch.linalg.qr(torch.randn(4, 4, generator=gen, dtype=F64))
    v, _ = torch.linalg.qr(torch.randn(4, 4, generator=gen, dtype=F64))
    matrix = u @ torch.diag(torch.logspace(0, -torch.log10(torch.tensor(cond)).item(), 4, dtype=F64)) @ v.T
    x = torch.randn(3, 4, generator=gen, dtype=F64).requires_grad_(True)
    y = implicit_inverse(
        x,
        lambda t: torch.linalg.solve(matrix, t.unsqueeze(-1)).squeeze(-1),
        forward_fn=lambda t: t @ matrix.T,
    )
    cotangent = torch.randn(3, 4, generator=gen, dtype=F64)
    (grad,) = torch.autograd.grad(y, x, cotangent)
    torch.testing.assert_close(grad, cotangent @ torch.linalg.inv(matrix), rtol=tol, atol=tol)


def test_overdetermined_residual_uses_least_squares() -> None:
    x = torch.randn(5, 1, generator=_gen(6), dtype=F64).requires_grad_(True)
    y = implicit_root(
        x.detach().clone(),
        lambda s, t: torch.cat([s - t, 2 * (s - t), 3 * (s - t)], -1),
        (x,),
    )
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(grad, torch.ones_like(x), **TOL)


# --- rung 3: variants agree ---------------------------------------------------------------------


def test_forward_jacobian_variant_matches_forward_fn() -> None:
    x = torch.randn(2, 3, 2, generator=_gen(7), dtype=F64).requires_grad_(True)

    def solve(u):
        return newton(swirl, swirl_jacobian, u)

    cotangent = torch.randn(2, 3, 2, generator=_gen(8), dtype=F64)
    (by_fn,) = torch.autograd.grad(implicit_inverse(x, solve, forward_fn=swirl), x, cotangent)
    (by_jac,) = torch.autograd.grad(implicit_inverse(x, solve, forward_jacobian=swirl_jacobian), x, cotangent)
    torch.testing.assert_close(by_jac, by_fn, **TOL)


def test_implicit_matches_unrolled_newton() -> None:
    x = torch.randn(7, 2, generator=_gen(9), dtype=F64).requires_grad_(True)
    cotangent = torch.randn(7, 2, generator=_gen(10), dtype=F64)
    (unrolled,) = torch.autograd.grad(newton(swirl, swirl_jacobian, x), x, cotangent)
    (implicit,) = torch.autograd.grad(
        implicit_inverse(x, lambda u: newton(swirl, swirl_jacobian, u), forward_fn=swirl),
        x,
        cotangent,
    )
    torch.testing.assert_close(implicit, unrolled, **TOL)


def test_broadcast_input_of_implicit_root_gets_summed_gradient() -> None:
    target = torch.tensor([0.4, -0.9], dtype=F64, requires_grad=True)  # one target for a (2, 3) batch
    solution = newton(swirl, swirl_jacobian, target.detach().expand(2, 3, 2))
    y = implicit_root(solution, lambda s, t: swirl(s) - t, (target,))
    (grad,) = torch.autograd.grad(y.sum(), target)
    expected = (torch.ones(2, 3, 1, 2, dtype=F64) @ torch.linalg.inv(swirl_jacobian(solution))).sum((0, 1, 2))
    assert grad.shape == target.shape
    torch.testing.assert_close(grad, expected, **TOL)


# --- rung 4: non-square, singular, invalid rows ------------------------------------------------


def test_redundant_arm_gets_minimum_norm_right_inverse() -> None:
    x = torch.tensor([[1.2, 0.9], [0.3, 1.5], [-0.8, 1.1]], dtype=F64).requires_grad_(True)
    q = implicit_inverse(x, arm_ik, forward_fn=arm)
    torch.testing.assert_close(arm(q.detach()), x.detach(), **TOL)
    dq_dx = _rows_of_jacobian(q, x)  # (3, 3, 2)
    jac = torch.func.vmap(torch.func.jacrev(arm))(q.detach())  # (3, 2, 3)
    torch.testing.assert_close(jac @ dq_dx, torch.eye(2, dtype=F64).expand(3, 2, 2), **TOL)
    torch.testing.assert_close(dq_dx, torch.linalg.pinv(jac), **TOL)  # the minimum-norm right inverse


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_singular_jacobians_stay_finite(dtype: torch.dtype) -> None:
    x = torch.zeros(3, dtype=dtype, requires_grad=True)  # y^3 has zero slope at the root y = 0
    y = implicit_inverse(x, torch.zeros_like, forward_fn=lambda t: t**3)
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert torch.isfinite(grad).all()

    rank_one = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=dtype)  # singular 2x2, and exactly zero
    target = torch.randn(4, 2, generator=_gen(11)).to(dtype).requires_grad_(True)
    jac = torch.stack([rank_one, rank_one, torch.zeros(2, 2, dtype=dtype), rank_one])
    y = implicit_root(
        torch.zeros(4, 2, dtype=dtype),
        lambda s, t: (jac @ s.unsqueeze(-1)).squeeze(-1) - t,
        (target,),
    )
    (grad,) = torch.autograd.grad(y.square().sum() + y.sum(), target)
    assert torch.isfinite(grad).all()
    torch.testing.assert_close(grad[2], torch.zeros(2, dtype=dtype))  # A = 0: no gradient at all


def test_valid_mask_zeroes_failed_rows_without_nan() -> None:
    target = torch.randn(4, 2, generator=_gen(12), dtype=F64).requires_grad_(True)
    scale = torch.tensor(1.0, dtype=F64, requires_grad=True)
    solution = newton(swirl, swirl_jacobian, target.detach())
    solution[1] = float("nan")  # the solver failed on row 1
    valid = torch.tensor([True, False, True, True])
    y = implicit_root(solution, lambda s, t, c: c * swirl(s) - t, (target, scale), valid=valid)
    grad_t, grad_c = torch.autograd.grad(y.square().sum(), (target, scale))  # NaN cotangent on row 1
    assert torch.isfinite(grad_t).all() and torch.isfinite(grad_c)
    torch.testing.assert_close(grad_t[1], torch.zeros(2, dtype=F64), rtol=0, atol=0)
    keep = valid.nonzero().squeeze(-1)
    kept_target = target.detach()[keep].requires_grad_(True)
    ref_y = implicit_root(solution[keep], lambda s, t, c: c * swirl(s) - t, (kept_target, scale))
    ref_t, ref_c = torch.autograd.grad(ref_y.square().sum(), (kept_target, scale))
    torch.testing.assert_close(grad_t[keep], ref_t, **TOL)
    torch.testing.assert_close(grad_c, ref_c, **TOL)


@pytest.mark.parametrize("batch", [(), (4,), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, F64], ids=str)
def test_batch_shapes_and_dtypes(batch: tuple[int, ...], dtype: torch.dtype) -> None:
    x = (0.5 * torch.randn(*batch, 2, generator=_gen(13))).to(dtype).requires_grad_(True)
    y = implicit_inverse(x, lambda u: newton(swirl, swirl_jacobian, u), forward_fn=swirl)
    (grad,) = torch.autograd.grad(y.sum(), x)
    expected = (torch.ones(*batch, 1, 2, dtype=dtype) @ torch.linalg.inv(swirl_jacobian(y.detach()))).squeeze(-2)
    assert grad.shape == x.shape and grad.dtype == dtype
    tol = 1e-10 if dtype == F64 else 1e-5
    torch.testing.assert_close(grad, expected, rtol=tol, atol=tol)


# --- behaviour and errors -----------------------------------------------------------------------


def test_inverse_fn_runs_once_without_grad() -> None:
    calls: list[bool] = []

    def solver(t: Tensor) -> Tensor:
        calls.append(torch.is_grad_enabled())
        return bisect_cubic(t)

    x = torch.randn(3, generator=_gen(14), dtype=F64).requires_grad_(True)
    y = implicit_inverse(x, solver, forward_fn=cubic)
    y.sum().backward()
    assert calls == [False]
    torch.testing.assert_close(x.grad, 1.0 / (3 * y.detach() ** 2 + 1), **TOL)


def test_no_grad_needed_means_no_backward_work() -> None:
    x = torch.randn(3, dtype=F64)
    y = implicit_inverse(x, bisect_cubic, forward_fn=cubic)
    assert not y.requires_grad
    torch.testing.assert_close(cubic(y), x, **TOL)


def test_errors_on_forward_arguments() -> None:
    x = torch.randn(3, dtype=F64)
    with pytest.raises(IKLayerError, match="exactly one of forward_fn and forward_jacobian, got both"):
        implicit_inverse(x, bisect_cubic, forward_fn=cubic, forward_jacobian=torch.diag_embed)
    with pytest.raises(IKLayerError, match="got neither"):
        implicit_inverse(x, bisect_cubic)
    with pytest.raises(IKLayerError, match="params need forward_fn"):
        implicit_inverse(x, bisect_cubic, forward_jacobian=torch.diag_embed, params=(torch.ones(1),))


def test_errors_on_shapes_and_values() -> None:
    x = torch.randn(4, 2, dtype=F64, requires_grad=True)
    with pytest.raises(ShapeError, match=r"inverse_fn\(x\) must keep the leading dims"):
        implicit_inverse(x, lambda t: t[0], forward_fn=swirl)
    with pytest.raises(ShapeError, match=r"forward_jacobian\(y\) must have shape \(4, 2, 2\)"):
        implicit_inverse(x, lambda t: t, forward_jacobian=lambda t: t)
    with pytest.raises(ShapeError, match="x must have shape"):
        implicit_inverse(torch.tensor(1.0), bisect_cubic, forward_fn=cubic)
    with pytest.raises(NonFiniteError, match="x holds 1 NaN"):
        implicit_inverse(torch.tensor([1.0, float("nan")]), bisect_cubic, forward_fn=cubic)
    with pytest.raises(NonFiniteError, match=r"inverse_fn\(x\) holds"):
        implicit_inverse(x, lambda t: t / 0.0, forward_fn=swirl)
    y = implicit_inverse(x, lambda t: t, forward_fn=lambda t: t[..., :1])
    with pytest.raises(ShapeError, match=r"forward_fn\(y\) must have shape \(\.\.\., 2\)"):
        y.sum().backward()


def test_implicit_root_argument_errors() -> None:
    solution = torch.zeros(3, 2, dtype=F64)
    target = torch.ones(3, 2, dtype=F64, requires_grad=True)

    def residual(s, t):
        return s - t

    with pytest.raises(ShapeError, match=r"jacobian must have shape \(3, 'm', 2\)"):
        implicit_root(solution, residual, (target,), jacobian=torch.zeros(3, 2, 3))
    with pytest.raises(ShapeError, match="valid must be a bool tensor of shape"):
        implicit_root(solution, residual, (target,), valid=torch.ones(3))
    with pytest.raises(IKLayerError, match="damping must be"):
        implicit_root(solution, residual, (target,), damping=-1.0)
    with pytest.raises(IKLayerError, match=r"inputs\[0\] must be a tensor"):
        implicit_root(solution, residual, (1.0,))  # type: ignore[arg-type]
    with pytest.raises(IKLayerError, match=re.escape("jacobian has dtype torch.float32")):
        implicit_root(solution, residual, (target,), jacobian=torch.zeros(3, 2, 2))
    y = implicit_root(
        solution,
        lambda s, t: (s - t)[..., :1],
        (target,),
        jacobian=torch.zeros(3, 2, 2, dtype=F64),
    )
    with pytest.raises(ShapeError, match=r"residual_fn\(solution, \*inputs\) must have shape \(3, 2\)"):
        y.sum().backward()


@pytest.mark.parametrize("shape", [(2, 3), (4, 3), (2, 5, 2, 6), (3, 3)], ids=str)
def test_damped_pseudo_inverse_matches_pinv(shape: tuple[int, ...]) -> None:
    matrix = torch.randn(*shape, generator=_gen(15), dtype=F64)
    pinv = damped_pseudo_inverse(matrix)
    assert pinv.shape == (*shape[:-2], shape[-1], shape[-2])
    torch.testing.assert_close(pinv, torch.linalg.pinv(matrix), **TOL)


def test_damped_pseudo_inverse_singular_and_errors() -> None:
    singular = torch.tensor([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]], dtype=F64)
    pinv = damped_pseudo_inverse(singular)
    assert torch.isfinite(pinv).all()
    # Rank one: round-off in the null direction is amplified by 1 / lam, hence the looser tolerance.
    torch.testing.assert_close(pinv[0], torch.linalg.pinv(singular[0]), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(pinv[1], torch.zeros(2, 2, dtype=F64))
    with pytest.raises(ShapeError, match="matrix must have shape"):
        damped_pseudo_inverse(torch.ones(3))
