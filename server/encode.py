"""Stage 4, encode: answers -> the response models' JSON (IK solutions), or models (poses, robot descriptions).

A robot with several end-effector frames answers with objects keyed by its frame names (see
:func:`ik_layer.server.decode.frame_keys`): FK poses ``{frame: Pose}`` and gradients ``{frame: dof x 6}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ik_layer import Robot
from ik_layer.server.decode import frames_of
from ik_layer.server.predict import Prediction
from ik_layer.server.schemas import Pose, RobotInfo
from ik_layer.terms import added_terms

__all__ = ["ik_response", "poses", "robot_info", "solutions"]


def solutions(
    prediction: Prediction, frames: Sequence[str] | None = None, sphere_links: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """One solution per row of ``prediction``, with its gradient if the request asked for it: the JSON object of
    an :class:`IKSolution` (its fields in order, those that are None left out), made as plain values, which
    :func:`json.dumps` writes several times faster than a model is built and dumped.

    Args:
        prediction: the rows' answers; its gradient (n, dof, 6), or (n, dof, F, 6) with ``frames``.
        frames: the F frames keying each gradient (``{frame: dof x 6}``), or None for one frame (dof x 6).
        sphere_links: the link of each of the robot's collision spheres (naming the closest pairs).
    """
    p = prediction
    rows = zip(p.q, p.success, p.position_error, p.orientation_error, p.iterations, p.status, strict=True)
    out = [
        {"q": q, "success": success, "position_error": position, "orientation_error": orientation,
         "iterations": iterations, "status": status}
        for q, success, position, orientation, iterations, status in rows
    ]  # fmt: skip
    if p.min_distance is not None:
        pairs = [None] * len(out) if p.closest_pair is None else p.closest_pair
        for solution, least, pair in zip(out, p.min_distance, pairs, strict=True):
            if math.isfinite(least):  # (+inf: no pair to measure; JSON has no infinity)
                solution["min_distance"] = least
                closest = None if pair is None else _pair(pair, sphere_links)
                if closest is not None:
                    solution["closest"] = closest
    if p.goal is not None:
        for solution, goal in zip(out, p.goal, strict=True):
            solution["goal"] = goal
    if p.gradient is not None:
        for solution, gradient in zip(out, _gradients(p.gradient, frames), strict=True):
            solution["gradient"] = gradient
    return out


def ik_response(
    robot: str, prediction: Prediction, frames: Sequence[str] | None = None, sphere_links: Sequence[str] = ()
) -> bytes:
    """The JSON body of an :class:`IKResponse` answering an IK request of ``robot`` (``gradient`` left out unless
    asked; keyed by ``frames`` for a robot with several; closest pairs named by ``sphere_links``; lists of
    ``prediction.per_target`` solutions per target when it is above 1)."""
    flat = solutions(prediction, frames, sphere_links)
    k = prediction.per_target
    answers = flat if k == 1 else [flat[i : i + k] for i in range(0, len(flat), k)]
    return json.dumps({"robot": robot, "solutions": answers}, allow_nan=False, separators=(",", ":")).encode()


def poses(pose_rows: Tensor, frames: Sequence[str] | None = None) -> list[Pose] | list[dict[str, Pose]]:
    """:class:`Pose` models of (n, 7) poses ``[x, y, z, qx, qy, qz, qw]``; with ``frames``, of (n, F, 7) poses as
    objects frame -> :class:`Pose`."""
    if frames is None:
        return [_pose(p) for p in pose_rows.reshape(-1, 7).tolist()]
    return [{frame: _pose(p) for frame, p in zip(frames, row, strict=True)} for row in pose_rows.tolist()]


def robot_info(robot: Robot, collision: str | None) -> RobotInfo:
    """The public description of a robot whose collision spheres came from ``collision`` (its spec's)."""
    return RobotInfo(
        name=robot.name,
        nq=robot.nq,
        dof=robot.dof,
        joint_names=list(robot.joint_names),
        lower=robot.lower.tolist(),
        upper=robot.upper.tolist(),
        ee_frame=robot.ee_frame,
        ee_frames=list(frames_of(robot)),
        floating_base=robot.floating_base,
        locked=_locked(robot),
        collision=collision,
        collision_spheres=0 if robot.collision is None else len(robot.collision.radii),
        terms={term.name: term.data_size(robot.chains.layout) for term in added_terms()},
    )


def _pair(pair: list[int], sphere_links: Sequence[str]) -> dict[str, Any] | None:
    """The :class:`ClosestPair` object of ``[sphere, obstacle or -1 - other sphere]`` (None: no pair)."""
    sphere, other = pair
    if sphere < 0:
        return None
    if other >= 0:
        return {"link": sphere_links[sphere], "sphere": sphere, "obstacle": other}
    other = -1 - other
    return {"link": sphere_links[sphere], "sphere": sphere, "other_link": sphere_links[other], "other_sphere": other}


def _pose(p: list[float]) -> Pose:
    return Pose.model_construct(position=p[:3], orientation=p[3:])


def _gradients(gradient: Tensor, frames: Sequence[str] | None) -> list:
    """Rows of a (n, dof, [F,] 6) gradient: dof x 6 lists, or with ``frames`` objects frame -> dof x 6."""
    n, dof = gradient.shape[:2]
    if frames is None:
        return gradient.reshape(n, dof, 6).tolist()
    by_frame = torch.movedim(gradient, 2, 1).tolist()  # (n, F, dof, 6)
    return [dict(zip(frames, row, strict=True)) for row in by_frame]


def _locked(robot: Robot) -> dict[str, float]:
    """The one-coordinate joints of the full model that neither move nor follow a moving joint, at the values they
    are held at."""
    model = robot.full_model
    full_q = robot.to_full_pinocchio_q(robot.neutral_q()).tolist()
    held: dict[str, float] = {}
    for joint, name in zip(model.joints[1:], model.names[1:], strict=True):
        if name in robot.joint_names or name in robot.mimic:
            continue
        if joint.nq == 1:
            held[name] = full_q[joint.idx_q]
        elif joint.nq == 2 and joint.nv == 1:  # continuous: (cos, sin)
            held[name] = math.atan2(full_q[joint.idx_q + 1], full_q[joint.idx_q])
    return held
