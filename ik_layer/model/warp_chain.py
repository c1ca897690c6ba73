"""The robot's chains in warp: types, the chain struct a kernel binds, and forward kinematics with its Jacobian.

:func:`chain_functions` gives the warp functions that walk a :class:`~ik_layer.model.chain.ChainDescription`
(one thread per configuration): the frames' poses, and with them the Jacobian. The fused FK kernel
(:mod:`ik_layer.model.fk_kernel`) and the LM engine (:mod:`ik_layer.engine.device.kernel`) are built from the same
functions, so they give the same bits.
"""

# No `from __future__ import annotations`: warp reads the functions' annotations as live types.
import functools
import weakref
from types import SimpleNamespace

import torch
import warp as wp

from ik_layer.model.chain import ChainDescription, Layout
from ik_layer.model.sparsity import normal_pattern
from ik_layer.model.trig import sin_cos_function
from ik_layer.model.warp_runtime import bind_struct, init_warp

__all__ = ["KERNEL_OPTIONS", "bind_chain", "chain_functions", "chain_struct", "warp_types"]

_WARP_FLOAT = {torch.float32: wp.float32, torch.float64: wp.float64}

# How the kernels compile: no adjoint (the layer's gradients are implicit) and loops unrolled up to 4 (measured ad
# hoc on the 2-core machine: a cold compile of talos' whole body takes 8 s instead of 32, at the same speed).
KERNEL_OPTIONS = {"module": "unique", "enable_backward": False, "module_options": {"max_unroll": 4}}

# Per description: the chain struct bound to its tensors, and the tensors it views (kept alive with it).
_BOUND: "weakref.WeakKeyDictionary[ChainDescription, tuple[object, dict[str, torch.Tensor]]]" = (
    weakref.WeakKeyDictionary()
)


@functools.cache
def warp_types(dtype: torch.dtype) -> tuple[type, type, type, type, type]:
    """Warp ``(scalar, vec2, vec3, vec6, mat33)`` types of a torch float dtype."""
    if dtype not in _WARP_FLOAT:
        raise TypeError(f"the LM kernel supports torch.float32 and torch.float64, got {dtype}")
    f = _WARP_FLOAT[dtype]
    return f, wp.types.vector(2, f), wp.types.vector(3, f), wp.types.vector(6, f), wp.types.matrix((3, 3), f)


@functools.cache
def chain_struct(dtype: torch.dtype) -> type:
    """The warp struct of a robot's chains as the kernel reads them (F x length entries in a row, as
    :class:`~ik_layer.model.chain.ChainDescription`), and of its joints' limits, for ``dtype`` floats."""
    f, _, vec3, _, mat33 = warp_types(dtype)

    @wp.struct
    class Chain:
        place_rot: wp.array(dtype=mat33)  # per entry: placement rotation, R K and R K^2 (K the axis' skew)
        place_rot_k: wp.array(dtype=mat33)
        place_rot_k2: wp.array(dtype=mat33)
        place_pos: wp.array(dtype=vec3)  # placement translation
        slide: wp.array(dtype=vec3)  # R s for prismatic entries
        axis: wp.array(dtype=vec3)  # unit axis in the joint frame
        revolute: wp.array(dtype=wp.int32)
        cols: wp.array(dtype=wp.int32)  # the coordinate moving the entry: q[col] * scale + offset
        scale: wp.array(dtype=f)
        offset: wp.array(dtype=f)
        tip_rot: wp.array(dtype=mat33)  # per frame: its placement in the last entry's frame
        tip_pos: wp.array(dtype=vec3)
        lower: wp.array(dtype=f)  # per joint coordinate
        upper: wp.array(dtype=f)
        continuous: wp.array(dtype=wp.int32)
        full_turn: wp.array(dtype=wp.int32)  # past a limit: back by whole turns
        order: wp.array(dtype=wp.int32)  # the normal equations' sparsity (ik_layer.model.sparsity.normal_pattern)
        first: wp.array(dtype=wp.int32)
        frame_slots: wp.array(dtype=wp.int32)
        frame_count: wp.array(dtype=wp.int32)

    return Chain


