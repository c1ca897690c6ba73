"""``ik_layer.client`` against a real ``python -m ik_layer.server`` (uvicorn); its retries on a mock transport."""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, IKResult, NonFiniteError, RobotNotFound, ShapeError
from ik_layer.client import (
    AsyncClient,
    Client,
    InvalidRequest,
    RemoteIKResult,
    RemoteRobotNotFound,
    RequestTooLarge,
    RetryPolicy,
    ServiceError,
    ServiceUnavailable,
)
from ik_layer.model.lie import matrix_to_pose, pose_error
from ik_layer.testing import ServerProcess, random_bases

ROOT = Path(__file__).resolve().parents[1]
MAX_TARGETS = 8
MAX_WORK = 500_000  # row-iterations: one row of 64 seeds x 10000 iterations is over it
FLAGS = [
    "--robots", "planar3,ur5e",
    "--max-targets", str(MAX_TARGETS),
    "--max-queued-work", str(MAX_WORK),
    "--queue-limit", "1",  # one request at a time per robot: a second one in flight gets 503
    "--num-seeds", "4",
    "--max-iterations", "200",
    "--log-level", "warning",
]  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    running = ServerProcess.start(FLAGS, ready_within=90, cwd=ROOT)
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, timeout=60) as c:
        yield c


