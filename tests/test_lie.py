"""SO(3)/SE(3) helpers: known values, round trips, edge angles, gradients and bad inputs."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd import forward_ad

from ik_layer.exceptions import IKLayerError, NonFiniteError, ShapeError
from ik_layer.model.lie import (
    as_transform,
    from_rotation_translation,
    invert_transform,
    matrix_to_pose,
    matrix_to_quaternion,
    pose_error,
    pose_to_matrix,
    quaternion_to_matrix,
    skew,
    so3_exp,
    so3_log,
    vee,
)

F64 = torch.float64
S = math.sqrt(0.5)
DTYPES = [pytest.param(torch.float64, id="f64"), pytest.param(torch.float32, id="f32")]
TOL = {torch.float64: 1e-12, torch.float32: 2e-6}
BATCHES = [pytest.param((), id="scalar"), pytest.param((5,), id="5"), pytest.param((2, 3), id="2x3")]


def t(x, dtype=F64) -> torch.Tensor:
    return torch.tensor(x, dtype=dtype)


def random_rotvec(gen: torch.Generator, shape: tuple[int, ...], max_angle: float = math.pi, dtype=F64) -> torch.Tensor:
    axis = torch.randn(*shape, 3, generator=gen, dtype=F64)
    axis = axis / axis.norm(dim=-1, keepdim=True)
    angle = torch.rand(*shape, 1, generator=gen, dtype=F64) * max_angle
    return (axis * angle).to(dtype)


def same_rotvec(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Distance between rotations a and b given as rotation vectors (handles the pi ambiguity)."""
    return (so3_exp(a) - so3_exp(b)).abs().amax(dim=(-2, -1))


def assert_rotation(r: torch.Tensor, tol: float) -> None:
    eye = torch.eye(3, dtype=r.dtype)
    torch.testing.assert_close(r @ r.transpose(-1, -2), eye.expand_as(r), atol=tol, rtol=0)
    torch.testing.assert_close(torch.linalg.det(r), torch.ones(r.shape[:-2], dtype=r.dtype), atol=tol, rtol=0)


# --------------------------------------------------------------------------- quaternions

KNOWN = [
    pytest.param([0, 0, 0, 1], [[1, 0, 0], [0, 1, 0], [0, 0, 1]], id="identity"),
    pytest.param([S, 0, 0, S], [[1, 0, 0], [0, 0, -1], [0, 1, 0]], id="x90"),
    pytest.param([0, S, 0, S], [[0, 0, 1], [0, 1, 0], [-1, 0, 0]], id="y90"),
    pytest.param([0, 0, S, S], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], id="z90"),
    pytest.param([1, 0, 0, 0], [[1, 0, 0], [0, -1, 0], [0, 0, -1]], id="x180"),
    pytest.param([0, 1, 0, 0], [[-1, 0, 0], [0, 1, 0], [0, 0, -1]], id="y180"),
    pytest.param([0, 0, 1, 0], [[-1, 0, 0], [0, -1, 0], [0, 0, 1]], id="z180"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("quat", "matrix"), KNOWN)
def test_quaternion_known_values(quat, matrix, dtype):
    q, m = t(quat, dtype), t(matrix, dtype)
    torch.testing.assert_close(quaternion_to_matrix(q), m, atol=TOL[dtype], rtol=0)
    back = matrix_to_quaternion(m)
    assert back[3] >= 0
    # At 180 degrees w = 0 and q, -q are both valid.
    assert min((back - q).abs().max(), (back + q).abs().max()) < TOL[dtype]


def test_quaternion_unnormalised_input_is_normalised():
    q = t([0.1, -0.2, 0.3, 0.9])
    torch.testing.assert_close(quaternion_to_matrix(7.5 * q), quaternion_to_matrix(q), atol=1e-14, rtol=0)
    assert_rotation(quaternion_to_matrix(7.5 * q), 1e-14)


