"""Closed-form IK of a UR5e (Hawkins, "Analytic inverse kinematics for the Universal Robots UR-5/UR-10 arms",
2013): every branch of a target, the reference a search for several solutions is measured against.

The shipped ``robots/urdf/ur5e.urdf`` chains the standard Denavit-Hartenberg transforms ``Rz(q) Tz(d) Tx(a)
Rx(alpha)`` from ``base_link`` to ``tool0``, so the DH parameters below describe it exactly; a test checks the
branches against Pinocchio's FK. Up to 8 branches: the shoulder left/right, the wrist up/down, the elbow up/down;
angles in (-pi, pi] (the shipped joints turn two turns, the elbow one: every branch lies in the limits).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["UR5E_DH", "dh_fk", "ur_branches"]

UR5E_DH = {"d": (0.1625, 0.0, 0.0, 0.1333, 0.0997, 0.0996), "a": (0.0, -0.425, -0.3922, 0.0, 0.0, 0.0)}
"""The UR5e's DH parameters [m]; alpha = (pi/2, 0, 0, pi/2, -pi/2, 0)."""
_ALPHA = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)


def _link(i: int, angle: float) -> np.ndarray:
    """The DH transform of joint ``i`` at ``angle``."""
    d, a, alpha = UR5E_DH["d"][i], UR5E_DH["a"][i], _ALPHA[i]
    ct, st, ca, sa = math.cos(angle), math.sin(angle), math.cos(alpha), math.sin(alpha)
    return np.array([[ct, -st * ca, st * sa, a * ct], [st, ct * ca, -ct * sa, a * st], [0, sa, ca, d], [0, 0, 0, 1]])


def dh_fk(q: np.ndarray) -> np.ndarray:
    """``T_base_tool0`` (4, 4) of one configuration (6,)."""
    out = np.eye(4)
    for i, angle in enumerate(q):
        out = out @ _link(i, float(angle))
    return out


def _wrap(angle: float) -> float:
    return math.remainder(angle, 2 * math.pi)


def ur_branches(target: np.ndarray, tolerance: float = 1e-8) -> np.ndarray:
    """Every branch (m, 6) of ``target`` (4, 4), m <= 8, each confirmed by FK to ``tolerance`` (m: position and
    rotation-matrix entries); (0, 6) for a target out of reach. Singular configurations (the wrist aligned with
    the shoulder, sin q5 = 0) give no branch: generic targets have none."""
    d4, d6 = UR5E_DH["d"][3], UR5E_DH["d"][5]
    a2, a3 = UR5E_DH["a"][1], UR5E_DH["a"][2]
    wrist = target @ np.array([0.0, 0.0, -d6, 1.0])  # the origin of frame 5
    radius = math.hypot(wrist[0], wrist[1])
    if radius < abs(d4):
        return np.zeros((0, 6))
    found = []
    inverse = np.linalg.inv(target)
    for shoulder in (1.0, -1.0):
        q1 = math.atan2(wrist[1], wrist[0]) + shoulder * math.acos(d4 / radius) + math.pi / 2
        s1, c1 = math.sin(q1), math.cos(q1)
        c5 = (target[0, 3] * s1 - target[1, 3] * c1 - d4) / d6
        if abs(c5) > 1:
            continue
        for up in (1.0, -1.0):
            q5 = up * math.acos(c5)
            s5 = math.sin(q5)
            if abs(s5) < 1e-12:
                continue
            q6 = math.atan2(
                (-inverse[1, 0] * s1 + inverse[1, 1] * c1) / s5, (inverse[0, 0] * s1 - inverse[0, 1] * c1) / s5
            )
            t14 = np.linalg.inv(_link(0, q1)) @ target @ np.linalg.inv(_link(4, q5) @ _link(5, q6))
            x, y = t14[0, 3], t14[1, 3]  # joints 2 and 3 move frame 4's origin in the x-y plane of frame 1
            c3 = (x * x + y * y - a2 * a2 - a3 * a3) / (2 * a2 * a3)
            if abs(c3) > 1:
                continue
            for elbow in (1.0, -1.0):
                q3 = elbow * math.acos(c3)
                q2 = math.atan2(y, x) - math.atan2(a3 * math.sin(q3), a2 + a3 * math.cos(q3))
                t34 = np.linalg.inv(_link(1, q2) @ _link(2, q3)) @ t14
                q4 = math.atan2(t34[1, 0], t34[0, 0])
                q = np.array([_wrap(v) for v in (q1, q2, q3, q4, q5, q6)])
                if np.abs(dh_fk(q) - target).max() <= tolerance:
                    found.append(q)
    return np.array(found).reshape(-1, 6)