def reachable_q(robot: ik_layer.Robot, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return robot.random_q(shape, generator=torch.Generator().manual_seed(seed))


def test_robots_describe_the_library_models(client: Client) -> None:
    robots = client.robots()
    assert list(robots) == ["planar3", "ur5e"]
    for name, info in robots.items():
        robot = ik_layer.load_robot(name)
        assert (info.name, info.dof, info.ee_frame) == (name, robot.dof, robot.ee_frame)
        assert info.joint_names == tuple(robot.joint_names)
        assert np.array_equal(info.lower, robot.lower.numpy()) and np.array_equal(info.upper, robot.upper.numpy())
    assert client.health() == {"status": "ok", "device": "cpu", "dtype": "float64", "robots": ["planar3", "ur5e"]}


def test_fk_equals_the_library_for_a_batch_over_the_limit(server: ServerProcess) -> None:
    robot = ik_layer.load_robot("ur5e")
    q = reachable_q(robot, (3, 5), seed=0)  # 15 rows > 8: two requests, the limit read from the first 413
    with Client(server.url) as client:
        assert client.max_targets is None
        poses = client.fk("ur5e", q, pose=True)
        assert client.max_targets == MAX_TARGETS
        transforms = client.fk("ur5e", q.numpy().tolist())
    assert poses.shape == (3, 5, 7) and poses.dtype == torch.float64
    assert torch.equal(poses, matrix_to_pose(robot.fk(q)))  # JSON carries float64 exactly
    assert isinstance(transforms, np.ndarray)  # nested lists in, numpy arrays out; tensors in, tensors out
    np.testing.assert_allclose(transforms, robot.fk(q).numpy(), rtol=0, atol=1e-12)


def test_solve_reaches_the_targets_and_warm_start_returns_the_library_answer(client: Client) -> None:
    robot = ik_layer.load_robot("ur5e")
    targets = robot.fk(reachable_q(robot, (2, 6), seed=1))  # (2, 6, 4, 4): 12 targets, two requests
    result = client.solve("ur5e", targets, num_seeds=8, max_iterations=300)
    assert isinstance(result, RemoteIKResult) and isinstance(result.q, torch.Tensor)
    assert result.q.shape == (2, 6, 6) and result.success.shape == (2, 6) and result.status.shape == (2, 6)
    assert bool(result.success.all()), result.status
    assert (result.status == "solved").all() and result.gradient is None
    error = pose_error(targets, robot.fk(result.q)).abs()
    assert float(error[..., :3].max()) < 1e-4 and float(error[..., 3:].max()) < 1e-3
    torch.testing.assert_close(result.position_error, pose_error(targets, robot.fk(result.q))[..., :3].norm(dim=-1))

    again = client.solve("ur5e", matrix_to_pose(targets), warm_start=result.q)  # already solved: kept as is
    local = ik_layer.solve(robot, targets, warm_start=result.q)
    assert torch.equal(again.q, result.q) and torch.equal(again.q, local.q)
    assert torch.equal(again.iterations, torch.zeros(2, 6, dtype=torch.int64))
    assert torch.equal(again.position_error, local.position_error)


def test_solve_single_target_numpy_and_gradient(client: Client) -> None:
    robot = ik_layer.load_robot("planar3")
    q0 = torch.tensor([0.3, -0.4, 0.5], dtype=torch.float64)
    target = matrix_to_pose(robot.fk(q0))  # (7,): one target, no batch dimensions
    result = client.solve("planar3", target.tolist(), warm_start=q0, gradient=True, numpy=True)
    assert isinstance(result.q, np.ndarray) and result.q.shape == (3,) and result.success.dtype == np.bool_
    assert bool(result.success) and result.status.shape == () and str(result.status) == "solved"
    np.testing.assert_array_equal(result.q, q0.numpy())
    assert isinstance(result.gradient, np.ndarray) and result.gradient.shape == (3, 6)
    np.testing.assert_allclose(result.gradient, ik_layer.target_gradient(robot, q0).numpy(), rtol=1e-12, atol=1e-12)
    plain = result.result()
    assert type(plain) is IKResult and plain.q is result.q and plain.iterations is result.iterations


def test_solve_sets_of_solutions_in_the_targets_batch_shape(client: Client) -> None:
    robot = ik_layer.load_robot("ur5e")
    q = reachable_q(robot, (2, 5), seed=11)  # 10 targets: two requests of at most 8
    targets = robot.fk(q)
    result = client.solve("ur5e", targets, num_solutions=4, gradient=True)
    assert result.q.shape == (2, 5, 4, 6) and result.success.shape == (2, 5, 4) and result.status.shape == (2, 5, 4)
    assert result.gradient is not None and result.gradient.shape == (2, 5, 4, 6, 6)
    assert bool(result.success[..., 0].all()) and float(result.success.float().mean()) >= 0.9
    error = pose_error(targets[..., None, :, :].expand(2, 5, 4, 4, 4), robot.fk(result.q))
    assert float(error[result.success][:, :3].norm(dim=-1).max()) < 1e-4
    torch.testing.assert_close(result.gradient[0, 0, 0], ik_layer.target_gradient(robot, result.q[0, 0, 0]))
    plain = result.result()
    assert plain.q.shape == (2, 5, 4, 6) and plain.status is not None and plain.status.shape == (2, 5, 4)
    closest = client.solve("ur5e", targets, warm_start=q, objective="closest")
    assert closest.q.shape == (2, 5, 6) and bool(closest.success.all())
    with pytest.raises(IKLayerError, match="num_solutions"):
        client.solve("ur5e", targets, num_solutions=0)
    with pytest.raises(InvalidRequest, match="objective"):
        client.solve("ur5e", targets, objective="closest")  # without a warm start: refused by the server


def test_solve_goal_sets_in_chunks_of_whole_rows(client: Client) -> None:
    robot = ik_layer.load_robot("ur5e")
    targets = robot.fk(reachable_q(robot, (5, 3), seed=12))  # 5 rows of 3 goals: 15 poses, limit 8 per request
    targets[:, 0, 0, 3] += 5.0  # every row's first goal out of reach
    result = client.solve("ur5e", targets, goal_set=True, max_iterations=60)
    assert result.q.shape == (5, 6) and result.goal is not None and result.goal.shape == (5,)
    assert bool(result.success.all()) and result.goal.tolist() == [1] * 5
    reached = targets[torch.arange(5), result.goal]
    assert float(pose_error(reached, robot.fk(result.q))[:, :3].norm(dim=-1).max()) < 1e-4
    assert torch.equal(result.result().goal, result.goal)
    with pytest.raises(ShapeError, match="goal_set"):
        client.solve("ur5e", torch.zeros(0, 4, 4), goal_set=True)


def test_async_client_matches_the_sync_one(server: ServerProcess, client: Client) -> None:
    robot = ik_layer.load_robot("planar3")
    q = reachable_q(robot, (10,), seed=2)

    async def run() -> tuple[torch.Tensor, RemoteIKResult]:
        async with AsyncClient(server.url) as remote:
            poses = await remote.fk("planar3", q, pose=True)
            return poses, await remote.solve("planar3", poses, warm_start=q)

    poses, result = asyncio.run(run())
    assert torch.equal(poses, client.fk("planar3", q, pose=True))
    assert torch.equal(result.q, q) and bool(result.success.all())


def test_unknown_robot_is_robot_not_found(client: Client) -> None:
    with pytest.raises(RobotNotFound) as caught:
        client.solve("nao", torch.zeros(7).index_fill(0, torch.tensor([6]), 1.0))
    assert isinstance(caught.value, RemoteRobotNotFound)
    assert caught.value.name == "nao" and caught.value.available == ["planar3", "ur5e"] and caught.value.status == 404
    assert "planar3, ur5e" in str(caught.value)
    with pytest.raises(RobotNotFound, match="'nao'"):
        client.fk("nao", [[0.0, 0.0, 0.0]])


def test_refused_bodies_are_library_errors_with_the_server_message(client: Client) -> None:
    target = [0.5, 0.2, 0.0, 0.0, 0.0, 0.0, 1.0]
    with pytest.raises(InvalidRequest, match=r"422: body\.warm_start\.0: warm_start\[0\] has 2 values") as caught:
        client.solve("planar3", [target], warm_start=[[0.0, 0.0]])
    assert isinstance(caught.value, IKLayerError) and caught.value.status == 422
    assert caught.value.errors[0]["loc"] == ["body", "warm_start", 0]
    with pytest.raises(InvalidRequest, match="this server allows at most 10 s"):
        client.solve("planar3", [target], timeout=60)
    with pytest.raises(InvalidRequest, match=r"q\[0\] has 2 values"):
        client.fk("planar3", [[0.0, 0.0]])


def test_bad_input_is_refused_before_sending(client: Client) -> None:
    with pytest.raises(ShapeError, match="target"):
        client.solve("planar3", torch.zeros(3, 5))
    with pytest.raises(IKLayerError, match="unknown solver option"):
        client.solve("planar3", [0.5, 0.2, 0.0, 0.0, 0.0, 0.0, 1.0], num_seed=3)
    with pytest.raises(IKLayerError, match="num_seeds must be"):
        client.solve("planar3", [0.5, 0.2, 0.0, 0.0, 0.0, 0.0, 1.0], num_seeds=0)
    with pytest.raises(NonFiniteError, match="q holds NaN"):
        client.fk("planar3", [[0.0, float("nan"), 0.0]])
    with pytest.raises(ShapeError, match="warm_start"):
        client.solve("planar3", torch.zeros(4, 7).index_fill(1, torch.tensor([6]), 1.0), warm_start=torch.zeros(3, 3))


def test_empty_batches_need_no_solve(client: Client) -> None:
    result = client.solve("ur5e", torch.zeros(0, 3, 4, 4))
    assert result.q.shape == (0, 3, 6) and result.success.shape == (0, 3) and result.status.shape == (0, 3)
    assert client.fk("planar3", torch.zeros(2, 0, 3)).shape == (2, 0, 4, 4)


def test_too_much_work_halves_the_batch_and_a_single_row_over_it_raises(client: Client) -> None:
    robot = ik_layer.load_robot("planar3")
    q = reachable_q(robot, (MAX_TARGETS,), seed=3)
    heavy = {"num_seeds": 64, "max_iterations": 2000}  # 128k row-iterations a row: 8 and 4 rows are over the limit
    result = client.solve("planar3", robot.fk(q), warm_start=q, **heavy)
    assert torch.equal(result.q, q) and bool(result.success.all())
    assert client.max_targets is None  # the work limit depends on the options: nothing kept
    with pytest.raises(RequestTooLarge, match="at most 500,000") as caught:
        client.solve("planar3", robot.fk(q[:1]), num_seeds=64, max_iterations=10_000)
    assert caught.value.status == 413 and caught.value.limit is None and isinstance(caught.value, IKLayerError)


def test_a_wrong_max_targets_is_corrected_from_the_413(server: ServerProcess) -> None:
    robot = ik_layer.load_robot("planar3")
    q = reachable_q(robot, (20,), seed=4)
    with Client(server.url, max_targets=100) as client:
        assert torch.equal(client.fk("planar3", q, pose=True), matrix_to_pose(robot.fk(q)))
        assert client.max_targets == MAX_TARGETS


class CountingTransport(httpx.HTTPTransport):
    """A real transport that records the status of every answer."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.statuses.append(response.status_code)
        return response


def test_busy_server_503_is_retried_after_retry_after(server: ServerProcess) -> None:
    """The server takes one ur5e request at a time: while a slow one runs, others get 503 and Retry-After: 1."""
    robot = ik_layer.load_robot("ur5e")
    q = reachable_q(robot, (MAX_TARGETS,), seed=5)
    targets = robot.fk(q)
    never = {"position_tolerance": 1e-300, "orientation_tolerance": 1e-300, "max_iterations": 10_000}
    slow: list[RemoteIKResult] = []
    with Client(server.url) as busy:
        thread = threading.Thread(target=lambda: slow.append(busy.solve("ur5e", targets, timeout=3, **never)))
        thread.start()
        try:
            with Client(server.url, retry=RetryPolicy(retries=0)) as impatient:
                refused = _first_refusal(impatient, targets[0], within=2.0)  # once the slow request is in line
            assert refused.status == 503 and "requests in line" in str(refused)
            transport = CountingTransport()
            with Client(server.url, transport=transport, retry=RetryPolicy(retries=5, max_wait=10)) as patient:
                patient.robots()  # a client reads the robots' frames once, before its first solve
                transport.statuses.clear()
                started = time.monotonic()
                answer = patient.solve("ur5e", targets[0], warm_start=q[0])
                waited = time.monotonic() - started
        finally:
            thread.join(timeout=30)
    assert transport.statuses[0] == 503 and transport.statuses[-1] == 200 and set(transport.statuses) == {200, 503}
    assert waited >= 0.9 * (len(transport.statuses) - 1)  # Retry-After: 1 honoured before each retry
    assert torch.equal(answer.q, q[0]) and bool(answer.success)
    assert len(slow) == 1 and set(slow[0].status.tolist()) <= {"deadline", "exhausted"}


def _first_refusal(client: Client, target: torch.Tensor, within: float) -> ServiceUnavailable:
    """The first 503 a request of ``client`` (no retries) gets within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            client.solve("ur5e", target)
        except ServiceUnavailable as err:
            return err
        time.sleep(0.05)
    raise AssertionError(f"no 503 within {within} s")


# --- retry and error mapping on a mock transport: exact counts and waits ---------------------------------------


def scripted(*answers: httpx.Response) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering with ``answers`` in turn; the requests it saw."""
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    return httpx.MockTransport(handle), seen


HEALTH = {"status": "ok", "device": "cpu", "dtype": "float64", "robots": []}


def busy(retry_after: str | None) -> httpx.Response:
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    return httpx.Response(503, json={"detail": "queue full"}, headers=headers)


def test_503_retries_honour_retry_after_seconds_and_dates() -> None:
    soon = email.utils.formatdate(time.time() + 1, usegmt=True)  # an HTTP date about 1 s ahead (whole seconds)
    transport, seen = scripted(busy("0.2"), busy(soon), httpx.Response(200, json=HEALTH))
    with Client("http://ik.test", transport=transport) as client:
        started = time.monotonic()
        assert client.health() == HEALTH
        took = time.monotonic() - started
    assert len(seen) == 3 and 0.2 <= took < 3


def test_503_without_retry_after_backs_off_exponentially() -> None:
    transport, seen = scripted(busy(None), busy(None), httpx.Response(200, json=HEALTH))
    with Client("http://ik.test", transport=transport, retry=RetryPolicy(retries=2, backoff=0.05)) as client:
        started = time.monotonic()
        assert client.health() == HEALTH
        assert 0.05 + 0.1 <= time.monotonic() - started < 1
    assert len(seen) == 3


def test_503_retries_are_bounded_in_count_and_time() -> None:
    transport, seen = scripted(*[busy("0") for _ in range(4)])
    retry = RetryPolicy(retries=3)
    with (
        Client("http://ik.test", transport=transport, retry=retry) as client,
        pytest.raises(ServiceUnavailable, match=r"503 queue full \(gave up after 3 retries, 0 s\)"),
    ):
        client.health()
    assert len(seen) == 4
    transport, seen = scripted(busy("120"), httpx.Response(200, json=HEALTH))
    with Client("http://ik.test", transport=transport, retry=RetryPolicy(max_wait=30)) as client:
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable, match="queue full") as caught:
            client.health()
        assert time.monotonic() - started < 1  # a wait past the budget gives up at once
    assert len(seen) == 1 and caught.value.body == {"detail": "queue full"}


def test_async_client_retries_too() -> None:
    transport, seen = scripted(busy("0.1"), httpx.Response(200, json=HEALTH))

    async def run() -> dict[str, object]:
        async with AsyncClient("http://ik.test", transport=transport) as client:
            return await client.health()

    assert asyncio.run(run()) == HEALTH and len(seen) == 2


@pytest.mark.parametrize(
    ("answer", "kind", "message"),
    [
        (httpx.Response(415, json={"detail": "the body must be JSON"}), InvalidRequest, "415: the body must be JSON"),
        (httpx.Response(413, json={"detail": "request body of 9 bytes is over"}), RequestTooLarge, "9 bytes"),
        (httpx.Response(500, text="boom"), ServiceError, "500 boom"),
        (httpx.Response(404, json={"detail": "Not Found"}), InvalidRequest, "404: Not Found"),  # not a robot: a path
        (httpx.Response(200, text="<html>"), ServiceError, "not JSON"),
    ],
)
def test_answers_map_to_exception_classes(answer: httpx.Response, kind: type[Exception], message: str) -> None:
    transport, _ = scripted(answer)
    with Client("http://ik.test", transport=transport) as client, pytest.raises(kind, match=message):
        client.fk("planar3", [0.0, 0.0, 0.0])


def test_example_runs_against_its_own_server() -> None:
    example = ROOT / "examples" / "remote_client.py"
    done = subprocess.run([sys.executable, str(example)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"solved \d+/100 targets", done.stdout)  # at least 95 % of them: the exit status says so
    assert "same configurations True, iterations 0" in done.stdout
    assert "dq/d(target twist) of the first target: (6, 6)" in done.stdout
    assert "four concurrent requests" in done.stdout


# --- several end-effector frames and a floating base ------------------------------------------------------------

SOLO = "solo_description/robots/solo12.urdf"
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
TALOS = "talos_data/robots/talos_reduced.urdf"
HANDS = ["gripper_left_base_link", "gripper_right_base_link"]
TORSO = {"torso_1_joint": 0.2, "torso_2_joint": 0.1}
POSITION_ONLY = torch.tensor([1.0, 1, 1, 0, 0, 0], dtype=torch.float64)


@pytest.fixture(scope="module")
def multi_server(erd_urdf, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server of solo12's four feet on a floating base and talos's two hands, torso locked (``@robots.json``)."""
    specs = [
        {"source": str(erd_urdf(SOLO)), "ee_frames": FEET, "floating_base": True},
        {"source": str(erd_urdf(TALOS)), "name": "talos_hands", "ee_frames": HANDS, "locked": TORSO},
    ]
    path = tmp_path_factory.mktemp("robots") / "robots.json"
    path.write_text(json.dumps(specs))
    flags = ["--robots", f"@{path}", "--max-targets", str(MAX_TARGETS), "--log-level", "warning"]
    running = ServerProcess.start(flags, ready_within=120, cwd=ROOT)
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture(scope="module")
def solo(erd_urdf) -> ik_layer.Robot:
    return ik_layer.load_robot(erd_urdf(SOLO), ee_frames=FEET, floating_base=True)


@pytest.fixture(scope="module")
def hands(erd_urdf) -> ik_layer.Robot:
    return ik_layer.load_robot(erd_urdf(TALOS), ee_frames=HANDS, locked=TORSO)


def test_robots_describe_frames_and_the_floating_base(multi_server: ServerProcess, solo, hands) -> None:
    with Client(multi_server.url) as client:
        robots = client.robots()
    assert list(robots) == ["solo", "talos_hands"]
    info = robots["solo"]
    assert (info.nq, info.dof, info.floating_base, info.ee_frames) == (solo.nq, solo.dof, True, tuple(FEET))
    assert info.target_shape == solo.target_shape == (4, 4, 4) and info.joint_names == tuple(solo.joint_names)
    assert np.array_equal(info.lower, solo.lower.numpy()) and np.array_equal(info.upper, solo.upper.numpy())
    arms = robots["talos_hands"]
    assert (arms.nq, arms.dof, arms.floating_base, arms.ee_frames) == (14, 14, False, tuple(HANDS))
    assert arms.locked["torso_1_joint"] == pytest.approx(0.2) and arms.target_shape == hands.target_shape


def test_fk_of_several_frames_equals_the_library(multi_server: ServerProcess, solo) -> None:
    q = random_bases(
        solo.random_q((3, 4), generator=torch.Generator().manual_seed(10)), torch.Generator().manual_seed(11)
    )  # 12 rows > 8
    with Client(multi_server.url) as client:
        transforms = client.fk("solo", q)
        poses = client.fk("solo", q.tolist(), pose=True)
    assert transforms.shape == (3, 4, 4, 4, 4) and poses.shape == (3, 4, 4, 7)
    assert np.array_equal(poses, matrix_to_pose(solo.fk(q)).numpy())  # JSON carries float64 exactly
    torch.testing.assert_close(transforms, solo.fk(q), rtol=0, atol=1e-12)


def test_solve_both_hands_in_any_batch_shape_with_gradients(multi_server: ServerProcess, hands) -> None:
    q = hands.random_q((3, 4), generator=torch.Generator().manual_seed(12))
    targets = hands.fk(q)  # (3, 4, 2, 4, 4): 12 targets, two requests
    with Client(multi_server.url) as client:
        result = client.solve("talos_hands", targets, num_seeds=8, gradient=True)
    local = ik_layer.solve(hands, targets, num_seeds=8)
    assert result.q.shape == local.q.shape == (3, 4, 14) and result.success.shape == local.success.shape == (3, 4)
    assert result.status.shape == (3, 4) and bool(result.success.all()), result.status
    error = pose_error(targets, hands.fk(result.q))  # (3, 4, 2, 6)
    assert float(error[..., :3].norm(dim=-1).max()) <= 1e-4 and float(error[..., 3:].norm(dim=-1).max()) <= 1e-3
    torch.testing.assert_close(result.position_error, error[..., :3].norm(dim=-1).amax(-1), atol=1e-12, rtol=0)
    assert result.gradient is not None and result.gradient.shape == (3, 4, 14, 2, 6)
    torch.testing.assert_close(result.gradient, ik_layer.target_gradient(hands, result.q), rtol=1e-9, atol=1e-12)


def test_solve_position_only_feet_with_weights_and_warm_starts(multi_server: ServerProcess, solo) -> None:
    q = random_bases(
        solo.random_q((5,), generator=torch.Generator().manual_seed(13)), torch.Generator().manual_seed(14)
    )
    targets = matrix_to_pose(solo.fk(q))  # (5, 4, 7)
    targets[..., 3:] = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64)  # orientations ignored
    per_foot = POSITION_ONLY.expand(4, 6).clone()
    per_foot[0] = torch.tensor([2.0, 2, 2, 0, 0, 0])  # the front left foot counts twice
    with Client(multi_server.url) as client:
        result = client.solve("solo", targets, weights=POSITION_ONLY)
        weighted = client.solve("solo", targets, weights=per_foot.numpy(), gradient=True, numpy=True)
        again = client.solve("solo", targets, weights=POSITION_ONLY, warm_start=result.q)
    assert result.q.shape == (5, 19) and bool(result.success.all()), result.status
    assert bool((result.orientation_error == 0).all())
    reached = solo.fk(result.q)[..., :3, 3]
    assert float((reached - targets[..., :3]).norm(dim=-1).max()) <= 1e-4
    assert weighted.gradient.shape == (5, 18, 4, 6) and bool(weighted.success.all())
    want = ik_layer.target_gradient(solo, torch.from_numpy(weighted.q), per_foot)
    np.testing.assert_allclose(weighted.gradient, want.numpy(), rtol=1e-9, atol=1e-12)
    assert torch.equal(again.iterations, torch.zeros(5, dtype=torch.int64))
    torch.testing.assert_close(again.q, result.q, rtol=0, atol=1e-12)


