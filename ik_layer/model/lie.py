"""SO(3) / SE(3) helpers on batched tensors.

Conventions (ROS): quaternions are ``(x, y, z, w)``, poses are ``(..., 7)`` as
``[x, y, z, qx, qy, qz, qw]`` or homogeneous ``(..., 4, 4)`` matrices, twists
are ``[v; w]`` (linear first). Every function takes any leading batch shape and
is differentiable, including at the identity (where ``log`` is smooth).

Every function refuses non-tensors, non-floating dtypes and wrong shapes with an
:class:`~ik_layer.exceptions.IKLayerError` naming the argument. Only the
validating entry points (:func:`as_transform`, :func:`pose_to_matrix`,
:func:`normalize_quaternion`) also read the values (one host sync) to refuse
NaN, infinite, zero-norm or non-rigid inputs; the kernels (``so3_log``,
``pose_error``, ...) never sync, so non-finite inputs give non-finite results.
Small CPU inputs are read in numpy for those checks (the same checks, a few
microseconds instead of a few torch calls each).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.autograd import forward_ad

from ik_layer.exceptions import DeviceError, DTypeError, NonFiniteError, ShapeError
from ik_layer.model.host import (
    MIN_QUATERNION_NORM,
    check_quaternion_norm,
    check_rigid,
    is_one_rigid,
    is_one_unit_pose,
    rotation_entries,
    rotation_matrices,
)
from ik_layer.model.host import pose_to_matrix as host_pose_to_matrix

_SMALL_ANGLE = 1e-4  # below this angle [rad], series expansions replace the closed forms
_HOST_CHECK_MAX = 4096  # values at most of a CPU input whose checks run in numpy (cheaper calls than torch's)


def _check_unit_quaternions(q: Tensor | np.ndarray, name: str) -> None:
    """:func:`check_quaternion_norm` of the quaternion (..., 4) whose norm is farthest from 1 (one host sync)."""
    if math.prod(q.shape) == 0:
        return
    # numpy's or torch's hypot, as q is: no overflow for huge entries
    hypot: Callable[[Any, Any], Any] = np.hypot if isinstance(q, np.ndarray) else torch.hypot
    norm = hypot(hypot(q[..., 0], q[..., 1]), hypot(q[..., 2], q[..., 3])).flatten()
    check_quaternion_norm(float(norm[abs(norm - 1).argmax()]), name)


def _check_tensor(name: str, x: object) -> None:
    """Raise unless ``x`` is a real floating-point tensor, naming ``name`` (no host sync)."""
    if not isinstance(x, Tensor):
        raise ShapeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise DTypeError(f"{name} must be a real floating-point tensor (e.g. torch.float64), got dtype {x.dtype}")


def _check_last(name: str, x: Tensor, shape: tuple[int, ...]) -> None:
    """Raise unless ``x`` is a real floating-point tensor of shape (..., *shape) (no host sync)."""
    _check_tensor(name, x)
    if tuple(x.shape[x.dim() - len(shape) :]) != shape or x.dim() < len(shape):
        want = ", ".join(str(s) for s in shape)
        raise ShapeError(f"{name} must have shape (..., {want}), got {tuple(x.shape)}")


def _check_values(name: str, x: Tensor | np.ndarray) -> None:
    """Raise unless ``x`` has values (is not a meta tensor) and they are all finite; one host sync."""
    if isinstance(x, Tensor) and x.is_meta:
        raise DeviceError(f"{name} is a meta tensor: it has a shape but no values")
    if not (np.isfinite(x) if isinstance(x, np.ndarray) else torch.isfinite(x)).all():
        raise NonFiniteError(f"{name} holds NaN or infinite values")


def check_finite(x: Tensor, name: str) -> None:
    """Raise unless tensor ``x``'s values are all finite (one host sync; in numpy for a small CPU tensor)."""
    _check_values(name, host_values(x))


def host_values(x: Tensor) -> Tensor | np.ndarray:
    """``x``'s values to check: a numpy view when ``x`` is a small float32/float64 CPU tensor, else ``x`` itself
    (also under ``torch.func`` transforms, whose tensors have no storage to view)."""
    small = x.is_cpu and x.numel() <= _HOST_CHECK_MAX
    if small and x.dtype in (torch.float32, torch.float64):
        try:
            return numpy_view(x)
        except RuntimeError:  # a functorch-wrapped tensor
            return x
    return x


def numpy_view(x: Tensor) -> np.ndarray:
    """A numpy view of CPU tensor ``x``'s values (detached only where it carries a graph: no torch operator
    otherwise)."""
    return x.detach().numpy() if x.requires_grad else x.numpy()


