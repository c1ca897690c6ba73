"""The normal equations' sparsity pattern (``ik_layer.model.sparsity``) against the Jacobian's actual zeros.

The kernel builds and factors ``J^T W J`` only where the pattern says a non-zero may be, so the pattern must cover
every non-zero of the Jacobian (at random configurations) and every entry of the factor; on a tree it must be
tight (no fill-in). The kernel's step itself is checked against the eager step in ``test_engine_robots.py`` and
``test_engine_kernel.py``.
"""

from __future__ import annotations

import pytest
import torch

import ik_layer
from ik_layer.model.sparsity import normal_pattern
from ik_layer.testing import random_configurations
from tests.conftest import erd_urdf_path
from tests.test_model_mimic import CHAIN

TALOS = "talos_data/robots/talos_reduced.urdf"
SOLO = "solo_description/robots/solo12.urdf"
BODY = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "gripper_right_base_link"]
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
TREES = ["talos-body", "talos-hands", "solo-base-feet", "talos-hands-shuffled"]


def robot_of(name: str) -> ik_layer.Robot:
    if name == "mimic":
        return ik_layer.load_robot(CHAIN, "tip")
    if name == "panda":
        return ik_layer.load_robot("panda")
    path, frames = {
        "talos-body": (TALOS, BODY),
        "talos-hands": (TALOS, BODY[2:]),
        "talos-hands-shuffled": (TALOS, [BODY[2], BODY[0], BODY[3], "arm_left_4_link"]),  # frames out of tree order
        "solo-base-feet": (SOLO, ["base_link", *FEET]),
    }[name]
    return ik_layer.load_robot(erd_urdf_path(path), ee_frames=frames, floating_base=name != "talos-hands")


def structure(robot: ik_layer.Robot) -> tuple[torch.Tensor, torch.Tensor]:
    """Each frame's non-zero Jacobian columns (F, dof) bool at random configurations, and ``H``'s (dof, dof)."""
    q = random_configurations(robot, 64, torch.Generator().manual_seed(0))
    _, jac = robot.kinematics(q, jacobian=True)
    touched = (jac.reshape(64, -1, 6, jac.shape[-1]) != 0).any(-2).any(0)  # (F, dof)
    coupled = (touched[:, :, None] & touched[:, None, :]).any(0)
    return touched, coupled


@pytest.mark.parametrize("name", [*TREES, "mimic", "panda"])
def test_the_pattern_covers_the_jacobian_and_the_factor(name: str) -> None:
    robot = robot_of(name)
    chains = robot.chains
    dof, frames = chains.layout.dof, chains.layout.frames
    pattern = normal_pattern(chains)
    order, first = pattern["order"].long(), pattern["first"].long()
    assert torch.equal(order.sort().values, torch.arange(dof))
    position = torch.empty_like(order)
    position[order] = torch.arange(dof)
    touched, coupled = structure(robot)
    for fr in range(frames):
        count = int(pattern["frame_count"][fr])
        slots = pattern["frame_slots"][fr * dof : fr * dof + count].long()
        assert bool((slots.diff() > 0).all())  # ascending
        assert set(position[touched[fr]].tolist()) <= set(slots.tolist())
    permuted = coupled[order][:, order]  # H's structure in the factored order
    rows, cols = torch.tril_indices(dof, dof)
    assert bool((first[rows] <= cols)[permuted[rows, cols]].all()), "a non-zero of H outside its row's envelope"
    # the factor of a matrix with that structure stays inside the envelope (any order: its fill-in is there)
    g = torch.Generator().manual_seed(1)
    a = torch.randn(dof, dof, generator=g, dtype=torch.float64)
    h = (a + a.T) * permuted
    h = h + torch.diag(h.abs().sum(1) + 1)  # diagonally dominant: positive definite
    factor = torch.linalg.cholesky(h)
    outside = torch.arange(dof)[None, :] < first[:, None]
    assert bool((factor[outside] == 0).all())


@pytest.mark.parametrize("name", TREES)
def test_on_a_tree_the_envelope_holds_no_zero(name: str) -> None:
    """Chains ordered from their tips, shared coordinates last: an envelope entry is a coupled pair (no fill-in, no
    work on zeros), so talos' whole body factors 284 entries instead of 561."""
    robot = robot_of(name)
    pattern = normal_pattern(robot.chains)
    order, first = pattern["order"].long(), pattern["first"].long()
    _, coupled = structure(robot)
    permuted = coupled[order][:, order]
    dof = order.numel()
    rows, cols = torch.tril_indices(dof, dof, -1)
    inside = first[rows] <= cols
    assert torch.equal(permuted[rows, cols] | ~inside, torch.ones_like(inside))
    if name == "talos-body":
        assert int(inside.sum()) == 284 and dof * (dof - 1) // 2 == 561