def test_async_client_solves_several_frames(multi_server: ServerProcess, hands) -> None:
    q = hands.random_q((4,), generator=torch.Generator().manual_seed(15))

    async def run() -> tuple[torch.Tensor, RemoteIKResult]:
        async with AsyncClient(multi_server.url) as remote:
            poses = await remote.fk("talos_hands", q, pose=True)
            return poses, await remote.solve("talos_hands", poses, warm_start=q)

    poses, result = asyncio.run(run())
    assert poses.shape == (4, 2, 7) and torch.equal(poses, matrix_to_pose(hands.fk(q)))
    torch.testing.assert_close(result.q, q, rtol=0, atol=1e-12)
    assert bool(result.success.all()) and torch.equal(result.iterations, torch.zeros(4, dtype=torch.int64))


def test_frames_shapes_and_weights_are_checked(multi_server: ServerProcess, solo) -> None:
    q = solo.random_q((2,), generator=torch.Generator().manual_seed(16))
    targets = solo.fk(q)  # (2, 4, 4, 4)
    with Client(multi_server.url) as client:
        with pytest.raises(ShapeError, match=r"solo \(frames FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT\) must have shape"):
            client.solve("solo", targets[:, :3])
        with pytest.raises(ShapeError, match=r"\(\.\.\., 4, 4, 4\) or \(\.\.\., 4, 7\)"):
            client.solve("solo", targets[0, 0])  # one foot's transform
        with pytest.raises(ShapeError, match=r"weights for solo must have shape \(6,\) or \(4, 6\)"):
            client.solve("solo", targets, weights=POSITION_ONLY.expand(2, 4, 6))
        with pytest.raises(NonFiniteError, match="weights"):
            client.solve("solo", targets, weights=[1.0, 1, 1, 0, 0, float("nan")])
        with pytest.raises(InvalidRequest, match=r"warm_start\[0\] has 12 values but solo has 19 values") as caught:
            client.solve("solo", targets, warm_start=q[:, 7:])
        assert caught.value.errors[0]["loc"] == ["body", "warm_start", 0]
        with pytest.raises(InvalidRequest, match="zero base quaternion"):
            client.solve("solo", targets, warm_start=q * torch.cat((torch.ones(3), torch.zeros(4), torch.ones(12))))
        with pytest.raises(InvalidRequest, match=r"weights\.FL_FOOT: .*at least one non-zero"):
            client.solve("solo", targets, weights=torch.cat((torch.zeros(1, 6), torch.ones(3, 6))))


