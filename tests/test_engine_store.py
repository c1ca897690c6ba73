"""The engine's stores: the host (numpy views) and tensor (torch indexing) bookkeeping give the same answers.

The tensor store is what the engine runs on CUDA; here it runs on the CPU, so that its every line runs in CI. Its
host-device traffic per step is counted through the store's two doors: :meth:`~Slots.stage` (host values to the
device, asynchronous) and :meth:`~Slots.read` (the step's one wait for the device).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer.core.problem import Problem
from ik_layer.engine import STORES, Engine, HostStore, TensorStore, open_store
from ik_layer.engine.device.kernel import DRAWN_START
from ik_layer.engine.launch import BlockLauncher

OPTIONS = ik_layer.SolveOptions(num_seeds=6, max_iterations=300)
SOLO = "solo_description/robots/solo12.urdf"


def hard_targets(robot: ik_layer.Robot, n: int, seed: int) -> torch.Tensor:
    """Reachable targets, some pushed to the edge of the workspace (they stall and get more seeds in scattered
    slots) and some far out of reach (given up early)."""
    q = robot.random_q((n,), generator=torch.Generator().manual_seed(seed))
    target = robot.fk(q).clone()
    target[1::5, :3, 3] *= 1.15
    target[::7, :3, 3] *= 3.0
    return target


def solve_on(robot: ik_layer.Robot, store: str, target: torch.Tensor, **kwargs) -> ik_layer.IKResult:
    engine = Engine(robot, capacity=kwargs.pop("capacity", 256), block=kwargs.pop("block", 8), store=store)
    generator = torch.Generator().manual_seed(11)
    return ik_layer.solve(robot, target, OPTIONS, engine=engine, generator=generator, **kwargs)


@pytest.mark.parametrize("name", ["ur5e", "panda"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_both_stores_give_identical_answers(name: str, dtype: torch.dtype) -> None:
    robot = ik_layer.load_robot(name, dtype=dtype)
    target = hard_targets(robot, 120, seed=3)
    posture = robot.random_q((120,), generator=torch.Generator().manual_seed(4))
    for extra in ({}, {"posture": posture}):
        host = solve_on(robot, "host", target, **extra)
        tensor = solve_on(robot, "tensor", target, **extra)
        assert 0.5 < float(host.success.float().mean()) < 1.0  # solved, stalled and given-up rows alike
        for field in ("q", "success", "iterations", "position_error", "orientation_error"):
            assert torch.equal(getattr(host, field), getattr(tensor, field)), field


def test_both_stores_agree_on_several_frames_and_a_floating_base(erd_urdf) -> None:
    robot = ik_layer.load_robot(erd_urdf(SOLO), ee_frames=["FL_FOOT", "HR_FOOT"], floating_base=True)
    q = robot.random_q((40,), generator=torch.Generator().manual_seed(5))
    host, tensor = (solve_on(robot, store, robot.fk(q), capacity=64) for store in ("host", "tensor"))
    assert bool(host.success.all())
    for field in ("q", "success", "iterations"):
        assert torch.equal(getattr(host, field), getattr(tensor, field)), field


def test_restart_streams_written_into_scattered_slots_keep_their_int32_type() -> None:
    """The CUDA crash of the first GPU run: restart offsets (int64 on the host) index-put into the int32 ``rng``
    of slots that are not consecutive. torch refuses mixed dtypes in an index put on every device, so this test
    (and every tensor-store test) fails when the offsets are written as int64."""
    robot = ik_layer.load_robot("ur5e")
    target = robot.fk(robot.random_q((3,), generator=torch.Generator().manual_seed(6)))
    store = open_store(robot, 8, "tensor")
    store.admit(np.array([0, 3, 6]), target, None, OPTIONS, seed=2, rng_offset=np.array([10, 11, 12]))
    assert store.rng.dtype == torch.int32 and store.rng[[0, 3, 6]].tolist() == [10, 11, 12]
    again = store.pack(target[1:])  # slots 3 and 6 placed again, with budgets of their own
    store.place(np.array([3, 6]), again, OPTIONS, gains=(0.0, 0.0, 0.0), start=DRAWN_START, seed=2,
                rng_offset=np.array([11, 12]), budget=np.array([5, 7]))  # fmt: skip
    assert store.budget[[0, 3, 6]].tolist() == [OPTIONS.max_iterations, 5, 7]


def test_a_tensor_store_step_waits_once_and_stages_per_group_not_per_row() -> None:
    """Per engine step: one read (the one host sync), and a bounded number of staged host-to-device copies that
    does not grow with the rows admitted or retired."""
    robot = ik_layer.load_robot("ur5e")
    engine = Engine(robot, capacity=64, block=4, store="tensor")
    counts = {"read": 0, "stage_all": 0}  # every staging goes through stage_all: one host-to-device copy each
    store = engine.slots
    for name in counts:
        method = getattr(store, name)

        def counted(*args, _method=method, _name=name, **kwargs):
            counts[_name] += 1
            return _method(*args, **kwargs)

        setattr(store, name, counted)
    requests = [
        engine.submit(Problem.prepare(robot, hard_targets(robot, 100, seed=s), OPTIONS), seed=s) for s in (7, 8)
    ]
    per_step = []
    while engine.busy:
        before = dict(counts)
        engine.step()
        per_step.append({name: counts[name] - before[name] for name in counts})
    assert all(r.done.is_set() for r in requests)
    assert max(step["read"] for step in per_step) == 1
    assert len(per_step) > 20 and sum(step["read"] for step in per_step) >= len(per_step) - 1  # the first: nothing
    # Admitting a group of rows stages its slots, its rows, its restart offsets (and budgets); retiring stages the
    # freed slots and, per group of answers, their rows and slots: a handful per step, whatever the rows.
    assert max(step["stage_all"] for step in per_step) <= 20
    assert sum(step["stage_all"] for step in per_step) / len(per_step) <= 4


def test_stores_are_chosen_by_name() -> None:
    robot = ik_layer.load_robot("ur5e")
    assert isinstance(Engine(robot, capacity=2).slots, HostStore)  # the CPU's default
    assert isinstance(Engine(robot, capacity=2, store="tensor").slots, TensorStore)
    assert sorted(STORES) == ["host", "tensor"]
    with pytest.raises(ik_layer.IKLayerError, match="store must be one of"):
        Engine(robot, capacity=2, store="gpu")


def test_the_tensor_store_launches_through_warp_and_the_host_store_through_its_bound_struct() -> None:
    robot = ik_layer.load_robot("ur5e")
    target = robot.fk(robot.random_q((4,), generator=torch.Generator().manual_seed(9)))
    ends = []
    for name in ("host", "tensor"):
        store = open_store(robot, 4, name)
        launch = BlockLauncher(store)
        assert (launch._launch_for(frozenset(), False).cpu_args is None) == (name == "tensor")
        store.admit(slice(0, 4), target, None, OPTIONS, seed=3)
        launch(5)
        ends.append((store.q.clone(), store.iterations.clone()))
    assert torch.equal(ends[0][0], ends[1][0]) and torch.equal(ends[0][1], ends[1][1])


def test_solve_checks_its_engine() -> None:
    robot, other = ik_layer.load_robot("ur5e"), ik_layer.load_robot("ur5e")
    target = robot.fk(robot.neutral_q()[None])
    with pytest.raises(ik_layer.IKLayerError, match="built for this robot"):
        ik_layer.solve(robot, target, engine=Engine(other, capacity=2))
    with pytest.raises(ik_layer.IKLayerError, match="engine"):
        ik_layer.solve(robot, target, engine="tensor")  # type: ignore[arg-type]
    with pytest.raises(ik_layer.IKLayerError, match="reference"):
        ik_layer.solve(robot, target, engine=Engine(robot, capacity=2), reference=True)
    engine = Engine(robot, capacity=2)
    robot.to(torch.float32)  # its engine's slots stay float64: refused, not launched on mismatched memory
    with pytest.raises(ik_layer.IKLayerError, match="current device and dtype"):
        ik_layer.solve(robot, target.float(), engine=engine)
