"""The CUDA suite: the engine, the layer, the server and the CLI on a GPU, checked against references.

Run on a CUDA host with ``pytest -m cuda``; skipped (with the reason in the summary) where torch sees no CUDA
device. ``IK_LAYER_TEST_DEVICE=cpu pytest -m cuda`` runs the same tests on the CPU (CI does, so the suite itself
cannot rot between GPU runs). Every solve is re-verified in float64 on the CPU; a kernel iteration is held to the
eager reference step on the same device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

import ik_layer
from ik_layer import SolveOptions
from ik_layer.core.problem import Problem
from ik_layer.engine import CANCELLED, DEADLINE, RUNNING, SOLVED, BlockLauncher, Engine, TensorStore, open_store
from ik_layer.model.lie import matrix_to_pose, pose_error
from ik_layer.reference import _LMState, _Solve
from ik_layer.testing import random_configurations
from tests.conftest import erd_urdf_path, serving

DEVICE = torch.device(os.environ.get("IK_LAYER_TEST_DEVICE", "cuda"))
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        DEVICE.type == "cuda" and not torch.cuda.is_available(),
        reason="CUDA suite: torch sees no CUDA device (IK_LAYER_TEST_DEVICE=cpu runs it on the CPU)",
    ),
]

F64, F32 = torch.float64, torch.float32
SOLO = "solo_description/robots/solo12.urdf"
TALOS = "talos_data/robots/talos_reduced.urdf"
WHOLE_BODY = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "gripper_right_base_link"]
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
ROBOTS = [*ik_layer.builtin_robots(), "talos-hands", "solo-feet"]  # multi-frame; floating base


def robot_of(name: str, dtype: torch.dtype = F64, device: torch.device = DEVICE) -> ik_layer.Robot:
    """A built-in robot, talos' two hands (two frames) or solo's feet on a floating base, on ``device`` (one
    object per name, dtype and device)."""
    return _load(name, dtype, device)


@cache
def _load(name: str, dtype: torch.dtype, device: torch.device) -> ik_layer.Robot:
    if name == "talos-hands":
        robot = ik_layer.load_robot(erd_urdf_path(TALOS), ee_frames=WHOLE_BODY[2:], dtype=dtype)
    elif name == "solo-feet":
        robot = ik_layer.load_robot(erd_urdf_path(SOLO), ee_frames=FEET, floating_base=True, dtype=dtype)
    else:
        robot = ik_layer.load_robot(name, dtype=dtype)
    return robot.to(device)


def gen(seed: int) -> torch.Generator:
    return torch.Generator(device=DEVICE).manual_seed(seed)


def targets_of(robot: ik_layer.Robot, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Configurations (float64, on the CPU) and their targets in the robot's dtype and device."""
    cpu = robot_of(robot_name(robot), F64, torch.device("cpu"))
    q = random_configurations(cpu, n, torch.Generator().manual_seed(seed))
    return q, cpu.fk(q).to(robot.dtype).to(robot.device)


def robot_name(robot: ik_layer.Robot) -> str:
    return next(name for name in ROBOTS if robot_of(name, robot.dtype) is robot)


def verified(robot: ik_layer.Robot, result: ik_layer.IKResult, target: torch.Tensor, options: SolveOptions) -> None:
    """Every reported success meets the tolerances in float64 FK on the CPU."""
    cpu = robot_of(robot_name(robot), F64, torch.device("cpu"))
    q = result.q.detach().cpu().double()
    e = pose_error(target.cpu().double(), cpu.fk(q)).reshape(q.shape[0], -1, 6)
    ok = (e[..., :3].norm(dim=-1).amax(-1) <= options.position_tolerance * 1.01) & (
        e[..., 3:].norm(dim=-1).amax(-1) <= options.orientation_tolerance * 1.01
    )
    success = result.success.cpu()
    assert bool((ok | ~success).all()), f"{int((success & ~ok).sum())} false successes"


# --------------------------------------------------------------------------- the kernel against the eager step


