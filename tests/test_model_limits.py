"""Joint limits as the solver uses them: huge limits read as unbounded, zero ranges warned about."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer import UnsupportedModelError
from ik_layer.model.limits import PRISMATIC_HALF_RANGE

ARM = '<limit lower="-2.5" upper="2.5" effort="1" velocity="1"/>'


def limit(lower: float, upper: float) -> str:
    return f'<limit lower="{lower}" upper="{upper}" effort="1" velocity="1"/>'


def joint(name: str, kind: str, parent: str, child: str, axis: str, xyz: str, lim: str) -> str:
    return (
        f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}"/><axis xyz="{axis}"/>{lim}</joint>'
    )


def mobile_base(base_limit: str) -> str:
    """x, y, yaw of a mobile base (``base_limit`` each), then a 4-joint arm and a tool."""
    links = ["world", "x", "y", "base", "l1", "l2", "l3", "l4", "tool"]
    return (
        '<robot name="mobile">'
        + "".join(f'<link name="{n}"/>' for n in links)
        + joint("base_x", "prismatic", "world", "x", "1 0 0", "0 0 0", base_limit)
        + joint("base_y", "prismatic", "x", "y", "0 1 0", "0 0 0", base_limit)
        + joint("base_yaw", "revolute", "y", "base", "0 0 1", "0 0 0", base_limit)
        + joint("a1", "revolute", "base", "l1", "0 0 1", "0.1 0 0.4", ARM)
        + joint("a2", "revolute", "l1", "l2", "0 1 0", "0 0 0.2", ARM)
        + joint("a3", "revolute", "l2", "l3", "0 1 0", "0.4 0 0", ARM)
        + joint("a4", "revolute", "l3", "l4", "1 0 0", "0.3 0 0", ARM)
        + '<joint name="t" type="fixed"><parent link="l4"/><child link="tool"/><origin xyz="0.1 0 0"/></joint>'
        + "</robot>"
    )


@pytest.mark.parametrize("bound", [1e16, 999999.0], ids=["1e16", "999999"])
def test_huge_limits_read_as_unbounded(bound):
    robot = ik_layer.load_robot(mobile_base(limit(-bound, bound)))
    assert robot.continuous.tolist() == [False, False, True, False, False, False, False]
    h = PRISMATIC_HALF_RANGE
    torch.testing.assert_close(robot.lower[:3], torch.tensor([-h, -h, -np.pi], dtype=torch.float64))
    torch.testing.assert_close(robot.upper[:3], torch.tensor([h, h, np.pi], dtype=torch.float64))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_mobile_base_with_huge_limits_solves(rng, reference):
    robot = ik_layer.load_robot(mobile_base(limit(-1e16, 1e16)))
    q = robot.random_q((500,), generator=rng)
    target = robot.fk(q)
    result = ik_layer.solve(robot, target, generator=torch.Generator().manual_seed(1), reference=reference)
    assert result.success.double().mean() >= 0.99
    assert bool(((result.q >= robot.lower) & (result.q <= robot.upper)).all())
    # The success flag agrees with the pose reached (1e-4 m, 1e-3 rad defaults).
    reached = robot.fk(result.q[result.success])
    err = (reached[:, :3, 3] - target[result.success][:, :3, 3]).norm(dim=-1)
    assert float(err.max()) <= 1e-4


@pytest.mark.parametrize(
    ("lower", "upper", "expected"),
    [
        pytest.param(0, 1e16, (0, 2 * PRISMATIC_HALF_RANGE), id="one-sided-up"),
        pytest.param(-1e16, 0.5, (0.5 - 2 * PRISMATIC_HALF_RANGE, 0.5), id="one-sided-down"),
        pytest.param(-3, 1e16, (-3, 2 * PRISMATIC_HALF_RANGE - 3), id="window-from-lower"),
        pytest.param(-0.3, 0.5, (-0.3, 0.5), id="bounded-unchanged"),
    ],
)
def test_prismatic_window_nearest_zero(lower, upper, expected):
    robot = ik_layer.load_robot(mobile_base(limit(lower, upper)))
    assert (robot.lower[0].item(), robot.upper[0].item()) == pytest.approx(expected, abs=1e-12)
    assert not robot.continuous[0]


@pytest.mark.parametrize(
    ("lower", "upper", "continuous"),
    [
        pytest.param(-10, 10, True, id="span-over-two-turns"),
        pytest.param(0, 1e16, True, id="one-sided-huge"),
        pytest.param(-2 * np.pi, 2 * np.pi, False, id="two-turns-kept"),
        pytest.param(-6.2832, 6.2832, False, id="two-turns-rounded-kept"),
        pytest.param(-1, 2, False, id="bounded"),
    ],
)
def test_revolute_span(lower, upper, continuous):
    robot = ik_layer.load_robot(mobile_base(limit(lower, upper)))
    assert bool(robot.continuous[2]) is continuous
    expected = (-np.pi, np.pi) if continuous else (lower, upper)
    assert (robot.lower[2].item(), robot.upper[2].item()) == pytest.approx(expected, abs=1e-12)


def test_zero_range_joint_warns():
    with pytest.warns(UserWarning, match=r"\['base_x', 'base_y', 'base_yaw'\].*cannot move"):
        robot = ik_layer.load_robot(mobile_base(limit(0.2, 0.2)))
    assert robot.lower[0] == robot.upper[0] == 0.2


def test_inverted_limits_are_refused():
    with pytest.raises(UnsupportedModelError, match=r"\['base_x', 'base_y', 'base_yaw'\].*invalid limits"):
        ik_layer.load_robot(mobile_base(limit(1, -1)))


@pytest.mark.parametrize(
    ("lower", "upper", "full_turn"),
    [
        pytest.param(-np.pi, np.pi, True, id="one-turn"),
        pytest.param(-3.14159, 3.14159, True, id="one-turn-rounded"),
        pytest.param(-2 * np.pi, 2 * np.pi, True, id="two-turns"),
        pytest.param(-3.0, 3.0, False, id="under-one-turn"),
        pytest.param(-10, 10, False, id="continuous"),
    ],
)
def test_full_turn_joints(lower, upper, full_turn):
    """A revolute joint whose limits lie a turn apart (not continuous) is a full-turn joint; a prismatic one never."""
    robot = ik_layer.load_robot(mobile_base(limit(lower, upper)))
    assert robot.full_turn.tolist() == [False, False, full_turn, False, False, False, False]


@pytest.mark.parametrize(("multiplier", "full_turn"), [(1.0, True), (-2.0, True), (0.5, False)])
def test_mimic_follower_with_part_turns_keeps_its_leader_at_its_limits(multiplier, full_turn):
    """A whole turn of a leader turns its followers by ``multiplier`` turns: the same pose only for whole ones."""
    one_turn = limit(-np.pi, np.pi)
    urdf = (
        '<robot name="mimic">'
        + "".join(f'<link name="{n}"/>' for n in ("base", "l1", "l2", "tool"))
        + joint("j1", "revolute", "base", "l1", "0 0 1", "0 0 0.1", one_turn)
        + joint("j2", "revolute", "l1", "l2", "0 1 0", "0.3 0 0", limit(-10, 10)).replace(
            "</joint>", f'<mimic joint="j1" multiplier="{multiplier}"/></joint>'
        )
        + '<joint name="t" type="fixed"><parent link="l2"/><child link="tool"/><origin xyz="0.2 0 0"/></joint>'
        + "</robot>"
    )
    robot = ik_layer.load_robot(urdf, "tool")
    assert robot.joint_names == ["j1"] and robot.full_turn.tolist() == [full_turn]


def test_wrap_brings_full_turn_joints_back_by_whole_turns(rng):
    """UR5e (every joint a full-turn one): angles whole turns past a limit come back inside it, to the same pose,
    past it by less than a turn; angles inside stay as they are."""
    robot = ik_layer.load_robot("ur5e", dtype=torch.float64)
    assert robot.full_turn.all()
    q = robot.random_q((300,), generator=rng)
    far = q + 2 * np.pi * torch.randint(-3, 4, q.shape, generator=rng).double()
    wrapped = robot.wrap(far)
    assert bool(((wrapped >= robot.lower) & (wrapped <= robot.upper)).all())
    torch.testing.assert_close(robot.fk(wrapped), robot.fk(q), rtol=0, atol=1e-12)
    assert torch.equal(robot.wrap(q), q)
    above, below = far > robot.upper, far < robot.lower
    assert bool(above.any() and below.any())
    assert bool((wrapped[above] > (robot.upper - 2 * np.pi).expand_as(far)[above]).all())
    assert bool((wrapped[below] < (robot.lower + 2 * np.pi).expand_as(far)[below]).all())


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_targets_at_full_turn_limits_solve(reference):
    """UR5e targets whose configurations lie within 0.3 rad of the joints' limits (±2 pi): solved, inside them."""
    robot = ik_layer.load_robot("ur5e", dtype=torch.float64)
    g = torch.Generator().manual_seed(5)
    side = torch.where(torch.rand(200, robot.dof, generator=g) < 0.5, robot.lower + 0.3, robot.upper - 0.3)
    q = side + (torch.rand(200, robot.dof, generator=g, dtype=torch.float64) - 0.5) * 0.6
    target = robot.fk(robot.wrap(q))
    result = ik_layer.solve(robot, target, generator=torch.Generator().manual_seed(6), reference=reference)
    assert float(result.success.double().mean()) >= 0.99
    assert bool(((result.q >= robot.lower) & (result.q <= robot.upper)).all())
    reached = robot.fk(result.q[result.success])
    err = (reached[:, :3, 3] - target[result.success][:, :3, 3]).norm(dim=-1)
    assert float(err.max()) <= 1e-4
