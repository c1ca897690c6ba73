"""Synthetic clips for tests, benchmarks and examples: smooth joint paths inside the limits, within velocity limits."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ik_layer.model.robot import Robot
from ik_layer.trajectory.problem import velocity_limits

__all__ = ["joint_paths", "motion_around"]

_COMPONENTS = 3  # sinusoids per joint
_INSIDE = 0.95  # the paths keep to this fraction of each joint's range about its middle


def joint_paths(
    robot: Robot, clips: int, frames: int, dt: float, speed: float = 0.8, generator: torch.Generator | None = None
) -> Tensor:
    """Random smooth joint paths (clips, frames, nq), every joint at most ``speed`` times its velocity limit.

    Each joint is ``mid + 0.95 half sin(theta(t))`` with ``theta`` a sum of three sinusoids of 0.1-0.5 Hz, so it
    stays inside its limits (and may sweep through singular configurations) while ``|dq/dt| <= speed v_max``
    (continuous joints and joints without a velocity limit: within (-pi, pi] at 1 rad/s). A floating base rests
    at the origin. The robot's dtype and device; ``generator`` on the CPU.
    """
    joints = len(robot.joint_names)
    limit = velocity_limits(robot).cpu().double()
    limit = torch.where(torch.isinf(limit), 1.0, limit)
    lower = torch.where(robot.continuous, -math.pi, robot.lower).cpu().double()
    upper = torch.where(robot.continuous, math.pi, robot.upper).cpu().double()
    mid, half = (lower + upper) / 2, _INSIDE * (upper - lower) / 2
    shape = (clips, 1, _COMPONENTS, joints)
    frequency = 0.1 + 0.4 * torch.rand(shape, generator=generator, dtype=torch.float64)
    phase = 2 * math.pi * torch.rand(shape, generator=generator, dtype=torch.float64)
    share = torch.rand(shape, generator=generator, dtype=torch.float64)
    share = share / share.sum(-2, keepdim=True)
    amplitude = speed * limit / half * share / (2 * math.pi * frequency)  # each sinusoid's share of the speed
    start = torch.asin(2 * torch.rand(clips, 1, joints, generator=generator, dtype=torch.float64) - 1)
    t = (torch.arange(frames, dtype=torch.float64) * dt)[None, :, None, None]
    theta = start + (amplitude * torch.sin(2 * math.pi * frequency * t + phase)).sum(-2)
    path = (mid + half * torch.sin(theta)).to(dtype=robot.dtype, device=robot.device)
    base = robot.neutral_q()[: robot.nq - joints].expand(clips, frames, -1)
    return torch.cat((base, path), -1)


def motion_around(
    robot: Robot,
    stance: Tensor,
    clips: int,
    frames: int,
    dt: float,
    amplitude: float = 0.2,
    speed: float = 0.5,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Random smooth motions (clips, frames, nq) about ``stance`` (nq,): each joint swings by up to ``amplitude``
    [rad or m] (within its limits) at most ``speed`` times its velocity limit, the floating base held at the
    stance's pose (a reference motion whose end-effector poses are targets: a humanoid's feet and hands)."""
    joints = len(robot.joint_names)
    limit = velocity_limits(robot).cpu().double()
    limit = torch.where(torch.isinf(limit), 1.0, limit)
    shape = (clips, 1, _COMPONENTS, joints)
    share = torch.rand(shape, generator=generator, dtype=torch.float64)
    share = share / share.sum(-2, keepdim=True)
    frequency = torch.minimum(speed * limit / (2 * math.pi * amplitude), torch.tensor(0.5)) * (
        0.5 + 0.5 * torch.rand(shape, generator=generator, dtype=torch.float64)
    )
    phase = 2 * math.pi * torch.rand(shape, generator=generator, dtype=torch.float64)
    t = (torch.arange(frames, dtype=torch.float64) * dt)[None, :, None, None]
    swing = (amplitude * share * (torch.sin(2 * math.pi * frequency * t + phase) - torch.sin(phase))).sum(-2)
    base = robot.nq - joints
    held = stance.cpu().double()
    path = torch.clamp(held[base:] + swing, robot.lower.cpu(), robot.upper.cpu())
    whole = torch.cat((held[:base].expand(clips, frames, -1), path), -1)
    return whole.to(dtype=robot.dtype, device=robot.device)
