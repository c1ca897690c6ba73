"""The :class:`Robot`: batched forward kinematics and analytic Jacobians in torch.

The kinematic chain from the base to the end-effector frame is read once from a
``pinocchio.Model`` (by :mod:`ik_layer.model.chain_building`) into buffers of a :class:`Robot` (an
``nn.Module``, so ``.to()`` moves everything). :func:`chain_kinematics` is the stateless kernel:
one loop over the joints of the chain, every operation batched over the leading
dimensions of ``q``.

Every supported joint (revolute about any axis, continuous, prismatic along any
axis) is written in one form: with ``K`` the skew matrix of the revolute axis
(zero for prismatic joints) and ``s`` the slide axis (zero for revolute ones),
the joint's transform in its parent's frame is

    R = R_place (I + sin(q) K + (1 - cos(q)) K^2),    p = p_place + R_place s q,

so the loop needs no branch on the joint type.

A robot with several end-effector frames (``ee_frames=[...]``) runs the same loop once for all its
chains, batched over a frame dimension: each chain is padded at its end with still joints (identity
placement, zero axes) to the longest one. A mimic joint (see :mod:`ik_layer.model.joints`) is a chain joint
whose value is ``multiplier * q[leader] + offset``; its Jacobian column is added, times the
multiplier, to its leader's.

A floating-base robot (``floating_base=True``) runs the same loop in its base's frame, then places the
result in the world at the base pose that leads its configuration (see :mod:`ik_layer.model.floating`).
"""

from __future__ import annotations

import functools
import logging
import math
import operator
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, SupportsIndex, cast, overload

import numpy as np
import pinocchio as pin
import torch
from torch import Tensor, nn

from ik_layer.exceptions import DeviceError, DTypeError, IKLayerError, NonFiniteError, ShapeError
from ik_layer.model.chain import ChainDescription, Layout
from ik_layer.model.chain_building import (
    coupling,
    frame_placement,
    frames_buffers,
    full_q_index,
    joint_sources,
    pinocchio_indices,
    rotating_joints,
    turnable_coordinates,
)
from ik_layer.model.floating import (
    BASE_NQ,
    BASE_NV,
    base_kinematics,
    integrate_base,
    neutral_base,
    normalize_base,
    with_free_flyer,
)
from ik_layer.model.joints import Mimic, select_joints
from ik_layer.model.lie import as_transform, check_finite
from ik_layer.model.limits import full_turns, joint_limits

if TYPE_CHECKING:
    from ik_layer.collision.model import RobotSpheres  # which imports this module

__all__ = ["NUMPY_DTYPES", "Robot", "chain_kinematics", "check_device", "check_dtype"]

# Half precision is refused: the solver's default tolerances (1e-4 m) are below its resolution at arm scale.
_log = logging.getLogger("ik_layer")
_FRAME_CHAINS = 16  # frame lists whose chains Robot.fk(q, frames=...) keeps built
_SUPPORTED_DTYPES = (torch.float32, torch.float64)
NUMPY_DTYPES: dict[torch.dtype, np.dtype] = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64)}
"""The numpy dtype of each dtype a robot may have."""
_TURN = 2 * math.pi  # [rad]


