"""Collision-aware IK on three scenes (a table with objects, a shelf, a cluttered bin): success, checked by coal,
and cost against plain IK on the same targets.

Per robot with collision spheres (``load_robot(name, collision="auto")``) and scene, float64, CPU: targets are the
FK of configurations kept only where the end-effector lies among the scene's objects (on the table, inside the
shelf, inside the bin: :data:`REGIONS`) and the robot's spheres are at least 5 mm clear of the scene and of each
other, so every target has a collision-free answer (:func:`free_targets`: uniform draws inside the limits, then
random steps from those that qualify). Each target set is solved by
``ik_layer.solve`` (the fused engine, defaults) in the same process, in turn:

- ``plain``: no collision term (its answers may well collide);
- ``self``: ``self_collision=1`` alone;
- ``scene``: the scene's obstacles and ``self_collision=1``;
- ``scene per target``: one scene per target (``obstacles=[[...], ...]``): the scene's shapes (the same objects
  in every target's list) and a small ball of each target's own far from the arm, so that every target's scene
  differs and is packed into the engine's obstacle table of its own.

Every answer is checked independently: a success must reach its target by Pinocchio's FK (1e-4 m, 1e-3 rad) inside
the limits and, for ``self`` and ``scene``, coal (hpp-fcl) must find the spheres (placed by Pinocchio) clear of the
obstacles and of each other; the script exits non-zero on any success not confirmed. Collision-free success counts
the confirmed successes. solves/s = targets / wall time of one ``solve`` call (median of ``--repeats``); the ratio
column is each rate over ``plain``'s, in the same run. The plain rate counts all targets; it does not care whether
its answers collide (the ``colliding`` column counts those coal finds in collision).

    python bench/collision.py                  # 10000 targets per scene, 3 repeats
    python bench/collision.py --quick          # 300 targets, 1 repeat
    python bench/collision.py --device cuda --dtype float32 --robots panda --batch 100000 --runs plain scene

With ``--device``/``--dtype`` the solves run there (targets drawn, and every answer checked, in float64 on the
CPU, as above).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace

import coal
import numpy as np
import pinocchio as pin
import torch
from common import apply_threads_and_describe, benchmark_parser, markdown_table

import ik_layer
from ik_layer import Box, Capsule, Sphere
from ik_layer.collision.cost import CollisionCost

CLEARANCE = 0.005  # how far the targets' configurations keep from everything [m]
RUNS = ("plain", "self", "scene", "scene per target")


def on_host(result: ik_layer.IKResult) -> ik_layer.IKResult:
    """``result`` on the CPU, its configurations in float64 (as the checks take them)."""
    on_cpu = result.map(torch.Tensor.cpu)
    return replace(on_cpu, q=on_cpu.q.double())


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (timings of whole solves)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def scenes() -> dict[str, list[ik_layer.Sphere | ik_layer.Box | ik_layer.Capsule]]:
    """The scenes, in the robot's base frame (the base on the floor at the origin, facing +x)."""
    table = [
        Box([0.55, 0.0, -0.03, 0, 0, 0, 1], [0.7, 1.2, 0.06]),  # its top at the base's foot
        Box([0.5, 0.25, 0.1, 0, 0, 0, 1], [0.1, 0.1, 0.2]),
        Box([0.7, -0.3, 0.05, 0, 0, 0.383, 0.924], [0.12, 0.2, 0.1]),  # turned 45 degrees
        Sphere([0.45, -0.25, 0.06], 0.06),
        Capsule([0.65, 0.05, 0.0], [0.65, 0.05, 0.25], 0.04),  # a bottle
    ]
    shelf = [Box([0.95, 0.0, 0.6, 0, 0, 0, 1], [0.02, 0.8, 1.2])]  # back
    shelf += [Box([0.8, side, 0.6, 0, 0, 0, 1], [0.3, 0.02, 1.2]) for side in (-0.4, 0.4)]
    shelf += [Box([0.8, 0.0, height, 0, 0, 0, 1], [0.3, 0.8, 0.02]) for height in (0.2, 0.5, 0.8, 1.2)]
    shelf += [Sphere([0.8, 0.15, 0.56], 0.05), Capsule([0.8, -0.2, 0.21], [0.8, -0.2, 0.4], 0.03)]
    bin_ = [Box([0.6, 0.0, -0.06, 0, 0, 0, 1], [0.8, 1.2, 0.06])]  # the table under it, clear of the base
    bin_ += [Box([0.55, 0.0, -0.02, 0, 0, 0, 1], [0.4, 0.5, 0.02])]  # floor
    bin_ += [Box([x, 0.0, 0.1, 0, 0, 0, 1], [0.02, 0.5, 0.2]) for x in (0.35, 0.75)]
    bin_ += [Box([0.55, y, 0.1, 0, 0, 0, 1], [0.4, 0.02, 0.2]) for y in (-0.25, 0.25)]
    bin_ += [Sphere([0.5, 0.1, 0.04], 0.05), Sphere([0.62, -0.1, 0.03], 0.04)]
    bin_ += [
        Capsule([0.45, -0.15, 0.02], [0.6, -0.05, 0.02], 0.03),
        Box([0.62, 0.12, 0.04, 0, 0, 0.2, 0.98], [0.1, 0.06, 0.08]),
    ]
    return {"table": table, "shelf": shelf, "bin": bin_}


