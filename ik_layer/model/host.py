"""Pose checks and conversions on numpy arrays, without torch: what the client shares with the library.

:mod:`ik_layer.client` runs on numpy alone (the ``ik-layer-client`` install has no torch); the library
uses the same checks for inputs it reads on the host (:func:`check_rigid` in :mod:`ik_layer.model.lie`,
:func:`matrix_to_pose` in the file readers). The differentiable torch versions are in :mod:`ik_layer.model.lie`;
tests hold the two to the same values. Conventions (ROS): quaternions ``(x, y, z, w)``, poses
``[x, y, z, qx, qy, qz, qw]``, transforms (..., 4, 4).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ik_layer.exceptions import IKLayerError, NonFiniteError, ShapeError

__all__ = [
    "QUATERNION_NORM_TOLERANCE",
    "as_checked",
    "check_quaternion_norm",
    "check_rigid",
    "is_one_rigid",
    "is_one_unit_pose",
    "matrix_to_pose",
    "pose_to_matrix",
    "rotation_entries",
]

MIN_QUATERNION_NORM = 1e-9  # a quaternion shorter than this is refused as zero (as ik_layer.model.lie's)
_TINY64 = float(np.finfo(np.float64).tiny)  # the smallest normal float64

QUATERNION_NORM_TOLERANCE = 0.01
"""How far from 1 the norm of a target's quaternion may be, ``| |q| - 1 | <= 0.01``; it is then normalised.