def _check_pair(names: tuple[str, str], a: Tensor, b: Tensor, batch_dims: tuple[int, int]) -> torch.Size:
    """Broadcast batch shape of ``a`` and ``b`` (their shapes without the last ``batch_dims`` dims).

    Raises unless they share dtype and device and their batch shapes broadcast (no host sync).
    """
    if a.dtype != b.dtype:
        raise DTypeError(f"{names[0]} has dtype {a.dtype} but {names[1]} has {b.dtype}; they must match")
    if a.device != b.device:
        raise DeviceError(f"{names[0]} is on {a.device} but {names[1]} is on {b.device}; they must match")
    batch_a, batch_b = a.shape[: a.dim() - batch_dims[0]], b.shape[: b.dim() - batch_dims[1]]
    if batch_a == batch_b:  # the common case, without torch's general broadcast
        return batch_a
    try:
        return torch.broadcast_shapes(batch_a, batch_b)
    except RuntimeError as err:
        raise ShapeError(
            f"{names[0]} batch shape {tuple(batch_a)} and {names[1]} batch shape {tuple(batch_b)} do not broadcast"
        ) from err


def skew(v: Tensor) -> Tensor:
    """Skew-symmetric matrix ``[v]x`` with ``[v]x u = v x u``: (..., 3) -> (..., 3, 3)."""
    _check_last("vector", v, (3,))
    x, y, z = v.unbind(-1)
    o = torch.zeros_like(x)
    return torch.stack((o, -z, y, z, o, -x, -y, x, o), dim=-1).unflatten(-1, (3, 3))


def vee(m: Tensor) -> Tensor:
    """Inverse of :func:`skew` on the antisymmetric part: (..., 3, 3) -> (..., 3)."""
    _check_last("matrix", m, (3, 3))
    return 0.5 * torch.stack(
        (m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]), dim=-1
    )


def normalize_quaternion(q: Tensor, name: str = "quaternion") -> Tensor:
    """Unit quaternion (x, y, z, w) from ``q`` (..., 4); zero (norm < 1e-9) or non-finite ones raise.

    Huge quaternions are fine: ``q`` is scaled by its largest entry first, so the norm cannot overflow.
    """
    _check_last(name, q, (4,))
    _check_values(name, host_values(q))
    # q / |q| does not depend on the scale, so no gradient flows through it.
    scale = q.detach().abs().amax(-1, keepdim=True).clamp_min(torch.finfo(q.dtype).tiny)
    scaled = q / scale
    norm = torch.linalg.vector_norm(scaled, dim=-1, keepdim=True)
    if bool((norm * scale < MIN_QUATERNION_NORM).any()):
        raise NonFiniteError(f"{name} has zero norm; a rotation needs a non-zero quaternion")
    return scaled / norm


def quaternion_to_matrix(q: Tensor) -> Tensor:
    """Rotation matrix of a quaternion (x, y, z, w), normalised first: (..., 4) -> (..., 3, 3)."""
    return _unit_quaternion_to_matrix(normalize_quaternion(q))


def _host_arithmetic(x: Tensor) -> Tensor | np.ndarray:
    """``x``'s values as a numpy view where the same arithmetic may run in numpy (:func:`host_values`, and no
    gradient nor forward-mode tangent to carry), else ``x``."""
    return x if x.requires_grad or forward_ad.unpack_dual(x).tangent is not None else host_values(x)


def _unit_quaternion_to_matrix(q: Tensor) -> Tensor:
    """Rotation matrix of a unit quaternion (x, y, z, w), unchecked: (..., 4) -> (..., 3, 3).

    A small CPU ``q`` that carries no gradient (nor a forward-mode tangent) takes the same arithmetic in numpy (the
    same values, bit for bit, at far cheaper calls: a single pose's matrix in a fraction of the time)."""
    values = _host_arithmetic(q)
    if isinstance(values, np.ndarray):
        return torch.from_numpy(rotation_matrices(values))
    return torch.stack(rotation_entries(*q.unbind(-1)), dim=-1).unflatten(-1, (3, 3))


