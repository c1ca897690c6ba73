"""Learn through IK: calibrate a tool offset and train a target predictor with ``loss.backward()``.

Part 1 (tool calibration): a UR5e holds a tool of unknown offset. We observe the
tool's world poses and the robot's joint angles; the IK layer maps the observed
poses, for the current estimate of the offset, to joint angles, and a loss on
those joint angles trains the offset. It must recover the true offset to 1 mm.

Part 2 (a network in front of IK): a small MLP maps a 2-D command to a target
position for the Panda's flange (position-only IK, the joints pulled towards a
posture); the loss is on joint angles: those of the true targets, a linear map of
the command. The network's targets must come within 5 mm of the true ones.

Both are small full-batch least-squares problems with exact gradients (the implicit
gradient of part 1 agrees with finite differences of re-solved IK to 8 digits), so
they are fitted by L-BFGS with a line search, the usual tool for such problems; each
of its steps runs several IK solves. Adam with a fixed learning rate moves each
parameter by about that rate per step whatever the gradient, so with 1 cm steps it
orbits the 1 mm answer instead of reaching it. Part 1 solves to 1e-9 m: at the
default tolerance (1e-4 m) the answers, and so the loss, jump by up to 1e-4 m from
one offset to the next, which the line search would take for curvature.

Run: ``python examples/learn_through_ik.py [--steps N]`` (seconds). Exits 1 if a part
misses its goal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import torch
from torch import Tensor, nn

import ik_layer
from ik_layer.model.lie import from_rotation_translation

F64 = torch.float64
TRUE_OFFSET = torch.tensor([0.01, -0.02, 0.08], dtype=F64)  # T_flange_tool translation [m]
OFFSET_GOAL = 1e-3  # [m]
TARGET_GOAL = 5e-3  # [m]


def fit(parameters: list[Tensor], loss_fn: Callable[[], Tensor], steps: int, name: str) -> None:
    """Minimise ``loss_fn()`` over ``parameters`` by L-BFGS (strong Wolfe line search), printing each step."""
    optimizer = torch.optim.LBFGS(parameters, max_iter=20, line_search_fn="strong_wolfe")
    losses: list[float] = []

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = loss_fn()
        loss.backward()
        losses.append(loss.item())
        return loss

    for step in range(steps):
        optimizer.step(closure)
        start = f" (from {losses[0]:.3e})" if step == 0 else ""
        print(f"{name}  step {step}  loss {losses[-1]:.3e}{start}  ({len(losses)} IK solves so far)")


def calibrate_tool(steps: int, generator: torch.Generator) -> float:
    """Recover the tool offset from (tool pose, joint angles) pairs; returns its error [m]."""
    robot = ik_layer.load_robot("ur5e")
    eye = torch.eye(3, dtype=F64)
    home = torch.tensor([0.0, -1.57, 1.57, -1.57, -1.57, 0.0], dtype=F64)  # away from singularities
    q_seen = home + 0.5 * (2 * torch.rand(64, 6, generator=generator, dtype=F64) - 1)
    observed = robot.fk(q_seen) @ from_rotation_translation(eye, TRUE_OFFSET)
    offset = torch.zeros(3, dtype=F64, requires_grad=True)

    def loss() -> Tensor:
        tool = from_rotation_translation(eye, offset)
        result = ik_layer.ik_solve(
            robot, observed, tool=tool, warm_start=q_seen, num_seeds=1,
            position_tolerance=1e-9, orientation_tolerance=1e-9,
        )  # fmt: skip
        return ((result.q - q_seen) ** 2)[result.success].mean()

    fit([offset], loss, steps, "tool")
    error = float((offset.detach() - TRUE_OFFSET).norm())
    print(f"offset {offset.detach().numpy().round(5)}, true {TRUE_OFFSET.numpy()}: {error * 1e3:.3f} mm off")
    return error


def train_target_predictor(steps: int, generator: torch.Generator) -> float:
    """Train an MLP command -> target position through position-only IK; returns its largest miss [m]."""
    robot = ik_layer.load_robot("panda")
    posture = (robot.lower + robot.upper) / 2
    command = 2 * torch.rand(32, 2, generator=generator, dtype=F64) - 1
    center = torch.tensor([0.4, 0.0, 0.4], dtype=F64)
    true_target = center + command @ torch.tensor([[0.1, 0.0, 0.05], [0.0, 0.1, -0.05]], dtype=F64)
    quaternion = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64).expand(32, 4)  # ignored: position-only

    def joints(position: Tensor) -> ik_layer.IKResult:
        target = torch.cat((position, quaternion), -1)
        weights = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0], dtype=F64)
        return ik_layer.ik_solve(robot, target, weights=weights, posture=posture, warm_start=posture, num_seeds=1)

    with torch.no_grad():
        q_goal = joints(true_target).q
    net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 3)).double()

    def loss() -> Tensor:
        result = joints(center + net(command))
        return ((result.q - q_goal) ** 2)[result.success].mean()

    fit(list(net.parameters()), loss, steps, "net ")
    with torch.no_grad():
        miss = float((center + net(command) - true_target).norm(dim=-1).max())
    print(f"the network's targets are within {miss * 1e3:.2f} mm of the true ones")
    return miss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="L-BFGS steps per part (default: 8)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # small tensors: more threads only wait for each other (and for other processes)
    torch.manual_seed(0)  # the network's initial weights
    generator = torch.Generator().manual_seed(0)
    offset_error = calibrate_tool(args.steps, generator)
    target_miss = train_target_predictor(args.steps, generator)
    failed = []
    if not offset_error <= OFFSET_GOAL:
        failed.append(f"the tool offset is {offset_error * 1e3:.3f} mm off (goal {OFFSET_GOAL * 1e3:g} mm)")
    if not target_miss <= TARGET_GOAL:
        failed.append(f"the network's targets miss by {target_miss * 1e3:.2f} mm (goal {TARGET_GOAL * 1e3:g} mm)")
    if failed:
        print("FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    print("ok: offset recovered, targets learned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
