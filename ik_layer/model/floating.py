"""The floating base: a free-flyer root joint (Pinocchio's ``JointModelFreeFlyer``) above the robot's joints.

Configuration ``q`` (..., nq): the base pose in the world, position ``[x, y, z]`` [m] then orientation as a
quaternion ``[qx, qy, qz, qw]`` (ROS order, as Pinocchio), then the joints' coordinates: ``nq = 7 + joints``.
Tangent (``dq``, Jacobian columns, gradients) (..., dof): the base twist ``[v; w]`` in the base's own frame
(Pinocchio's free-flyer velocity), then the joints: ``dof = 6 + joints``. A step moves the base on SE(3),
``T_world_base <- T_world_base exp(twist)`` (``pinocchio.integrate``), the joints additively.
"""

from __future__ import annotations

import pinocchio as pin
import torch
from torch import Tensor

from ik_layer.model.lie import _unit_quaternion_to_matrix, skew

__all__ = [
    "BASE_NQ",
    "BASE_NV",
    "base_kinematics",
    "integrate_base",
    "neutral_base",
    "normalize_base",
    "with_free_flyer",
]

BASE_NQ, BASE_NV = 7, 6  # configuration and tangent sizes of the free-flyer
_SMALL_ANGLE_SQ = 1e-8  # [rad^2] below this squared angle, series expansions replace the closed forms


def with_free_flyer(model: pin.Model) -> pin.Model:
    """``model`` under a free-flyer root joint named ``root_joint`` (as ``buildModelFromUrdf(path, FreeFlyer)``)."""
    root = pin.Model()
    root.name = model.name
    joint = root.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root_joint")
    frame = root.addFrame(pin.Frame("root_joint", joint, 0, pin.SE3.Identity(), pin.FrameType.JOINT))
    return pin.appendModel(root, model, frame, pin.SE3.Identity())


def neutral_base(like: Tensor, batch: tuple[int, ...]) -> Tensor:
    """Base at the world origin, identity orientation: (*batch, 7) of ``like``'s dtype and device."""
    base = like.new_zeros(*batch, BASE_NQ)
    base[..., -1] = 1
    return base


def normalize_base(base: Tensor) -> Tensor:
    """``base`` (..., 7) with its quaternion scaled to unit norm (unchecked: a zero quaternion gives NaN)."""
    quat = base[..., 3:]
    return torch.cat((base[..., :3], quat / torch.linalg.vector_norm(quat, dim=-1, keepdim=True)), -1)


def base_kinematics(base: Tensor, pose: Tensor, jac: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """World poses and Jacobians of frames given in the base: ``base`` (..., 7), ``pose`` (..., [F,] 4, 4),
    ``jac`` (..., [F,] 6, joints) in the base's axes (or None).

    Returns ``T_world_base @ pose`` and the Jacobian (..., [F,] 6, 6 + joints): origin at the frame, axes of
    the world (``LOCAL_WORLD_ALIGNED``), base columns for the local base twist ``[v; w]``.
    """
    extra = pose.dim() - 2 - (base.dim() - 1)  # 1 with a frame dimension
    rot = _unit_quaternion_to_matrix(normalize_base(base)[..., 3:]).reshape(*base.shape[:-1], *[1] * extra, 3, 3)
    pos = base[..., :3].reshape(*base.shape[:-1], *[1] * extra, 3, 1)
    world = torch.cat((torch.cat((rot @ pose[..., :3, :3], rot @ pose[..., :3, 3:] + pos), -1), pose[..., 3:, :]), -2)
    if jac is None:
        return world, None
    zero = torch.zeros_like(rot).expand(*pose.shape[:-2], 3, 3)
    rot = rot.expand(*pose.shape[:-2], 3, 3)
    base_cols = torch.cat(
        (torch.cat((rot, -rot @ skew(pose[..., :3, 3])), -1), torch.cat((zero, rot), -1)), -2
    )  # d(frame velocity)/d(local base twist)
    joint_cols = torch.cat((rot @ jac[..., :3, :], rot @ jac[..., 3:, :]), -2)
    return world, torch.cat((base_cols, joint_cols), -1)


def integrate_base(base: Tensor, twist: Tensor) -> Tensor:
    """``base`` (..., 7) moved by ``exp(twist)`` in its own frame, ``twist`` (..., 6) ``[v; w]``; unit quaternion."""
    v, w = twist[..., :3], twist[..., 3:]
    theta_sq = (w * w).sum(-1, keepdim=True)
    small = theta_sq < _SMALL_ANGLE_SQ
    safe_sq = torch.where(small, torch.ones_like(theta_sq), theta_sq)  # the other branch's gradient stays finite
    theta = torch.sqrt(safe_sq)
    # V(w) = I + b [w]x + c [w]x^2 maps v to the translation of exp(twist); half: sin(theta / 2) / theta.
    b = torch.where(small, 0.5 - theta_sq / 24, (1 - torch.cos(theta)) / safe_sq)
    c = torch.where(small, 1 / 6 - theta_sq / 120, (theta - torch.sin(theta)) / (safe_sq * theta))
    half = torch.where(small, 0.5 - theta_sq / 48, torch.sin(theta / 2) / theta)
    cos_half = torch.where(small, 1 - theta_sq / 8, torch.cos(theta / 2))
    wxv = torch.linalg.cross(w, v, dim=-1)
    local = v + b * wxv + c * torch.linalg.cross(w, wxv, dim=-1)
    unit = normalize_base(base)
    rot = _unit_quaternion_to_matrix(unit[..., 3:])
    position = base[..., :3] + (rot @ local[..., None]).squeeze(-1)
    quat = _quaternion_product(unit[..., 3:], torch.cat((half * w, cos_half), -1))
    return normalize_base(torch.cat((position, quat), -1))


def _quaternion_product(a: Tensor, b: Tensor) -> Tensor:
    """Hamilton product ``a b`` of quaternions (x, y, z, w): (..., 4) each."""
    av, aw, bv, bw = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return torch.cat((aw * bv + bw * av + torch.linalg.cross(av, bv, dim=-1), aw * bw - (av * bv).sum(-1, True)), -1)
