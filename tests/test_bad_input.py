"""Every bad input raises an IKLayerError (a ValueError) naming the argument: never a plain torch/Python error.

Each case asserts the exception type and that the message names the argument; see also the bad-input
tests of test_kinematics.py and test_lie.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

import ik_layer
from ik_layer import IKLayerError, RobotNotFound, ShapeError, SolveOptions
from ik_layer.exceptions import DeviceError, DTypeError
from ik_layer.model.host import QUATERNION_NORM_TOLERANCE
from ik_layer.model.lie import (
    as_transform,
    from_rotation_translation,
    invert_transform,
    matrix_to_pose,
    matrix_to_quaternion,
    normalize_quaternion,
    pose_error,
    pose_to_matrix,
    quaternion_to_matrix,
    skew,
    so3_exp,
    so3_log,
    vee,
)

F64, F32 = torch.float64, torch.float32
IDENTITY_POSE = [0.3, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0]
NON_FLOATING = [torch.int64, torch.int32, torch.bool, torch.complex128]


@pytest.fixture(scope="module")
def panda() -> ik_layer.Robot:
    return ik_layer.load_robot("panda")


def raises(error: type[IKLayerError], call: Callable[[], object], *names: str) -> str:
    """Run ``call``, check it raises ``error`` (an IKLayerError and ValueError) naming every one of ``names``."""
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, IKLayerError) and isinstance(info.value, ValueError)
    message = str(info.value)
    for name in names:
        assert name in message, f"{name!r} not in {message!r}"
    return message


def pose_target(dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(IDENTITY_POSE).to(dtype)


# --------------------------------------------------------------------------- target and q dtypes


@pytest.mark.parametrize("dtype", NON_FLOATING, ids=str)
@pytest.mark.parametrize("form", ["pose", "matrix"])
@pytest.mark.parametrize("entry", ["solve", "ik", "as_transform"])
def test_non_floating_target_is_refused(panda, dtype, form, entry):
    target = pose_target(dtype) if form == "pose" else torch.eye(4).to(dtype)
    call = {
        "solve": lambda: ik_layer.solve(panda, target),
        "ik": lambda: ik_layer.ik(panda, target),
        "as_transform": lambda: as_transform(target),
    }[entry]
    raises(DTypeError, call, "target", str(dtype))


@pytest.mark.parametrize("dtype", [*NON_FLOATING, F32], ids=str)
def test_check_target_names_the_robot_dtype(panda, dtype):
    raises(DTypeError, lambda: panda.check_target(pose_target(dtype), "goal"), "goal", str(dtype), "float64")


def test_check_target_accepts_poses_and_transforms(panda):
    assert panda.check_target(pose_target(F64)).shape == (4, 4)
    assert panda.check_target(torch.eye(4, dtype=F64)[None]).shape == (1, 4, 4)


@pytest.mark.parametrize("dtype", [*NON_FLOATING, F32, torch.float16], ids=str)
@pytest.mark.parametrize("method", ["check_q", "fk", "fk_jacobian", "to_pinocchio_q", "wrap"])
def test_non_matching_q_dtype_names_the_robot_dtype(panda, dtype, method):
    q = torch.zeros(panda.dof).to(dtype)
    raises(DTypeError, lambda: getattr(panda, method)(q), "q", str(dtype), "float64")


@pytest.mark.parametrize("make", [lambda dof: [0.0] * dof, lambda dof: np.zeros(dof), lambda dof: (0.0,) * dof])
@pytest.mark.parametrize("method", ["check_q", "wrap"])
def test_q_must_be_a_tensor(panda, make, method):
    raises(ShapeError, lambda: getattr(panda, method)(make(panda.dof)), "q", "torch.Tensor")


def test_check_q_names_a_custom_argument(panda):
    raises(ShapeError, lambda: panda.check_q(np.zeros(panda.dof), "warm_start"), "warm_start")
    raises(DTypeError, lambda: panda.check_q(torch.zeros(panda.dof, dtype=torch.long), "posture"), "posture")


def test_wrap_checks_the_shape(panda):
    raises(ShapeError, lambda: panda.wrap(torch.zeros(panda.dof - 1, dtype=F64)), "q", f"(..., {panda.dof})")


# --------------------------------------------------------------------------- meta tensors


@pytest.mark.parametrize(
    ("call", "name"),
    [
        pytest.param(lambda r: ik_layer.solve(r, torch.empty(2, 7, dtype=F64, device="meta")), "target", id="solve"),
        pytest.param(lambda r: ik_layer.ik(r, torch.empty(4, 4, dtype=F64, device="meta")), "target", id="ik"),
        pytest.param(lambda r: as_transform(torch.empty(4, 4, device="meta"), "goal"), "goal", id="as-transform"),
        pytest.param(lambda r: pose_to_matrix(torch.empty(7, device="meta")), "pose", id="pose-to-matrix"),
        pytest.param(lambda r: normalize_quaternion(torch.empty(4, device="meta")), "quaternion", id="normalize"),
        pytest.param(lambda r: r.check_q(torch.empty(3, r.dof, dtype=F64, device="meta")), "q", id="check-q"),
        pytest.param(lambda r: r.fk(torch.empty(r.dof, dtype=F64, device="meta")), "q", id="fk"),
        pytest.param(lambda r: r.wrap(torch.empty(r.dof, dtype=F64, device="meta")), "q", id="wrap"),
        pytest.param(
            lambda r: ik_layer.solve(r, pose_target(F64), warm_start=torch.empty(r.dof, dtype=F64, device="meta")),
            "warm_start",
            id="warm-start",
        ),
    ],
)
def test_meta_tensors_are_refused(panda, call, name):
    raises(DeviceError, lambda: call(panda), name, "meta")


# --------------------------------------------------------------------------- robot dtype and device


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, "float16"], ids=str)
def test_half_precision_robot_is_refused(dtype):
    message = raises(DTypeError, lambda: ik_layer.load_robot("planar3", dtype=dtype), "dtype", "float32", "float64")
    assert "half precision" in message


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64, torch.uint8, "int64", "nonsense", 3])
def test_non_float_robot_dtype_is_refused(dtype):
    raises(DTypeError, lambda: ik_layer.load_robot("planar3", dtype=dtype), "dtype", "float32", "float64")


@pytest.mark.parametrize(("name", "dtype"), [("float32", F32), ("float64", F64), ("torch.float32", F32), (None, F64)])
def test_dtype_names_are_accepted(name, dtype):
    assert ik_layer.load_robot("planar3", dtype=name).dtype == dtype


@pytest.mark.parametrize(
    "convert",
    [
        pytest.param(lambda r: r.to(torch.float16), id="to-half"),
        pytest.param(lambda r: r.to(dtype=torch.bfloat16), id="to-bfloat16-keyword"),
        pytest.param(lambda r: r.to("cpu", torch.int64), id="to-int64"),
        pytest.param(lambda r: r.to(torch.zeros(1, dtype=torch.int32)), id="to-int-tensor"),
        pytest.param(lambda r: r.half(), id="half"),
        pytest.param(lambda r: r.bfloat16(), id="bfloat16"),
        pytest.param(lambda r: r.type(torch.int32), id="type-int32"),
    ],
)
def test_robot_conversion_to_unsupported_dtype_is_refused_before_converting(convert):
    robot = ik_layer.load_robot("planar3")
    raises(DTypeError, lambda: convert(robot), "dtype", "float32", "float64")
    assert robot.dtype == F64 and robot.lower.dtype == robot._place_rot.dtype == F64
    assert robot._chain_cols.dtype == torch.long


def test_robot_conversions_to_supported_dtypes_still_work():
    robot = ik_layer.load_robot("planar3")
    assert robot.to(F32).dtype == F32
    assert robot.double().dtype == F64
    assert robot.to("cpu", F32).to(torch.zeros(1, dtype=F64)).dtype == F64
    assert robot.float().share_memory().dtype == F32
    assert robot.fk(torch.zeros(robot.dof, dtype=F32)).dtype == F32


@pytest.mark.parametrize("device", ["gpu0", "cuda:99", "meta", 1.5, "cpu:x"])
def test_bad_robot_device_is_refused(device):
    raises(DeviceError, lambda: ik_layer.load_robot("planar3", device=device), "device", repr(device))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without CUDA")
def test_cuda_device_without_cuda_is_refused():
    raises(DeviceError, lambda: ik_layer.load_robot("planar3", device="cuda"), "device", "CUDA is not available")
    raises(DeviceError, lambda: ik_layer.load_robot("planar3").cuda(), "device")


@pytest.mark.parametrize(
    ("move", "error"),
    [
        pytest.param(lambda r: r.to("gpu0"), IKLayerError, id="to-malformed"),
        pytest.param(lambda r: r.to("cuda:99"), DeviceError, id="to-missing-index"),
        pytest.param(lambda r: r.to("meta"), DeviceError, id="to-meta"),
        pytest.param(lambda r: r.to_empty(device="meta"), DeviceError, id="to-empty-meta"),
        pytest.param(lambda r: r.cuda(99), DeviceError, id="cuda-missing-index"),
        pytest.param(lambda r: r.to(dtype="float32"), IKLayerError, id="to-dtype-string"),
    ],
)
def test_robot_move_to_bad_device_is_refused(move, error):
    robot = ik_layer.load_robot("planar3")
    raises(error, lambda: move(robot), "device")
    assert robot.device == torch.device("cpu") and robot.dtype == F64


# --------------------------------------------------------------------------- load_robot arguments


@pytest.mark.parametrize("name_or_path", [None, 123, 1.5, b"panda", ["panda"]], ids=repr)
def test_load_robot_name_of_the_wrong_type(name_or_path):
    raises(IKLayerError, lambda: ik_layer.load_robot(name_or_path), "name_or_path", type(name_or_path).__name__)


@pytest.mark.parametrize("name", ["", "a" * 5000, "no_such_robot"])
def test_load_robot_unknown_names(name):
    raises(RobotNotFound, lambda: ik_layer.load_robot(name), "unknown robot", "panda")


@pytest.mark.parametrize("path", ["no/such/dir/" * 3 + "arm.urdf", "no/such/dir/", "x" * 5000 + ".urdf"])
def test_load_robot_missing_files(path):
    message = raises(RobotNotFound, lambda: ik_layer.load_robot(path), "no such file")
    assert "unknown robot" not in message


@pytest.mark.parametrize("ee_frame", [123, b"panda_link8", ["panda_link8"], 1.0], ids=repr)
def test_ee_frame_of_the_wrong_type(ee_frame):
    raises(IKLayerError, lambda: ik_layer.load_robot("panda", ee_frame), "ee_frame", type(ee_frame).__name__)


def test_robot_needs_a_pinocchio_model():
    raises(IKLayerError, lambda: ik_layer.Robot("panda.urdf", "tool"), "model", "pinocchio.Model")


# --------------------------------------------------------------------------- random_q


@pytest.mark.parametrize("shape", [(-1,), -2, (2.5,), "ab", None, ((2,),), (torch.tensor(1.5),)], ids=repr)
def test_random_q_bad_shape(panda, shape):
    raises(ShapeError, lambda: panda.random_q(shape), "shape")


@pytest.mark.parametrize(("shape", "size"), [(3, (3,)), ([2, 3], (2, 3)), (torch.Size([4]), (4,)), ((), ())])
def test_random_q_shapes(panda, shape, size):
    assert panda.random_q(shape).shape == (*size, panda.dof)


@pytest.mark.parametrize("generator", [42, np.random.default_rng(0), "seed"], ids=repr)
def test_random_q_bad_generator(panda, generator):
    raises(IKLayerError, lambda: panda.random_q((2,), generator=generator), "generator", type(generator).__name__)


# --------------------------------------------------------------------------- huge joint limits


HUGE_LIMITS_URDF = """<?xml version="1.0"?>
<robot name="huge">
  <link name="base"/> <link name="l1"/> <link name="l2"/> <link name="l3"/> <link name="tip"/>
  <joint name="j1" type="revolute">
    <parent link="base"/> <child link="l1"/> <axis xyz="0 0 1"/>
    <limit lower="-1e308" upper="1e308" effort="1" velocity="1"/>
  </joint>
  <joint name="j2" type="revolute">
    <parent link="l1"/> <child link="l2"/> <origin xyz="0.5 0 0"/> <axis xyz="0 0 1"/>
    <limit lower="-1e308" upper="1e308" effort="1" velocity="1"/>
  </joint>
  <joint name="j3" type="revolute">
    <parent link="l2"/> <child link="l3"/> <origin xyz="0.4 0 0"/> <axis xyz="0 0 1"/>
    <limit lower="1e307" upper="1.7e308" effort="1" velocity="1"/>
  </joint>
  <joint name="tip" type="fixed"><parent link="l3"/> <child link="tip"/> <origin xyz="0.3 0 0"/></joint>
