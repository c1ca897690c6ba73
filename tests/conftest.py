"""Shared test fixtures: seeded generators, example-robot-data URDFs, a Pinocchio oracle, tmp URDFs, the service in
this process.

Generic on purpose: nothing here knows about a particular test file.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from ik_layer.testing import example_robot_data_candidates, example_robot_data_dir

if TYPE_CHECKING:
    import httpx
    from fastapi import FastAPI

    from ik_layer.server import Settings

SEED = 20240611


# --------------------------------------------------------------------------- engine stores


@pytest.fixture(params=["host", "tensor"])
def each_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once per engine store: every engine and slot pool it opens without naming a store takes this
    one (the CPU's default is "host"; "tensor" is the CUDA path's bookkeeping, run here on the CPU)."""
    import ik_layer.engine.store

    monkeypatch.setattr(ik_layer.engine.store, "default_store", lambda device: request.param)
    return request.param


# --------------------------------------------------------------------------- randomness


@pytest.fixture
def rng() -> torch.Generator:
    """A fresh CPU ``torch.Generator`` seeded with :data:`SEED` (one per test, never global state)."""
    return torch.Generator().manual_seed(SEED)


def make_rng(seed: int = SEED) -> torch.Generator:
    """A seeded CPU generator, for module-scoped fixtures that cannot use :func:`rng`."""
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- example-robot-data


def erd_urdf_path(relative: str) -> Path:
    """Path of an example-robot-data URDF (e.g. ``ur_description/urdf/ur5_robot.urdf``); skip loudly if absent."""
    root = example_robot_data_dir()
    if root is None:
        pytest.skip(
            "example-robot-data is not installed (pip install example-robot-data); looked in: "
            + ", ".join(str(c) for c in example_robot_data_candidates())
        )
    path = root / relative
    if not path.is_file():
        pytest.skip(f"example-robot-data at {root} has no {relative}")
    return path


@pytest.fixture(scope="session")
def erd_urdf() -> Callable[[str], Path]:
    """``erd_urdf("panda_description/urdf/panda.urdf") -> Path``, skipping loudly when missing."""
    return erd_urdf_path


# --------------------------------------------------------------------------- Pinocchio oracle


