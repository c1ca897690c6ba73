"""A secondary cost term with per-target data, added from outside the library (this file alone): registered, it
works in the engine (its warp function against its torch cost), the reference solver, the implicit layer's
gradients and over HTTP (the server's ``--terms``), and bad uses of it get clear errors.

The term, :class:`JointPull`, pulls each joint towards a value of its own per target, at a weight of its own per
target: ``s = 1/2 sum_j w_j (q_j - c_j)^2``, its data ``[c_1..c_J, w_1..w_J]``.
"""

# No `from __future__ import annotations`: warp reads the function's annotations as live types.
import functools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import torch
import warp as wp
from fastapi import FastAPI
from torch import Tensor

import ik_layer
from ik_layer import IKLayerError
from ik_layer.client import AsyncClient
from ik_layer.engine import Engine
from ik_layer.engine.launch import BlockLauncher
from ik_layer.engine.store import open_store
from ik_layer.model.chain import Layout
from ik_layer.model.kernel_types import kernel_types
from ik_layer.model.lie import matrix_to_pose, pose_error
from ik_layer.model.robot import Robot
from ik_layer.server import Settings
from ik_layer.terms import (
    CENTRING,
    SecondaryTerm,
    TermInput,
    data_vector,
    joint_gradient,
    joints_of,
    rank_of_cost,
    register_term,
    registered_terms,
    unregister_term,
)
from tests.conftest import serving
from tests.test_cost_terms import optimum, optimum_derivative, perturbed

F64 = torch.float64
SOLVED = 1