def bind_chain(chains: ChainDescription) -> object:
    """The :func:`chain_struct` of ``chains`` (warp views of its tensors, int32 flags and indices, each frame's tip
    split in rotation and position, the sparsity of its normal equations), made once per description and kept with
    the tensors it views."""
    held = _BOUND.get(chains)
    if held is not None:
        return held[0]
    init_warp()
    tensors = {
        "place_rot": chains.place_rot.contiguous(),
        "place_rot_k": chains.place_rot_k.contiguous(),
        "place_rot_k2": chains.place_rot_k2.contiguous(),
        "place_pos": chains.place_pos.contiguous(),
        "slide": chains.slide.contiguous(),
        "axis": chains.axis.contiguous(),
        "revolute": chains.revolute.to(torch.int32),
        "cols": chains.cols.to(torch.int32),
        "scale": chains.scale.contiguous(),
        "offset": chains.offset.contiguous(),
        "tip_rot": chains.tip[:, :3, :3].contiguous(),
        "tip_pos": chains.tip[:, :3, 3].contiguous(),
        "lower": chains.lower.contiguous(),
        "upper": chains.upper.contiguous(),
        "continuous": chains.continuous.to(torch.int32),
        "full_turn": chains.full_turn.to(torch.int32),
        **{name: pattern.to(chains.device) for name, pattern in normal_pattern(chains).items()},
    }
    chain = bind_struct(chain_struct(chains.dtype), tensors)
    _BOUND[chains] = (chain, tensors)
    return chain