REGIONS = {  # per scene: where the targets lie (x, y, z bounds [m]): among the objects, in the shelf, in the bin
    "table": ((0.25, 0.85), (-0.55, 0.55), (0.0, 0.3)),
    "shelf": ((0.65, 0.95), (-0.4, 0.4), (0.0, 1.2)),
    "bin": ((0.35, 0.75), (-0.25, 0.25), (0.0, 0.25)),
}


def free_targets(
    robot: ik_layer.Robot, obstacles: list, region: tuple, n: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` targets in ``region`` and the configurations they are the FK of, each CLEARANCE clear of the scene and
    of itself: configurations drawn uniformly inside the limits until 64 qualify, then random steps (0.25 rad per
    joint) from those that qualify, kept where they qualify too (in a shelf or a bin one uniform draw in a thousand
    or more qualifies)."""
    cost = CollisionCost.of(robot, obstacles, ik_layer.SolveOptions(self_collision=1))
    assert cost is not None
    generator = torch.Generator().manual_seed(seed)

    def qualifying(q: torch.Tensor) -> torch.Tensor:
        position = robot.fk(q)[:, :3, 3]
        inside = torch.ones(q.shape[0], dtype=torch.bool)
        for axis, (low, high) in enumerate(region):
            inside &= (position[:, axis] >= low) & (position[:, axis] <= high)
        q = q[inside]
        return q[cost.min_distance(robot, q) >= CLEARANCE]

    pool = torch.zeros(0, robot.nq, dtype=robot.dtype)
    for _ in range(64):
        pool = torch.cat((pool, qualifying(robot.random_q((20000,), generator=generator))))
        if pool.shape[0] >= min(64, n):
            break
    for _ in range(1000):
        if pool.shape[0] >= n:
            break
        parents = pool[torch.randint(pool.shape[0], (4 * n,), generator=generator)]
        step = 0.25 * torch.randn(parents.shape, generator=generator, dtype=robot.dtype)
        pool = torch.cat((pool, qualifying(torch.clamp(parents + step, robot.lower, robot.upper))))
    if pool.shape[0] < n:
        raise SystemExit(f"{robot.name}: the scene leaves too few collision-free configurations")
    q = pool[torch.randperm(pool.shape[0], generator=generator)[:n]]
    return robot.fk(q), q


def per_target(obstacles: list, n: int) -> list[list]:
    """``n`` scenes: ``obstacles`` and a 1 cm ball of each scene's own, 3 m from the base (it never comes near)."""
    return [[*obstacles, Sphere([3.0, 0.0, 0.001 * k], 0.01)] for k in range(n)]


class CoalCheck:
    """coal's view of a robot's spheres and a scene: whether configurations are collision-free."""

    def __init__(self, robot: ik_layer.Robot, obstacles: list) -> None:
        spheres = robot.collision
        assert spheres is not None
        self.robot, self.model = robot, robot.model
        self.data = self.model.createData()
        self.frames = [self.model.getFrameId(link) for link in spheres.sphere_links]
        self.centers, self.radii = spheres.centers.numpy(), spheres.radii.numpy()
        self.balls = [coal.Sphere(float(r)) for r in self.radii]
        self.pairs = spheres.pairs.numpy()
        self.obstacles = [_coal_shape(shape) for shape in obstacles]
        # A conservative pre-filter of the pairs coal measures: each obstacle's bounding ball.
        self.bounds = np.array([[*at.getTranslation(), reach] for _, at, reach in self.obstacles]).reshape(-1, 4)

    def colliding(self, q: torch.Tensor, self_collision: bool) -> int:
        """How many of the configurations ``q`` (n, nq) coal finds in collision (spheres against the obstacles,
        and the self-collision pairs if asked)."""
        count = 0
        for qi in self.robot.to_pinocchio_q(q).numpy():
            pin.framesForwardKinematics(self.model, self.data, qi)
            centres = np.array([self.data.oMf[f].act(c) for f, c in zip(self.frames, self.centers, strict=True)])
            count += int(self._hits(centres, self_collision))
        return count

    def _hits(self, centres: np.ndarray, self_collision: bool) -> bool:
        near = (
            np.linalg.norm(centres[:, None] - self.bounds[None, :, :3], axis=-1)
            < self.radii[:, None] + self.bounds[:, 3]
        )
        for s, o in zip(*np.nonzero(near), strict=True):
            shape, at, _ = self.obstacles[o]
            if _distance(self.balls[s], centres[s], shape, at) < 0:
                return True
        if self_collision:
            a, b = self.pairs[:, 0], self.pairs[:, 1]
            near = np.linalg.norm(centres[a] - centres[b], axis=-1) < self.radii[a] + self.radii[b] + 1e-3
            for i, j in self.pairs[near]:
                if _distance(self.balls[i], centres[i], self.balls[j], coal.Transform3s(np.eye(3), centres[j])) < 0:
                    return True
        return False


def _coal_shape(shape: ik_layer.Sphere | ik_layer.Box | ik_layer.Capsule) -> tuple[object, object, float]:
    """A coal shape, its placement and the radius of a ball about its centre that holds it."""
    if isinstance(shape, Sphere):
        return coal.Sphere(float(shape.radius)), coal.Transform3s(np.eye(3), shape.center.numpy()), float(shape.radius)
    if isinstance(shape, Box):
        pose, size = shape.pose.numpy(), shape.size.numpy()
        return coal.Box(*size), coal.Transform3s(pose[:3, :3], pose[:3, 3]), float(np.linalg.norm(size) / 2)
    a, b = shape.a.numpy(), shape.b.numpy()
    length = float(np.linalg.norm(b - a))
    rotation = pin.Quaternion.FromTwoVectors(np.array([0.0, 0, 1]), (b - a) / length).matrix()
    radius = float(shape.radius)
    return coal.Capsule(radius, length), coal.Transform3s(rotation, (a + b) / 2), length / 2 + radius


def _distance(ball: object, centre: np.ndarray, shape: object, at: object) -> float:
    request, result = coal.DistanceRequest(), coal.DistanceResult()
    request.enable_signed_distance = True
    coal.distance(ball, coal.Transform3s(np.eye(3), centre), shape, at, request, result)
    return float(result.min_distance)


def pose_confirmed(
    robot: ik_layer.Robot, q: torch.Tensor, target: torch.Tensor, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """(n,) bool: Pinocchio's FK of ``q`` reaches ``target`` within 1e-4 m and 1e-3 rad, ``q`` inside the limits
    (as ``dtype``, the solver's, rounds them: float32 limits lie up to an ulp outside float64's)."""
    model, data = robot.model, robot.model.createData()
    frame = model.getFrameId(robot.ee_frame)
    ok = []
    for qi, ti in zip(robot.to_pinocchio_q(q).numpy(), target.numpy(), strict=True):
        pin.framesForwardKinematics(model, data, qi)
        placement = data.oMf[frame]
        position = np.linalg.norm(placement.translation - ti[:3, 3])
        orientation = np.linalg.norm(pin.log3(ti[:3, :3] @ placement.rotation.T))
        ok.append(position <= 1e-4 and orientation <= 1e-3)
    slack = max(1e-12, 4 * torch.finfo(dtype).eps * float(torch.cat((robot.lower, robot.upper)).abs().max()))
    inside = ((q >= robot.lower - slack) & (q <= robot.upper + slack)).all(-1)
    return torch.tensor(ok) & inside


def main() -> int:
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--robots", nargs="+", default=["panda", "ur5e", "iiwa14"])
    parser.add_argument("--batch", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="300 targets, 1 repeat")
    parser.add_argument("--device", default="cpu", help="where the solves run (default cpu)")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64", help="(default float64)")
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS, help="which runs (plain first)")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    batch, repeats = (300, 1) if args.quick else (args.batch, args.repeats)
    print(apply_threads_and_describe(args.threads))
    rows, unconfirmed = [], 0
    for name in args.robots:
        robot = ik_layer.load_robot(name, collision="auto")  # float64 on the CPU: targets and checks
        solver = ik_layer.load_robot(name, collision="auto").to(device, dtype)
        if robot.collision is None:
            print(f"{name}: no collision spheres (load_robot(..., collision='auto') finds none): skipped")
            continue
        for scene_name, obstacles in scenes().items():
            target, _ = free_targets(robot, obstacles, REGIONS[scene_name], batch, seed=1)
            in_scene, alone = CoalCheck(robot, obstacles), CoalCheck(robot, [])
            every = {  # label: the solve's collision arguments for n targets, and what coal checks successes against
                "plain": (lambda n: {}, in_scene),
                "self": (lambda n: {"self_collision": 1}, alone),
                "scene": (lambda n: {"obstacles": obstacles, "self_collision": 1}, in_scene),
                "scene per target": (lambda n: {"obstacles": per_target(obstacles, n), "self_collision": 1}, in_scene),
            }
            runs = {label: every[label] for label in RUNS if label in args.runs}
            on_device = target.to(device, dtype)
            plain_rate = 0.0
            for label, (arguments, coal_view) in runs.items():
                ik_layer.solve(solver, on_device[:64], **arguments(64))  # warm-up: kernels compiled or loaded
                extra = arguments(batch)
                times, result = [], None
                for k in range(repeats):
                    generator = torch.Generator(device=device).manual_seed(2 + k)
                    synchronize(device)
                    start = time.perf_counter()
                    result = ik_layer.solve(solver, on_device, generator=generator, **extra)
                    synchronize(device)
                    times.append(time.perf_counter() - start)
                assert result is not None
                result = on_host(result)
                rate = batch / statistics.median(times)
                plain_rate = plain_rate or rate
                reached = pose_confirmed(robot, result.q, target, dtype) & result.success
                colliding = coal_view.colliding(result.q[reached], self_collision=True)
                unconfirmed += int((result.success & ~reached).sum())
                if label != "plain":  # a collision-aware success coal finds in collision is a failure of ours
                    unconfirmed += colliding
                rows.append([
                    name, scene_name, label, f"{100 * (int(reached.sum()) - colliding) / batch:.2f} %", str(colliding),
                    f"{rate:,.0f}", f"{rate / plain_rate:.2f}x",
                ])  # fmt: skip
            print(f"{name} {scene_name}: done", flush=True)
    print()
    where = "CPU" if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(f"{batch} targets per scene (each with a collision-free answer), {args.dtype}, {where}; median of {repeats}")
    header = ["robot", "scene", "run", "collision-free success", "successes colliding (coal)", "solves/s", "vs plain"]
    print(markdown_table(header, rows, text_columns=3))
    if unconfirmed:
        print(f"FAILED: {unconfirmed} successes not confirmed by Pinocchio and coal")
        return 1
    print("every success confirmed with Pinocchio (pose, limits) and coal (collision-free)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
