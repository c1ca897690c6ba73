"""``load_robot``: a robot from a built-in name, a model file or text, with its collision model.

The kinematics come from :mod:`ik_layer.model.sources` and :class:`~ik_layer.model.robot.Robot`; the collision
spheres (:mod:`ik_layer.collision`) from a sphere file, the built-in robot's own, or the URDF's primitives.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from ik_layer.collision.fitting import mesh_spheres, urdf_spheres
from ik_layer.collision.model import RobotSpheres
from ik_layer.collision.spheres import load_disabled_pairs, load_spheres, spheres_from_mapping
from ik_layer.exceptions import IKLayerError, UnsupportedModelError
from ik_layer.model.robot import Robot, check_device, check_dtype
from ik_layer.model.sources import ModelSource, read_model

__all__ = ["load_robot"]

_log = logging.getLogger("ik_layer")


def load_robot(
    name_or_path: str | Path,
    ee_frame: str | None = None,
    *,
    ee_frames: Sequence[str] | None = None,
    active_joints: Sequence[str] | None = None,
    locked: Mapping[str, float] | None = None,
    floating_base: bool = False,
    base_frame: str | None = None,
    dtype: torch.dtype | str | None = torch.float64,
    device: str | torch.device | None = "cpu",
    collision: str | os.PathLike[str] | Mapping[str, object] | None = "auto",
    srdf: str | os.PathLike[str] | None = None,
) -> Robot:
    """Load a built-in robot by name, a URDF, MJCF or xacro file by path, or URDF / MJCF text.

    Args:
        name_or_path: a built-in name (see :func:`robots.builtin_robots`), a path (``.xacro`` files need
            the ``xacro`` extra; MJCF is recognised by its ``<mujoco>`` root), or a string
            holding the XML itself. Meshes are never read.
        ee_frame: end-effector frame; default: the built-in robot's, else the tool frame of the longest arm,
            never a finger, sensor or gripper joint's frame when another exists (see
            :mod:`ik_layer.model.default_frame`; logged at INFO on the ``ik_layer`` logger with the moving joints).
        ee_frames: several end-effector frames instead of ``ee_frame`` (both hands, four feet): poses,
            Jacobians, targets and weights get a frame dimension (see :class:`Robot`).
        active_joints: the joints the solver moves; default: those between the base and the end-effector
            frames that are not in ``locked`` (and the leaders of mimic joints on those chains).
        locked: values [rad or m] of joints held fixed; other joints that do not move stay at 0
            (Pinocchio's neutral configuration).
        floating_base: put the model under a free-flyer root joint (whole-body IK of humanoids and legged
            robots): ``q`` gets the base pose first and poses are in the world (see :class:`Robot`).
        base_frame: a frame of the model the chains start from (KDL's and TRAC-IK's base link: a torso-mounted
            arm from its shoulder, a camera frame): poses, Jacobians, targets, obstacles and gradients are in that
            frame, and every joint that moves it stays locked (at 0 or its ``locked`` value); default: the model's
            root.
        dtype: dtype of the robot's tensors, torch.float32 or torch.float64 (or its name, ``"float32"``);
            None keeps float64.
        device: device of the robot's tensors; None keeps the CPU.
        collision: the collision spheres (``robot.collision_spheres``): a sphere file (YAML or JSON, cuRobo's
            shape, see :mod:`ik_layer.collision.spheres`) or its mapping; ``"auto"``: the built-in robot's own, else
            spheres covering the URDF's collision primitives (:mod:`ik_layer.collision.fitting`), else none (no
            collision geometry, meshes, or MJCF); ``"fit"``: as ``"auto"``, the URDF file's collision meshes
            covered too (each mesh's convex hull, :func:`~ik_layer.collision.fitting.mesh_spheres`; slower to
            load, which is why ``"auto"`` leaves meshes out); None: none.
        srdf: an SRDF file whose ``disable_collisions`` pairs are never checked for self-collision.

    Raises:
        RobotNotFound: neither a built-in name, XML text nor an existing file.
        UnsupportedModelError: a model the parser refuses (its reason included), a moving joint of an
            unsupported type (planar, spherical, ...), no moving joint under an end-effector frame (a fixed
            base; with a floating base, frames fixed to the base are end-effectors), or no moving joint at all.
        FrameNotFound, JointNotFound: ``ee_frame`` or a joint name is not in the model (the message lists them).
        DTypeError, DeviceError: unsupported ``dtype``; malformed or unavailable ``device``.
        IKLayerError: arguments of the wrong type; a xacro file without the xacro package; a bad sphere file.
    """
    dtype = check_dtype(dtype) if dtype is not None else None
    device = check_device(device) if device is not None else None
    source = read_model(name_or_path)
    robot = Robot(
        source.model,
        source.ee_frame if ee_frame is None and ee_frames is None else ee_frame,
        ee_frames=ee_frames,
        name=source.name,
        mimic_joints=source.mimic_joints,
        active_joints=active_joints,
        locked=locked,
        floating_base=floating_base,
        base_frame=base_frame,
    )
    robot = robot.to(device=device, dtype=dtype)
    robot.collision = _collision_model(robot, source, collision, srdf)
    return robot


def _collision_model(
    robot: Robot,
    source: ModelSource,
    collision: str | os.PathLike[str] | Mapping[str, object] | None,
    srdf: str | os.PathLike[str] | None,
) -> RobotSpheres | None:
    """The collision model ``collision`` chooses (see :func:`load_robot`)."""
    links = [frame.name for frame in robot.model.frames]
    if collision is None:
        return None
    if isinstance(collision, Mapping):
        spheres = spheres_from_mapping(collision, links)
    elif collision in ("auto", "fit"):
        if source.spheres is not None:
            spheres = load_spheres(source.spheres, links)
        elif source.urdf is not None:
            fitted = _fitted(source, links, robot.name) if collision == "auto" else _fitted_meshes(source, links)
            if not fitted:
                return None
            spheres = spheres_from_mapping(fitted, links, f"{robot.name}'s collision geometry")
        elif collision == "fit":
            raise IKLayerError("collision='fit' covers a URDF's collision geometry; this model is not a URDF")
        else:
            return None
    elif isinstance(collision, (str, os.PathLike)):
        spheres = load_spheres(collision, links)
    else:
        raise IKLayerError(
            f"collision must be 'auto', a sphere file, a mapping of spheres or None, got {type(collision).__name__}"
        )
    ignore = load_disabled_pairs(srdf, links) if srdf is not None else frozenset()
    return RobotSpheres(robot, spheres, ignore)


def _fitted(source: ModelSource, links: Sequence[str], name: str) -> dict[str, list[dict[str, object]]]:
    """Spheres covering the URDF's collision primitives; none (logged) where it has meshes."""
    assert source.urdf is not None  # a URDF's
    try:
        return urdf_spheres(source.urdf, links)
    except UnsupportedModelError as err:
        _log.info("%s: no collision spheres (%s; collision='fit' covers meshes too)", name, err)
        return {}


def _fitted_meshes(source: ModelSource, links: Sequence[str]) -> dict[str, list[dict[str, object]]]:
    """Spheres covering the URDF's collision primitives and meshes, per link.

    Raises:
        IKLayerError: the URDF has meshes but was given as text (its meshes' paths need its file), or no collision
            geometry at all; UnsupportedModelError: a mesh cannot be read.
    """
    assert source.urdf is not None  # a URDF's
    fitted = urdf_spheres(source.urdf, links, meshes=True)
    if "<mesh" in source.urdf:
        if source.path is None:
            raise IKLayerError("collision='fit': the URDF's meshes are found from its file; load it by its path")
        for link, spheres in mesh_spheres(source.path, source.model, links).items():
            fitted.setdefault(link, []).extend(spheres)
    if not fitted:
        raise IKLayerError("collision='fit': the URDF has no collision geometry on the robot's links")
    return fitted
