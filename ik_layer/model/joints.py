"""Which joints of a Pinocchio model a :class:`~ik_layer.Robot` moves, and its default end-effector frame.

By default a robot moves the joints between its base and its end-effector frames; every other joint
is locked, at its value in ``locked`` or else at Pinocchio's neutral configuration (0 for revolute
and prismatic joints), and folded into the fixed placements by ``pinocchio.buildReducedModel``.
``active_joints`` names the moving joints instead. Only moving joints need a supported type
(revolute, continuous or prismatic).

Every end-effector frame needs a moving joint between the base and it, except with a floating base: the
free-flyer moves every frame, so a frame fixed to the base (the base link itself) is an end-effector too.
A floating-base robot still needs one moving joint at least (a robot of the base alone is refused).

Mimic joints (``q_m = multiplier * q_leader + offset``, from a URDF's ``<mimic>``) are never
coordinates: one whose leader moves stays in the reduced model and follows it (a mimic joint on a
chain makes its leader move, even off the chain); one whose leader is locked is locked at the value
its leader gives it, unless ``locked`` names it.
"""

from __future__ import annotations

import numbers
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ik_layer.exceptions import FrameNotFound, IKLayerError, JointNotFound, UnsupportedModelError
from ik_layer.model.default_frame import default_frame

__all__ = ["JointSelection", "Mimic", "frame_id", "motion_axis", "select_joints"]

_FRAME_KINDS = (pin.FrameType.BODY, pin.FrameType.OP_FRAME)  # links and sites: what a user names as end-effector


@dataclass(frozen=True)
class Mimic:
    """A URDF ``<mimic>``: the joint's value is ``multiplier * q[leader] + offset``."""

    leader: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class JointSelection:
    """The moving joints of a model.

    Attributes:
        ee_frames: the end-effector frames.
        model: the model of the moving joints (the locked ones folded into fixed placements).
        reference: a configuration of the full model holding the locked joints' values.
        followers: the mimic joints of ``model`` (they move with their leader), by name.
    """

    ee_frames: tuple[str, ...]
    model: pin.Model
    reference: np.ndarray
    followers: dict[str, Mimic]


def select_joints(
    model: pin.Model,
    ee_frames: Sequence[str] | None,
    mimic: Mapping[str, Mimic] | None = None,
    active_joints: Sequence[str] | None = None,
    locked: Mapping[str, float] | None = None,
    *,
    floating_base: bool = False,
    base_frame: str | None = None,
) -> JointSelection:
    """The joints a robot on ``model`` moves towards ``ee_frames`` (see the module docstring).

    ``ee_frames`` None picks one frame: the tool frame of the longest arm (see :mod:`ik_layer.model.default_frame`;
    never one below a mimic joint). ``floating_base``: whether a
    free-flyer will carry ``model`` (frames fixed to the base are then end-effectors too). Raises FrameNotFound,
    JointNotFound, UnsupportedModelError (a moving joint of an unsupported type, no moving joint under a frame
    of a fixed base, or no moving joint at all) or IKLayerError (arguments). ``base_frame``: the frame the
    chains start from; every joint that moves it stays locked (not in ``active_joints``); the default frame is the
    one chosen without it, unless the base frame leaves that one still (then the next in the same ranking).
    """
    mimic = {n: m for n, m in (mimic or {}).items() if model.existJointName(n) and model.existJointName(m.leader)}
    reference = _reference(model, locked or {}, mimic)
    free = _free_joints(model, active_joints, locked or {}, mimic)
    moves_base = set(_chain(model, frame_id(model, base_frame))) if base_frame is not None else set()
    named = sorted(model.names[j] for j in moves_base & free) if active_joints is not None else []
    if named:
        raise IKLayerError(f"active joints {named} move base_frame {base_frame!r}: they stay locked")
    blocked = {j for j in free - moves_base if _unsupported(model, j) or model.names[j] in mimic}
    frames = _movable_frames(model, free - moves_base, blocked)
    if ee_frames is None:
        if not frames:
            raise UnsupportedModelError(f"no frame of {model.name!r} has a joint the robot can move above it")
        linked = set(mimic) | {m.leader for m in mimic.values()}
        # Ranked as without base_frame (the joints that move it count): it only leaves out the frames it leaves still.
        ranked = _movable_frames(model, free, blocked)
        chosen = default_frame(model, {f: ranked[f] for f in frames}, free - blocked, linked)
        ee_frames = [model.frames[chosen].name]
    free -= moves_base  # the joints that move the base frame are locked
    chains = {name: _chain(model, frame_id(model, name)) for name in ee_frames}
    on_chains = sorted(set().union(*chains.values()))
    leaders = {model.getJointId(mimic[model.names[j]].leader) for j in on_chains if model.names[j] in mimic}
    leads = {j for j in free if model.names[j] not in mimic}
    if active_joints is None:
        leads &= set(on_chains) | leaders
    followers = {n: m for n, m in mimic.items() if n not in (locked or {}) and model.getJointId(m.leader) in leads}
    active = sorted(leads | {model.getJointId(n) for n in followers})
    for j in active:
        reason = _unsupported(model, j)
        if reason:
            raise UnsupportedModelError(f"joint {model.names[j]!r} {reason}; lock it or choose another ee_frame")
    if floating_base and not active:
        raise UnsupportedModelError(
            f"no joint of {model.name!r} moves: end-effector frames {list(ee_frames)} are fixed to the floating "
            "base; add a frame below a moving joint, or name joints in active_joints"
        )
    for name, chain in chains.items():
        if not floating_base:
            _check_moves(model, name, chain, active, frames)
    lock = [j for j in range(1, model.njoints) if j not in active]
    return JointSelection(tuple(ee_frames), _reduced(model, lock, reference), reference, followers)


