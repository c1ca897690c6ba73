"""Secondary cost terms (ik_layer.terms): each term's closed-form gradient against finite differences of its cost,
their effect on solves, and the implicit layer's gradients at a constrained optimum against finite differences.

The kernel's versions of the terms are held to the reference path in tests/test_engine_kernel.py (one iteration and
whole trajectories, each term on every built-in robot it applies to).
"""

from __future__ import annotations

import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, SolveOptions
from ik_layer.core.lm import LM
from ik_layer.model.lie import pose_error, so3_exp
from ik_layer.terms import BUILT_IN, CENTRING, MANIPULABILITY, POSTURE, SecondaryTerm, rank_of_cost

F64 = torch.float64
BUILTIN = ik_layer.builtin_robots()
UR5 = "ur_description/urdf/ur5_robot.urdf"


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def cost_at(robot: ik_layer.Robot, term: SecondaryTerm, q: torch.Tensor, goal: torch.Tensor | None) -> torch.Tensor:
    """The term's cost at ``q``, its Jacobian taken afresh (torch kinematics)."""
    return term.cost(robot, q, robot.kinematics(q, jacobian=True)[1], goal)


def applies(robot: ik_layer.Robot, term: SecondaryTerm) -> bool:
    """Whether ``term`` does something on ``robot``."""
    if term is CENTRING:
        return not bool((robot.continuous | robot.full_turn).all())
    return term is not MANIPULABILITY or robot.chains.serial_arm


def finite_difference_gradient(robot, term, q, goal, h=1e-6) -> torch.Tensor:
    """Central differences of the term's cost along each joint, (n, dof)."""
    columns = []
    for k in range(robot.dof):
        step = torch.zeros_like(q)
        step[:, k] = h
        columns.append((cost_at(robot, term, q + step, goal) - cost_at(robot, term, q - step, goal)) / (2 * h))
    return torch.stack(columns, -1)


@pytest.mark.parametrize("term", BUILT_IN, ids=lambda t: t.name)
@pytest.mark.parametrize("name", [*BUILTIN, "ur5-erd"])
def test_gradient_matches_finite_differences(name: str, term: SecondaryTerm, erd_urdf) -> None:
    """Each term's closed-form gradient (the reference path's, and the kernel's through the step tests) is the
    derivative of its cost, on the built-in robots and on a URDF we did not write."""
    robot = ik_layer.load_robot(erd_urdf(UR5), dtype=F64) if name == "ur5-erd" else ik_layer.load_robot(name, dtype=F64)
    if not applies(robot, term):
        pytest.skip(f"{term.name} does not apply to {name}")
    n = 64
    q = robot.random_q((n,), generator=gen(1))
    goal = robot.random_q((n,), generator=gen(2))
    expected = finite_difference_gradient(robot, term, q, goal)
    got = term.gradient(robot, q, robot.kinematics(q, jacobian=True)[1], goal)
    scale = expected.abs().amax(-1, keepdim=True).clamp_min(1)
    assert float(((got - expected).abs() / scale).max()) < 1e-6
    assert float(got.abs().max()) > 1e-3  # the comparison is not between zeros


def test_costs_against_closed_forms() -> None:
    """Centring is half the squared offset from the middle of the limits; manipulability is minus the log of
    Yoshikawa's measure (``sqrt det J J^T``), up to the damping floor; the posture half the squared distance."""
    robot = ik_layer.load_robot("panda", dtype=F64)
    q = robot.random_q((32,), generator=gen(3))
    goal = robot.random_q((32,), generator=gen(4))
    jac = robot.fk_jacobian(q)[1]
    middle = (robot.lower + robot.upper) / 2
    torch.testing.assert_close(CENTRING.cost(robot, q, jac, None), 0.5 * (q - middle).square().sum(-1))
    damped = torch.linalg.svdvals(jac).square() + LM.damping_floor(F64)  # det(J J^T + eps I), by singular values
    torch.testing.assert_close(MANIPULABILITY.cost(robot, q, jac, None), -0.5 * damped.log().sum(-1))
    torch.testing.assert_close(POSTURE.cost(robot, q, jac, goal), 0.5 * (q - goal).square().sum(-1))
    # a full-turn joint (the UR5e's) has no middle: centring adds nothing there
    ur5e = ik_layer.load_robot("ur5e", dtype=F64)
    assert bool(ur5e.full_turn.all())
    q_ur = ur5e.random_q((8,), generator=gen(5))
    assert float(CENTRING.cost(ur5e, q_ur, ur5e.fk_jacobian(q_ur)[1], None).abs().max()) == 0.0


