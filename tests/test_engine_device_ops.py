"""The host's work per engine step on the tensor store (the GPU's store, run on the CPU here): a few device
operations whatever the batch size, and one read back.

A ``TorchDispatchMode`` sees every torch operator a step issues. Views (slices, reshapes, dtype views) move no data;
the others (copies, index reads and writes, fills) are device work, each a launch on a GPU. A host-to-device copy of
staged values is not a torch operator on the CPU (the staging buffer is the device's memory there), so each
``stage_all`` counts one more, and each kernel launch one more.
"""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import ik_layer
from ik_layer.core.problem import Problem
from ik_layer.engine import Engine
from ik_layer.engine.store import TensorStore

VIEWS = {
    "_unsafe_view", "alias", "as_strided", "detach", "expand", "lift_fresh", "reshape", "select", "slice",
    "squeeze", "t", "transpose", "unflatten", "unsqueeze", "view",
}  # fmt: skip
MOST = 12


class DeviceWork(TorchDispatchMode):
    """Counts the torch operators that are not views, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in VIEWS:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("batch", [1, 64, 3000])
def test_a_step_issues_a_few_device_operations_at_any_batch_size(monkeypatch, batch):
    robot = ik_layer.load_robot("panda")
    generator = torch.Generator().manual_seed(batch)
    engine = Engine(robot, capacity=max(batch // 2, 1), block=4, store="tensor")  # admitted over several steps
    calls = collections.Counter()
    for name in ("stage_all", "read"):
        method = getattr(TensorStore, name)

        def counted(self, *args, _method=method, _name=name, **kwargs):
            calls[_name] += 1
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(TensorStore, name, counted)
    launch = engine._launch.launch
    monkeypatch.setattr(engine._launch, "launch", lambda *a: (calls.update(["launch"]), launch(*a))[1])
    target = robot.fk(robot.random_q((batch,), generator=generator))
    target[: batch // 10, 0, 3] += 2.0  # out of reach: seeds stall, restart and give up
    options = ik_layer.SolveOptions(num_seeds=3, restart_after=8, max_iterations=60)
    request = engine.submit(Problem.prepare(robot, target, options), seed=1)
    steps = []
    while not request.done.is_set():
        calls.clear()
        with DeviceWork() as work:
            engine.step()
        steps.append((sum(work.ops.values()) + calls["stage_all"] + calls["launch"], calls["read"], dict(work.ops)))
    assert len(steps) >= 2
    assert [read for _, read, _ in steps] == [0] + [1] * (len(steps) - 1)  # a step's one wait for the device
    worst = max(steps, key=lambda step: step[0])
    assert worst[0] <= MOST, worst
    result = request.result()
    assert bool(result.success[batch // 10 :].float().mean() > 0.9) and not bool(result.success[: batch // 10].any())
