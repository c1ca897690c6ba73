"""Implicit gradients: differentiate through any solver via its optimality condition.

A solver finds ``y*`` with ``F(y*, x) = 0``. Instead of backpropagating through its iterations, the
implicit function theorem gives the derivative from ``F`` alone:

    A dy + B dx = 0,   A = dF/dy (..., m, n),   B = dF/dx   =>   dy/dx = -A^+ B.

:func:`implicit_root` attaches that derivative to a solution; :func:`implicit_inverse` specialises
it to inverting a forward map, ``F(y, x, p) = f(y, p) - x``.

Damping. The backward solves a Gram system ``G u = r`` with ``G = A A^T`` (m < n) or ``A^T A``
(m >= n). It factors ``G + lam I`` with ``lam = max(damping, 100 eps) * trace(G) / k``: relative to
the mean eigenvalue of ``G``, so it is unit-free; the ``100 eps`` floor keeps the Cholesky factor of
a singular ``G`` real in float32. Two steps of iterative refinement with the same factor follow
(iterated Tikhonov); each multiplies the damping bias by ``lam / sigma``, leaving a relative error
of about ``(lam / sigma_min(G))**3``. So well-conditioned problems get the exact inverse (~1e-10 in
float64 up to cond(A) ~ 1e2; beyond ~1e3 the round-off of ``G`` itself, ~eps cond(A)^2, dominates),
while directions with ``sigma(G) << lam`` are damped instead of blowing up, so singular Jacobians
give finite gradients. ``damping`` is a numerical safeguard, not a regulariser.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ik_layer.exceptions import IKLayerError, NonFiniteError, ShapeError
from ik_layer.layer.jacobian import batch_jacobian

__all__ = ["damped_pseudo_inverse", "implicit_inverse", "implicit_root"]

ResidualFn = Callable[..., Tensor]
"""``residual_fn(y, *inputs) -> F``: ``y`` (..., n), ``F`` (..., m); row-wise and differentiable."""


def implicit_root(
    solution: Tensor,
    residual_fn: ResidualFn,
    inputs: Sequence[Tensor],
    *,
    jacobian: Tensor | None = None,
    damping: float = 1e-9,
    valid: Tensor | None = None,
) -> Tensor:
    """Attach implicit-function-theorem gradients to a root found by any solver.

    The returned tensor equals ``solution``; its backward maps ``v = dL/dy`` to
    ``dL/dx_i = -(A^+ B_i)^T v`` for every input ``x_i`` that requires grad, where ``A = dF/dy`` and
    ``B_i = dF/dx_i`` at the solution. ``A^+`` is the (damped) pseudo-inverse: the minimum-norm
    right inverse when ``m < n`` (redundant unknowns), the least-squares left inverse when ``m >= n``.
    ``solution`` itself gets no gradient (it is treated as a constant). First-order only: the
    backward is not differentiable again, and it calls autograd, so ``torch.func`` transforms
    (``vmap``/``grad`` over this function) are not supported; batch through the leading dims.

    Args:
        solution: The root, ``(..., n)``.
        residual_fn: ``residual_fn(y, *inputs) -> (..., m)`` with ``F(solution, *inputs) ~ 0``.
            Row-wise: row ``b`` of the output depends on row ``b`` of ``y`` (and of the inputs,
            which may broadcast). Evaluated once in the backward pass, plus once more to build
            ``A`` when ``jacobian`` is not given.
        inputs: Tensors ``F`` depends on, e.g. a target and parameters. They may have fewer leading
            dims than ``solution`` (broadcast); each gradient has its input's shape.
        jacobian: ``A = dF/dy`` at the solution, ``(..., m, n)``, if already known (e.g. from the
            solver's last iteration); otherwise computed with :func:`~ik_layer.layer.jacobian.batch_jacobian`.
        damping: Relative damping of the backward's linear solve, ``>= 0`` (see the module docstring).
        valid: Boolean mask ``(...)`` of rows that converged. Other rows get exactly zero gradient,
            whatever ``v``, ``A`` or ``F`` hold there (NaN included).

    Returns:
        A tensor equal to ``solution``, ``(..., n)``, connected to the inputs' graphs.

    Raises:
        ShapeError: ``solution`` is a scalar, or ``jacobian`` / ``valid`` have the wrong shape.
        IKLayerError: ``inputs`` holds a non-tensor, ``solution`` is not floating point, or
            ``damping`` is negative or not finite.
    """
    inputs = tuple(inputs)
    _check_root_arguments(solution, inputs, jacobian, damping, valid)
    jacobian = None if jacobian is None else jacobian.detach()
    return _ImplicitRoot.apply(solution.detach(), residual_fn, jacobian, float(damping), valid, *inputs)


def _check_root_arguments(
    solution: Tensor,
    inputs: tuple[Tensor, ...],
    jacobian: Tensor | None,
    damping: float,
    valid: Tensor | None,
) -> None:
    _check_tensor("implicit_root", "solution", solution)
    for index, item in enumerate(inputs):
        if not isinstance(item, Tensor):
            raise IKLayerError(f"implicit_root: inputs[{index}] must be a tensor, got {type(item).__name__}")
    if not (isinstance(damping, (int, float)) and 0.0 <= damping < float("inf")):
        raise IKLayerError(f"implicit_root: damping must be a finite number >= 0, got {damping!r}")
    batch, n = solution.shape[:-1], solution.shape[-1]
    if jacobian is not None:
        if jacobian.ndim < 2 or jacobian.shape[:-2] != batch or jacobian.shape[-1] != n:
            raise ShapeError(
                f"implicit_root: jacobian must have shape {(*batch, 'm', n)} "
                f"(solution {tuple(solution.shape)}), got {tuple(jacobian.shape)}"
            )
        if jacobian.dtype != solution.dtype:
            raise IKLayerError(f"implicit_root: jacobian has dtype {jacobian.dtype}, solution {solution.dtype}")
    if valid is not None and (valid.dtype != torch.bool or valid.shape != batch):
        raise ShapeError(
            f"implicit_root: valid must be a bool tensor of shape {tuple(batch)}, "
            f"got {valid.dtype} of shape {tuple(valid.shape)}"
        )


class _ImplicitRoot(torch.autograd.Function):
    """Identity on the solution forward; implicit-function-theorem VJP backward."""

    @staticmethod
    def forward(
        solution: Tensor,
        residual_fn: ResidualFn,
        jacobian: Tensor | None,
        damping: float,
        valid: Tensor | None,
        *inputs: Tensor,
    ) -> Tensor:
        return solution.clone()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
        solution, residual_fn, jacobian, damping, valid, *tensors = inputs
        ctx.residual_fn = residual_fn
        ctx.damping = damping
        ctx.has_jacobian = jacobian is not None
        ctx.has_valid = valid is not None
        saved = [solution, *tensors]
        if jacobian is not None:
            saved.append(jacobian)
        if valid is not None:
            saved.append(valid)
        ctx.save_for_backward(*saved)
        ctx.n_inputs = len(tensors)

    # Derivation. Along the solution manifold F(y(x), x) = 0, so A dy + B dx = 0 and, taking the
    # pseudo-inverse, dy = -A^+ B dx. For a cotangent v = dL/dy:
    #     dL/dx = (dy/dx)^T v = -B^T (A^+)^T v = B^T (-w),   w = (A^+)^T v.
    # (A^+)^T v without forming A^+, with G the damped Gram matrix (G + lam I):
    #     m <  n: A^+ = A^T (A A^T)^-1  =>  w = (A A^T)^-1 (A v)        (solve m x m)
    #     m >= n: A^+ = (A^T A)^-1 A^T  =>  w = A ((A^T A)^-1 v)        (solve n x n)
    # B^T (-w) is one vector-Jacobian product of F w.r.t. all inputs at once, so B is never formed.
    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_y: Tensor) -> tuple[Tensor | None, ...]:
        solution, *tensors = ctx.saved_tensors
        inputs, extra = tensors[: ctx.n_inputs], list(tensors[ctx.n_inputs :])
        jacobian = extra.pop(0) if ctx.has_jacobian else None
        valid = extra.pop(0) if ctx.has_valid else None
        wanted = ctx.needs_input_grad[_N_ARGS:]
        if not any(wanted):
            return (None,) * (_N_ARGS + len(inputs))

        y = solution
        if valid is not None:  # failed rows: finite stand-ins, zero cotangent
            rows = valid.unsqueeze(-1)
            y = torch.where(rows, solution, 0.0)
            grad_y = torch.where(rows, grad_y, 0.0)
        detached = [item.detach() for item in inputs]
        if jacobian is None:
            jacobian = batch_jacobian(lambda point: ctx.residual_fn(point, *detached), y)
        if valid is not None:
            jacobian = torch.where(valid[..., None, None], jacobian, 0.0)
        w = _pinv_transpose_times(jacobian, grad_y, ctx.damping)
        if valid is not None:
            w = torch.where(valid.unsqueeze(-1), w, 0.0)
        grads = _residual_vjp(ctx.residual_fn, y, detached, wanted, -w)
        return (None,) * _N_ARGS + grads


# The Function's arguments before *inputs: solution, residual_fn, jacobian, damping, valid.
_N_ARGS = 5


def _pinv_transpose_times(jacobian: Tensor, v: Tensor, damping: float) -> Tensor:
    """``(A^+)^T v`` for ``A`` (..., m, n) and ``v`` (..., n), by a damped Gram solve: (..., m)."""
    rows, cols = jacobian.shape[-2:]
    if rows < cols:  # minimum norm: (A A^T)^-1 A v
        gram = jacobian @ jacobian.mT
        return _damped_solve(gram, jacobian @ v.unsqueeze(-1), damping).squeeze(-1)
    gram = jacobian.mT @ jacobian  # least squares: A (A^T A)^-1 v
    return (jacobian @ _damped_solve(gram, v.unsqueeze(-1), damping)).squeeze(-1)


def damped_pseudo_inverse(matrix: Tensor, damping: float = 1e-9) -> Tensor:
    """Damped pseudo-inverse of a batch of matrices, the one the implicit backward applies.

    The minimum-norm right inverse ``A^T (A A^T)^-1`` when ``m < n``, the least-squares left
    inverse ``(A^T A)^-1 A^T`` otherwise, with the relative damping and refinement of the module
    docstring: exact to ~1e-10 for well-conditioned float64 input, finite for singular input.
    One Cholesky factorisation per matrix; differentiable.

    Args:
        matrix: ``A``, ``(..., m, n)``.
        damping: Relative damping, ``>= 0``.

    Returns:
        ``A^+``, ``(..., n, m)``.

    Raises:
        ShapeError: ``matrix`` has fewer than 2 dims.
    """
    if matrix.ndim < 2:
        raise ShapeError(f"damped_pseudo_inverse: matrix must have shape (..., m, n), got {tuple(matrix.shape)}")
    rows, cols = matrix.shape[-2:]
    if rows < cols:  # (G^-1 A)^T = A^T G^-1, G = A A^T symmetric
        return _damped_solve(matrix @ matrix.mT, matrix, damping).mT
    return _damped_solve(matrix.mT @ matrix, matrix.mT, damping)


def _damped_solve(gram: Tensor, rhs: Tensor, damping: float) -> Tensor:
    """Solve ``gram u = rhs`` (gram (..., k, k) PSD, rhs (..., k, r)): damped Cholesky + refinement."""
    size = gram.shape[-1]
    relative = max(damping, 100.0 * torch.finfo(gram.dtype).eps)
    mean_eigenvalue = gram.diagonal(dim1=-2, dim2=-1).sum(-1) / size
    # gram == 0 means A == 0, where any positive lam gives the right answer (w = 0).
    lam = torch.where(mean_eigenvalue > 0, relative * mean_eigenvalue, 1.0)
    eye = torch.eye(size, dtype=gram.dtype, device=gram.device)
    factor, _ = torch.linalg.cholesky_ex(gram + lam[..., None, None] * eye)
    u = torch.cholesky_solve(rhs, factor)
    # Iterated Tikhonov: each step multiplies the damping bias by lam / sigma.
    for _ in range(_REFINEMENTS):
        u = u + torch.cholesky_solve(rhs - gram @ u, factor)
    return u


_REFINEMENTS = 2


def _residual_vjp(
    residual_fn: ResidualFn,
    y: Tensor,
    inputs: list[Tensor],
    wanted: Sequence[bool],
    cotangent: Tensor,
) -> tuple[Tensor | None, ...]:
    """``cotangent^T dF/dx_i`` for each wanted input, from one evaluation of ``F`` (each input's shape)."""
    leaves = [item.requires_grad_(True) if need else item for item, need in zip(inputs, wanted, strict=False)]
    with torch.enable_grad():
        residual = residual_fn(y, *leaves)
    if residual.shape != cotangent.shape:
        raise ShapeError(
            f"implicit_root: residual_fn(solution, *inputs) must have shape {tuple(cotangent.shape)} "
            f"(solution {tuple(y.shape)}, m = {cotangent.shape[-1]}), got {tuple(residual.shape)}"
        )
    targets = [item for item, need in zip(leaves, wanted, strict=False) if need]
    if not residual.requires_grad:  # F does not depend on any wanted input
        return (None,) * len(wanted)
    found = iter(torch.autograd.grad(residual, targets, cotangent, allow_unused=True))
    return tuple(next(found) if need else None for need in wanted)


def _check_tensor(where: str, name: str, value: Tensor) -> None:
    if not isinstance(value, Tensor):
        raise IKLayerError(f"{where}: {name} must be a tensor, got {type(value).__name__}")
    if value.ndim < 1:
        raise ShapeError(f"{where}: {name} must have shape (..., n), got a scalar")
    if not value.is_floating_point():
        raise IKLayerError(f"{where}: {name} must be floating point, got {value.dtype}")


def implicit_inverse(
    x: Tensor,
    inverse_fn: Callable[[Tensor], Tensor],
    *,
    forward_fn: Callable[..., Tensor] | None = None,
    forward_jacobian: Callable[[Tensor], Tensor] | None = None,
    params: Sequence[Tensor] = (),
    damping: float = 1e-9,
) -> Tensor:
    """Differentiable numerical inverse: ``y = inverse_fn(x)`` with ``forward_fn(y) = x``.

    ``inverse_fn`` runs exactly once, under ``torch.no_grad`` (its iterations are never recorded).
    Gradients come from the inverse function theorem through :func:`implicit_root` with the residual
    ``F(y, x, *params) = forward_fn(y, *params) - x``:

        dy/dx = J^+,   dy/dp = -J^+ df/dp,   J = df/dy (..., m, n)

    (``J^+`` the damped pseudo-inverse; minimum norm when ``m < n``). Give exactly one of
    ``forward_fn`` (autograd builds ``J`` and the parameter VJP) or ``forward_jacobian`` (``J``
    directly; gradients w.r.t. ``x`` only).

    Args:
        x: Targets, ``(..., m)``, finite.
        inverse_fn: ``(..., m) -> (..., n)`` with the same leading dims; any solver.
        forward_fn: ``forward_fn(y, *params) -> (..., m)``, row-wise and differentiable.
        forward_jacobian: ``forward_jacobian(y) -> (..., m, n)``, the Jacobian of the forward map.
        params: Tensors ``forward_fn`` depends on (e.g. link lengths, network weights) that should
            receive gradients; they may broadcast against the batch. Only with ``forward_fn``.
        damping: Relative damping of the backward's linear solve (see :mod:`ik_layer.layer.implicit`).

    Returns:
        ``y``, ``(..., n)``, differentiable w.r.t. ``x`` and ``params``.

    Raises:
        IKLayerError: Not exactly one of ``forward_fn`` / ``forward_jacobian``, or ``params`` with
            ``forward_jacobian``.
        ShapeError: ``inverse_fn`` or ``forward_jacobian`` returned the wrong shape.
        NonFiniteError: ``x`` or the solution ``y`` holds NaN or inf.
    """
    if (forward_fn is None) == (forward_jacobian is None):
        given = "both" if forward_fn is not None else "neither"
        raise IKLayerError(f"implicit_inverse: give exactly one of forward_fn and forward_jacobian, got {given}")
    params = tuple(params)
    if forward_jacobian is not None and params:
        raise IKLayerError(
            "implicit_inverse: params need forward_fn (their gradient is a VJP of the forward map); "
            "forward_jacobian gives gradients w.r.t. x only"
        )
    _check_tensor("implicit_inverse", "x", x)
    _check_finite("x", x)
    with torch.no_grad():
        y = inverse_fn(x.detach())
    _check_tensor("implicit_inverse", "inverse_fn(x)", y)
    if y.shape[:-1] != x.shape[:-1]:
        raise ShapeError(
            f"implicit_inverse: inverse_fn(x) must keep the leading dims of x {tuple(x.shape[:-1])}, "
            f"got {tuple(y.shape)}"
        )
    _check_finite("inverse_fn(x)", y)
    if forward_fn is not None:
        return implicit_root(y, _InverseResidual(forward_fn), (x, *params), damping=damping)
    assert forward_jacobian is not None  # exactly one of the two, checked above
    return _with_forward_jacobian(x, y, forward_jacobian, damping)


class _InverseResidual:
    """``F(y, x, *params) = forward_fn(y, *params) - x``, checking that ``forward_fn`` matches ``x``."""

    def __init__(self, forward_fn: Callable[..., Tensor]) -> None:
        self.forward_fn = forward_fn

    def __call__(self, y: Tensor, x: Tensor, *params: Tensor) -> Tensor:
        fx = self.forward_fn(y, *params)
        if fx.shape[-1:] != x.shape[-1:]:
            raise ShapeError(
                f"implicit_inverse: forward_fn(y) must have shape (..., {x.shape[-1]}) like x, got {tuple(fx.shape)}"
            )
        return fx - x


def _with_forward_jacobian(
    x: Tensor, y: Tensor, forward_jacobian: Callable[[Tensor], Tensor], damping: float
) -> Tensor:
    with torch.no_grad():
        jacobian = forward_jacobian(y)
    expected = (*y.shape[:-1], x.shape[-1], y.shape[-1])
    if not isinstance(jacobian, Tensor) or tuple(jacobian.shape) != expected:
        got = tuple(jacobian.shape) if isinstance(jacobian, Tensor) else type(jacobian).__name__
        raise ShapeError(f"implicit_inverse: forward_jacobian(y) must have shape {expected}, got {got}")

    # Without forward_fn, F is its first-order model at the solution, F(y', x') = J (y' - y) - (x' - x):
    # dF/dy = J is passed as the jacobian, and dF/dx = -I is all the VJP needs.
    def linearised(point: Tensor, target: Tensor) -> Tensor:
        return (jacobian @ (point - y).unsqueeze(-1)).squeeze(-1) - (target - x.detach())

    return implicit_root(y, linearised, (x,), jacobian=jacobian, damping=damping)


def _check_finite(name: str, value: Tensor) -> None:
    if not torch.isfinite(value).all():
        bad = int((~torch.isfinite(value)).sum())
        raise NonFiniteError(f"implicit_inverse: {name} holds {bad} NaN/inf value(s)")
