"""Robot descriptions shipped with ik-layer and their registry.

Each built-in robot is a kinematics-only URDF in ``robots/urdf`` written from
the manufacturer's published kinematic parameters, plus its default
end-effector frame and, where published collision geometry was fitted
(``scripts/make_robot_spheres.py``), its collision spheres in ``robots/spheres``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

URDF_DIR = Path(__file__).resolve().parent / "urdf"
SPHERES_DIR = Path(__file__).resolve().parent / "spheres"


@dataclass(frozen=True)
class RobotSpec:
    """A built-in robot: its URDF file, default end-effector frame and collision spheres (None: none shipped)."""

    name: str
    urdf: Path
    ee_frame: str
    description: str
    spheres: Path | None = None


REGISTRY: dict[str, RobotSpec] = {
    spec.name: spec
    for spec in (
        RobotSpec(
            "panda",
            URDF_DIR / "panda.urdf",
            "panda_link8",
            "Franka Emika Panda, 7-DoF, flange",
            SPHERES_DIR / "panda.yml",
        ),
        RobotSpec(
            "ur5e",
            URDF_DIR / "ur5e.urdf",
            "tool0",
            "Universal Robots UR5e, 6-DoF, tool0",
            SPHERES_DIR / "ur5e.yml",
        ),
        RobotSpec(
            "iiwa14",
            URDF_DIR / "iiwa14.urdf",
            "iiwa_link_ee",
            "KUKA LBR iiwa 14 R820, 7-DoF, flange",
            SPHERES_DIR / "iiwa14.yml",
        ),
        RobotSpec("planar3", URDF_DIR / "planar3.urdf", "tip", "planar 3-link arm (0.5, 0.4, 0.3 m), tip"),
    )
}


def builtin_robots() -> list[str]:
    """Names of the built-in robots, sorted."""
    return sorted(REGISTRY)
