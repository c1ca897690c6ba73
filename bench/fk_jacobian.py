"""Benchmark: batched pose + geometric Jacobian, ours vs Pinocchio, pytorch-kinematics and vmap(jacrev).

For each robot (panda, ur5e), dtype (float64, float32) and batch size (1, 100, 10k), on the CPU:

* ``ours``:     ``robot.fk_jacobian(q)``: one fused warp kernel (q without grad).
* ``autograd``:  ``robot.kinematics(q, jacobian=True)``: ours in eager torch, the path ``fk_jacobian`` takes when
  ``q`` requires grad (the fused kernel's reference).
* ``pinocchio``: one Python call per configuration, the fastest of
  (a) ``computeJointJacobians`` + ``updateFramePlacements`` + ``getFrameJacobian`` and
  (b) ``forwardKinematics`` + ``updateFramePlacements`` + ``computeFrameJacobian``
  (always float64: Pinocchio's Python bindings have no float32).
* ``pk``:        pytorch-kinematics, ``chain.jacobian(q, ret_eef_pose=True)`` (pose and Jacobian in one
  pass, faster than its ``forward_kinematics`` + ``jacobian``).
* ``jacrev``:    ``torch.func.vmap(torch.func.jacrev(fk))`` (autograd Jacobian of the 4x4 pose).

Before timing, every peer's pose and Jacobian are checked against ours (max abs difference printed):
pytorch-kinematics' Jacobian is in the base frame with its reference point at the end-effector
origin, rows [linear; angular], i.e. Pinocchio's ``LOCAL_WORLD_ALIGNED``, the convention of ours.

Run: ``python bench/fk_jacobian.py`` (about a minute) or ``--quick`` (tiny sizes, a few seconds).
Times are per configuration [us], the median of a few repeats; ratios > 1 mean ours is faster.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable

import numpy as np
import pinocchio as pin
import torch
from common import markdown_table, time_call

import ik_layer
from ik_layer.model.lie import vee
from ik_layer.robots import REGISTRY

ROBOTS = ["panda", "ur5e"]
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def time_per_config(fn: Callable[[], object], batch: int, budget_s: float, repeats: int = 5) -> float:
    """Median wall time per configuration [us] of ``fn`` (which handles ``batch`` configurations)."""
    return time_call(fn, budget_s, repeats) / batch


# --------------------------------------------------------------------------- the peers


def pinocchio_runner(robot: ik_layer.Robot, q: torch.Tensor) -> tuple[str, Callable[[], list], Callable[[], list]]:
    """Two per-configuration Pinocchio loops; returns their names and callables."""
    model = robot.model
    data = model.createData()
    fid = model.getFrameId(robot.ee_frame)
    qs = list(robot.to_pinocchio_q(q).numpy())
    lwa = pin.LOCAL_WORLD_ALIGNED

    def joint_jacobians() -> list:
        out = []
        for qi in qs:
            pin.computeJointJacobians(model, data, qi)
            pin.updateFramePlacement(model, data, fid)
            out.append((data.oMf[fid].homogeneous, pin.getFrameJacobian(model, data, fid, lwa)))
        return out

    def frame_jacobian() -> list:
        out = []
        for qi in qs:
            pin.forwardKinematics(model, data, qi)
            pin.updateFramePlacement(model, data, fid)
            out.append((data.oMf[fid].homogeneous, pin.computeFrameJacobian(model, data, qi, fid, lwa)))
        return out

    return "computeJointJacobians", joint_jacobians, frame_jacobian


def vmap_jacrev_fk(robot: ik_layer.Robot) -> tuple[str, Callable[[torch.Tensor], torch.Tensor]]:
    """``vmap(jacrev(fk))`` on the unchecked path (``robot.fk`` validates its input, which vmap refuses)."""

    def fk(q: torch.Tensor) -> torch.Tensor:
        return robot.kinematics(q, jacobian=False)[0]

    return "robot.kinematics", torch.func.vmap(torch.func.jacrev(fk))


def twist_from_pose_jacobian(d_pose: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
    """(B, 4, 4, n) d pose / d q -> (B, 6, n) [d p / d q; vee(dR/dq R^T)]."""
    d_rot = d_pose[:, :3, :3, :].permute(0, 3, 1, 2)
    angular = vee(d_rot @ pose[:, None, :3, :3].transpose(-1, -2)).transpose(-1, -2)
    return torch.cat((d_pose[:, :3, 3, :], angular), dim=-2)


# --------------------------------------------------------------------------- one robot


def bench_robot(name: str, batches: list[int], budget_s: float, rows: list[list[str]]) -> None:
    spec = REGISTRY[name]
    import pytorch_kinematics as pk

    urdf = spec.urdf.read_bytes()
    robot64 = ik_layer.load_robot(name)  # Pinocchio's bindings are float64 only
    for dtype_name, dtype in DTYPES.items():
        robot = ik_layer.load_robot(name, dtype=dtype)
        chain = pk.build_serial_chain_from_urdf(urdf, spec.ee_frame).to(dtype=dtype)
        assert chain.get_joint_parameter_names() == robot.joint_names, "joint order differs from pk's"
        jacrev_kind, jacrev_fn = vmap_jacrev_fk(robot)
        gen = torch.Generator().manual_seed(0)

        # Agreement first, on 256 configurations (apples to apples).
        q = robot.random_q((256,), generator=gen)
        pose, jac = robot.fk_jacobian(q)
        pk_jac, pk_pose = chain.jacobian(q, ret_eef_pose=True)
        _pin_name, pin_a, pin_b = pinocchio_runner(robot64, q.double())
        pin_out = pin_a()
        pin_pose = torch.tensor(np.array([p for p, _ in pin_out]), dtype=dtype)
        pin_jac = torch.tensor(np.array([j for _, j in pin_out]), dtype=dtype)
        jr_jac = twist_from_pose_jacobian(jacrev_fn(q), pose)
        eager_pose, eager_jac = robot.kinematics(q, jacobian=True)
        print(
            f"{name} {dtype_name}: max |diff| vs ours (pose, J): "
            f"autograd ({(eager_pose - pose).abs().max():.1e}, {(eager_jac - jac).abs().max():.1e}), "
            f"pinocchio ({(pin_pose - pose).abs().max():.1e}, {(pin_jac - jac).abs().max():.1e}), "
            f"pk ({(pk_pose - pose).abs().max():.1e}, {(pk_jac - jac).abs().max():.1e}), "
            f"jacrev (-, {(jr_jac - jac).abs().max():.1e}) [jacrev via {jacrev_kind}]"
        )

        for batch in batches:
            q = robot.random_q((batch,), generator=gen)
            t_ours = time_per_config(lambda: robot.fk_jacobian(q), batch, budget_s)
            t_eager = time_per_config(lambda: robot.kinematics(q, jacobian=True), batch, budget_s)
            _, pin_a, pin_b = pinocchio_runner(robot64, q.double())
            t_pin_a = time_per_config(pin_a, batch, budget_s, repeats=3)
            t_pin_b = time_per_config(pin_b, batch, budget_s, repeats=3)
            t_pin = min(t_pin_a, t_pin_b)
            t_pk = time_per_config(lambda: chain.jacobian(q, ret_eef_pose=True), batch, budget_s)
            t_jr = time_per_config(lambda: jacrev_fn(q), batch, budget_s, repeats=3)
            rows.append([
                name, dtype_name, f"{batch:,}", f"{t_ours:.2f}", f"{t_eager:.2f}", f"{t_pin:.2f}", f"{t_pk:.2f}",
                f"{t_jr:.2f}", f"{t_eager / t_ours:.1f}x", f"{t_pin / t_ours:.1f}x", f"{t_pk / t_ours:.1f}x",
                f"{t_jr / t_ours:.1f}x",
            ])  # fmt: skip
            which = "computeJointJacobians" if t_pin_a <= t_pin_b else "computeFrameJacobian"
            print(f"  batch {batch:>6}: ours {t_ours:8.2f} us  autograd {t_eager:8.2f} us  "
                  f"pinocchio {t_pin:6.2f} us ({which})  "
                  f"pk {t_pk:8.2f} us  jacrev {t_jr:8.2f} us")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny batch sizes and time budgets (smoke test)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    batches, budget = ([1, 10, 100], 0.02) if args.quick else ([1, 100, 10_000], 0.3)
    print(
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), pinocchio {pin.__version__}, "
        f"{platform.processor() or platform.machine()}, CPU\n"
    )
    rows: list[list[str]] = []
    for name in ROBOTS:
        bench_robot(name, batches, budget, rows)
    header = ["robot", "dtype", "batch", "ours [us]", "autograd [us]", "pinocchio [us]", "pk [us]",
              "vmap(jacrev) [us]", "autograd/ours", "pinocchio/ours", "pk/ours", "jacrev/ours"]  # fmt: skip
    print("\nPer-configuration time of pose + Jacobian (pinocchio: float64, one Python call per configuration)\n")
    print(markdown_table(header, rows, text_columns=2))


if __name__ == "__main__":
    main()