@pytest.mark.parametrize("name", ROBOTS)
def test_one_kernel_iteration_equals_the_eager_step(name: str) -> None:
    robot = robot_of(name)
    n = 128
    q0 = random_configurations(robot, n, gen(1))
    target = robot.fk(random_configurations(robot, n, gen(2)))
    options = SolveOptions(check_every=1000, restart_after=10_000)
    rows = torch.arange(n, device=DEVICE)
    weights = torch.ones(n, *robot.target_shape[:-2], 6, dtype=F64, device=DEVICE)
    problem = _Solve(robot, target, weights, options, None, None)
    start = _LMState.start(problem, rows, q0[:, None])
    ref = start.step(problem, rows)
    slots = open_store(robot, n)
    assert isinstance(slots, TensorStore) or DEVICE.type == "cpu"
    slots.admit(rows, target, q0, options)
    BlockLauncher(slots)(1)
    assert (slots.iterations == 1).all() and (slots.status == RUNNING).all()
    torch.testing.assert_close(slots.q, ref.q[:, 0], rtol=0, atol=1e-10)
    torch.testing.assert_close(slots.mu, ref.mu[:, 0], rtol=1e-12, atol=0)
    torch.testing.assert_close(slots.check_cost, start.cost[:, 0], rtol=1e-9, atol=0)


# --------------------------------------------------------------------------- solves


@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
@pytest.mark.parametrize("name", ["panda", "ur5e", "iiwa14"])
def test_solve_succeeds_and_every_success_holds_in_float64(name: str, dtype: torch.dtype) -> None:
    robot = robot_of(name, dtype)
    _, target = targets_of(robot, 2000, seed=3)
    result = ik_layer.solve(robot, target, generator=gen(4))
    assert result.q.device.type == DEVICE.type and result.success.device.type == DEVICE.type
    assert float(result.success.float().mean()) >= 0.995
    verified(robot, result, target, SolveOptions())


def test_several_frames_and_a_floating_base_solve() -> None:
    robot = robot_of("solo-feet")
    _, target = targets_of(robot, 200, seed=5)
    result = ik_layer.solve(robot, target, generator=gen(6))
    assert float(result.success.float().mean()) >= 0.99
    verified(robot, result, target, SolveOptions())


def test_restarts_in_scattered_slots_and_given_up_targets() -> None:
    """The first GPU run's crash: extra seeds in slots that are not consecutive (batch >= 100)."""
    robot = robot_of("ur5e", F32)
    _, target = targets_of(robot, 400, seed=7)
    target = target.clone()
    target[1::5, :3, 3] *= 1.15  # at the edge: stalls, more seeds
    target[::7, :3, 3] += 5.0  # out of reach: given up early
    options = SolveOptions(num_seeds=6)
    result = ik_layer.solve(robot, target, options, generator=gen(8))
    assert not bool(result.success[::7].any()) and float(result.success.float().mean()) > 0.6
    verified(robot, result, target, options)


def test_answers_do_not_depend_on_admission_order_or_pool_size() -> None:
    robot = robot_of("panda", F64)
    _, target = targets_of(robot, 60, seed=9)
    options = SolveOptions(num_seeds=2)
    answers = []
    for capacity, block in ((16, 4), (200, 8)):
        engine = Engine(robot, capacity=capacity, block=block)
        request = engine.submit(Problem.prepare(robot, target, options), seed=5)
        engine.run(request)
        answers.append(request.result())
    for field in ("q", "success", "iterations"):
        assert torch.equal(getattr(answers[0], field), getattr(answers[1], field)), field


def test_warm_start_at_the_answer_and_posture() -> None:
    robot = robot_of("panda", F64)
    q, target = targets_of(robot, 50, seed=10)
    result = ik_layer.solve(robot, target, warm_start=q.to(DEVICE))
    assert bool((result.iterations == 0).all())
    torch.testing.assert_close(result.q.cpu(), robot_of("panda", F64, torch.device("cpu")).wrap(q))
    posture = robot.neutral_q().expand(50, -1)
    pulled = ik_layer.solve(robot, target, posture=posture, generator=gen(11))
    free = ik_layer.solve(robot, target, generator=gen(11))
    near = (pulled.q - posture).norm(dim=-1)[pulled.success].mean()
    assert float(near) < float((free.q - posture).norm(dim=-1)[free.success].mean())


def test_deadline_and_cancel() -> None:
    robot = robot_of("ur5e", F32)
    _, target = targets_of(robot, 512, seed=12)
    hopeless = target.clone()
    hopeless[:, :3, 3] *= 1.3  # mostly unsolvable: in 8 slots, their whole budgets take seconds, not 0.3 s
    engine = Engine(robot, capacity=8, block=2)
    options = SolveOptions(max_iterations=10_000, num_seeds=1)
    late = engine.submit(Problem.prepare(robot, hopeless, options), deadline=time.monotonic() + 0.3, give_up=False)
    cancelled = engine.submit(Problem.prepare(robot, hopeless, options), give_up=False)
    for _ in range(3):
        engine.step()
    engine.cancel(cancelled)
    started = time.monotonic()
    engine.run()
    assert time.monotonic() - started < 30
    assert DEADLINE in late.status.tolist() and RUNNING not in late.status.tolist()
    assert set(cancelled.status.tolist()) <= {SOLVED, CANCELLED} and CANCELLED in cancelled.status.tolist()
    assert bool(torch.isfinite(late.result().q).all())