def chain_kinematics(
    q: Tensor,
    place_rot: Tensor,
    place_rot_k: Tensor,
    place_rot_k2: Tensor,
    place_pos: Tensor,
    slide: Tensor,
    axis: Tensor,
    revolute: Tensor,
    tip: Tensor,
    *,
    jacobian: bool,
) -> tuple[Tensor, Tensor | None]:
    """Pose of the chain's tip and, optionally, its geometric Jacobian.

    Args:
        q: (..., n) values of the chain's joints [rad or m], root first.
        place_rot: (n, 3, 3) joint placement rotations ``R_place`` in the parent joint frame.
        place_rot_k: (n, 3, 3) ``R_place K`` (K: skew of the revolute axis, zero if prismatic).
        place_rot_k2: (n, 3, 3) ``R_place K^2``.
        place_pos: (n, 3) joint placement translations [m].
        slide: (n, 3) ``R_place s`` (s: unit prismatic axis, zero if revolute).
        axis: (n, 3) unit joint axis in the joint's own frame.
        revolute: (n,) bool, True for revolute and continuous joints.
        tip: (4, 4) placement of the tip frame in the last joint's frame.
        jacobian: also compute the Jacobian.

    Several chains of equal length: every constant gets a leading frame dimension F ((F, n, 3, 3),
    ..., (F, 4, 4)), and ``q`` is (..., F, n).

    Returns:
        ``T_base_tip`` (..., 4, 4) and, if asked, ``J`` (..., 6, n): rows
        [linear; angular] of the tip frame's velocity, origin at the tip, axes of
        the base (Pinocchio's ``LOCAL_WORLD_ALIGNED``).
    """
    batch = q.shape[:-1]
    rot = place_rot.new_zeros(()).expand(*batch, 3, 3) + torch.eye(3, dtype=q.dtype, device=q.device)
    pos = q.new_zeros(*batch, 3)
    sin, cos = torch.sin(q), torch.cos(q)
    axes_world, origins = [], []
    for i in range(q.shape[-1]):
        local_rot = (
            place_rot[..., i, :, :]
            + sin[..., i, None, None] * place_rot_k[..., i, :, :]
            + (1 - cos[..., i, None, None]) * place_rot_k2[..., i, :, :]
        )
        local_pos = place_pos[..., i, :] + q[..., i, None] * slide[..., i, :]
        pos = pos + (rot @ local_pos[..., None]).squeeze(-1)
        rot = rot @ local_rot
        if jacobian:
            axes_world.append((rot @ axis[..., i, :, None]).squeeze(-1))
            origins.append(pos)
    tip_pos = pos + (rot @ tip[..., :3, 3:]).squeeze(-1)
    tip_rot = rot @ tip[..., :3, :3]
    bottom = torch.zeros(*batch, 1, 4, dtype=q.dtype, device=q.device)
    bottom[..., 0, 3] = 1
    pose = torch.cat((torch.cat((tip_rot, tip_pos[..., None]), -1), bottom), -2)
    if not jacobian:
        return pose, None
    w = torch.stack(axes_world, dim=-1)  # (..., 3, n)
    lever = tip_pos[..., None] - torch.stack(origins, dim=-1)
    revolute = revolute[..., None, :]
    rev = revolute.to(q.dtype)
    linear = torch.where(revolute, torch.linalg.cross(w, lever, dim=-2), w)
    return pose, torch.cat((linear, w * rev), dim=-2)