def _free_joints(
    model: pin.Model, active_joints: Sequence[str] | None, locked: Mapping[str, float], mimic: Mapping[str, Mimic]
) -> set[int]:
    """Joints that may move: ``active_joints`` if given, else every joint not in ``locked``."""
    if active_joints is None:
        return set(range(1, model.njoints)) - {model.getJointId(n) for n in locked}
    names = _names(active_joints, "active_joints")
    clash = sorted(set(names) & set(locked))
    if clash:
        raise IKLayerError(f"joints {clash} are both in active_joints and in locked")
    for name in names:
        if name in mimic:
            raise IKLayerError(f"active_joints: {name!r} mimics {mimic[name].leader!r}; name its leader instead")
    return {_joint_id(model, n, "active_joints") for n in names}


def _check_moves(model: pin.Model, ee_frame: str, chain: list[int], active: list[int], frames: dict[int, int]) -> None:
    """Raise unless a joint of ``active`` moves ``ee_frame``."""
    if not set(chain) & set(active):
        candidates = ", ".join(model.frames[f].name for f in sorted(frames)) or "(none)"
        raise UnsupportedModelError(
            f"no joint moves between the base and {ee_frame!r}; frames with a moving joint above them: {candidates}"
        )


def _reduced(model: pin.Model, lock: list[int], reference: np.ndarray) -> pin.Model:
    """``pin.buildReducedModel``, which refuses models where frames share a name: they are renamed meanwhile
    (joint frames excepted: they name their joints)."""
    if not lock:
        return model
    counts = Counter(frame.name for frame in model.frames)
    work, clash, renamed = pin.Model(model), {n for n, k in counts.items() if k > 1}, {}
    for f in range(len(work.frames)):
        frame = work.frames[f]
        if frame.name in clash and frame.type != pin.FrameType.JOINT:
            renamed[f"{frame.name}#{f}"] = frame.name
            frame.name = f"{frame.name}#{f}"
    reduced = pin.buildReducedModel(work, lock, reference)
    for f in range(len(reduced.frames)):
        frame = reduced.frames[f]
        frame.name = renamed.get(frame.name, frame.name)
    return reduced


def motion_axis(jm: pin.JointModel) -> tuple[np.ndarray, np.ndarray]:
    """Linear and angular parts of a one-dof joint's motion subspace."""
    data = jm.createData()
    q_neutral = np.array([1.0, 0.0]) if jm.nq == 2 else np.zeros(1)
    jm.calc(data, q_neutral)
    s = np.asarray(data.S).reshape(6)
    return s[:3], s[3:]