class JointPull(SecondaryTerm):
    """Half the weighted squared distance of the joints to values of their own, per target."""

    name = "joint_pull"

    def data_size(self, layout: Layout) -> int:
        return 2 * layout.joints

    def check_data(self, robot: Robot, data: Tensor) -> None:
        if bool((data[:, robot.lower.shape[0] :] < 0).any()):
            raise IKLayerError("terms: 'joint_pull' takes weights >= 0")

    def cost(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        values, weights = data.chunk(2, -1)
        return 0.5 * (weights * (joints_of(robot, q) - values).square()).sum(-1)

    def gradient(self, robot: Robot, q: Tensor, jac: Tensor, data: Tensor | None) -> Tensor:
        values, weights = data.chunk(2, -1)
        return joint_gradient(robot, weights * (joints_of(robot, q) - values))

    def warp_function(self, layout: Layout, dtype: torch.dtype) -> Any:
        return _joint_pull(layout, dtype, data_vector(self, layout, dtype))


@functools.cache
def _joint_pull(layout: Layout, dtype: torch.dtype, vecd: Any) -> Any:
    t = kernel_types(layout, dtype)
    f, vecq, vect, jac_t, Chain, joints, bq, bv = t.f, t.vecq, t.vect, t.jac_t, t.Chain, layout.joints, t.bq, t.bv

    @wp.func
    def joint_pull(q: vecq, jac: jac_t, data: vecd, chain: Chain):
        grad = vect()
        s = f(0.0)
        for a in range(joints):
            d = q[bq + a] - data[a]
            grad[bv + a] = data[joints + a] * d
            s = s + data[joints + a] * d * d
        return grad, f(0.5) * s

    return joint_pull


JOINT_PULL = JointPull()


def forget() -> None:
    """Remove the term, if registered."""
    if JOINT_PULL in registered_terms():
        unregister_term(JOINT_PULL.name)


@pytest.fixture
def added() -> Iterator[JointPull]:
    """The term registered for one test, removed after it."""
    register_term(JOINT_PULL)
    yield JOINT_PULL
    forget()


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def pull_data(robot: Robot, values: Tensor, weights: list[float]) -> Tensor:
    """(n, 2J) data: the joints of ``values`` (n, nq) and ``weights`` (J,) for every target."""
    w = torch.tensor(weights, dtype=robot.dtype).expand(values.shape[0], -1)
    return torch.cat((joints_of(robot, values), w), -1)


def weighted_distance(robot: Robot, q: Tensor, data: Tensor) -> Tensor:
    return JOINT_PULL.cost(robot, q, q.new_zeros(0), data)


def within_tolerance(robot: Robot, q: Tensor, target: Tensor) -> bool:
    error = pose_error(target, robot.fk(q))
    return float(error[..., :3].norm(dim=-1).max()) <= 1e-4 and float(error[..., 3:].norm(dim=-1).max()) <= 1e-3


def test_gradient_matches_finite_differences() -> None:
    robot = ik_layer.load_robot("panda", dtype=F64)
    q = robot.random_q((16,), generator=gen(1))
    data = pull_data(robot, robot.random_q((16,), generator=gen(2)), [1.0, 0.5, 2.0, 0.0, 1.0, 3.0, 0.2])
    jac = robot.fk_jacobian(q)[1]
    h = 1e-6
    numeric = torch.stack(
        [
            (JOINT_PULL.cost(robot, q + h * e, jac, data) - JOINT_PULL.cost(robot, q - h * e, jac, data)) / (2 * h)
            for e in torch.eye(robot.dof, dtype=F64)
        ],
        -1,
    )
    torch.testing.assert_close(JOINT_PULL.gradient(robot, q, jac, data), numeric, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("store", ["host", "tensor"])
def test_the_kernel_ranks_by_the_terms_torch_cost(added: JointPull, store: str) -> None:
    """A slot solved with the term ranks by ``rank_of_cost`` of its torch cost at its answer: the warp function
    reads the slot's own data and computes what the torch cost does."""
    robot = ik_layer.load_robot("panda", dtype=F64)
    n = 12
    target = robot.fk(robot.random_q((n,), generator=gen(3)))
    data = pull_data(robot, robot.random_q((n,), generator=gen(4)), [1.0, 0.0, 2.0, 0.5, 0.0, 1.0, 0.3])
    gain = 0.4
    slots = open_store(robot, n, store)
    options = ik_layer.SolveOptions(num_seeds=1)
    slots.admit(torch.arange(n), target, robot.random_q((n,), generator=gen(5)), options,
                terms={added.name: TermInput(gain, data)})  # fmt: skip
    assert slots.gains_of(ik_layer.Problem.prepare(robot, target, terms={added.name: (gain, data)}))[-1] == gain
    BlockLauncher(slots)(60)
    done = slots.status == SOLVED
    assert int(done.sum()) >= n // 2
    q = slots.best_q[done]
    expected = rank_of_cost(gain * added.cost(robot, q, robot.fk_jacobian(q)[1], data[done]))
    torch.testing.assert_close(slots.best_score[done], expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "reference"])
def test_the_term_pulls_the_answers_to_each_targets_values(added: JointPull, reference: bool) -> None:
    """Every target has its own values and weights; with the term the answers lie nearer them than without, each
    still within the tolerances (measured: 0.60 of the plain weighted distance on the engine, REF on the reference)."""
    robot = ik_layer.load_robot("panda", dtype=F64)
    n = 48
    target = robot.fk(robot.random_q((n,), generator=gen(6)))
    data = pull_data(robot, robot.random_q((n,), generator=gen(7)), [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    plain = ik_layer.solve(robot, target, generator=gen(8), reference=reference)
    pulled = ik_layer.solve(robot, target, generator=gen(8), reference=reference, terms={added.name: (0.5, data)})
    assert bool(plain.success.all()) and bool(pulled.success.all())
    assert within_tolerance(robot, pulled.q, target)
    ratio = float(weighted_distance(robot, pulled.q, data).mean() / weighted_distance(robot, plain.q, data).mean())
    assert ratio < 0.75, ratio


def test_layer_gradient_follows_the_optimum(added: JointPull) -> None:
    """``ik()``'s gradient with the term is the derivative of the constrained optimum of the term (central
    differences of re-found optima), as for the built-in terms (tests/test_cost_terms.py)."""
    robot = ik_layer.load_robot("panda", dtype=F64)
    middle = (robot.lower + robot.upper) / 2
    q0 = middle + 0.5 * (robot.random_q((1,), generator=gen(9))[0] - middle)
    values = middle + 0.5 * (robot.random_q((1,), generator=gen(10))[0] - middle)
    data = pull_data(robot, values[None], [1.0, 2.0, 0.5, 1.0, 1.0, 0.5, 1.0])[0]
    gain, target = 0.5, robot.fk(q0)
    terms = {added.name: (gain, data)}
    xi = torch.zeros(6, dtype=F64, requires_grad=True)
    answer = ik_layer.ik_solve(robot, perturbed(target, xi), warm_start=q0, terms=terms)
    assert bool(answer.success) and int(answer.iterations) > 0  # it polished
    q_star = optimum(robot, answer.q.detach(), target, added, gain, data)
    numeric = optimum_derivative(robot, q_star, target, added, gain, data)
    q = ik_layer.ik(robot, perturbed(target, xi), warm_start=q_star, terms=terms)
    analytic = torch.stack([torch.autograd.grad(q[j], xi, retain_graph=True)[0] for j in range(robot.dof)])
    minimum_norm = float((ik_layer.target_gradient(robot, q_star) - numeric).abs().max())
    # measured: 1.7e-5 of the largest derivative (the answer polished from q_star, a hair off it); the minimum-norm
    # gradient 0.05 and more away
    assert float((analytic - numeric).abs().max()) < 1e-4 * float(numeric.abs().max()) and minimum_norm > 0.05


def test_bad_uses_are_refused_naming_the_term(added: JointPull) -> None:
    robot = ik_layer.load_robot("panda", dtype=F64)
    target = robot.fk(robot.random_q((3,), generator=gen(11)))
    data = pull_data(robot, robot.random_q((3,), generator=gen(12)), [1.0] * 7)
    cases: list[tuple[Any, str]] = [
        ({"no_such_term": 1.0}, "unknown term 'no_such_term'"),
        ({"centring": 0.5}, "built-in term"),
        ({"joint_pull": 0.5}, "takes data of 14 reals per target"),
        ({"joint_pull": (0.5, data[:, :7])}, r"shape \(14,\) or \(..., 14\)"),
        ({"joint_pull": (0.5, data[:2])}, "does not broadcast"),
        ({"joint_pull": (-1.0, data)}, "gain must be a finite number >= 0"),
        ({"joint_pull": (0.5, data.clone().fill_(float("nan")))}, "must be finite"),
        ({"joint_pull": (0.5, -data.abs() - 1)}, "weights >= 0"),
        ({"joint_pull": (0.5, data, 1)}, "a gain or \\(gain, data\\)"),
        ([("joint_pull", 0.5)], "terms must map"),
    ]
    for terms, message in cases:
        with pytest.raises(IKLayerError, match=message):
            ik_layer.solve(robot, target, terms=terms)
    early = Engine(ik_layer.load_robot("panda", dtype=F64), capacity=8)  # built with the term: it may use it
    assert early.slots.terms == registered_terms()
    for bad in (CENTRING, "not a term"):
        with pytest.raises(IKLayerError):
            register_term(bad)  # type: ignore[arg-type]
    with pytest.raises(IKLayerError, match="built-in"):
        unregister_term("posture")


def test_a_trajectory_refuses_added_terms(added: JointPull) -> None:
    """A trajectory frame's answer is the one nearest its pull point: no secondary term, added ones included."""
    robot = ik_layer.load_robot("panda", dtype=F64)
    q = robot.random_q((5,), generator=gen(19))
    terms = {added.name: (0.5, pull_data(robot, q, [1.0] * 7))}
    with pytest.raises(IKLayerError, match="added terms"):
        ik_layer.solve_trajectory(robot, robot.fk(q), dt=0.01, terms=terms)


def test_an_engine_built_before_the_term_refuses_it() -> None:
    robot = ik_layer.load_robot("panda", dtype=F64)
    engine = Engine(robot, capacity=8)
    target = robot.fk(robot.random_q((2,), generator=gen(13)))
    register_term(JOINT_PULL)
    try:
        data = pull_data(robot, robot.random_q((2,), generator=gen(14)), [1.0] * 7)
        with pytest.raises(IKLayerError, match="registered after this engine was built"):
            ik_layer.solve(robot, target, engine=engine, terms={"joint_pull": (0.5, data)})
        assert bool(ik_layer.solve(robot, target, terms={"joint_pull": (0.5, data)}).success.all())  # a new engine
    finally:
        unregister_term(JOINT_PULL.name)


# --------------------------------------------------------------------------- over HTTP


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def api() -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """panda served with the term added by the server's --terms (registered at start-up, removed after)."""
    async with serving(Settings(robots=["panda"], terms=[f"{__name__}:JOINT_PULL"], max_targets=64)) as pair:
        yield pair
    forget()


@pytest.mark.anyio
async def test_http_requests_name_the_term(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    """GET /v1/robots lists the term and its data size; an IK request's ``terms`` pull its answers as the library's
    do, with data for every target or one row per target; bad terms are 422s naming them."""
    app, client = api
    [info] = (await client.get("/v1/robots")).json()["robots"]
    assert info["terms"] == {"joint_pull": 14}
    robot = app.state.ik.robots["panda"].robot
    n = 16
    q_true = robot.random_q((n,), generator=gen(15))
    target, start = robot.fk(q_true), robot.wrap(q_true + 0.05)  # starts near: the first seed solves, as the library's
    data = pull_data(robot, robot.random_q((n,), generator=gen(16)), [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    body = {"targets": matrix_to_pose(target).tolist(), "warm_start": start.tolist()}

    async def solve(extra: dict[str, Any]) -> Tensor:
        response = await client.post("/v1/robots/panda/ik", json={**body, **extra})
        assert response.status_code == 200, response.text
        solutions = response.json()["solutions"]
        assert all(s["success"] for s in solutions)
        return torch.tensor([s["q"] for s in solutions], dtype=F64)

    def distance(q: Tensor, rows: Tensor = data) -> float:
        return float(weighted_distance(robot, q, rows).mean())

    plain = await solve({})
    pulled = await solve({"terms": {"joint_pull": {"gain": 0.5, "data": data.tolist()}}})
    assert within_tolerance(robot, pulled, target)
    poses = torch.tensor(body["targets"], dtype=F64)  # as sent
    library = ik_layer.solve(robot, poses, warm_start=start, terms={"joint_pull": (0.5, data)})
    assert distance(pulled) < distance(plain)  # (measured: 0.87 of it from starts this near)
    # the library's answers, to the polish's precision (measured: 5e-7 apart on a few rows, whose seeds differ)
    torch.testing.assert_close(pulled, library.q, rtol=0, atol=1e-5)
    shared = await solve({"terms": {"joint_pull": {"gain": 0.5, "data": data[0].tolist()}}})
    assert distance(shared, data[:1]) < distance(plain, data[:1])

    bad = {
        "unknown term 'elbow_up'": {"elbow_up": {"gain": 1.0}},
        "takes data of 14 reals": {"joint_pull": {"gain": 1.0}},
        "has 2 rows but there are 16 targets": {"joint_pull": {"gain": 1.0, "data": data[:2].tolist()}},
        "shape (14,)": {"joint_pull": {"gain": 1.0, "data": [1.0, 2.0]}},
        "weights >= 0": {"joint_pull": {"gain": 1.0, "data": (-data.abs() - 1).tolist()}},
        "greater than or equal to 0": {"joint_pull": {"gain": -1.0, "data": data.tolist()}},
    }
    for message, terms in bad.items():
        response = await client.post("/v1/robots/panda/ik", json={**body, "terms": terms})
        assert response.status_code == 422 and message in response.text, (message, response.text)
    assert (await client.get("/health")).status_code == 200


@pytest.mark.anyio
async def test_the_client_sends_the_term_in_chunks(api: tuple[FastAPI, httpx.AsyncClient]) -> None:
    app, _ = api
    robot = app.state.ik.robots["panda"].robot
    q_true = robot.random_q((2, 5), generator=gen(17))
    target, start = robot.fk(q_true), robot.wrap(q_true + 0.05)
    data = pull_data(robot, robot.random_q((10,), generator=gen(18)), [1.0] * 7).reshape(2, 5, 14)
    async with AsyncClient("http://ik.test", transport=httpx.ASGITransport(app=app), max_targets=4) as remote:
        assert (await remote.robots())["panda"].terms == {"joint_pull": 14}
        result = await remote.solve("panda", target, warm_start=start, terms={"joint_pull": (0.5, data)})  # 3 requests
        with pytest.raises(ik_layer.ShapeError, match="'joint_pull''s data must have shape"):
            await remote.solve("panda", target, terms={"joint_pull": (0.5, data[0])})
    local = ik_layer.solve(robot, target, warm_start=start, terms={"joint_pull": (0.5, data)})
    assert result.q.shape == (2, 5, 7) and bool(result.success.all())
    torch.testing.assert_close(result.q, local.q, rtol=0, atol=1e-5)


def test_the_server_refuses_terms_it_cannot_import() -> None:
    from ik_layer.server.added_terms import register_terms

    for spec, message in {
        "joint_pull": "module:NAME",
        "no_such_module_here:TERM": "does not import",
        f"{__name__}:NOTHING": "does not import",
        "json:dumps": "not an ik_layer.terms.SecondaryTerm",
    }.items():
        with pytest.raises(IKLayerError, match=message):
            register_terms([spec])
    try:
        register_terms([f"{__name__}:JOINT_PULL", f"{__name__}:JOINT_PULL"])  # once, however often named
        assert registered_terms().count(JOINT_PULL) == 1
    finally:
        forget()