def pinocchio_fk_jacobian(robot, q: torch.Tensor, frame: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Reference pose (..., 4, 4) and LOCAL_WORLD_ALIGNED Jacobian (..., 6, dof) from Pinocchio, float64.

    One Pinocchio call per configuration (forwardKinematics, updateFramePlacements,
    computeFrameJacobian) on ``robot.model`` with ``robot.to_pinocchio_q(q)``. The columns of mimic
    joints (``robot.mimic``) are added to their leader's, times the multiplier (the chain rule).
    """
    import pinocchio as pin

    model = robot.model
    data = model.createData()
    frame_id = model.getFrameId(frame or robot.ee_frame)
    q_pin = robot.to_pinocchio_q(q.to(robot.dtype)).detach().cpu().double().numpy()
    batch = q_pin.shape[:-1]
    flat = q_pin.reshape(-1, q_pin.shape[-1])
    poses = np.empty((flat.shape[0], 4, 4))
    jacs = np.empty((flat.shape[0], 6, model.nv))
    for i, qi in enumerate(flat):
        pin.forwardKinematics(model, data, qi)
        pin.updateFramePlacements(model, data)
        poses[i] = data.oMf[frame_id].homogeneous
        jacs[i] = pin.computeFrameJacobian(model, data, qi, frame_id, pin.LOCAL_WORLD_ALIGNED)
    return poses.reshape(*batch, 4, 4), (jacs @ coordinate_fold(robot, model)).reshape(*batch, 6, robot.dof)


def coordinate_fold(robot, model) -> np.ndarray:
    """(model.nv, dof): d(model's velocity)/d(robot's coordinates); ``robot.model`` or ``robot.full_model``.

    Each coordinate's joint has a one; a moving mimic joint has its multiplier in its leader's column;
    locked joints have zero rows.
    """
    fold = np.zeros((model.nv, robot.dof))
    for j in range(1, model.njoints):
        name, rule = model.names[j], robot.mimic.get(model.names[j])
        if rule is not None:
            fold[model.joints[j].idx_v, robot.joint_names.index(rule.leader)] = rule.multiplier
        elif name in robot.joint_names:
            fold[model.joints[j].idx_v, robot.joint_names.index(name)] = 1.0
    return fold


@pytest.fixture(scope="session")
def fold() -> Callable[..., np.ndarray]:
    """:func:`coordinate_fold` as a fixture."""
    return coordinate_fold


@pytest.fixture(scope="session")
def pin_reference() -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """The Pinocchio oracle :func:`pinocchio_fk_jacobian` as a fixture."""
    return pinocchio_fk_jacobian


# --------------------------------------------------------------------------- URDFs written on the fly

# A tree with every supported joint kind: continuous (aligned and off-axis), revolute about an
# off-axis and a negative axis, prismatic along an off-axis direction, fixed joints inside the
# chain and at its end (frames on fixed links), and a side branch whose joint is not in the chain.
TINY_URDF = """<?xml version="1.0"?>
<robot name="tiny">
  <link name="base"/>
  <link name="l1"/> <link name="l2"/> <link name="l2b"/> <link name="l3"/> <link name="l4"/> <link name="l5"/>
  <link name="tool"/> <link name="side"/> <link name="side_tip"/>
  <joint name="j_cont" type="continuous">
    <parent link="base"/> <child link="l1"/> <origin xyz="0 0 0.1" rpy="0 0 0.3"/> <axis xyz="0 0 1"/>
  </joint>
  <joint name="j_side" type="revolute">
    <parent link="l1"/> <child link="side"/> <origin xyz="0.2 0 0" rpy="0.1 0 0"/> <axis xyz="1 0 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="side_fixed" type="fixed">
    <parent link="side"/> <child link="side_tip"/> <origin xyz="0 0.3 0" rpy="0 0 1.0"/>
  </joint>
  <joint name="j_off" type="revolute">
    <parent link="l1"/> <child link="l2"/> <origin xyz="0.1 0.2 0.3" rpy="0.4 -0.2 0.7"/> <axis xyz="0.3 0.5 0.8"/>
    <limit lower="-2" upper="2.5" effort="1" velocity="1"/>
  </joint>
  <joint name="mid_fixed" type="fixed">
    <parent link="l2"/> <child link="l2b"/> <origin xyz="0.05 0 0.1" rpy="0.1 0.2 0.3"/>
  </joint>
  <joint name="j_prism" type="prismatic">
    <parent link="l2b"/> <child link="l3"/> <origin xyz="0 0.1 0.2" rpy="0 0.5 0"/> <axis xyz="1 0 1"/>
    <limit lower="-0.3" upper="0.5" effort="1" velocity="1"/>
  </joint>
  <joint name="j_neg" type="revolute">
    <parent link="l3"/> <child link="l4"/> <origin xyz="0.2 0 0" rpy="0 0 0"/> <axis xyz="0 -1 0"/>
    <limit lower="-1.5" upper="1.5" effort="1" velocity="1"/>
  </joint>
  <joint name="j_cont_off" type="continuous">
    <parent link="l4"/> <child link="l5"/> <origin xyz="0 0 0.25" rpy="-0.3 0.2 0.1"/> <axis xyz="1 1 0"/>
  </joint>
  <joint name="tool_fixed" type="fixed">
    <parent link="l5"/> <child link="tool"/> <origin xyz="0 0 0.15" rpy="3.0 0.1 -0.2"/>
  </joint>
</robot>
"""


@pytest.fixture(scope="session")
def tiny_urdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of :data:`TINY_URDF` (end-effector frame ``tool``; the ``side`` joint is off that chain)."""
    path = tmp_path_factory.mktemp("urdf") / "tiny.urdf"
    path.write_text(TINY_URDF)
    return path


@pytest.fixture
def write_urdf(tmp_path: Path) -> Callable[..., Path]:
    """``write_urdf(text, name="robot.urdf") -> Path``: write a URDF (or garbage) under ``tmp_path``."""

    def write(text: str, name: str = "robot.urdf") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


# --------------------------------------------------------------------------- the service in this process


@contextlib.asynccontextmanager
async def serving(settings: Settings, timeout: float = 60.0) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The service's app for ``settings`` with its lifespan running (robots loaded, worker started), and an httpx
    client that calls it in this process (no socket), each request waiting at most ``timeout`` seconds."""
    import httpx

    from ik_layer.server import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ik.test", timeout=timeout) as client:
            yield app, client