def _unsupported(model: pin.Model, j: int) -> str | None:
    """Why joint ``j`` cannot move in a robot (None if it can)."""
    jm = model.joints[j]
    kind = jm.shortname()
    if jm.nv != 1 or jm.nq not in (1, 2) or "Mimic" in kind:
        return f"is a {kind}; ik-layer moves revolute, continuous and prismatic joints only"
    v, w = motion_axis(jm)
    if np.linalg.norm(v) > 1e-12 and np.linalg.norm(w) > 1e-12:
        return f"({kind}) is helical; not supported"
    return None


def _chain(model: pin.Model, frame_id: int) -> list[int]:
    """Joints from the base to frame ``frame_id``, root first (the universe excluded)."""
    return [j for j in model.supports[model.frames[frame_id].parentJoint] if j != 0]


def _movable_frames(model: pin.Model, free: set[int], blocked: set[int]) -> dict[int, int]:
    """Links and sites with a free joint above them and no blocked one: frame id -> number of free joints."""
    found = {}
    for f, frame in enumerate(model.frames):
        chain = _chain(model, f)
        moving = sum(j in free for j in chain)
        if frame.type in _FRAME_KINDS and moving and not blocked.intersection(chain):
            found[f] = moving
    return found


def frame_id(model: pin.Model, name: str) -> int:
    """Index of the first frame named ``name`` (a fixed joint and its child link may share a name)."""
    names = [f.name for f in model.frames]
    if name not in names:
        raise FrameNotFound(name, dict.fromkeys(names))
    return names.index(name)


def _joint_id(model: pin.Model, name: str, argument: str) -> int:
    if not model.existJointName(name) or name == "universe":
        raise JointNotFound(name, model.names[1:], argument)
    return model.getJointId(name)


def _names(names: object, argument: str) -> list[str]:
    """``names`` as a list of str; a lone string or other objects raise."""
    if isinstance(names, str) or not isinstance(names, Sequence) or not all(isinstance(n, str) for n in names):
        raise IKLayerError(f"{argument} must be a sequence of joint names, got {names!r}")
    return list(names)


def _reference(model: pin.Model, locked: Mapping[str, float], mimic: Mapping[str, Mimic]) -> np.ndarray:
    """Pinocchio's neutral configuration of ``model`` with the one-dof ``locked`` joints at their values and the
    other mimic joints at the value their leader gives them."""
    if not isinstance(locked, Mapping):
        raise IKLayerError(f"locked must be a mapping of joint names to values, got {type(locked).__name__}")
    q = pin.neutral(model)
    for name, value in locked.items():
        jm = model.joints[_joint_id(model, name, "locked")]
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
            raise IKLayerError(f"locked[{name!r}] must be a finite number [rad or m], got {value!r}")
        if jm.nv != 1:
            raise UnsupportedModelError(
                f"locked joint {name!r} is a {jm.shortname()}; only one-dof joints take a value"
            )
        _set_value(q, jm, value)
    for name, m in mimic.items():
        if name not in locked and model.existJointName(m.leader):
            leader = model.joints[model.getJointId(m.leader)]
            _set_value(q, model.joints[model.getJointId(name)], m.multiplier * _value(q, leader) + m.offset)
    return q


def _value(q: np.ndarray, jm: pin.JointModel) -> float:
    """The angle or displacement of one-dof joint ``jm`` in Pinocchio configuration ``q``."""
    if jm.nq == 2:
        return float(np.arctan2(q[jm.idx_q + 1], q[jm.idx_q]))
    return float(q[jm.idx_q])


def _set_value(q: np.ndarray, jm: pin.JointModel, value: float) -> None:
    """Write the angle or displacement ``value`` of one-dof joint ``jm`` into Pinocchio configuration ``q``."""
    q[jm.idx_q : jm.idx_q + jm.nq] = [np.cos(value), np.sin(value)] if jm.nq == 2 else [value]