def test_rank_orders_successes_below_failures() -> None:
    cost = torch.tensor([-1e9, -3.0, 0.0, 2.0, 1e9], dtype=F64)
    rank = rank_of_cost(cost)
    assert bool((rank.diff() > 0).all()) and bool((rank > 0).all()) and bool((rank < 1).all())


def yoshikawa(robot: ik_layer.Robot, q: torch.Tensor) -> torch.Tensor:
    return torch.linalg.svdvals(robot.fk_jacobian(q)[1]).prod(-1)


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_terms_move_the_answers_their_way(reference: bool) -> None:
    """On the same targets and seeds, centring brings the answers nearer the middle of the limits and
    manipulability raises Yoshikawa's measure, every answer still verified within tolerance in float64.

    The terms act until a seed's first success and choose among successes (measured: 0.69-0.80 of the plain
    offset, 1.08-1.14 of the plain measure over three target sets, engine and reference alike)."""
    robot = ik_layer.load_robot("panda", dtype=F64)
    n = 96
    target = robot.fk(robot.random_q((n,), generator=gen(6)))
    middle = (robot.lower + robot.upper) / 2

    def solve(**option) -> ik_layer.IKResult:
        result = ik_layer.solve(robot, target, generator=gen(7), reference=reference, **option)
        assert bool(result.success.all())
        error = pose_error(target, robot.fk(result.q))
        assert float(error[:, :3].norm(dim=-1).max()) <= 1e-4 and float(error[:, 3:].norm(dim=-1).max()) <= 1e-3
        return result

    plain, centred, manipulable = solve(), solve(centring=1.0), solve(manipulability=0.5)
    offset = lambda q: (q - middle).square().sum(-1).mean()  # noqa: E731
    assert float(offset(centred.q)) < 0.85 * float(offset(plain.q))
    assert float(yoshikawa(robot, manipulable.q).mean()) > 1.05 * float(yoshikawa(robot, plain.q).mean())


def test_manipulability_is_refused_where_it_does_not_apply(erd_urdf) -> None:
    planar = ik_layer.load_robot("planar3")
    with pytest.raises(IKLayerError, match="manipulability applies to serial arms"):
        ik_layer.solve(planar, planar.fk(planar.neutral_q()), manipulability=0.1)
    solo = ik_layer.load_robot(erd_urdf("solo_description/robots/solo12.urdf"), ee_frames=["FL_FOOT", "HR_FOOT"])
    with pytest.raises(IKLayerError, match="manipulability"):
        ik_layer.solve(solo, solo.fk(solo.neutral_q()), manipulability=0.1)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(IKLayerError, match="centring"):
            SolveOptions(centring=bad)


# --------------------------------------------------------------------------- gradients at a constrained optimum