Targets (:func:`as_transform`, the server's poses) are data: 0.01 takes any unit quaternion written to two
decimals (each entry off by at most 0.005, so the norm by at most 0.01), float32 and float16 round-off, and
whatever ROS's tf2 takes (it refuses ``| |q|^2 - 1 | > 0.01``, a norm about 0.005 from 1). It refuses what is
not a unit quaternion: zeros, Euler angles or an axis-angle in four numbers, degrees. The math helpers
(:func:`normalize_quaternion`, :func:`quaternion_to_matrix`, :func:`pose_to_matrix`) take any non-zero norm.
"""


def check_quaternion_norm(norm: float, name: str) -> None:
    """Raise an :class:`IKLayerError` naming ``name`` unless ``norm`` is within
    :data:`QUATERNION_NORM_TOLERANCE` of 1."""
    if not abs(norm - 1.0) <= QUATERNION_NORM_TOLERANCE:  # "not <=": a NaN norm fails too
        raise IKLayerError(
            f"{name} has norm {norm:.4g}; a quaternion (x, y, z, w) must have norm 1 to within "
            f"{QUATERNION_NORM_TOLERANCE:g} (it is then normalised)"
        )


def check_rigid(t: Any, name: str) -> None:
    """Raise unless ``t`` (..., 4, 4) is a rigid transform: orthonormal, det +1, bottom row [0, 0, 0, 1].

    ``t`` is a numpy array or a torch tensor (on any device): only indexing and arithmetic are used on a tensor, so
    the same check serves both without importing torch. Tolerance 1e-6 for float64, else 1e-3.
    """
    if math.prod(t.shape) == 0:
        return
    if isinstance(t, np.ndarray) and is_one_rigid(t):
        return  # (a few us; the arrays' checks below explain a refusal)
    tol = _tolerance(t)
    rot = t[..., :3, :3]
    gram = rot.swapaxes(-1, -2) @ rot  # a new array: its diagonal (every 4th of 9 entries) may change in place
    gram.reshape(*gram.shape[:-2], 9)[..., ::4] -= 1
    det = np.linalg.det(rot) if isinstance(rot, np.ndarray) else _determinant(rot)  # numpy: one call (small arrays)
    # "not <=": a NaN deviation (overflowing entries) fails too
    if not bool(abs(gram).max() <= tol) or bool(det.min() < 0):
        raise IKLayerError(f"{name} rotation blocks must be orthonormal with determinant +1 (to {tol:g})")
    bottom = t[..., 3, :] * 1  # a copy: [0, 0, 0, 0] once its last entry lost 1
    bottom[..., 3] -= 1
    if not bool(abs(bottom).max() <= tol):
        raise IKLayerError(f"{name} bottom rows must be [0, 0, 0, 1]")


def is_one_rigid(t: np.ndarray) -> bool:
    """Whether ``t`` is one transform (16 values) with finite entries that :func:`check_rigid` takes: its tests, the
    same sums, in plain floats (a NaN fails every comparison) for a few microseconds; False says nothing more (the
    arrays' checks explain a refusal)."""
    if t.size != 16:
        return False
    tol = _tolerance(t)
    (a, b, c, x), (d, e, f, y), (g, h, i, z), (w0, w1, w2, w3) = t.reshape(4, 4).tolist()
    off = (a * b + d * e + g * h, a * c + d * f + g * i, b * c + e * f + h * i, w0, w1, w2, w3 - 1)
    diagonal = (a * a + d * d + g * g - 1, b * b + e * e + h * h - 1, c * c + f * f + i * i - 1)
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    finite = abs(x) < math.inf and abs(y) < math.inf and abs(z) < math.inf
    return det >= 0 and finite and all(abs(v) <= tol for v in off) and all(abs(v) <= tol for v in diagonal)


def _tolerance(t: Any) -> float:
    """:func:`check_rigid`'s tolerance for ``t``'s dtype: 1e-6 for float64, else 1e-3."""
    return 1e-6 if t.itemsize == 8 else 1e-3


def _determinant(rot: Any) -> Any:
    """Determinants (...) of 3x3 blocks ``rot`` (..., 3, 3) by the triple product, in elementwise arithmetic (a
    batched LU factorisation costs far more for many small matrices)."""
    x, y, z = rot[..., :, 0], rot[..., :, 1], rot[..., :, 2]
    return (
        x[..., 0] * (y[..., 1] * z[..., 2] - y[..., 2] * z[..., 1])
        - x[..., 1] * (y[..., 0] * z[..., 2] - y[..., 2] * z[..., 0])
        + x[..., 2] * (y[..., 0] * z[..., 1] - y[..., 1] * z[..., 0])
    )


def as_checked(x: np.ndarray, name: str) -> np.ndarray:
    """``x``, checked as :func:`ik_layer.model.lie.as_transform` checks a target: shape (..., 7) or (..., 4, 4), finite
    values, rigid transforms and quaternions of norm 1 (to :data:`QUATERNION_NORM_TOLERANCE`); poses stay poses,
    transforms stay transforms.

    Raises:
        ShapeError: another shape.
        NonFiniteError: NaN or infinite values.
        IKLayerError: a transform that is not rigid, a quaternion whose norm is not 1.
    """
    is_pose = x.ndim >= 1 and x.shape[-1] == 7
    if not is_pose and not (x.ndim >= 2 and x.shape[-2:] == (4, 4)):
        raise ShapeError(f"{name} must have shape (..., 7) or (..., 4, 4), got {x.shape}")
    if not np.isfinite(x).all():
        raise NonFiniteError(f"{name} holds NaN or infinite values")
    if is_pose and x.size:
        norm = np.linalg.norm(x[..., 3:], axis=-1).ravel()
        check_quaternion_norm(float(norm[abs(norm - 1).argmax()]), f"{name} quaternion")
    else:
        check_rigid(x, name)
    return x


def matrix_to_pose(t: np.ndarray) -> np.ndarray:
    """Pose ``[x, y, z, qx, qy, qz, qw]`` (``qw >= 0``) of transforms: (..., 4, 4) -> (..., 7).

    The quaternion by Shepperd's method (the largest of four pivots), as
    :func:`ik_layer.model.lie.matrix_to_quaternion`.
    """
    r = t[..., :3, :3]
    m00, m11, m22 = r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]
    # 4*q_i^2 for the pivots w, x, y, z.
    four_sq = np.stack((1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22), axis=-1)
    d21, d02, d10 = r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0], r[..., 1, 0] - r[..., 0, 1]
    s21, s02, s10 = r[..., 2, 1] + r[..., 1, 2], r[..., 0, 2] + r[..., 2, 0], r[..., 1, 0] + r[..., 0, 1]
    # Each row is 4*q_pivot*(x, y, z, w) for one pivot.
    candidates = np.stack(
        (
            np.stack((d21, d02, d10, four_sq[..., 0]), axis=-1),
            np.stack((four_sq[..., 1], s10, s02, d21), axis=-1),
            np.stack((s10, four_sq[..., 2], s21, d02), axis=-1),
            np.stack((s02, s21, four_sq[..., 3], d10), axis=-1),
        ),
        axis=-2,
    )
    best = np.take_along_axis(candidates, four_sq.argmax(axis=-1)[..., None, None], axis=-2)[..., 0, :]
    q = best / np.linalg.norm(best, axis=-1, keepdims=True)
    return np.concatenate((t[..., :3, 3], np.where(q[..., 3:] < 0, -q, q)), axis=-1)


def pose_to_matrix(pose: np.ndarray, name: str = "pose") -> np.ndarray:
    """Homogeneous transforms of poses ``[x, y, z, qx, qy, qz, qw]``: (..., 7) -> (..., 4, 4).

    The quaternion is normalised; a zero one raises :class:`~ik_layer.exceptions.NonFiniteError` naming ``name``.
    """
    if pose.size == 7 and pose.dtype == np.float64:  # one pose: the same arithmetic in plain floats (a few us)
        one = _one_pose_to_matrix(pose.reshape(7).tolist())
        if one is not None:
            return np.array(one).reshape(*pose.shape[:-1], 4, 4)
    t = np.zeros((*pose.shape[:-1], 4, 4), dtype=np.result_type(pose.dtype, np.float32))
    t[..., :3, :3] = rotation_matrices(_unit_quaternion(pose[..., 3:], f"{name} quaternion"))
    t[..., :3, 3] = pose[..., :3]
    t[..., 3, 3] = 1.0
    return t


