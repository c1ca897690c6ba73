"""The fused FK + Jacobian kernel (ik_layer.model.fk_kernel) against the eager torch kinematics, its reference.

``Robot.fk`` and ``Robot.fk_jacobian`` run the kernel when no autograd goes through ``q``; the eager path
(``Robot.kinematics``) stays for gradients and ``torch.func`` transforms. Pinocchio holds both to 1e-10 elsewhere
(test_kinematics.py, test_multi_frame.py, test_floating_base.py); here the two paths are held to each other.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import ik_layer
from ik_layer.model import fk_kernel as fk
from ik_layer.testing import random_configurations
from tests.conftest import erd_urdf_path
from tests.test_model_mimic import CHAIN

F64, F32 = torch.float64, torch.float32
TALOS = "talos_data/robots/talos_reduced.urdf"
SOLO = "solo_description/robots/solo12.urdf"
ROBOTS = [*ik_layer.builtin_robots(), "mixed-urdf", "talos-hands", "solo-base-feet", "mimic"]


def load(name: str, dtype: torch.dtype, tiny_urdf: Path) -> ik_layer.Robot:
    """A built-in robot, every joint kind, two hands of a tree, a floating base with five frames, a mimic chain."""
    if name == "mixed-urdf":
        joints = ["j_cont", "j_side", "j_off", "j_prism", "j_neg", "j_cont_off"]
        return ik_layer.load_robot(tiny_urdf, "tool", active_joints=joints, dtype=dtype)
    if name == "talos-hands":
        frames = ["gripper_left_base_link", "gripper_right_base_link"]
        return ik_layer.load_robot(erd_urdf_path(TALOS), ee_frames=frames, dtype=dtype)
    if name == "solo-base-feet":
        frames = ["base_link", "FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
        return ik_layer.load_robot(erd_urdf_path(SOLO), ee_frames=frames, floating_base=True, dtype=dtype)
    if name == "mimic":
        return ik_layer.load_robot(CHAIN, "tip", dtype=dtype)
    return ik_layer.load_robot(name, dtype=dtype)


@pytest.mark.parametrize("dtype", [F64, F32], ids=str)
@pytest.mark.parametrize("name", ROBOTS)
def test_the_kernel_equals_the_eager_kinematics(name: str, dtype: torch.dtype, tiny_urdf: Path) -> None:
    robot = load(name, dtype, tiny_urdf)
    q = random_configurations(robot, 300, torch.Generator().manual_seed(1)).reshape(3, 100, robot.nq)
    assert fk.takes(q)
    pose, jac = robot.fk_jacobian(q)
    ref_pose, ref_jac = robot.kinematics(q, jacobian=True)
    assert pose.shape == ref_pose.shape and jac.shape == ref_jac.shape
    tol = 1e-12 if dtype == F64 else 2e-5
    torch.testing.assert_close(pose, ref_pose, rtol=0, atol=tol)
    torch.testing.assert_close(jac, ref_jac, rtol=0, atol=tol * max(1.0, float(ref_jac.abs().max())))
    assert torch.equal(robot.fk(q), pose)  # the pose-only kernel: the same bits


def test_autograd_and_torch_func_take_the_eager_path() -> None:
    robot = ik_layer.load_robot("panda")
    q = robot.random_q((5,), generator=torch.Generator().manual_seed(2)).requires_grad_(True)
    assert not fk.takes(q)
    pose, jac = robot.fk_jacobian(q)
    assert pose.requires_grad and jac.requires_grad
    pose[..., :3, 3].sum().backward()
    torch.testing.assert_close(q.grad, jac[..., :3, :].sum(-2).detach(), rtol=0, atol=1e-12)  # d(sum p)/dq
    with torch.no_grad():
        assert fk.takes(q) and not robot.fk(q).requires_grad
    seen = []  # under torch.func transforms (wrapped tensors without storage): never the kernel

    def probe(x: torch.Tensor) -> torch.Tensor:
        seen.append(fk.takes(x))
        return x.sum()

    torch.func.vmap(probe)(q.detach())
    torch.func.grad(probe)(q.detach()[0])
    assert seen == [False, False]


def test_the_kernel_follows_the_robot_across_dtypes_and_empty_batches() -> None:
    robot = ik_layer.load_robot("ur5e")
    q = robot.random_q((4,), generator=torch.Generator().manual_seed(3))
    before = robot.fk(q)
    robot.to(F32)
    after = robot.fk(q.float())
    assert after.dtype == F32
    torch.testing.assert_close(after.double(), before, rtol=0, atol=2e-6)
    pose, jac = robot.fk_jacobian(q.float()[:0])
    assert pose.shape == (0, 4, 4) and jac.shape == (0, 6, robot.dof)