# --- the request and answer layouts of several frames, on a mock transport ----------------------------------------

DUO = {  # two frames on a floating base: q = [base (7), j1, j2], dof 8
    "name": "duo",
    "nq": 9,
    "dof": 8,
    "joint_names": ["j1", "j2"],
    "lower": [-1.0, -1.0],
    "upper": [1.0, 1.0],
    "ee_frame": "left",
    "ee_frames": ["left", "right"],
    "floating_base": True,
    "locked": {},
}


def test_several_frames_are_sent_and_read_in_the_robots_frame_order() -> None:
    targets = torch.zeros(2, 2, 7, dtype=torch.float64)
    targets[..., 6] = 1.0
    targets[:, 1, 0] = torch.tensor([0.5, 0.6], dtype=torch.float64)  # the right frame's x
    gradient = torch.arange(2 * 8 * 2 * 6, dtype=torch.float64).reshape(2, 8, 2, 6)
    solutions = [
        {
            "q": [0.0] * 6 + [1.0, 0.1 * i, 0.2],
            "success": True,
            "position_error": 0.0,
            "orientation_error": 0.0,
            "iterations": 3,
            "status": "solved",
            "gradient": {"right": gradient[i, :, 1].tolist(), "left": gradient[i, :, 0].tolist()},  # any key order
        }
        for i in range(2)
    ]
    poses = [
        {
            "right": {"position": [0.5, 0, 0], "orientation": [0, 0, 0, 1]},
            "left": {"position": [1, 2, 3], "orientation": [0, 0, 1, 0]},
        }
    ]
    transport, seen = scripted(
        httpx.Response(200, json={"robots": [DUO]}),
        httpx.Response(200, json={"robot": "duo", "solutions": solutions}),
        httpx.Response(200, json={"robot": "duo", "poses": poses}),
    )
    with Client("http://ik.test", transport=transport) as client:
        result = client.solve(
            "duo", targets, weights=[[1, 1, 1, 0, 0, 0], [1] * 6], warm_start=[0] * 6 + [1, 0, 0], gradient=True
        )
        fk = client.fk("duo", [[0.0] * 6 + [1.0, 0.0, 0.0]], pose=True)
    assert [r.url.path for r in seen] == ["/v1/robots", "/v1/robots/duo/ik", "/v1/robots/duo/fk"]
    body = json.loads(seen[1].content)
    assert [list(t) for t in body["targets"]] == [["left", "right"]] * 2
    assert body["targets"][1]["right"] == {"position": [0.6, 0.0, 0.0], "orientation": [0.0, 0.0, 0.0, 1.0]}
    assert body["weights"] == {"left": [1.0, 1.0, 1.0, 0.0, 0.0, 0.0], "right": [1.0] * 6}
    assert body["warm_start"] == [[0.0] * 6 + [1.0, 0.0, 0.0]] * 2 and body["return_gradient"] is True
    assert result.q.shape == (2, 9) and result.gradient is not None and result.gradient.shape == (2, 8, 2, 6)
    assert torch.equal(result.gradient, gradient)
    assert fk.shape == (1, 2, 7)
    with Client("http://ik.test", transport=scripted(httpx.Response(200, json={"robots": [DUO]}))[0]) as client:
        assert client.fk("duo", torch.zeros(3, 0, 9)).shape == (3, 0, 2, 4, 4)  # no rows: the frames from /v1/robots
        empty = client.solve("duo", torch.zeros(0, 2, 7), gradient=True)
    assert empty.q.shape == (0, 9) and empty.gradient is not None and empty.gradient.shape == (0, 8, 2, 6)
    assert fk[0].tolist() == [[1.0, 2.0, 3.0, 0.0, 0.0, 1.0, 0.0], [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]


def test_one_frame_fk_asks_for_nothing_more() -> None:
    poses = [{"position": [1, 2, 3], "orientation": [0, 0, 0, 1]}]
    transport, seen = scripted(httpx.Response(200, json={"robot": "planar3", "poses": poses}))
    with Client("http://ik.test", transport=transport) as client:
        assert client.fk("planar3", [0.0, 0.0, 0.0], pose=True).tolist() == [1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0]
    assert len(seen) == 1