def matrix_to_quaternion(r: Tensor) -> Tensor:
    """Unit quaternion (x, y, z, w) with ``w >= 0`` of a rotation matrix: (..., 3, 3) -> (..., 4).

    Uses the largest of the four candidate pivots (Shepperd's method), so it is
    accurate for every rotation, including those near pi.
    """
    _check_last("rotation", r, (3, 3))
    m00, m11, m22 = r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]
    # 4*q_i^2 for the pivots w, x, y, z.
    four_sq = torch.stack((1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22), dim=-1)
    d21, d02, d10 = r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1]
    s21, s02, s10 = r[..., 2, 1] + r[..., 1, 2], r[..., 0, 2] + r[..., 2, 0], r[..., 1, 0] + r[..., 0, 1]
    # Each row is 4*q_pivot*(x, y, z, w) for one pivot.
    candidates = torch.stack(
        (
            torch.stack((d21, d02, d10, four_sq[..., 0]), -1),
            torch.stack((four_sq[..., 1], s10, s02, d21), -1),
            torch.stack((s10, four_sq[..., 2], s21, d02), -1),
            torch.stack((s02, s21, four_sq[..., 3], d10), -1),
        ),
        dim=-2,
    )
    pivot = four_sq.argmax(dim=-1, keepdim=True)
    best = torch.gather(candidates, -2, pivot[..., None].expand(*pivot.shape[:-1], 1, 4)).squeeze(-2)
    q = best / torch.linalg.vector_norm(best, dim=-1, keepdim=True)
    return torch.where(q[..., 3:] < 0, -q, q)


def pose_to_matrix(pose: Tensor, name: str = "pose") -> Tensor:
    """Homogeneous transform of a pose ``[x, y, z, qx, qy, qz, qw]``: (..., 7) -> (..., 4, 4).

    The quaternion is normalised; a zero or non-finite one raises, naming ``name``. A small CPU ``pose`` that
    carries no gradient takes the same arithmetic in numpy (:func:`ik_layer.model.host.pose_to_matrix`: the same
    values, bit for bit, in a third of the time).
    """
    _check_last(name, pose, (7,))
    values = _host_arithmetic(pose)
    _check_values(name, values)
    if isinstance(values, np.ndarray):
        return torch.from_numpy(host_pose_to_matrix(values, name))
    unit = normalize_quaternion(pose[..., 3:], name=f"{name} quaternion")
    return from_rotation_translation(_unit_quaternion_to_matrix(unit), pose[..., :3])


def matrix_to_pose(t: Tensor) -> Tensor:
    """Pose ``[x, y, z, qx, qy, qz, qw]`` of a homogeneous transform: (..., 4, 4) -> (..., 7).

    A pure conversion (no host sync): rows with NaN give NaN poses; validate with :func:`as_transform`.
    """
    _check_last("transform", t, (4, 4))
    return torch.cat((t[..., :3, 3], matrix_to_quaternion(t[..., :3, :3])), dim=-1)


def from_rotation_translation(r: Tensor, p: Tensor) -> Tensor:
    """Homogeneous transform from rotation (..., 3, 3) and translation (..., 3) -> (..., 4, 4).

    Both must share dtype and device, and their batch shapes must broadcast.
    """
    _check_last("rotation", r, (3, 3))
    _check_last("translation", p, (3,))
    batch = _check_pair(("rotation", "translation"), r, p, (2, 1))
    top = torch.cat((r.expand(*batch, 3, 3), p.expand(*batch, 3)[..., None]), dim=-1)
    bottom = torch.zeros(*batch, 1, 4, dtype=r.dtype, device=r.device)
    bottom[..., 0, 3] = 1
    return torch.cat((top, bottom), dim=-2)


def invert_transform(t: Tensor) -> Tensor:
    """Inverse of a rigid transform (..., 4, 4), using R^T rather than a matrix inverse."""
    _check_last("transform", t, (4, 4))
    rt = t[..., :3, :3].transpose(-1, -2)
    return from_rotation_translation(rt, -(rt @ t[..., :3, 3:]).squeeze(-1))


def so3_exp(w: Tensor) -> Tensor:
    """Rotation matrix ``exp([w]x)`` of a rotation vector w [rad]: (..., 3) -> (..., 3, 3)."""
    _check_last("rotation vector", w, (3,))
    theta_sq = (w * w).sum(-1)
    small = theta_sq < _SMALL_ANGLE**2
    theta = torch.sqrt(torch.where(small, torch.ones_like(theta_sq), theta_sq))
    a = torch.where(small, 1 - theta_sq / 6, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - theta_sq / 24, (1 - torch.cos(theta)) / (theta * theta))
    k = skew(w)
    eye = torch.eye(3, dtype=w.dtype, device=w.device)
    return eye + a[..., None, None] * k + b[..., None, None] * (k @ k)


