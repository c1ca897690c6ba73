"""The end-effector frame a robot gets when none is named: the tool frame of its longest arm.

Read in three steps from the tree of joints the robot can move:

1. Grippers and hands are set apart. A joint that mimics another or that another mimics drives a gripper's
   linkage; a joint named as one (its name's last word is ``gripper``, ``finger``, ``jaw``...: ``jointGripper``,
   ``panda_finger_joint1``, not ``RightGripperYaw``) is one; a joint whose moving children branch into several
   chains, all shorter than the chain that carries it, is a wrist with fingers below (a torso carrying two arms
   is not: its arms are longer than the torso). Frames below those joints are left out, unless nothing else
   moves (a hand on its own).
2. The arm is the longest chain of the rest: the frames with the most moving joints above them.
3. Among the frames at its end (a flange, the links and sites fixed after it), names decide: ``tcp``, then
   ``tool``, ``ee`` / ``eef`` / ``effector``, ``flange``, ``grasp``, ``hand``, ``palm``, ``wrist``, then any
   other name, and last fingers and sensors (``finger``, ``camera``, ``imu``, ...). Ties: the last frame of the
   model.

A base frame (``load_robot(..., base_frame=...)``) changes none of this, except that the frames it leaves without a
moving joint are out: the joints that move it count as they do without it (TIAGo's torso lift from
``torso_lift_link``), so the fingers of a hand below it stay fingers.

So example-robot-data's Panda gets ``panda_hand_tcp`` (7 joints, not the finger), a UR arm ``tool0``, a
quadruped a foot, a humanoid the hand frame of one arm (torso and arm joints).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

import pinocchio as pin

__all__ = ["default_frame"]

_GRIPPER_JOINT = frozenset({"gripper", "finger", "fingers", "jaw", "claw"})
_NOT_HEAD_WORDS = frozenset({"joint", "jnt", "left", "right", "l", "r"})
_PREFERRED = ("tcp", "tool", ("ee", "eef", "effector"), "flange", ("grasp", "grasping"), "hand", "palm", "wrist")
_AVOIDED = frozenset(
    {
        "finger", "fingertip", "fingers", "thumb", "knuckle", "jaw", "nail",
        "sensor", "camera", "cam", "imu", "laser", "lidar", "sonar", "optical", "depth", "rgb", "rgbd",
        "accelerometer", "range", "antenna", "screen", "display",
    }
)  # fmt: skip
_TOKEN = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def default_frame(
    model: pin.Model, movable: Mapping[int, int], moving: Collection[int], linked: Collection[str]
) -> int:
    """Id of the default end-effector frame (see the module docstring).

    Args:
        model: the robot's Pinocchio model.
        movable: the frames the robot can move, by id: the number of moving joints above each, those that move a
            base frame included (not empty).
        moving: the joints the robot can move, those that move a base frame included, by id.
        linked: the mimic joints of the model and their leaders, by name.
    """
    chains = {f: list(model.supports[model.frames[f].parentJoint]) for f in movable}
    apart = _grippers_and_hands(model, set(moving), linked)
    arm = {f: n for f, n in movable.items() if not apart.intersection(chains[f])} or dict(movable)
    return max(arm, key=lambda f: (arm[f], _name_rank(model.frames[f].name), f))


def _grippers_and_hands(model: pin.Model, moving: set[int], linked: Collection[str]) -> set[int]:
    """The moving joints of grippers and hands (step 1): frames below them are not the arm's end."""
    apart = {j for j in moving if model.names[j] in linked or _head_word(model.names[j]) in _GRIPPER_JOINT}
    children: dict[int, list[int]] = {j: [] for j in moving}
    for j in moving:
        if model.parents[j] in children:
            children[model.parents[j]].append(j)
    for wrist, below in children.items():
        depth = sum(j in moving for j in model.supports[wrist])
        if len(below) >= 2 and all(_height(c, children) < depth for c in below):
            apart.update(below)
    return apart


def _height(joint: int, children: Mapping[int, list[int]]) -> int:
    """Moving joints on the longest chain from ``joint`` (included) down."""
    return 1 + max((_height(c, children) for c in children[joint]), default=0)


def _name_rank(name: str) -> int:
    """How likely ``name`` names a tool frame: higher for the earlier ``_PREFERRED`` names, -1 for fingers and
    sensors."""
    tokens = set(_tokens(name))
    if tokens & _AVOIDED:
        return -1
    for rank, words in enumerate(_PREFERRED):
        if tokens.intersection((words,) if isinstance(words, str) else words):
            return len(_PREFERRED) - rank
    return 0


def _head_word(name: str) -> str:
    """The last word of a joint's name, sides, numbers and "joint" left out: what the joint is (``"jointGripper"``
    -> ``"gripper"``, ``"RightGripperYaw"`` -> ``"yaw"``, ``"panda_finger_joint1"`` -> ``"finger"``)."""
    words = [t for t in _tokens(name) if not t.isdigit() and t not in _NOT_HEAD_WORDS]
    return words[-1] if words else ""


def _tokens(name: str) -> list[str]:
    """Lower-case words of ``name``: ``"RightSakeFingerTip2"`` -> ``["right", "sake", "finger", "tip", "2"]``."""
    return [t.lower() for t in _TOKEN.findall(name)]