def _one_pose_to_matrix(pose: list[float]) -> list[float] | None:
    """The 16 entries of one float64 pose's transform: :func:`pose_to_matrix`'s operations in their order (the
    same values, bit for bit); None for a quaternion it refuses or one with entries that are not finite (the
    arrays explain)."""
    x, y, z, *q = pose
    scale = max(max(abs(v) for v in q), _TINY64)
    sx, sy, sz, sw = (v / scale for v in q)
    norm = math.sqrt(((sx * sx + sy * sy) + sz * sz) + sw * sw)  # numpy's sum of four, in order
    if not (norm * scale >= MIN_QUATERNION_NORM and norm < math.inf):
        return None
    r = rotation_entries(sx / norm, sy / norm, sz / norm, sw / norm)
    return [*r[0:3], x, *r[3:6], y, *r[6:9], z, 0.0, 0.0, 0.0, 1.0]


def is_one_unit_pose(pose: np.ndarray) -> bool:
    """Whether ``pose`` is one pose (7 values) with finite entries whose quaternion has norm 1 to within
    :data:`QUATERNION_NORM_TOLERANCE` (with room to spare for rounding): ``as_transform``'s checks in plain floats,
    for a few microseconds; False says nothing more (the arrays' checks explain a refusal)."""
    if pose.size != 7:
        return False
    values = pose.reshape(7).tolist()
    finite = all(abs(v) < math.inf for v in values)
    return finite and abs(math.hypot(*values[3:]) - 1) <= QUATERNION_NORM_TOLERANCE - 1e-12


def rotation_entries(x: Any, y: Any, z: Any, w: Any) -> tuple[Any, ...]:
    """The 9 entries, row by row, of the rotation matrix of unit quaternions with components ``x, y, z, w``.

    Arithmetic only, so the components are numpy arrays or torch tensors alike (:mod:`ik_layer.model.lie` stacks
    them into tensors, :func:`pose_to_matrix` into arrays).
    """
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz, wx, wy, wz = x * y, x * z, y * z, w * x, w * y, w * z
    return (
        1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy),
        2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx),
        2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy),
    )  # fmt: skip


# rotation_entries' 9 entries as (first, second) products of q_i q_j (index 4 i + j, x y z w = 0 1 2 3), the
# entries that subtract them, and the diagonal: what rotation_matrices gathers.
_FIRST = np.array([5, 1, 2, 1, 0, 6, 2, 6, 0])  # yy, xy, xz, xy, xx, yz, xz, yz, xx
_SECOND = np.array([10, 14, 13, 14, 10, 12, 13, 12, 5])  # zz, wz, wy, wz, zz, wx, wy, wx, yy
_SUBTRACTS = np.array([False, True, False, False, False, True, True, False, False])
_DIAGONAL = np.array([0, 4, 8])


def rotation_matrices(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of unit quaternions ``q`` (..., 4) (x, y, z, w): :func:`rotation_entries`'
    arithmetic, each entry's the same operations on the same products (the same values, bit for bit), in a few
    whole-array operations rather than one per entry."""
    products = (q[..., :, None] * q[..., None, :]).reshape(*q.shape[:-1], 16)
    first, second = products[..., _FIRST], products[..., _SECOND]
    entries = 2 * np.where(_SUBTRACTS, first - second, first + second)
    entries[..., _DIAGONAL] = 1 - entries[..., _DIAGONAL]
    return entries.reshape(*q.shape[:-1], 3, 3)


_TINY = {np.dtype(t): np.finfo(t).tiny for t in (np.float32, np.float64)}  # the smallest normal of each dtype


def _unit_quaternion(q: np.ndarray, name: str) -> np.ndarray:
    """``q`` (..., 4) over its norm; scaled by its largest entry first, so huge quaternions do not overflow."""
    scale = np.maximum(abs(q).max(axis=-1, keepdims=True, initial=0.0), _TINY.get(q.dtype) or np.finfo(q.dtype).tiny)
    scaled = q / scale
    norm = np.sqrt((scaled * scaled).sum(axis=-1, keepdims=True))  # np.linalg.norm's own arithmetic, less its calls
    if (norm * scale < MIN_QUATERNION_NORM).any():
        raise NonFiniteError(f"{name} has zero norm; a rotation needs a non-zero quaternion")
    return scaled / norm