class Robot(nn.Module):
    """The chains from the base to one end-effector frame, or to several, with batched FK and Jacobians.

    Coordinates: one per moving joint (angle [rad] or displacement [m]) in Pinocchio's joint
    order; continuous joints use a single angle; mimic joints follow their leader and carry none.
    A floating base (``floating_base=True``: a free-flyer root) puts its pose first: ``q`` is
    ``[x, y, z, qx, qy, qz, qw, joints...]`` (nq = 7 + joints) and tangents, Jacobian columns and
    gradients are ``[base twist in the base frame (6), joints...]`` (dof = 6 + joints); see
    :mod:`ik_layer.model.floating`. Fixed-base robots have nq == dof. Functions of configurations take q
    (..., nq); Jacobians and steps are (..., dof).
    By default the moving joints are those between the base and the end-effector frames; the
    others are locked (see :mod:`ik_layer.model.joints`). Limits follow :mod:`ik_layer.model.limits` (huge ones
    read as unbounded).

    One frame (``ee_frame``): poses are (..., 4, 4), Jacobians (..., 6, dof), targets (..., 4, 4).
    Several (``ee_frames=[...]``, F of them, even F = 1): every pose, Jacobian, target and weight gets
    a frame dimension before its own: (..., F, 4, 4), (..., F, 6, dof), (..., F, 6).

    Attributes:
        name: robot name (built-in name or model name).
        nq: size of a configuration ``q``.
        dof: size of a tangent (Jacobian columns): the degrees of freedom.
        floating_base: whether a free-flyer base leads the configuration.
        joint_names: names of the joints carrying the joint coordinates, in order.
        ee_frame: name of the end-effector frame (the first of ``ee_frames``).
        ee_frames: names of the end-effector frames; None for a one-frame robot.
        mimic: the mimic joints that move (with their leader), by name.
        lower, upper: (joints,) joint limits [rad or m]; continuous joints get (-pi, pi]. The base has none.
        continuous: (joints,) bool, joints without limits (wrapped to (-pi, pi]).
        full_turn: (joints,) bool, revolute joints whose limits lie at least one turn apart: past a limit they come
            back inside by whole turns (the same pose) rather than stop at it (see :mod:`ik_layer.model.limits`).
        any_continuous, any_full_turn: whether any joint is (Python bools: host code skips the wrapping without
            reading a device tensor).
        model: Pinocchio model of the moving joints (locked joints folded into fixed placements; the
            free-flyer ``root_joint`` first with a floating base).
        full_model: the Pinocchio model as loaded, every joint included (see :meth:`to_full_pinocchio_q`).
    """

    lower: Tensor
    upper: Tensor
    continuous: Tensor
    full_turn: Tensor
    # Private buffers (registered in __init__; declared here for nn.Module's __getattr__, typed Tensor | Module).
    _q_index: Tensor  # Pinocchio's q slots of the joints (see chain_building.pinocchio_indices)
    _cos_index: Tensor
    _sin_index: Tensor
    _joint_cols: Tensor  # the joints' coupling (see chain_building.coupling)
    _joint_scale: Tensor
    _joint_offset: Tensor
    _full_reference: Tensor
    _full_q_index: Tensor
    _chain_cols: Tensor  # the chains to the end-effector frames (see chain_building.frames_buffers)
    _chain_scale: Tensor
    _chain_offset: Tensor
    _place_rot: Tensor
    _place_rot_k: Tensor
    _place_rot_k2: Tensor
    _place_pos: Tensor
    _slide: Tensor
    _axis: Tensor
    _revolute: Tensor
    _tip: Tensor

    def __init__(
        self,
        model: pin.Model,
        ee_frame: str | None = None,
        *,
        ee_frames: Sequence[str] | None = None,
        name: str | None = None,
        mimic_joints: Mapping[str, Mimic] | None = None,
        active_joints: Sequence[str] | None = None,
        locked: Mapping[str, float] | None = None,
        floating_base: bool = False,
        base_frame: str | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(model, pin.Model):
            raise IKLayerError(f"model must be a pinocchio.Model, got {type(model).__name__}")
        if not isinstance(floating_base, bool):
            raise IKLayerError(f"floating_base must be True or False, got {floating_base!r}")
        if base_frame is not None and (floating_base or not isinstance(base_frame, str)):
            raise IKLayerError(
                f"base_frame must be a frame's name (str), and excludes floating_base=True; got {base_frame!r}"
            )
        frames = _frame_names(ee_frame, ee_frames)
        selection = select_joints(
            model, frames, mimic_joints, active_joints, locked, floating_base=floating_base, base_frame=base_frame
        )
        self.base_frame = base_frame
        self.floating_base = floating_base
        add_base = with_free_flyer if floating_base else lambda m: m
        self.full_model, self.model = add_base(model), add_base(selection.model)
        model = selection.model
        self.name = name or model.name
        self.mimic = selection.followers
        joints = [j for j in range(1, model.njoints) if model.names[j] not in self.mimic]
        self._base_nq, self._base_nv = (BASE_NQ, BASE_NV) if floating_base else (0, 0)
        self.nq, self.dof = self._base_nq + len(joints), self._base_nv + len(joints)
        self._joints_nq = model.nq
        self.joint_names = [model.names[j] for j in joints]
        self.ee_frame = selection.ee_frames[0]
        self.ee_frames = selection.ee_frames if ee_frames is not None else None
        if frames is None:
            _log.info(
                "%s: no ee_frame given, using %r (see ik_layer.model.default_frame); moving joints: %s",
                self.name,
                self.ee_frame,
                ", ".join(self.joint_names),
            )
        rotates = rotating_joints(model)
        lower, upper, continuous = joint_limits(model, joints, [rotates[j] for j in joints])
        self.register_buffer("lower", lower)
        self.register_buffer("upper", upper)
        self.register_buffer("continuous", continuous)
        sources = joint_sources(model, self.joint_names, self.mimic)
        turnable = turnable_coordinates(sources, rotates, len(joints))
        self.register_buffer("full_turn", full_turns(lower, upper, continuous, turnable))
        self.any_continuous, self.any_full_turn = bool(continuous.any()), bool(self.full_turn.any())
        q_index, cos_index, sin_index = pinocchio_indices(model)
        self.register_buffer("_q_index", q_index)
        self.register_buffer("_cos_index", cos_index)
        self.register_buffer("_sin_index", sin_index)
        for key, value in coupling(list(range(1, model.njoints)), sources).items():
            self.register_buffer(f"_joint{key}", value)
        reference = torch.tensor(selection.reference, dtype=torch.float64)
        base = neutral_base(reference, ())[: self._base_nq]
        self.register_buffer("_full_reference", torch.cat((base, reference)))
        self.register_buffer("_full_q_index", full_q_index(self.full_model, self.model))

        stacked = self.ee_frames is not None
        self._origin = pin.SE3.Identity() if base_frame is None else frame_placement(model, base_frame).inverse()
        for key, value in frames_buffers(model, selection.ee_frames, sources, self._origin, stacked=stacked).items():
            self.register_buffer(key, value)
        self._chain_model, self._sources = model, sources  # chains to other frames (fk(q, frames=...)), on demand
        self._frame_chains: OrderedDict[tuple[str, ...], dict[str, Tensor]] = OrderedDict()
        self.collision: RobotSpheres | None = None  # set by load_robot(..., collision=...)

    @property
    def dtype(self) -> torch.dtype:
        """Floating dtype of the robot's tensors."""
        # Not through nn.Module.__getattr__: read on every call of the hot path (registered in __init__: never None).
        return cast(Tensor, self._buffers["lower"]).dtype

    @property
    def device(self) -> torch.device:
        """Device of the robot's tensors."""
        return cast(Tensor, self._buffers["lower"]).device

    @property
    def collision_spheres(self) -> list[tuple[str, Tensor, float]]:
        """The collision spheres (link name, centre (3,) in the link's frame [m], radius [m]); empty without a
        collision model (see ``load_robot(..., collision=...)``)."""
        if self.collision is None:
            return []
        radii = self.collision.radii.tolist()
        return list(zip(self.collision.sphere_links, self.collision.centers.unbind(0), radii, strict=True))

    @functools.cached_property
    def target_shape(self) -> tuple[int, ...]:
        """Shape of one target transform: (4, 4), or (F, 4, 4) with several end-effector frames."""
        return (4, 4) if self.ee_frames is None else (len(self.ee_frames), 4, 4)

    def extra_repr(self) -> str:
        frames = f"ee_frame={self.ee_frame!r}" if self.ee_frames is None else f"ee_frames={list(self.ee_frames)!r}"
        base = ", floating_base=True" if self.floating_base else ""
        return f"name={self.name!r}, dof={self.dof}{base}, {frames}, dtype={self.dtype}, device={self.device}"

    def to(self, *args: Any, **kwargs: Any) -> Robot:
        """``nn.Module.to``; dtypes other than float32 / float64 and unusable devices raise an IKLayerError."""
        try:
            device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        except (TypeError, RuntimeError) as err:
            usage = "Robot.to takes a device, a dtype (float32 or float64) or a tensor"
            raise IKLayerError(f"{usage}: {_brief(err)}") from err
        if dtype is not None:
            check_dtype(dtype)
        if device is not None:
            check_device(device)
        return super().to(*args, **kwargs)

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Robot:
        """Convert the tensors (``to()``, ``half()``, ``cuda()``...), refusing unsupported dtypes and unusable devices.

        ``fn`` is tried on an empty slice of the limits first, so a refused conversion changes nothing. Limits
        beyond the new dtype's range (1e308 in float32) are clamped to it: they stay finite.
        """
        try:
            probe = fn(self.lower[:0])
        except (RuntimeError, AssertionError) as err:  # torch asserts when CUDA is not compiled in
            raise DeviceError(f"cannot move the robot to that device: {_brief(err)}") from err
        check_dtype(probe.dtype)
        if probe.device != self.device:
            check_device(probe.device)
        self.__dict__.pop("_chains", None)  # the chain description of the old tensors
        super()._apply(fn, recurse)
        big = torch.finfo(self.dtype).max
        self.lower.clamp_(-big, big)
        self.upper.clamp_(-big, big)
        return self

    def check_q(self, q: Tensor, name: str = "q") -> Tensor:
        """Validate a configuration tensor (..., nq): type, shape, dtype, device and (one host sync) finiteness;
        a floating base's quaternion must not be zero."""
        self._check_configuration(q, name)
        check_finite(q, name)
        if self.floating_base and bool((torch.linalg.vector_norm(q[..., 3:BASE_NQ], dim=-1) < 1e-9).any()):
            raise NonFiniteError(f"{name} holds a zero base quaternion (entries 3:7, [qx, qy, qz, qw])")
        return q

    def check_target(self, target: Tensor, name: str = "target") -> Tensor:
        """Validate a target pose (..., 7) or transform (..., 4, 4) for this robot and return it as (..., 4, 4).

        With F end-effector frames: (..., F, 7) or (..., F, 4, 4), returned as (..., F, 4, 4). Its dtype
        and device must be the robot's; see :func:`ik_layer.model.lie.as_transform` for the other checks.
        """
        if isinstance(target, Tensor):
            self._check_like(target, name)
        transform = as_transform(target, name)
        shape = self.target_shape
        if transform.shape[transform.dim() - len(shape) :] != shape:
            frames = ", ".join(self.ee_frames or ())
            raise ShapeError(
                f"{name} must have shape (..., {shape[0]}, 4, 4) or (..., {shape[0]}, 7): one pose per frame of "
                f"{self.name} ({frames}), got {tuple(target.shape)}"
            )
        return transform

    def check_generator(self, generator: torch.Generator | None, name: str = "generator") -> None:
        """Raise unless ``generator`` is None or a ``torch.Generator`` on the robot's device type."""
        if generator is None:
            return
        if not isinstance(generator, torch.Generator):
            raise IKLayerError(f"{name} must be a torch.Generator or None, got {type(generator).__name__}")
        if generator.device.type != self.device.type:
            raise DeviceError(f"{name} is on {generator.device} but the robot is on {self.device}")

    def _check_configuration(self, q: Tensor, name: str) -> None:
        """Raise unless ``q`` is a tensor (..., nq) of the robot's dtype and device (no host sync)."""
        if not isinstance(q, Tensor):
            raise ShapeError(f"{name} must be a torch.Tensor, got {type(q).__name__}")
        if q.dim() < 1 or q.shape[-1] != self.nq:
            raise ShapeError(f"{name} must have shape (..., {self.nq}) for {self.name}, got {tuple(q.shape)}")
        self._check_like(q, name)

    def _check_like(self, x: Tensor, name: str) -> None:
        """Raise unless tensor ``x`` has the robot's dtype and device (no host sync)."""
        if x.dtype != self.dtype:
            fix = f"call robot.to({x.dtype}) or convert {name}" if x.dtype in _SUPPORTED_DTYPES else f"convert {name}"
            raise DTypeError(f"{name} has dtype {x.dtype} but the robot uses {self.dtype}; {fix}")
        if x.device != self.device:
            raise DeviceError(f"{name} is on {x.device} but the robot is on {self.device}")

    @property
    def chains(self) -> ChainDescription:
        """The chains to the end-effector frames as the fused kernels read them (views of this robot's tensors,
        made once per placement: ``.to()`` makes a new description)."""
        held = self.__dict__.get("_chains")
        if held is None:
            held = self.__dict__["_chains"] = self._description(cast("Mapping[str, Tensor]", self._buffers))
        return held

    def chains_to(self, frames: Sequence[str]) -> ChainDescription:
        """The chains to any ``frames`` of the model (stacked, each padded to the longest) as the fused kernels
        read them: the links that carry collision spheres, say."""
        return self._description(self._chains_to(frames))

    def _description(self, chains: Mapping[str, Tensor]) -> ChainDescription:
        """The :class:`ChainDescription` of ``chains`` (:func:`~ik_layer.model.chain_building.frames_buffers`' keys, one
        or several frames)."""
        tip = chains["_tip"].reshape(-1, 4, 4)
        frames, length = tip.shape[0], chains["_chain_cols"].shape[-1]
        entries = frames * length
        return ChainDescription(
            layout=Layout(frames, length, int(self.lower.shape[0]), self.floating_base),
            place_rot=chains["_place_rot"].reshape(entries, 3, 3),
            place_rot_k=chains["_place_rot_k"].reshape(entries, 3, 3),
            place_rot_k2=chains["_place_rot_k2"].reshape(entries, 3, 3),
            place_pos=chains["_place_pos"].reshape(entries, 3),
            slide=chains["_slide"].reshape(entries, 3),
            axis=chains["_axis"].reshape(entries, 3),
            revolute=chains["_revolute"].reshape(entries),
            cols=chains["_chain_cols"].reshape(entries),
            scale=chains["_chain_scale"].reshape(entries),
            offset=chains["_chain_offset"].reshape(entries),
            tip=tip,
            lower=self.lower,
            upper=self.upper,
            continuous=self.continuous,
            full_turn=self.full_turn,
        )

    @overload
    def kinematics(
        self, q: Tensor, *, jacobian: Literal[True], frames: Sequence[str] | None = None
    ) -> tuple[Tensor, Tensor]: ...
    @overload
    def kinematics(
        self, q: Tensor, *, jacobian: bool, frames: Sequence[str] | None = None
    ) -> tuple[Tensor, Tensor | None]: ...
    def kinematics(
        self, q: Tensor, *, jacobian: bool, frames: Sequence[str] | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """Pose (..., [F,] 4, 4) and, if asked, Jacobian (..., [F,] 6, dof) of ``q`` (..., nq) without validating it;
        ``frames``: any frames of the model instead, as in :meth:`fk`.

        The unchecked path for inner loops (no host sync, so it also works under
        ``torch.func.vmap``); :meth:`fk` and :meth:`fk_jacobian` validate first.
        """
        chains = cast("Mapping[str, Tensor]", self._buffers) if frames is None else self._chains_to(frames)
        return self._walk(q, chains, jacobian)  # the buffers are registered: never None

    def _walk(self, q: Tensor, chains: Mapping[str, Tensor], jacobian: bool) -> tuple[Tensor, Tensor | None]:
        """:meth:`kinematics` along ``chains`` (:func:`~ik_layer.model.chain_building.frames_buffers`' keys): the
        end-effector frames' or others'."""
        joints = q[..., self._base_nq :]
        cols, scale = chains["_chain_cols"], chains["_chain_scale"]
        pose, j_chain = chain_kinematics(
            joints[..., cols] * scale + chains["_chain_offset"],
            chains["_place_rot"],
            chains["_place_rot_k"],
            chains["_place_rot_k2"],
            chains["_place_pos"],
            chains["_slide"],
            chains["_axis"],
            chains["_revolute"],
            chains["_tip"],
            jacobian=jacobian,
        )
        jac = None
        if j_chain is not None:
            full = j_chain.new_zeros(*j_chain.shape[:-1], self.dof - self._base_nv)
            jac = full.scatter_add(-1, cols[..., None, :].expand(j_chain.shape), j_chain * scale[..., None, :])
        return base_kinematics(q[..., :BASE_NQ], pose, jac) if self.floating_base else (pose, jac)

    def fk(self, q: Tensor, frames: Sequence[str] | None = None) -> Tensor:
        """End-effector pose ``T_base_ee`` (..., 4, 4) of ``q`` (..., nq), or (..., F, 4, 4); differentiable.

        ``frames``: any frames of the model instead (links, joints, sensors...), (..., len(frames), 4, 4).
        With a floating base the pose is in the world (``T_world_ee``). Differentiable when ``q`` requires grad;
        otherwise the end-effector frames' are computed by one fused kernel (as :meth:`fk_jacobian`).
        """
        if frames is not None:
            return self.kinematics(self.check_q(q), jacobian=False, frames=frames)[0]
        return self._forward(self.check_q(q), jacobian=False)[0]

    def fk_jacobian(self, q: Tensor, frames: Sequence[str] | None = None) -> tuple[Tensor, Tensor]:
        """``T_base_ee`` (..., 4, 4) and the geometric Jacobian (..., 6, dof) in one pass; with F frames
        (..., F, 4, 4) and (..., F, 6, dof); ``frames``: any frames of the model instead, as in :meth:`fk`.

        Jacobian rows are [linear; angular], origin at the end-effector frame, axes of the base (the world
        with a floating base: Pinocchio's ``LOCAL_WORLD_ALIGNED``); a mimic joint's motion is in its leader's
        column; a floating base's columns come first, for its twist in its own frame.

        Differentiable when ``q`` requires grad (torch kinematics); otherwise one fused kernel computes the
        end-effector frames' (:mod:`ik_layer.model.fk_kernel`), with the same values.
        """
        if frames is not None:
            return self.kinematics(self.check_q(q), jacobian=True, frames=frames)
        return self._forward(self.check_q(q), jacobian=True)

    def _chains_to(self, frames: Sequence[str]) -> dict[str, Tensor]:
        """The chains to ``frames`` (stacked), on the robot's device and dtype, built once per frame list (the last
        :data:`_FRAME_CHAINS` lists kept)."""
        if isinstance(frames, str) or not all(isinstance(f, str) for f in frames) or not frames:
            raise IKLayerError(f"frames must be a non-empty list of frame names, got {frames!r}")
        key = tuple(frames)
        chains = self._frame_chains.get(key)
        if chains is None or chains["_tip"].device != self.device or chains["_tip"].dtype != self.dtype:
            built = frames_buffers(self._chain_model, list(key), self._sources, self._origin, stacked=True)
            chains = {k: v.to(self.device, self.dtype if v.is_floating_point() else v.dtype) for k, v in built.items()}
            self._frame_chains[key] = chains
            while len(self._frame_chains) > _FRAME_CHAINS:
                self._frame_chains.popitem(last=False)
        self._frame_chains.move_to_end(key)
        return chains

    @overload
    def _forward(self, q: Tensor, *, jacobian: Literal[True]) -> tuple[Tensor, Tensor]: ...
    @overload
    def _forward(self, q: Tensor, *, jacobian: bool) -> tuple[Tensor, Tensor | None]: ...
    def _forward(self, q: Tensor, *, jacobian: bool) -> tuple[Tensor, Tensor | None]:
        """:meth:`kinematics` of a checked ``q``: by one fused kernel where no autograd runs through ``q``."""
        from ik_layer.model.fk_kernel import forward, takes  # warp, loaded on first use

        if takes(q):
            return forward(self.chains, q, self.target_shape[:-2], jacobian=jacobian)
        return self.kinematics(q, jacobian=jacobian)

    def to_pinocchio_q(self, q: Tensor) -> Tensor:
        """Pinocchio configuration (..., model.nq) of :attr:`model` at ``q`` (..., nq): continuous joints as
        (cos, sin), mimic joints at their leader's multiple, a floating base's quaternion normalised."""
        q = self.check_q(q)
        values = q[..., self._base_nq :][..., self._joint_cols] * self._joint_scale + self._joint_offset
        out = q.new_zeros(*q.shape[:-1], self._joints_nq)
        direct, rotary = self._q_index >= 0, self._cos_index >= 0
        out[..., self._q_index[direct]] = values[..., direct]
        out[..., self._cos_index[rotary]] = torch.cos(values[..., rotary])
        out[..., self._sin_index[rotary]] = torch.sin(values[..., rotary])
        base = normalize_base(q[..., :BASE_NQ]) if self.floating_base else q[..., :0]
        return torch.cat((base, out), -1)

    def to_full_pinocchio_q(self, q: Tensor) -> Tensor:
        """Configuration (..., full_model.nq) of :attr:`full_model` at ``q`` (..., nq), locked joints held."""
        moving = self.to_pinocchio_q(q)
        full = self._full_reference.expand(*moving.shape[:-1], -1).clone()
        full[..., self._full_q_index] = moving
        return full

    def neutral_q(self) -> Tensor:
        """(nq,) every joint at 0, wrapped into its limits; a floating base at the origin, identity orientation."""
        joints = self.lower.new_zeros(self.lower.shape[0])
        return self.wrap(torch.cat((neutral_base(joints, ())[: self._base_nq], joints)))

    def random_q(self, shape: int | Sequence[int] = (), generator: torch.Generator | None = None) -> Tensor:
        """Random configurations (*shape, nq): joints uniform inside their limits (finite even for huge limits),
        a floating base at the world origin with the identity orientation."""
        size = _check_shape(shape)
        self.check_generator(generator)
        u = torch.rand(*size, self.lower.shape[0], generator=generator, dtype=self.dtype, device=self.device)
        # Not lower + u (upper - lower): the range of huge limits overflows. Rounding may step past a limit.
        joints = torch.clamp(self.lower * (1 - u) + self.upper * u, self.lower, self.upper)
        return torch.cat((neutral_base(joints, size)[..., : self._base_nq], joints), -1)

    def wrap(self, q: Tensor) -> Tensor:
        """``q`` with continuous joints wrapped to (-pi, pi], full-turn joints past a limit brought back by whole
        turns, all others clamped to their limits and a floating base's quaternion normalised.

        Checks type, shape, dtype and device but not the values (no host sync: the solver calls it every step).
        """
        self._check_configuration(q, "q")
        joints = inside = q[..., self._base_nq :]
        if self.any_full_turn:  # full-turn joints come back by whole turns
            above, below = (joints - self.upper).clamp_min(0), (self.lower - joints).clamp_min(0)
            turns = torch.ceil(above / _TURN) - torch.ceil(below / _TURN)
            inside = torch.where(self.full_turn, joints - _TURN * turns, joints)
        wrapped = torch.minimum(torch.maximum(inside, self.lower), self.upper)
        if self.any_continuous:
            wrapped = torch.where(self.continuous, torch.pi - torch.remainder(torch.pi - joints, 2 * torch.pi), wrapped)
        return torch.cat((normalize_base(q[..., :BASE_NQ]), wrapped), -1) if self.floating_base else wrapped

    def integrate(self, q: Tensor, dq: Tensor) -> Tensor:
        """``q`` (..., nq) moved by the tangent ``dq`` (..., dof): joints added, a floating base moved on SE(3)
        (``pinocchio.integrate``); unchecked, neither wrapped nor clamped."""
        if not self.floating_base:
            return q + dq
        base = integrate_base(q[..., :BASE_NQ], dq[..., :BASE_NV])
        return torch.cat((base, q[..., BASE_NQ:] + dq[..., BASE_NV:]), -1)


def check_dtype(dtype: object, name: str = "dtype") -> torch.dtype:
    """``dtype`` if it is torch.float32 or torch.float64 (names such as ``"float32"`` are accepted); others raise."""
    resolved = getattr(torch, dtype.removeprefix("torch."), None) if isinstance(dtype, str) else dtype
    if isinstance(resolved, torch.dtype) and resolved in _SUPPORTED_DTYPES:
        return resolved
    low = isinstance(resolved, torch.dtype) and resolved.is_floating_point
    why = " (the solver's 1e-4 m tolerances are out of reach in half precision)" if low else ""
    raise DTypeError(f"{name} must be torch.float32 or torch.float64, got {dtype!r}{why}")


def check_device(device: object, name: str = "device") -> torch.device:
    """``device`` as a ``torch.device`` that exists here and holds values; malformed, unavailable or meta ones raise."""
    try:
        resolved = torch.device(device)  # type: ignore[call-overload]  # any object: torch raises on a malformed one
    except (RuntimeError, TypeError) as err:
        raise DeviceError(f"{name} {device!r} is malformed: {_brief(err)}") from err
    if resolved.type == "meta":
        raise DeviceError(f"{name} 'meta' holds no values; use 'cpu' or 'cuda'")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"{name} {device!r}: CUDA is not available on this machine")
    if resolved.type == "cuda" and (resolved.index or 0) >= torch.cuda.device_count():
        raise DeviceError(f"{name} {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    try:
        torch.empty(0, device=resolved)  # other backends (mps, xpu, ...): raises if not available
    except (RuntimeError, AssertionError) as err:
        raise DeviceError(f"{name} {device!r} is not available: {_brief(err)}") from err
    return resolved


def _brief(err: Exception) -> str:
    """The first line of a (torch) error message, at most 160 characters: the rest lists overloads or backends."""
    line = str(err).strip().split("\n", 1)[0]
    return line if len(line) <= 160 else line[:157] + "..."


def _check_shape(shape: int | Iterable[SupportsIndex], name: str = "shape") -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints >= 0) as a tuple; others (whatever a caller passes) raise."""
    dims = (shape,) if isinstance(shape, int) else shape
    try:
        size = tuple(operator.index(d) for d in dims)
    except TypeError as err:
        raise ShapeError(f"{name} must be an int or a sequence of ints, got {shape!r}") from err
    if any(d < 0 for d in size):
        raise ShapeError(f"{name} must not hold negative sizes, got {size}")
    return size


def _frame_names(ee_frame: object, ee_frames: object) -> list[str] | None:
    """The end-effector frames asked for: ``[ee_frame]``, ``ee_frames``, or None (the default frame)."""
    if not isinstance(ee_frame, (str, type(None))):
        raise IKLayerError(f"ee_frame must be a frame name (str) or None, got {type(ee_frame).__name__}")
    if ee_frames is None:
        return None if ee_frame is None else [ee_frame]
    if ee_frame is not None:
        raise IKLayerError("give ee_frame or ee_frames, not both")
    names = ee_frames if isinstance(ee_frames, Sequence) and not isinstance(ee_frames, str) else None
    if not names or not all(isinstance(n, str) for n in names):
        raise IKLayerError(f"ee_frames must be a non-empty sequence of frame names, got {ee_frames!r}")
    if len(set(names)) != len(names):
        raise IKLayerError(f"ee_frames must not repeat a frame, got {list(names)}")
    return list(names)