def perturbed(target: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
    """``target`` moved by ``xi = [v, w]``: translated by ``v`` and rotated by ``exp(w)`` (world axes)."""
    out = target.clone()
    out[:3, :3] = so3_exp(xi[3:]) @ target[:3, :3]
    out[:3, 3] = target[:3, 3] + xi[:3]
    return out


def optimality(robot, q, target, term, gain, goal) -> torch.Tensor:
    """``[pose error; P grad S]`` with ``grad S`` by autograd and ``P`` by the pseudo-inverse (independent of the
    library's closed forms and projector)."""
    error = pose_error(target, robot.kinematics(q, jacobian=False)[0])
    jac = robot.kinematics(q, jacobian=True)[1]
    grad = torch.autograd.grad(gain * cost_at(robot, term, q, goal), q, create_graph=True)[0]
    projector = torch.eye(robot.dof, dtype=q.dtype) - torch.linalg.pinv(jac) @ jac
    return torch.cat((error, projector @ grad))


def optimum(robot, q, target, term, gain, goal) -> torch.Tensor:
    """The configuration near ``q`` that reaches ``target`` at a minimum of the term on its solutions (Newton)."""
    for _ in range(50):
        x = q.detach().requires_grad_(True)
        residual = optimality(robot, x, target, term, gain, goal)
        if float(residual.detach().abs().max()) < 1e-13:
            return q
        rows = [torch.autograd.grad(r, x, retain_graph=True)[0] for r in residual]
        q = q - torch.linalg.lstsq(torch.stack(rows), residual.detach()[:, None]).solution[:, 0]
    raise AssertionError(f"no optimum: residual {float(residual.detach().abs().max())}")


def optimum_derivative(robot, q_star, target, term, gain, goal, h=1e-6) -> torch.Tensor:
    """(dof, 6) the derivative of the optimum at ``q_star`` w.r.t. the target's twist: central differences of the
    optima re-found at the moved targets."""
    numeric = torch.zeros(robot.dof, 6, dtype=q_star.dtype)
    for k in range(6):
        step = torch.zeros(6, dtype=q_star.dtype)
        step[k] = h
        ends = [optimum(robot, q_star, perturbed(target, s), term, gain, goal) for s in (step, -step)]
        numeric[:, k] = (ends[0] - ends[1]) / (2 * h)
    return numeric


@pytest.mark.parametrize("term", [CENTRING, MANIPULABILITY, POSTURE], ids=lambda t: t.name)
def test_layer_gradient_follows_the_optimum(term: SecondaryTerm) -> None:
    """The solve polishes its answer towards a constrained optimum of the term, and ``ik()``'s gradient w.r.t. the
    target is the derivative of that optimum (central differences of re-found optima), not the minimum-norm motion,
    which differs: at an exact optimum given as the warm start, and (as close as the polish came) at the solver's
    own answer."""
    robot = ik_layer.load_robot("panda", dtype=F64)
    gain = 0.5
    middle = (robot.lower + robot.upper) / 2
    q0 = middle + 0.5 * (robot.random_q((1,), generator=gen(8))[0] - middle)
    goal = middle + 0.5 * (robot.random_q((1,), generator=gen(9))[0] - middle) if term is POSTURE else None
    target = robot.fk(q0)
    arguments = {"posture": goal} if term is POSTURE else {term.name: gain}

    xi = torch.zeros(6, dtype=F64, requires_grad=True)
    answer = ik_layer.ik_solve(robot, perturbed(target, xi), warm_start=q0, **arguments)
    assert bool(answer.success) and int(answer.iterations) > 0  # it polished
    q_star = optimum(robot, answer.q.detach(), target, term, gain, goal)
    assert float((answer.q.detach() - q_star).abs().max()) < 2e-3  # the answer is (near) the optimum
    assert bool(((q_star > robot.lower) & (q_star < robot.upper)).all())

    numeric = optimum_derivative(robot, q_star, target, term, gain, goal)

    def error(q: torch.Tensor) -> float:
        analytic = torch.stack([torch.autograd.grad(q[j], xi, retain_graph=True)[0] for j in range(robot.dof)])
        return float((analytic - numeric).abs().max())

    at_optimum = ik_layer.ik(robot, perturbed(target, xi), warm_start=q_star, **arguments)
    minimum_norm = float((ik_layer.target_gradient(robot, q_star) - numeric).abs().max())
    # measured: 5e-6, 1e-7 and 1.2e-6 at the optimum; 3e-5, 4e-5 and 1.9e-3 at the answers; the minimum-norm
    # gradient 0.1, 0.8 and 0.24 away (centring, manipulability, posture)
    assert error(at_optimum) < 1e-5
    assert error(answer.q) < 0.02 * minimum_norm and minimum_norm > 0.05