def test_quaternion_sign_convention_w_nonnegative(rng):
    q = torch.randn(200, 4, generator=rng, dtype=F64)
    q = q / q.norm(dim=-1, keepdim=True)
    q_neg = torch.where(q[:, 3:] > 0, -q, q)  # all with w <= 0
    back = matrix_to_quaternion(quaternion_to_matrix(q_neg))
    assert (back[:, 3] >= 0).all()
    torch.testing.assert_close(back, -q_neg, atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_quaternion_round_trip_batched(rng, batch, dtype):
    q = torch.randn(*batch, 4, generator=rng, dtype=F64)
    q = (q / q.norm(dim=-1, keepdim=True)).to(dtype)
    q = torch.where(q[..., 3:] < 0, -q, q)
    r = quaternion_to_matrix(q)
    assert r.shape == (*batch, 3, 3)
    assert_rotation(r, 10 * TOL[dtype])
    torch.testing.assert_close(matrix_to_quaternion(r), q, atol=10 * TOL[dtype], rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gap", [0.0, 1e-12, 1e-9, 1e-7, 1e-4, 1e-2])
def test_matrix_to_quaternion_near_pi(rng, gap, dtype):
    """Rotations at pi - gap about random axes (every pivot of Shepperd's method gets exercised)."""
    axis = torch.randn(64, 3, generator=rng, dtype=F64)
    axis = axis / axis.norm(dim=-1, keepdim=True)
    r = so3_exp(axis * (math.pi - gap)).to(dtype)
    r_back = quaternion_to_matrix(matrix_to_quaternion(r))
    torch.testing.assert_close(r_back, r, atol=10 * TOL[dtype], rtol=0)


unit_quaternions = st.tuples(*[st.floats(-1, 1, allow_nan=False) for _ in range(4)]).filter(
    lambda v: sum(x * x for x in v) > 1e-3
)


@settings(max_examples=200, deadline=None)
@given(unit_quaternions)
def test_quaternion_round_trip_property(v):
    q = t(v)
    q = q / q.norm()
    back = matrix_to_quaternion(quaternion_to_matrix(q))
    assert abs(back.norm() - 1) < 1e-12
    assert min((back - q).abs().max(), (back + q).abs().max()) < 1e-12


# --------------------------------------------------------------------------- poses


def test_pose_to_matrix_known_value():
    pose = t([1.0, -2.0, 3.0, 0, 0, S, S])  # 90 degrees about z
    expected = t([[0, -1, 0, 1], [1, 0, 0, -2], [0, 0, 1, 3], [0, 0, 0, 1]])
    torch.testing.assert_close(pose_to_matrix(pose), expected, atol=1e-15, rtol=0)
    torch.testing.assert_close(matrix_to_pose(expected), pose, atol=1e-15, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_pose_round_trip(rng, batch, dtype):
    q = torch.randn(*batch, 4, generator=rng, dtype=F64)
    q = q / q.norm(dim=-1, keepdim=True)
    q = torch.where(q[..., 3:] < 0, -q, q)
    pose = torch.cat((torch.randn(*batch, 3, generator=rng, dtype=F64), q), -1).to(dtype)
    m = pose_to_matrix(pose)
    assert m.shape == (*batch, 4, 4)
    torch.testing.assert_close(m[..., 3, :], t([0, 0, 0, 1], dtype).expand(*batch, 4), atol=0, rtol=0)
    torch.testing.assert_close(matrix_to_pose(m), pose, atol=10 * TOL[dtype], rtol=0)
    torch.testing.assert_close(as_transform(pose), m, atol=0, rtol=0)
    torch.testing.assert_close(as_transform(m), m, atol=0, rtol=0)


@pytest.mark.parametrize("batch", BATCHES)
def test_invert_transform(rng, batch):
    m = from_rotation_translation(so3_exp(random_rotvec(rng, batch)), torch.randn(*batch, 3, generator=rng, dtype=F64))
    inv = invert_transform(m)
    eye = torch.eye(4, dtype=F64).expand(*batch, 4, 4)
    torch.testing.assert_close(inv @ m, eye, atol=1e-14, rtol=0)
    torch.testing.assert_close(m @ inv, eye, atol=1e-14, rtol=0)
    torch.testing.assert_close(inv, torch.linalg.inv(m), atol=1e-13, rtol=0)


# --------------------------------------------------------------------------- exp / log


def test_skew_vee():
    v, u = t([1.0, -2.0, 0.5]), t([0.3, 0.1, -0.7])
    torch.testing.assert_close(skew(v) @ u, torch.linalg.cross(v, u), atol=1e-15, rtol=0)
    torch.testing.assert_close(vee(skew(v)), v, atol=0, rtol=0)


@pytest.mark.parametrize(
    ("w", "r"),
    [
        pytest.param([0, 0, 0], [[1, 0, 0], [0, 1, 0], [0, 0, 1]], id="zero"),
        pytest.param([math.pi / 2, 0, 0], [[1, 0, 0], [0, 0, -1], [0, 1, 0]], id="x90"),
        pytest.param([0, math.pi / 2, 0], [[0, 0, 1], [0, 1, 0], [-1, 0, 0]], id="y90"),
        pytest.param([0, 0, math.pi / 2], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], id="z90"),
        pytest.param([math.pi, 0, 0], [[1, 0, 0], [0, -1, 0], [0, 0, -1]], id="x180"),
        pytest.param([0, 0, math.pi], [[-1, 0, 0], [0, -1, 0], [0, 0, 1]], id="z180"),
    ],
)
def test_exp_log_known_values(w, r):
    torch.testing.assert_close(so3_exp(t(w)), t(r), atol=1e-15, rtol=0)
    w_back = so3_log(t(r))
    # At exactly pi, w and -w are the same rotation; the angle must be pi either way.
    assert min((w_back - t(w)).abs().max(), (w_back + t(w)).abs().max()) < 1e-15


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_exp_log_round_trip(rng, batch, dtype):
    w = random_rotvec(rng, batch, max_angle=math.pi - 1e-3, dtype=dtype)
    r = so3_exp(w)
    assert r.shape == (*batch, 3, 3)
    assert_rotation(r, 10 * TOL[dtype])
    torch.testing.assert_close(so3_log(r), w, atol=20 * TOL[dtype], rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("angle", [0.0, 1e-12, 1e-9, 1e-6, 1e-4, 1.01e-4, 1e-3])
def test_exp_log_near_zero(rng, angle, dtype):
    w = random_rotvec(rng, (32,), dtype=F64)
    w = (w / w.norm(dim=-1, keepdim=True) * angle).to(dtype)
    r = so3_exp(w)
    assert_rotation(r, TOL[dtype])
    # Relative accuracy, not just absolute: the series must keep tiny angles.
    torch.testing.assert_close(so3_log(r), w, atol=TOL[dtype] * max(angle, 1e-300) + 1e-300, rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gap", [0.0, 1e-12, 1e-9, 1e-7, 3e-5, 1e-4, 1e-3, 1e-2, 0.5])
def test_exp_log_near_pi(rng, gap, dtype):
    """Angles pi - gap: the log recovers the rotation (and the rotation vector unless gap ~ 0)."""
    axis = torch.randn(64, 3, generator=rng, dtype=F64)
    axis = axis / axis.norm(dim=-1, keepdim=True)
    w = axis * (math.pi - gap)
    r = so3_exp(w).to(dtype)
    w_back = so3_log(r)
    assert (w_back.norm(dim=-1) <= math.pi + 10 * TOL[dtype]).all()
    assert same_rotvec(w_back.double(), w).max() < 10 * TOL[dtype]
    if gap > 1e-3 or (dtype == F64 and gap > 0):
        torch.testing.assert_close(w_back.double(), w, atol=10 * TOL[dtype], rtol=0)


def test_log_exactly_pi_about_coordinate_axes():
    """v = vee(R) vanishes exactly here: the angle must still be pi (not atan2(1, -1) = 3 pi / 4)."""
    for i in range(3):
        w = torch.zeros(3, dtype=F64)
        w[i] = math.pi
        r = torch.diag(torch.where(torch.arange(3) == i, 1.0, -1.0).double())
        w_back = so3_log(r)
        assert abs(w_back.norm() - math.pi) < 1e-15
        torch.testing.assert_close(w_back.abs(), w, atol=1e-15, rtol=0)


@settings(max_examples=200, deadline=None)
@given(
    st.tuples(*[st.floats(-1, 1, allow_nan=False) for _ in range(3)]).filter(lambda v: sum(x * x for x in v) > 1e-6),
    st.floats(0, math.pi),
)
def test_exp_log_round_trip_property(axis, angle):
    a = t(axis)
    w = a / a.norm() * angle
    w_back = so3_log(so3_exp(w))
    assert w_back.norm() <= math.pi + 1e-12
    assert same_rotvec(w_back, w) < 1e-12
    if angle < math.pi - 1e-6:
        assert (w_back - w).abs().max() < 1e-10


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("scale", [0.0, 1e-9, 1e-5, 0.3, 2.0, 3.0])
def test_log_of_exp_gradient(rng, scale):
    """d log(exp(w)) / dw = I near 0 (smooth at the identity); gradcheck everywhere below pi."""
    w0 = random_rotvec(rng, (), dtype=F64)
    w = (w0 / w0.norm() * scale).requires_grad_()
    jac = torch.autograd.functional.jacobian(lambda x: so3_log(so3_exp(x)), w)
    assert torch.isfinite(jac).all()
    torch.testing.assert_close(jac, torch.eye(3, dtype=F64), atol=1e-8, rtol=0)
    assert torch.autograd.gradcheck(lambda x: so3_log(so3_exp(x)), (w,), eps=1e-7, atol=1e-6)


def test_log_gradient_finite_at_identity_matrix():
    r = torch.eye(3, dtype=F64, requires_grad=True)
    w = so3_log(r)
    grads = [torch.autograd.grad(w[i], r, retain_graph=True)[0] for i in range(3)]
    u = t([0.3, -1.2, 0.7])
    for i, g in enumerate(grads):
        assert torch.isfinite(g).all()
        # Along the tangent direction [u]x at the identity, log moves by u.
        torch.testing.assert_close((g * skew(u)).sum(), u[i], atol=1e-12, rtol=0)


@pytest.mark.parametrize("angle", [0.5, 2.0, 3.0])
def test_gradcheck_rotation_functions(rng, angle):
    w = random_rotvec(rng, (4,), dtype=F64)
    w = (w / w.norm(dim=-1, keepdim=True) * angle).requires_grad_()
    r = so3_exp(w).detach().requires_grad_()
    q = matrix_to_quaternion(r).detach().requires_grad_()
    assert torch.autograd.gradcheck(so3_exp, (w,))
    assert torch.autograd.gradcheck(so3_log, (r,))
    assert torch.autograd.gradcheck(quaternion_to_matrix, (q,))
    assert torch.autograd.gradcheck(matrix_to_quaternion, (r,))


# --------------------------------------------------------------------------- pose error


def left_jacobian_inverse(e: torch.Tensor) -> torch.Tensor:
    """Closed form Jl^-1(e) = I - [e]/2 + (1/th^2 - (1 + cos th) / (2 th sin th)) [e]^2."""
    th = e.norm()
    k = skew(e)
    c = 1 / th**2 - (1 + torch.cos(th)) / (2 * th * torch.sin(th))
    return torch.eye(3, dtype=e.dtype) - k / 2 + c * (k @ k)


def transform(rotvec, p) -> torch.Tensor:
    return from_rotation_translation(so3_exp(t(rotvec)), t(p))


def test_pose_error_known_values():
    cur = transform([0.1, -0.4, 0.2], [0.3, 0.2, 0.1])
    torch.testing.assert_close(pose_error(cur, cur), torch.zeros(6, dtype=F64), atol=1e-15, rtol=0)
    shifted = cur.clone()
    shifted[:3, 3] += t([1.0, 2.0, 3.0])
    torch.testing.assert_close(pose_error(shifted, cur), t([1.0, 2.0, 3.0, 0, 0, 0]), atol=1e-15, rtol=0)
    # Target rotated about its own origin by 0.7 rad about world z: error [0; 0.7 z].
    rotated = from_rotation_translation(so3_exp(t([0, 0, 0.7])) @ cur[:3, :3], cur[:3, 3])
    torch.testing.assert_close(pose_error(rotated, cur), t([0, 0, 0, 0, 0, 0.7]), atol=1e-15, rtol=0)
    # Identity current: the error is the target's translation and rotation vector.
    torch.testing.assert_close(
        pose_error(transform([0.5, -1.0, 2.0], [1, 2, 3]), torch.eye(4, dtype=F64)),
        t([1, 2, 3, 0.5, -1.0, 2.0]),
        atol=1e-14,
        rtol=0,
    )


@pytest.mark.parametrize("batch", BATCHES)
def test_pose_error_batched_and_antisymmetric(rng, batch):
    a = from_rotation_translation(
        so3_exp(random_rotvec(rng, batch, 2.0)), torch.randn(*batch, 3, generator=rng, dtype=F64)
    )
    b = from_rotation_translation(
        so3_exp(random_rotvec(rng, batch, 1.0)), torch.randn(*batch, 3, generator=rng, dtype=F64)
    )
    e = pose_error(a, b)
    assert e.shape == (*batch, 6)
    torch.testing.assert_close(e[..., :3], -pose_error(b, a)[..., :3], atol=1e-14, rtol=0)
    # exp(e_rot) R_current = R_target
    torch.testing.assert_close(so3_exp(e[..., 3:]) @ b[..., :3, :3], a[..., :3, :3], atol=1e-13, rtol=0)


def perturb_target(target: torch.Tensor, twist: torch.Tensor) -> torch.Tensor:
    """Move the target by [dv; dw] about its own origin, axes of the world (LOCAL_WORLD_ALIGNED)."""
    return from_rotation_translation(so3_exp(twist[3:]) @ target[:3, :3], target[:3, 3] + twist[:3])


def test_pose_error_first_order_in_target_twist_at_zero_error(rng):
    """The docstring's claim: at zero error a target twist [dv; dw] changes the error by [dv; dw]."""
    target = transform([0.4, -0.3, 1.1], [0.5, -0.2, 0.8])
    twist = torch.randn(6, generator=rng, dtype=F64)
    for h in (1e-3, 1e-4, 1e-5):
        de = pose_error(perturb_target(target, h * twist), target)
        assert (de - h * twist).abs().max() < 2 * h**2 * twist.norm() ** 2
    jac = torch.autograd.functional.jacobian(
        lambda x: pose_error(perturb_target(target, x), target), torch.zeros(6, dtype=F64)
    )
    torch.testing.assert_close(jac, torch.eye(6, dtype=F64), atol=1e-12, rtol=0)


def test_pose_error_derivative_away_from_zero_error():
    """Away from zero error the translation part still moves by dv; the rotation part by Jl^-1(e) dw."""
    target = transform([0.4, -0.3, 1.1], [0.5, -0.2, 0.8])
    current = transform([-0.2, 0.9, 0.1], [0.1, 0.3, 0.2])
    e_rot = pose_error(target, current)[3:]
    jac = torch.autograd.functional.jacobian(
        lambda x: pose_error(perturb_target(target, x), current), torch.zeros(6, dtype=F64)
    )
    torch.testing.assert_close(jac[:3], torch.eye(6, dtype=F64)[:3], atol=1e-12, rtol=0)
    torch.testing.assert_close(jac[3:, :3], torch.zeros(3, 3, dtype=F64), atol=1e-12, rtol=0)
    torch.testing.assert_close(jac[3:, 3:], left_jacobian_inverse(e_rot), atol=1e-10, rtol=0)


def test_pose_error_first_order_in_current_motion_at_zero_error(rng):
    """Moving the current frame by a world-aligned twist d changes the error by -d (so by -J dq for joints)."""
    current = transform([0.4, -0.3, 1.1], [0.5, -0.2, 0.8])
    jac = torch.autograd.functional.jacobian(
        lambda x: pose_error(current, perturb_target(current, x)), torch.zeros(6, dtype=F64)
    )
    torch.testing.assert_close(jac, -torch.eye(6, dtype=F64), atol=1e-12, rtol=0)


def test_pose_error_gradcheck(rng):
    a = from_rotation_translation(so3_exp(random_rotvec(rng, (3,), 2.5)), torch.randn(3, 3, generator=rng, dtype=F64))
    b = from_rotation_translation(so3_exp(random_rotvec(rng, (3,), 2.5)), torch.randn(3, 3, generator=rng, dtype=F64))
    assert torch.autograd.gradcheck(pose_error, (a.requires_grad_(), b.requires_grad_()))


# --------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    ("call", "error"),
    [
        pytest.param(lambda: quaternion_to_matrix(torch.zeros(4)), NonFiniteError, id="zero-quaternion"),
        pytest.param(lambda: quaternion_to_matrix(t([0, 0, float("nan"), 1])), NonFiniteError, id="nan-quaternion"),
        pytest.param(lambda: quaternion_to_matrix(t([0, 0, float("inf"), 1])), NonFiniteError, id="inf-quaternion"),
        pytest.param(lambda: quaternion_to_matrix(torch.ones(3)), ShapeError, id="quaternion-3"),
        pytest.param(lambda: quaternion_to_matrix([0, 0, 0, 1]), ShapeError, id="quaternion-list"),
        pytest.param(lambda: matrix_to_quaternion(torch.eye(4)), ShapeError, id="matrix-4x4"),
        pytest.param(lambda: matrix_to_quaternion(torch.ones(3)), ShapeError, id="matrix-1d"),
        pytest.param(lambda: pose_to_matrix(torch.ones(6)), ShapeError, id="pose-6"),
        pytest.param(lambda: pose_to_matrix(t([0, 0, 0, 0, 0, 0, 0])), NonFiniteError, id="pose-zero-quaternion"),
        pytest.param(lambda: pose_to_matrix(t([float("nan"), 0, 0, 0, 0, 0, 1])), NonFiniteError, id="pose-nan"),
        pytest.param(lambda: matrix_to_pose(torch.eye(3)), ShapeError, id="matrix-to-pose-3x3"),
        pytest.param(lambda: so3_log(torch.eye(4)), ShapeError, id="log-4x4"),
        pytest.param(lambda: so3_exp(torch.ones(4)), ShapeError, id="exp-4"),
        pytest.param(lambda: so3_exp(torch.tensor(1.0)), ShapeError, id="exp-scalar"),
        pytest.param(lambda: invert_transform(torch.eye(3)), ShapeError, id="invert-3x3"),
        pytest.param(lambda: pose_error(torch.ones(7), torch.eye(4)), ShapeError, id="pose-error-7"),
        pytest.param(lambda: pose_error(torch.eye(4), torch.eye(3)), ShapeError, id="pose-error-3x3"),
        pytest.param(lambda: as_transform(torch.ones(2, 6)), ShapeError, id="as-transform-6"),
        pytest.param(lambda: as_transform("pose"), ShapeError, id="as-transform-str"),
        pytest.param(lambda: as_transform(torch.full((4, 4), float("nan"))), NonFiniteError, id="as-transform-nan"),
        pytest.param(lambda: as_transform(t([0, 0, 0, 0, 0, 0, 0])), IKLayerError, id="as-transform-zero-q"),
    ],
)
def test_bad_inputs_raise_the_family(call, error):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, IKLayerError) and isinstance(info.value, ValueError)
    assert str(info.value)


def test_error_messages_name_the_argument():
    with pytest.raises(NonFiniteError, match="goal quaternion"):
        pose_to_matrix(t([0, 0, 0, 0, 0, 0, 0]), name="goal")
    with pytest.raises(ShapeError, match=r"\(\.\.\., 7\).*\(6,\)"):
        pose_to_matrix(torch.ones(6))


def _broken(kind: str, dtype: torch.dtype) -> torch.Tensor:
    """Two transforms (2, 4, 4), the second broken as ``kind`` says (beyond the dtype's tolerance)."""
    m = pose_to_matrix(torch.tensor([[0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.9]] * 2, dtype=dtype))
    bad = 1e-5 if dtype == torch.float64 else 1e-2  # tolerances: 1e-6 / 1e-3
    if kind == "scaled":
        m[1, :3, :3] *= 1 + bad
    elif kind == "reflected":
        m[1, :3, 0] *= -1
    elif kind == "bottom":
        m[1, 3, 0] = bad
    elif kind == "inf":
        m[1, 0, 3] = float("inf")
    return m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["rigid", "scaled", "reflected", "bottom", "inf"])
@pytest.mark.parametrize("host", [True, False], ids=["numpy", "torch"])
def test_as_transform_checks_agree_on_the_numpy_and_torch_paths(kind, dtype, host, monkeypatch):
    monkeypatch.setattr("ik_layer.model.lie._HOST_CHECK_MAX", 4096 if host else 0)
    messages = {
        "scaled": "rotation blocks must be orthonormal",
        "reflected": "rotation blocks must be orthonormal",
        "bottom": "bottom rows must be",
        "inf": "holds NaN or infinite",
    }
    m = _broken(kind, dtype)
    if kind == "rigid":
        assert as_transform(m) is m
        return
    with pytest.raises(IKLayerError, match=messages[kind]):
        as_transform(m, "goal")


def test_as_transform_is_differentiable_under_torch_func(rng):
    """The checks read small CPU inputs in numpy; under ``torch.func`` (tensors without storage) they fall back
    to torch, and the derivative is the identity map's."""
    pose = from_rotation_translation(so3_exp(random_rotvec(rng, (3,))), torch.randn(3, 3, generator=rng, dtype=F64))
    jac = torch.func.jacrev(as_transform)(pose)  # (3, 4, 4, 3, 4, 4)
    torch.testing.assert_close(jac, torch.eye(48, dtype=F64).reshape(jac.shape), rtol=0, atol=0)


def test_pose_to_matrix_keeps_forward_mode_tangents_of_a_single_pose() -> None:
    """A small CPU pose without gradient takes numpy arithmetic: never one that carries a forward-mode tangent."""
    pose = torch.tensor([0.1, -0.2, 0.3, 0.2, -0.1, 0.3, 0.9], dtype=torch.float64)
    direction = torch.tensor([0.3, 0.1, -0.2, 0.5, -0.4, 0.2, 0.1], dtype=torch.float64)
    with forward_ad.dual_level():
        tangent = forward_ad.unpack_dual(pose_to_matrix(forward_ad.make_dual(pose, direction))).tangent
    expected = torch.func.jacrev(pose_to_matrix)(pose) @ direction
    assert tangent is not None and float(expected.abs().max()) > 0.1
    torch.testing.assert_close(tangent, expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pose_to_matrix_takes_the_same_arithmetic_on_both_paths(dtype, rng, monkeypatch) -> None:
    """Small CPU poses without gradient convert in numpy, the rest in torch: the same matrices, bit for bit, at every
    scale and batch size, and the same refusal of a zero quaternion."""
    for n in (1, 3, 64, 500):
        for scale in (1e-3, 1.0, 1e3):
            pose = (torch.randn(n, 7, generator=rng, dtype=F64) * scale).to(dtype)
            in_numpy = pose_to_matrix(pose)
            monkeypatch.setattr("ik_layer.model.lie._HOST_CHECK_MAX", 0)
            in_torch = pose_to_matrix(pose)
            monkeypatch.undo()
            assert in_numpy.dtype == dtype and torch.equal(in_numpy, in_torch)
    zero = torch.tensor([[0.1, 0.2, 0.3, 0.0, 0.0, 0.0, 0.0]], dtype=dtype)
    for limit in (4096, 0):
        monkeypatch.setattr("ik_layer.model.lie._HOST_CHECK_MAX", limit)
        with pytest.raises(NonFiniteError, match="goal quaternion has zero norm"):
            pose_to_matrix(zero, "goal")
