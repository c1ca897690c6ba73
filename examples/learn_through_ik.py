"""Learn through IK: calibrate a tool offset and train a target predictor with ``loss.backward()``.

Part 1 (tool calibration): a UR5e holds a tool of unknown offset. We observe the
tool's world poses and the robot's joint angles; the IK layer maps the observed
poses, for the current estimate of the offset, to joint angles, and a loss on
those joint angles trains the offset.

Part 2 (a network in front of IK): a small MLP maps a 2-D command to a target
position for the Panda's flange (position-only IK); the loss is on joint angles.

Run: ``python examples/learn_through_ik.py [--epochs N]``.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import ik_layer
from ik_layer.lie import from_rotation_translation


def calibrate_tool(epochs: int, generator: torch.Generator) -> list[float]:
    """Recover a tool offset from (pose, joint angles) pairs; returns the loss per epoch."""
    robot = ik_layer.load_robot("ur5e")
    true_offset = torch.tensor([0.01, -0.02, 0.08], dtype=torch.float64)
    eye = torch.eye(3, dtype=torch.float64)
    home = torch.tensor([0.0, -1.57, 1.57, -1.57, -1.57, 0.0], dtype=torch.float64)  # away from singularities
    q_seen = home + 0.5 * (2 * torch.rand(64, 6, generator=generator, dtype=torch.float64) - 1)
    observed = robot.fk(q_seen) @ from_rotation_translation(eye, true_offset)

    offset = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([offset], lr=0.01)
    losses = []
    for epoch in range(epochs):
        tool = from_rotation_translation(eye, offset)
        result = ik_layer.ik_solve(robot, observed, tool=tool, warm_start=q_seen, num_seeds=1)
        loss = ((result.q - q_seen) ** 2)[result.success].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        print(f"tool  epoch {epoch:2d}  loss {loss.item():.3e}  offset {offset.detach().numpy().round(4)}")
    print(f"true offset {true_offset.numpy()}")
    return losses


def train_target_predictor(epochs: int, generator: torch.Generator) -> list[float]:
    """Train an MLP command -> target position through position-only IK; returns the loss per epoch."""
    robot = ik_layer.load_robot("panda")
    posture = (robot.lower + robot.upper) / 2
    q_goal = posture + 0.3 * (robot.random_q((32,), generator=generator) - posture)
    command = torch.randn(32, 2, generator=generator, dtype=torch.float64)
    net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 3)).double()
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    quaternion = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64).expand(32, 4)
    position_only = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    losses = []
    for epoch in range(epochs):
        target = torch.cat((net(command) + torch.tensor([0.4, 0.0, 0.4], dtype=torch.float64), quaternion), -1)
        result = ik_layer.ik_solve(
            robot, target, weights=position_only, posture=posture, warm_start=posture, num_seeds=1
        )
        loss = ((result.q - q_goal) ** 2)[result.success].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        print(f"net   epoch {epoch:2d}  loss {loss.item():.3e}  solved {int(result.success.sum())}/32")
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)  # the network's initial weights
    generator = torch.Generator().manual_seed(0)
    for losses in (calibrate_tool(args.epochs, generator), train_target_predictor(args.epochs, generator)):
        if not losses[-1] < 0.8 * losses[0]:
            raise SystemExit(f"loss did not drop: {losses[0]:.3e} -> {losses[-1]:.3e}")
    print("ok: both losses dropped")


if __name__ == "__main__":
    main()