</robot>
"""


@pytest.mark.parametrize("dtype", [F64, F32], ids=str)
def test_random_q_with_huge_limits_is_finite_and_inside(write_urdf, dtype):
    robot = ik_layer.load_robot(write_urdf(HUGE_LIMITS_URDF), dtype=dtype)
    assert torch.isfinite(robot.lower).all() and torch.isfinite(robot.upper).all()  # float32: clamped to its range
    q = robot.random_q((2000,), generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(q).all()
    assert ((q >= robot.lower) & (q <= robot.upper)).all()
    assert (q[:, 0] < 0).any() and (q[:, 0] > 0).any()  # spread over the whole range, not stuck at a bound
    assert robot.continuous.all()  # limits beyond ±1e6 read as unbounded: the joints wrap (ik_layer.model.limits)


@pytest.mark.parametrize("dtype", [F64, F32], ids=str)
@pytest.mark.parametrize("warm", [False, True])
def test_solve_with_huge_limits_gives_finite_q_and_a_true_flag(write_urdf, dtype, warm):
    robot = ik_layer.load_robot(write_urdf(HUGE_LIMITS_URDF), dtype=dtype)
    q_true = torch.tensor([0.3, 0.5, 0.0], dtype=dtype)
    q_true[2] = robot.random_q((), generator=torch.Generator().manual_seed(1))[2]
    options = SolveOptions(num_seeds=4, max_iterations=60)
    result = ik_layer.solve(
        robot,
        robot.fk(q_true),
        options,
        warm_start=q_true if warm else None,
        generator=torch.Generator().manual_seed(2),
    )
    assert torch.isfinite(result.q).all()
    assert torch.isfinite(result.position_error) and torch.isfinite(result.orientation_error)
    within = (result.position_error <= options.position_tolerance) & (
        result.orientation_error <= options.orientation_tolerance
    )
    assert bool(result.success) == bool(within)
    if warm:
        assert result.success


# --------------------------------------------------------------------------- lie helpers


def _eye(dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.eye(4, dtype=dtype)


@pytest.mark.parametrize(
    ("call", "error", "names"),
    [
        pytest.param(lambda: pose_to_matrix(pose_target(torch.long)), DTypeError, ("pose",), id="pose-to-matrix-long"),
        pytest.param(
            lambda: pose_to_matrix(pose_target(torch.bool), "goal"), DTypeError, ("goal",), id="pose-to-matrix-bool"
        ),
        pytest.param(lambda: matrix_to_pose(_eye(torch.long)), DTypeError, ("transform",), id="matrix-to-pose-long"),
        pytest.param(
            lambda: matrix_to_pose(_eye(torch.complex64)), DTypeError, ("transform",), id="matrix-to-pose-complex"
        ),
        pytest.param(
            lambda: normalize_quaternion(torch.tensor([0, 0, 0, 1])), DTypeError, ("quaternion",), id="normalize-long"
        ),
        pytest.param(
            lambda: normalize_quaternion(torch.ones(4, dtype=torch.bool)),
            DTypeError,
            ("quaternion",),
            id="normalize-bool",
        ),
        pytest.param(
            lambda: normalize_quaternion(torch.ones(4, dtype=torch.complex64), "q0"),
            DTypeError,
            ("q0",),
            id="normalize-complex",
        ),
        pytest.param(
            lambda: quaternion_to_matrix(torch.tensor([0, 0, 0, 1])), DTypeError, ("quaternion",), id="q-to-matrix-long"
        ),
        pytest.param(
            lambda: matrix_to_quaternion(torch.eye(3, dtype=torch.long)),
            DTypeError,
            ("rotation",),
            id="matrix-to-q-long",
        ),
        pytest.param(lambda: invert_transform(_eye(torch.long)), DTypeError, ("transform",), id="invert-long"),
        pytest.param(lambda: invert_transform(_eye(torch.bool)), DTypeError, ("transform",), id="invert-bool"),
        pytest.param(lambda: so3_exp(torch.tensor([0, 0, 1])), DTypeError, ("rotation vector",), id="exp-long"),
        pytest.param(lambda: so3_log(torch.eye(3, dtype=torch.int32)), DTypeError, ("rotation",), id="log-int"),
        pytest.param(
            lambda: pose_error(_eye(torch.long), _eye(torch.long)), DTypeError, ("target",), id="pose-error-long"
        ),
        pytest.param(lambda: pose_error(_eye(), _eye(F32)), DTypeError, ("target", "current"), id="pose-error-mixed"),
        pytest.param(
            lambda: pose_error(_eye().expand(2, 4, 4), _eye().expand(3, 4, 4)),
            ShapeError,
            ("target", "current"),
            id="pose-error-batch",
        ),
        pytest.param(lambda: skew(torch.zeros(4)), ShapeError, ("vector",), id="skew-4"),
        pytest.param(lambda: skew([1.0, 2.0, 3.0]), ShapeError, ("vector",), id="skew-list"),
        pytest.param(lambda: skew(torch.tensor([1, 2, 3])), DTypeError, ("vector",), id="skew-long"),
        pytest.param(lambda: vee(torch.zeros(2)), ShapeError, ("matrix",), id="vee-1d"),
        pytest.param(lambda: vee(torch.zeros(3, 3, dtype=torch.long)), DTypeError, ("matrix",), id="vee-long"),
        pytest.param(
            lambda: from_rotation_translation(torch.eye(3), torch.zeros(4)), ShapeError, ("translation",), id="frt-4"
        ),
        pytest.param(
            lambda: from_rotation_translation([[1.0] * 3] * 3, torch.zeros(3)), ShapeError, ("rotation",), id="frt-list"
        ),
        pytest.param(
            lambda: from_rotation_translation(torch.eye(3, dtype=F64), torch.zeros(3)),
            DTypeError,
            ("rotation", "translation"),
            id="frt-mixed",
        ),
        pytest.param(
            lambda: from_rotation_translation(torch.eye(3).expand(2, 3, 3), torch.zeros(3, 3)),
            ShapeError,
            ("rotation", "translation"),
            id="frt-batch",
        ),
        pytest.param(
            lambda: as_transform(torch.eye(4, dtype=torch.int32), "tool"), DTypeError, ("tool",), id="as-transform-name"
        ),
    ],
)
def test_lie_helpers_refuse_bad_inputs(call, error, names):
    raises(error, call, *names)


@pytest.mark.parametrize(
    ("quaternion", "dtype"),
    [([1e200, 0, 0, 1e200], F64), ([1e30, 0, 0, 1e30], F32), ([0, 3e38, 0, 3e38], F32), ([0, 0, 1e-3, 1e300], F64)],
)
def test_normalize_quaternion_does_not_overflow(quaternion, dtype):
    unit = normalize_quaternion(torch.tensor(quaternion, dtype=dtype))
    expected = torch.tensor(quaternion, dtype=F64)
    expected = expected / expected.abs().max()
    torch.testing.assert_close(unit, (expected / expected.norm()).to(dtype))


def test_pose_with_a_huge_quaternion_is_its_rotation_but_no_target():
    pose = torch.tensor([0.1, 0.2, 0.3, 0.0, 0.0, 1e300, 1e300], dtype=F64)
    expected = so3_exp(torch.tensor([0.0, 0.0, torch.pi / 2], dtype=F64))
    torch.testing.assert_close(pose_to_matrix(pose)[:3, :3], expected)  # the math helper takes any norm
    raises(ik_layer.IKLayerError, lambda: as_transform(pose, "goal"), "goal quaternion", "norm 1.414e+300")


# 0.71 / 0.71: the entries of a unit quaternion written to two decimals (norm 1.0041), within the bound
@pytest.mark.parametrize(
    "scale", [1 - 0.999 * QUATERNION_NORM_TOLERANCE, 0.71 / math.sqrt(0.5), 1.0, 1 + 0.999 * QUATERNION_NORM_TOLERANCE]
)
def test_target_quaternions_near_unit_norm_are_normalised(scale):
    quaternion = torch.tensor([0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)], dtype=F64)  # 90 degrees about z
    matrix = as_transform(torch.cat((torch.zeros(3, dtype=F64), scale * quaternion)))
    expected = so3_exp(torch.tensor([0.0, 0.0, torch.pi / 2], dtype=F64))
    torch.testing.assert_close(matrix[:3, :3], expected, atol=1e-15, rtol=0)


@pytest.mark.parametrize(
    "scale", [0.0, 0.5, 1 - 1.01 * QUATERNION_NORM_TOLERANCE, 1 + 1.01 * QUATERNION_NORM_TOLERANCE, 2.0]
)
def test_target_quaternions_far_from_unit_norm_are_refused(scale):
    rows = torch.tensor([[0, 0, 0, 0, 0, 0, 1.0]] * 3, dtype=F64)
    rows[1, 3:] *= scale  # one bad row among good ones is found
    raises(ik_layer.IKLayerError, lambda: as_transform(rows, "goal"), "goal quaternion", f"norm {scale:.4g}")


def test_tiny_quaternion_is_still_refused_as_zero():
    raises(ik_layer.NonFiniteError, lambda: pose_to_matrix(torch.tensor([0, 0, 0, 1e-10, 0, 0, 0], dtype=F64)), "pose")