# --------------------------------------------------------------------------- gradients


def test_ik_gradients_equal_the_cpu_s_at_the_same_configurations() -> None:
    robot, cpu = robot_of("panda", F64), robot_of("panda", F64, torch.device("cpu"))
    q, target = targets_of(robot, 8, seed=13)
    weights = torch.linspace(0.5, 1.5, robot.nq, dtype=F64)
    grads = []
    for r, device in ((robot, DEVICE), (cpu, torch.device("cpu"))):
        t = target.to(device).clone().requires_grad_(True)
        solution = ik_layer.ik(r, t, warm_start=q.to(device))  # at the answer already: the same q on both
        (solution * weights.to(device)).sum().backward()
        grads.append(t.grad.cpu())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(
        ik_layer.target_gradient(robot, q.to(DEVICE)).cpu(), ik_layer.target_gradient(cpu, q), rtol=1e-9, atol=1e-12
    )


def test_fk_and_jacobian_equal_the_cpu_s() -> None:
    for name in ("panda", "solo-feet"):
        robot, cpu = robot_of(name), robot_of(name, F64, torch.device("cpu"))
        q = random_configurations(cpu, 100, torch.Generator().manual_seed(14))
        pose, jac = robot.fk_jacobian(q.to(DEVICE))
        ref_pose, ref_jac = cpu.fk_jacobian(q)
        torch.testing.assert_close(pose.cpu(), ref_pose, rtol=0, atol=1e-12)
        torch.testing.assert_close(jac.cpu(), ref_jac, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- bad input stays an IKLayerError


@pytest.mark.parametrize(
    ("make", "names"),
    [
        pytest.param(lambda r: torch.full((2, 4, 4), torch.nan, dtype=F64, device=DEVICE), ["target"], id="nan"),
        pytest.param(lambda r: torch.zeros(2, 7, dtype=F64, device=DEVICE), ["target"], id="zero-quaternion"),
        pytest.param(lambda r: torch.zeros(2, 5, dtype=F64, device=DEVICE), ["target"], id="shape"),
        pytest.param(lambda r: torch.zeros(2, 7, dtype=torch.int64, device=DEVICE), ["target"], id="dtype"),
    ],
)
def test_bad_targets_are_refused(make, names) -> None:
    robot = robot_of("panda")
    with pytest.raises(ik_layer.IKLayerError) as info:
        ik_layer.solve(robot, make(robot))
    assert all(name in str(info.value) for name in names)


def test_bad_warm_start_and_engine_are_refused() -> None:
    robot = robot_of("panda")
    _, target = targets_of(robot, 2, seed=15)
    with pytest.raises(ik_layer.IKLayerError, match="warm_start"):
        ik_layer.solve(robot, target, warm_start=torch.full((2, robot.nq), torch.inf, dtype=F64, device=DEVICE))
    if DEVICE.type == "cuda":
        with pytest.raises(ik_layer.IKLayerError, match="store 'host' needs a robot on the CPU"):
            Engine(robot, capacity=2, store="host")


# --------------------------------------------------------------------------- service and CLI


@contextlib.asynccontextmanager
async def ur5e_service() -> AsyncIterator[httpx.AsyncClient]:
    """A client of the service serving ur5e on the device under test."""
    from ik_layer.server import Settings

    async with serving(Settings(robots=["ur5e"], device=DEVICE.type)) as (app, client):
        assert app.state.ik.robots["ur5e"].robot.device.type == DEVICE.type
        yield client


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_server_answers_ik_fk_and_gradients(anyio_backend: str) -> None:
    robot = robot_of("ur5e", F64, torch.device("cpu"))
    q = random_configurations(robot, 16, torch.Generator().manual_seed(16))
    poses = matrix_to_pose(robot.fk(q))
    targets = [{"position": p[:3].tolist(), "orientation": p[3:].tolist()} for p in poses]
    async with ur5e_service() as client:
        ik = await client.post("/v1/robots/ur5e/ik", json={"targets": targets, "return_gradient": True})
        fk = await client.post("/v1/robots/ur5e/fk", json={"q": q.tolist()})
        bad = await client.post("/v1/robots/ur5e/ik", json={"targets": [{"position": [0, 0], "orientation": []}]})
    assert ik.status_code == 200 and fk.status_code == 200 and bad.status_code == 422
    solutions = ik.json()["solutions"]
    found = torch.tensor([s["q"] for s in solutions], dtype=F64)
    assert all(s["success"] for s in solutions)
    e = pose_error(robot.fk(q), robot.fk(found))
    assert float(e[:, :3].norm(dim=-1).max()) <= 1e-4 and float(e[:, 3:].norm(dim=-1).max()) <= 1e-3
    gradient = torch.tensor([s["gradient"] for s in solutions], dtype=F64)
    torch.testing.assert_close(gradient, ik_layer.target_gradient(robot, found), rtol=1e-6, atol=1e-9)
    answered = torch.tensor([[*p["position"], *p["orientation"]] for p in fk.json()["poses"]], dtype=F64)
    torch.testing.assert_close(answered, matrix_to_pose(robot.fk(q)), rtol=0, atol=1e-9)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_server_answers_sets_of_solutions_and_goal_sets(anyio_backend: str) -> None:
    """num_solutions and objective (a search's rounds on the device's engine) and goals (each row's best goal)."""
    robot = robot_of("ur5e", F64, torch.device("cpu"))
    q = random_configurations(robot, 4, torch.Generator().manual_seed(18))
    poses = matrix_to_pose(robot.fk(q)).tolist()
    away = [5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    async with ur5e_service() as client:
        sets = await client.post("/v1/robots/ur5e/ik", json={"targets": poses[:2], "num_solutions": 4})
        body = {"targets": poses[:2], "warm_start": q[:2].tolist(), "objective": "closest"}
        closest = await client.post("/v1/robots/ur5e/ik", json=body)
        body = {"goals": [[away, poses[2]], [poses[3]]], "objective": "manipulability", "return_gradient": True}
        goals = await client.post("/v1/robots/ur5e/ik", json=body)
    assert sets.status_code == closest.status_code == goals.status_code == 200, (sets.text, goals.text)
    for answers, target in zip(sets.json()["solutions"], robot.fk(q[:2]), strict=True):
        found = torch.tensor([a["q"] for a in answers if a["success"]], dtype=F64)
        assert len(found) >= 3
        e = pose_error(target.expand(len(found), 4, 4), robot.fk(found))
        assert float(e[:, :3].norm(dim=-1).max()) <= 1e-4
    near = torch.tensor([a["q"] for a in closest.json()["solutions"]], dtype=F64)
    assert float((torch.remainder(near - q[:2] + torch.pi, 2 * torch.pi) - torch.pi).abs().max()) < 1e-6
    answered = goals.json()["solutions"]
    assert [a["goal"] for a in answered] == [1, 0] and all(a["success"] for a in answered)
    found = torch.tensor([a["q"] for a in answered], dtype=F64)
    torch.testing.assert_close(
        torch.tensor([a["gradient"] for a in answered], dtype=F64), ik_layer.target_gradient(robot, found)
    )


def test_the_cli_solves_on_the_device(tmp_path: Path) -> None:
    from ik_layer.cli.main import main

    robot = robot_of("ur5e", F64, torch.device("cpu"))
    q = random_configurations(robot, 6, torch.Generator().manual_seed(17))
    poses = tmp_path / "poses.npz"
    np.savez(poses, target=matrix_to_pose(robot.fk(q)).numpy())
    out = tmp_path / "q.npz"
    assert main(["solve", "ur5e", str(poses), "-o", str(out), "--device", DEVICE.type, "--random-seed", "0"]) == 0
    with np.load(out) as answer:
        found, success = torch.from_numpy(answer["q"]), answer["success"]
    assert success.all()
    e = pose_error(robot.fk(q), robot.fk(found))
    assert float(e[:, :3].norm(dim=-1).max()) <= 1e-4 and float(e[:, 3:].norm(dim=-1).max()) <= 1e-3


def test_the_tensor_store_stages_through_page_locked_memory() -> None:
    store = open_store(robot_of("ur5e"), 4, "tensor")
    assert store._staging.is_pinned() == (DEVICE.type == "cuda")
    start = dataclasses.replace(SolveOptions(), max_iterations=0)
    target = targets_of(robot_of("ur5e"), 4, seed=18)[1]
    store.admit([0, 2, 1, 3], target, None, start, seed=1)
    BlockLauncher(store)(1)
    readout = store.read(4)
    assert readout.status.tolist() == store.status.tolist() and store._staged == 0
