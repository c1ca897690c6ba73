"""``load_robot(urdf, collision="fit")``: spheres covering a URDF's collision meshes (each mesh's convex hull) as
well as its primitives, checked by placing the meshes' vertices with Pinocchio's own geometry placements at random
configurations: every vertex lies inside a sphere of its link."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

import ik_layer
from ik_layer.testing import example_robot_data_dir

ERD = example_robot_data_dir()
pytestmark = pytest.mark.skipif(ERD is None, reason="example-robot-data not installed")


def test_meshes_are_covered_at_random_configurations() -> None:
    assert ERD is not None
    urdf = ERD / "ur_description/urdf/ur5_robot.urdf"
    plain = ik_layer.load_robot(urdf, "tool0")
    assert plain.collision is None  # "auto": meshes are not fitted (seconds for a big robot)
    robot = ik_layer.load_robot(urdf, "tool0", collision="fit")
    spheres = robot.collision
    assert spheres is not None and len(spheres.links) >= 7 and len(spheres) <= 8 * 8
    model = robot.full_model
    geometry = pin.buildGeomFromUrdf(model, str(urdf), pin.COLLISION, package_dirs=[str(p) for p in urdf.parents])
    data, geometry_data = model.createData(), geometry.createData()
    q = robot.random_q((5,), generator=torch.Generator().manual_seed(0))
    centres = spheres.centres(robot, q, jacobian=False)[0].numpy()
    checked = 0
    for row, qi in enumerate(robot.to_full_pinocchio_q(q).numpy()):
        pin.updateGeometryPlacements(model, data, geometry, geometry_data, qi)
        for item, placement in zip(geometry.geometryObjects, geometry_data.oMg, strict=True):
            if not hasattr(item.geometry, "vertices"):
                continue
            link = model.frames[item.parentFrame].name
            points = np.asarray(item.geometry.vertices()) * np.asarray(item.meshScale)
            world = points @ placement.rotation.T + placement.translation
            own = (spheres.link_index == spheres.links.index(link)).numpy()
            gap = np.linalg.norm(world[:, None] - centres[row, own][None], axis=-1) - spheres.radii.numpy()[own]
            assert float(gap.min(axis=1).max()) <= 1e-9, link  # every vertex inside a sphere of its link
            checked += len(points)
    assert checked > 1000


def test_fit_refuses_what_it_cannot_cover() -> None:
    mesh_text = (
        '<robot name="r"><link name="a"><collision><geometry><mesh filename="a.stl"/></geometry></collision></link>'
        '<link name="b"/><joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>'
        '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>'
    )
    with pytest.raises(ik_layer.IKLayerError, match="load it by its path"):
        ik_layer.load_robot(mesh_text, "b", collision="fit")
    with pytest.raises(ik_layer.IKLayerError, match="no collision geometry"):
        ik_layer.load_robot(
            mesh_text.replace('<collision><geometry><mesh filename="a.stl"/></geometry></collision>', ""),
            "b",
            collision="fit",
        )