@functools.cache
def chain_functions(layout: Layout, dtype: torch.dtype) -> SimpleNamespace:
    """The warp functions that walk the chains of a robot of ``layout`` in ``dtype`` floats.

    ``base_pose`` (a floating base's rotation and position, the identity without one), ``chain_tip`` and
    ``chain_pose`` (one frame's pose in the base frame, the latter with each entry's axis and origin),
    ``in_world``, ``placed``, ``poses`` (every frame's pose in the world: (3F, 4) rows ``[R | p]``) and
    ``kinematics`` (the poses and the Jacobian (6F, dof), ``LOCAL_WORLD_ALIGNED``, as ``Robot.kinematics``).
    """
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout, got {type(layout).__name__}")
    f, _, vec3, _, mat33 = warp_types(dtype)
    frames, length, joints, floating = layout.frames, layout.length, layout.joints, layout.floating
    nq, dof, rows = layout.nq, layout.dof, 6 * layout.frames
    bq, bv = nq - joints, dof - joints  # where the joints start in q and in a tangent
    vecq = wp.types.vector(nq, f)
    Chain = chain_struct(dtype)
    jac_t = wp.types.matrix((rows, dof), f)
    poses_t = wp.types.matrix((3 * frames, 4), f)
    chain_t = wp.types.matrix((3, length), f)
    sin_cos = sin_cos_function(f)

    @wp.func
    def base_pose(q: vecq):
        """Rotation and position of the base in the world: the unit quaternion of ``q`` (identity without a
        floating base), as ``lie._unit_quaternion_to_matrix``."""
        rot = wp.identity(3, f)
        pos = vec3()
        if wp.static(floating):
            n = wp.sqrt(q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6])
            x = q[3] / n
            y = q[4] / n
            z = q[5] / n
            w = q[6] / n
            rot = mat33(
                f(1.0) - f(2.0) * (y * y + z * z), f(2.0) * (x * y - w * z), f(2.0) * (x * z + w * y),
                f(2.0) * (x * y + w * z), f(1.0) - f(2.0) * (x * x + z * z), f(2.0) * (y * z - w * x),
                f(2.0) * (x * z - w * y), f(2.0) * (y * z + w * x), f(1.0) - f(2.0) * (x * x + y * y),
            )  # fmt: skip
            pos = vec3(q[0], q[1], q[2])
        return rot, pos

    @wp.func
    def advance(q: vecq, x: int, rot: mat33, pos: vec3, chain: Chain):
        """Rotation and position after chain entry ``x``, from those before it (``kinematics.chain_kinematics``'s
        step)."""
        qj = q[bq + chain.cols[x]] * chain.scale[x] + chain.offset[x]
        sin_q, cos_q = sin_cos(qj)
        local = chain.place_rot[x] + sin_q * chain.place_rot_k[x] + (f(1.0) - cos_q) * chain.place_rot_k2[x]
        return rot * local, pos + rot * (chain.place_pos[x] + qj * chain.slide[x])

    @wp.func
    def chain_tip(q: vecq, fr: int, chain: Chain):
        """Rotation and position of frame ``fr`` in the base frame at ``q``: :func:`chain_pose` without the
        Jacobian's axes and origins (the same arithmetic, so the same bits)."""
        rot = wp.identity(3, f)
        pos = vec3()
        for j in range(length):
            rot, pos = advance(q, fr * length + j, rot, pos, chain)
        return rot * chain.tip_rot[fr], pos + rot * chain.tip_pos[fr]

    @wp.func
    def chain_pose(
        q: vecq,
        fr: int,
        chain: Chain,
    ):
        """Rotation and position of frame ``fr`` in the base frame at ``q``, and per chain entry its axis and
        origin (columns of two 3 x length matrices), as ``kinematics.chain_kinematics``."""
        rot = wp.identity(3, f)
        pos = vec3()
        axes = chain_t()
        origins = chain_t()
        for j in range(length):
            x = fr * length + j
            # advance() written out: through the helper (rotation and position by value) the CPU kernel loses 2 %.
            # The same arithmetic, so chain_tip gives the same bits (tests/test_engine_store.py).
            qj = q[bq + chain.cols[x]] * chain.scale[x] + chain.offset[x]
            sin_q, cos_q = sin_cos(qj)
            local = chain.place_rot[x] + sin_q * chain.place_rot_k[x] + (f(1.0) - cos_q) * chain.place_rot_k2[x]
            pos = pos + rot * (chain.place_pos[x] + qj * chain.slide[x])
            rot = rot * local
            a = rot * chain.axis[x]
            for k in range(3):
                axes[k, j] = a[k]
                origins[k, j] = pos[k]
        return rot * chain.tip_rot[fr], pos + rot * chain.tip_pos[fr], axes, origins

    @wp.func
    def in_world(tip_r: mat33, tip_p: vec3, base_rot: mat33, base_pos: vec3):
        """A frame's pose in the base frame, in the world: through a floating base's pose (as is without one)."""
        if wp.static(floating):
            return base_rot * tip_r, base_rot * tip_p + base_pos
        return tip_r, tip_p

    @wp.func
    def placed(poses: poses_t, fr: int, tip_r: mat33, tip_p: vec3) -> poses_t:
        """``poses`` with frame ``fr``'s rows ``[R | p]``."""
        out = poses
        for k in range(3):
            for m in range(3):
                out[3 * fr + k, m] = tip_r[k, m]
            out[3 * fr + k, 3] = tip_p[k]
        return out

    @wp.func
    def kinematics(q: vecq, chain: Chain):
        """The frames' poses in the world at ``q`` (frame ``fr``: rows ``3 fr .. 3 fr + 2`` of a (3F, 4) matrix,
        ``[R | p]``) and the Jacobian (6F, dof) (``LOCAL_WORLD_ALIGNED``, as ``Robot.kinematics``)."""
        base_rot, base_pos = base_pose(q)
        jac = jac_t()  # coordinates off a frame's chain keep zero columns in its rows
        poses = poses_t()
        for fr in range(frames):
            tip_r, tip_p, axes, origins = chain_pose(q, fr, chain)
            for j in range(length):
                x = fr * length + j
                c = bv + chain.cols[x]
                a = vec3(axes[0, j], axes[1, j], axes[2, j])
                linear = a
                angular = vec3()
                if chain.revolute[x] != 0:
                    linear = wp.cross(a, tip_p - vec3(origins[0, j], origins[1, j], origins[2, j]))
                    angular = a
                linear = linear * chain.scale[x]
                angular = angular * chain.scale[x]
                if wp.static(floating):  # into the world's axes
                    linear = base_rot * linear
                    angular = base_rot * angular
                for k in range(3):
                    jac[6 * fr + k, c] = jac[6 * fr + k, c] + linear[k]
                    jac[6 * fr + 3 + k, c] = jac[6 * fr + 3 + k, c] + angular[k]
            if wp.static(floating):  # the base twist [v; w] in the base frame: [R, -R [p]x; 0, R]
                for b in range(3):
                    unit = vec3()
                    unit[b] = f(1.0)
                    moment = base_rot * wp.cross(unit, tip_p)
                    for k in range(3):
                        jac[6 * fr + k, b] = base_rot[k, b]
                        jac[6 * fr + k, 3 + b] = moment[k]
                        jac[6 * fr + 3 + k, 3 + b] = base_rot[k, b]
            tip_r, tip_p = in_world(tip_r, tip_p, base_rot, base_pos)
            poses = placed(poses, fr, tip_r, tip_p)
        return poses, jac

    @wp.func
    def poses(q: vecq, chain: Chain):
        """The frames' poses in the world at ``q``, as :func:`kinematics` gives them, without the Jacobian (the
        same arithmetic, so the same bits)."""
        base_rot, base_pos = base_pose(q)
        out = poses_t()
        for fr in range(frames):
            tip_r, tip_p = chain_tip(q, fr, chain)
            tip_r, tip_p = in_world(tip_r, tip_p, base_rot, base_pos)
            out = placed(out, fr, tip_r, tip_p)
        return out

    return SimpleNamespace(
        base_pose=base_pose,
        advance=advance,
        chain_tip=chain_tip,
        chain_pose=chain_pose,
        in_world=in_world,
        placed=placed,
        poses=poses,
        kinematics=kinematics,
    )