def so3_log(r: Tensor) -> Tensor:
    """Rotation vector w [rad] with ``exp([w]x) = r``, ``|w| <= pi``: (..., 3, 3) -> (..., 3).

    Smooth (and differentiable) at the identity; accurate near pi, where the axis
    is read from the symmetric part of ``r`` instead of the vanishing skew part.
    """
    _check_last("rotation", r, (3, 3))
    v = vee(r)  # sin(theta) * axis
    cos = ((r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2] - 1) / 2).clamp(-1, 1)
    sin_sq = (v * v).sum(-1)
    positive = sin_sq > 0
    sin = torch.sqrt(torch.where(positive, sin_sq, torch.ones_like(sin_sq)))
    # atan2 of the true sin (0 when v vanishes, e.g. exactly pi), the safe one only divides.
    theta = torch.atan2(torch.where(positive, sin, torch.zeros_like(sin)), cos)
    small = sin_sq < _SMALL_ANGLE**2
    # theta / sin(theta), with its series near 0: 1 + theta^2/6 ~ 1 + sin^2/6.
    scale = torch.where(small, 1 + sin_sq / 6, theta / sin)
    # Beyond pi/2, v / sin loses relative accuracy (eps / sin); read the axis from the symmetric part.
    near_pi = cos < 0
    w_regular = scale[..., None] * v
    # Both branches are computed for every row: no host sync, so the solver loop stays on the device.
    # r = cos I + sin [a]x + (1 - cos) a a^T, so (r + r^T) / 2 - cos I = (1 - cos) a a^T:
    # take its largest column, fix its sign by v.
    eye = torch.eye(3, dtype=r.dtype, device=r.device)
    sym = (r + r.transpose(-1, -2)) / 2 - cos[..., None, None] * eye
    col = torch.diagonal(sym, dim1=-2, dim2=-1).argmax(-1)
    axis = torch.gather(sym, -1, col[..., None, None].expand(*col.shape, 3, 1)).squeeze(-1)
    axis = axis / torch.linalg.vector_norm(axis, dim=-1, keepdim=True).clamp_min(1e-30)
    sign = torch.where((axis * v).sum(-1, keepdim=True) < 0, -1.0, 1.0).to(r.dtype)
    return torch.where(near_pi[..., None], sign * theta[..., None] * axis, w_regular)


def pose_error(target: Tensor, current: Tensor) -> Tensor:
    """6-D error ``[p_t - p; log(R_t R^T)]`` of ``current`` w.r.t. ``target``, both (..., 4, 4) -> (..., 6).

    Both parts are expressed in the base frame (axes of the world), matching a
    ``LOCAL_WORLD_ALIGNED`` Jacobian. To first order at zero error, moving the
    joints by dq changes this error by ``-J dq``, and moving the target by
    ``[dv; dw]`` about its own origin (``p_t <- p_t + dv``,
    ``R_t <- exp([dw]x) R_t``) changes it by ``[dv; dw]``. The position part
    obeys this at any error; away from zero error the rotation part changes by
    ``Jl^-1(e_rot) dw`` (target) and ``-Jr^-1(e_rot) J_w dq`` (joints), with
    ``Jl``, ``Jr`` the left and right Jacobians of SO(3).
    """
    _check_last("target", target, (4, 4))
    _check_last("current", current, (4, 4))
    _check_pair(("target", "current"), target, current, (2, 2))
    dp = target[..., :3, 3] - current[..., :3, 3]
    dr = target[..., :3, :3] @ current[..., :3, :3].transpose(-1, -2)
    return torch.cat((dp, so3_log(dr)), dim=-1)


def as_transform(target: Tensor, name: str = "target") -> Tensor:
    """Accept a pose (..., 7) or a transform (..., 4, 4) and return (..., 4, 4), checked finite and rigid.

    A pose's quaternion must have norm 1 to within :data:`QUATERNION_NORM_TOLERANCE`; it is normalised.

    Non-tensors, non-floating dtypes, meta tensors and wrong shapes raise too, naming ``name``.
    """
    _check_tensor(name, target)
    if target.dim() >= 1 and target.shape[-1] == 7:
        values = _host_arithmetic(target)
        if isinstance(values, np.ndarray) and is_one_unit_pose(values):  # (one host pose: a few us)
            return torch.from_numpy(host_pose_to_matrix(values, name))
        values = host_values(target)
        _check_values(name, values)
        _check_unit_quaternions(values[..., 3:], f"{name} quaternion")
        return pose_to_matrix(target, name)
    if target.dim() >= 2 and tuple(target.shape[-2:]) == (4, 4):
        values = host_values(target)
        if not (isinstance(values, np.ndarray) and is_one_rigid(values)):  # (one host transform: a few us)
            _check_values(name, values)
            check_rigid(values, name)
        return target
    raise ShapeError(f"{name} must have shape (..., 7) or (..., 4, 4), got {tuple(target.shape)}")
