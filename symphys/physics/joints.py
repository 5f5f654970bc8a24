"""Joints and joint limits as constraint rows of the impulse solver (the
rows on a joint's coordinate that drive or brake it, motors, bearing
losses, armature and springs, are in `drives`).

A joint holds its child (body a) to its parent (body b, or the world):

- point rows keep the anchor points of both bodies together (hinge, ball,
  fixed along world x, y, z; slider across its axis only);
- angular rows keep the bodies' relative orientation (fixed and slider: all
  three axes; hinge: the two axes across the hinge axis);
- a hinge or slider has a coordinate q (angle in rad or slide in m, 0 at the
  initial pose) with optional one-sided limit rows, and may carry a motor;
- a planar joint keeps the child's anchor in the plane normal to its axis
  (one point row) and turns it only about that axis (two angular rows);
- a universal joint has point rows and one angular row keeping its two
  axes (the parent's `axis`, the child's `axis2`) perpendicular: no twist.
  Its coordinates are the angles about each axis; each may carry a motor.

Every joint stores, per world, its anchor in child and parent coordinates
and its joint frame F = [axis, ref, axis x ref] (columns, world at the
initial pose) in both bodies' coordinates. These are computed once from the
initial pose and the `<joint>.anchor` parameter, so anchors are
differentiable hardware parameters.

Joints and motors are grouped into blocks of one type in which no body
appears twice, like contacts; a block's rows are solved at once (exact
Gauss-Seidel). Shapes: per-joint arrays (Bp, J); block quantities (B, K).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from symphys.physics.algebra import (Mat3, Vec3, cross, dot, matmul, matTvec, matvec, normalize,
                                     quat_to_mat, rotation_coefficients, transpose)
from symphys.physics.contacts import Gather
from symphys.physics.model import State, _stack_bodies
from symphys.physics.solver import (Mobility, RowBlock, RowGroup, RowKind, RowSpec, row_block,
                                    row_group)
from symphys.scene.elements import WORLD, JointType, MotorMode
from symphys.scene.scene import Scene
from symphys.tree import tree_map

# A drag joint's parameters, in `JointFrames`' order after its frames.
DRAG_FIELDS = ("viscous_damping", "dry_friction", "armature", "spring_stiffness",
               "spring_reference")

_X = Vec3(1.0, 0.0, 0.0)
_Y = Vec3(0.0, 1.0, 0.0)
_Z = Vec3(0.0, 0.0, 1.0)


@dataclass(frozen=True)
class JointBlock:
    """Joints of one type and softness solved together; no body twice."""

    type: JointType
    joints: tuple[int, ...]          # indices into scene.joints
    a: tuple[int, ...]               # child bodies
    b: tuple[int, ...] | None        # parent bodies; None: the world
    softness: tuple[float, float] | None = None   # (Hz, ratio); None: stiff


@dataclass(frozen=True)
class MotorBlock:
    """Motors of one mode on one joint type solved together; no body twice."""

    mode: MotorMode
    joint_type: JointType
    motors: tuple[int, ...]          # indices into scene.motors
    joints: tuple[int, ...]
    a: tuple[int, ...]
    b: tuple[int, ...] | None
    axis: int = 0                    # coordinate driven (universal joints: 0 or 1)


def _greedy_blocks(items, key):
    """Split `items` (dicts with a, b) into groups of equal `key` in which no
    body index appears twice, in a fixed order."""
    groups: dict = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    out = []
    for k, members in groups.items():
        remaining = members
        while remaining:
            used, block, rest = set(), [], []
            for item in remaining:
                bodies = {item["a"]} | ({item["b"]} if item["b"] is not None else set())
                if bodies & used:
                    rest.append(item)
                    continue
                used |= bodies
                block.append(item)
            out.append((k, block))
            remaining = rest
    return out


def _joint_items(scene: Scene):
    index = {b.name: i for i, b in enumerate(scene.bodies)}
    return [{"joint": i, "type": j.type, "a": index[j.child],
             "b": None if j.parent == WORLD else index[j.parent], "softness": j.softness}
            for i, j in enumerate(scene.joints)]


def _parents(block) -> tuple[int, ...] | None:
    return None if block[0]["b"] is None else tuple(x["b"] for x in block)


def joint_blocks(scene: Scene) -> list[JointBlock]:
    groups = _greedy_blocks(_joint_items(scene),
                            lambda x: (x["type"], x["b"] is None, x["softness"]))
    return [JointBlock(k[0], tuple(x["joint"] for x in blk), tuple(x["a"] for x in blk),
                       _parents(blk), k[2]) for k, blk in groups]


def motor_blocks(scene: Scene) -> list[MotorBlock]:
    """Blocks of the motors, no body twice per block; implicit motors
    (`Scene.implicit_motors`) are left out: their joint's drag row holds
    them (`drives.drag_rows`)."""
    items = _joint_items(scene)
    names = scene.joint_names
    held = set(scene.implicit_motors.values())
    motors = [dict(items[names.index(m.joint)], motor=i, mode=m.mode, axis=m.axis)
              for i, m in enumerate(scene.motors) if i not in held]
    groups = _greedy_blocks(motors, lambda x: (x["mode"], x["type"], x["b"] is None,
                                               x["axis"]))
    return [MotorBlock(k[0], k[1], tuple(x["motor"] for x in blk),
                       tuple(x["joint"] for x in blk), tuple(x["a"] for x in blk),
                       _parents(blk), k[3]) for k, blk in groups]


def drag_blocks(scene: Scene) -> list[JointBlock]:
    """Blocks of the hinges and sliders with a drag row (`Scene.drag_row_joints`:
    all of them when the scene has bearing losses, and those an implicit
    motor holds), no body twice per block."""
    rows = set(scene.drag_row_joints)
    items = [x for x in _joint_items(scene) if x["joint"] in rows]
    groups = _greedy_blocks(items, lambda x: (x["type"], x["b"] is None))
    return [JointBlock(k[0], tuple(x["joint"] for x in blk), tuple(x["a"] for x in blk),
                       _parents(blk)) for k, blk in groups]


def articulated_bodies(scene: Scene) -> tuple[int, ...]:
    """Indices of the bodies held by a joint (to another body or the world)."""
    index = {b.name: i for i, b in enumerate(scene.bodies)}
    held = {index[j.child] for j in scene.joints}
    held |= {index[j.parent] for j in scene.joints if j.parent != WORLD}
    return tuple(sorted(held))


# -- per-joint arrays ---------------------------------------------------------
@dataclass(frozen=True)
class JointFrames:
    """Per joint, each component (Bp, J): anchor and joint frame F (columns
    axis, ref, axis x ref) in child (a) and parent (b) coordinates; for a
    world parent, b coordinates are world coordinates."""

    anchor_a: Vec3
    anchor_b: Vec3
    frame_a: Mat3
    frame_b: Mat3
    viscous_damping: object = None   # bearing losses (Bp, J), when the scene has them
    dry_friction: object = None
    armature: object = None
    spring_stiffness: object = None
    spring_reference: object = None


@dataclass(frozen=True)
class MotorArrays:
    """Per motor, each (Bp, M): servo gain (1/s) or gear, velocity limit,
    torque limit, and a torque motor's stiffness and damping (0 for others)."""

    gain: object
    max_velocity: object
    max_torque: object
    stiffness: object
    damping: object


def perpendicular(axis) -> np.ndarray:
    """A unit vector perpendicular to the unit `axis` (numeric)."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.57 else np.array([0.0, 1.0, 0.0])
    ref = np.cross(np.cross(axis, helper), axis)
    return ref / np.linalg.norm(ref)


def joint_frame(axis, ref=None) -> Mat3:
    """F = [axis, ref, axis x ref] as columns (numeric constants); ref: a
    unit vector perpendicular to axis (a universal joint's axis2), or None
    for any."""
    a = np.asarray(axis, float)
    ref = perpendicular(a) if ref is None else np.asarray(ref, float)
    c = np.cross(a, ref)
    return Mat3(*(float(v) for v in np.stack([a, ref, c], axis=1).ravel()))


def _initial_pose(p: dict, body: str):
    """(position Vec3, rotation Mat3) of a body at the start, (B,) or scalars."""
    pos = p[f"{body}.position"]
    quat = p[f"{body}.quaternion"]
    return (Vec3(pos[..., 0], pos[..., 1], pos[..., 2]),
            quat_to_mat(quat[..., 0], quat[..., 1], quat[..., 2], quat[..., 3]))


def build_joint_arrays(scene: Scene, p: dict):
    """(JointFrames or None, MotorArrays or None) from the parameters `p`."""
    def column(x):
        x = pt.as_tensor_variable(x)
        x = x if x.dtype == "float64" else x.astype("float64")   # numeric frames
        return x.reshape((1,)) if x.ndim == 0 else x

    def stack(values):
        return _stack_bodies([column(v) for v in values])

    frames = None
    if scene.joints:
        per_joint = []
        for j in scene.joints:
            anchor = p[f"{j.name}.anchor"]
            anchor = Vec3(anchor[..., 0], anchor[..., 1], anchor[..., 2])
            frame = joint_frame(j.axis, j.axis2)
            pa, ra = _initial_pose(p, j.child)
            local_a = matTvec(ra, anchor - pa)
            frame_a = matmul(transpose(ra), frame)
            if j.parent == WORLD:
                local_b, frame_b = anchor, frame
            else:
                pb, rb = _initial_pose(p, j.parent)
                local_b = matTvec(rb, anchor - pb)
                frame_b = matmul(transpose(rb), frame)
            # Joints without losses (ball, fixed, universal) get zeros.
            drag = (tuple(p.get(f"{j.name}.{key}", 0.0) for key in DRAG_FIELDS)
                    if scene.drag_row_joints else (None,) * len(DRAG_FIELDS))
            per_joint.append(JointFrames(local_a, local_b, frame_a, frame_b, *drag))
        frames = tree_map(lambda *values: stack(list(values)), *per_joint)
    motors = None
    if scene.motors:
        motors = MotorArrays(*(stack([p.get(f"{m.name}.{key}", 0.0) for m in scene.motors])
                               for key in ("gain", "max_velocity", "max_torque", "stiffness",
                                           "damping")))
    return frames, motors


# -- rows -----------------------------------------------------------------------
@dataclass(frozen=True)
class _Pose:
    """A block's joints at the current pose, each (B, K)."""

    ga: Gather
    gb: Gather | None
    ra: Vec3             # child's lever arm to its anchor
    rb: Vec3 | None      # parent's lever arm to the child's anchor point
    error: Vec3          # anchor separation p_a - p_b (world)
    axis_a: Vec3         # world joint frame columns of the child ...
    ref_a: Vec3
    axis_b: Vec3         # ... and of the parent
    ref_b: Vec3
    side_b: Vec3         # axis_b x ref_b
    frame_a: Mat3
    frame_b: Mat3


def _columns(m: Mat3) -> tuple[Vec3, Vec3, Vec3]:
    return Vec3(m.xx, m.yx, m.zx), Vec3(m.xy, m.yy, m.zy), Vec3(m.xz, m.yz, m.zz)


def _pose(joints: tuple[int, ...], a, b, frames: JointFrames, state: State,
          n_bodies: int, n_joints: int) -> _Pose:
    gj = Gather(joints, n_joints)
    ga = Gather(a, n_bodies)
    gb = None if b is None else Gather(b, n_bodies)
    rot_a = state.rotation.map(ga.take)
    ra = matvec(rot_a, frames.anchor_a.map(gj.take))
    world_a = state.position.map(ga.take) + ra
    wa = matmul(rot_a, frames.frame_a.map(gj.take))
    if gb is None:
        anchor_b = frames.anchor_b.map(gj.take)
        wb = frames.frame_b.map(gj.take)
        rb = None
    else:
        rot_b = state.rotation.map(gb.take)
        centre_b = state.position.map(gb.take)
        anchor_b = centre_b + matvec(rot_b, frames.anchor_b.map(gj.take))
        wb = matmul(rot_b, frames.frame_b.map(gj.take))
        rb = world_a - centre_b
    axis_a, ref_a, _ = _columns(wa)
    axis_b, ref_b, side_b = _columns(wb)
    return _Pose(ga, gb, ra, rb, world_a - anchor_b, axis_a, ref_a, axis_b, ref_b,
                 side_b, wa, wb)


def ball_turn(pose: _Pose) -> tuple[object, Vec3]:
    """(angle in [0, pi], unit world axis) of the turn taking the parent's
    joint frame to the child's, E = Wa Wb^T: its skew part is sin(angle)
    axis, (tr E - 1) / 2 its cosine (axis x where there is no turn)."""
    e = _turn(pose)
    axis, sine = normalize(_skew_part(e), fallback=_X)
    return pt.arctan2(sine, 0.5 * (e.xx + e.yy + e.zz - 1.0)), axis


def coordinate(kind: JointType, pose: _Pose, axis: int = 0):
    """Joint coordinate q: hinge angle of the child about the axis from its
    initial pose (atan2, in (-pi, pi]); slider displacement along the axis.
    Universal joint: axis 0, the angle of the child's axis2 about the
    parent's axis (as a hinge); axis 1, the child's turn about its axis2."""
    if kind in (JointType.HINGE, JointType.UNIVERSAL) and axis == 0:
        return pt.arctan2(dot(pose.ref_a, pose.side_b), dot(pose.ref_a, pose.ref_b))
    if kind is JointType.UNIVERSAL:
        across = cross(pose.ref_a, pose.axis_b)
        return pt.arctan2(dot(pose.axis_a, across), dot(pose.axis_a, pose.axis_b))
    return dot(pose.error, pose.axis_b)


def coordinate_axis(kind: JointType, pose: _Pose, axis: int = 0) -> Vec3:
    """World direction along which the coordinate's rate is measured: the
    parent's axis, or a universal joint's axis2 (on the child)."""
    return pose.ref_a if kind is JointType.UNIVERSAL and axis == 1 else pose.axis_b


def _axis_row(kind: JointType, row_kind: RowKind, direction: Vec3, pose: _Pose,
              mob: Mobility, target) -> RowBlock:
    """A motor row on the joint coordinate's rate along `direction`."""
    return row_block(row_kind, _axis_spec(kind, direction, pose, target), pose.ga, pose.gb,
                     mob)


def _turn(pose: _Pose) -> Mat3:
    """E = Wa Wb^T: the turn taking the parent's joint frame to the child's
    (the identity at the initial relative pose)."""
    return matmul(pose.frame_a, transpose(pose.frame_b))


def _skew_part(e: Mat3) -> Vec3:
    """(E - E^T) / 2 as a vector: sin(angle) axis of a rotation E."""
    return Vec3(0.5 * (e.zy - e.yz), 0.5 * (e.xz - e.zx), 0.5 * (e.yx - e.xy))


def _rotation_error(pose: _Pose) -> Vec3:
    """Small rotation vector taking the parent's joint frame to the child's:
    the skew part of Wa Wb^T (zero at the initial relative pose)."""
    return _skew_part(_turn(pose))


def _centripetal_drift(pose: _Pose, w: Vec3, dt: float) -> Vec3:
    """Separation of the anchors over one step at angular velocities w
    beyond the first-order part dt w x r that the point rows cancel: the
    rotation update `rotate_by(dt w)` moves a lever arm r by
    dt (sin t/t) w x r + dt^2 (1 - cos t)/t^2 w x (w x r), t = dt |w|.
    (B, K) components."""
    def beyond_first_order(wb: Vec3, r: Vec3) -> Vec3:
        sinc, cosc = rotation_coefficients(wb.scale(dt))
        turn = cross(wb, r)
        return turn.scale((sinc - 1.0) * dt) + cross(wb, turn).scale(cosc * dt * dt)

    drift = beyond_first_order(w.map(pose.ga.take), pose.ra)
    if pose.gb is not None:
        drift = drift - beyond_first_order(w.map(pose.gb.take), pose.rb)
    return drift


def joint_rows(block: JointBlock, scene: Scene, frames: JointFrames, mob: Mobility,
               state: State, w: Vec3, feedback: float, dt: float) -> list[RowGroup]:
    """The equality rows (and limit rows) of one joint block at the current
    pose, as one `RowGroup`; position errors are fed back at rate
    `feedback` / dt (Baumgarte), and the anchors' centripetal drift over the
    step (at the angular velocities w before the solve) is cancelled in
    advance."""
    pose = _pose(block.joints, block.a, block.b, frames, state, len(scene.bodies),
                 len(scene.joints))
    specs = []
    drift = _centripetal_drift(pose, w, dt)
    # A soft block's equality rows feed the error back at its own rate and
    # keep only part of each update (`soft_joint`); limits stay stiff.
    keep, gain = soft_joint(block.softness, dt) if block.softness else (1.0, feedback)

    def point(direction: Vec3, error):
        specs.append(_point_spec(direction, pose,
                                 -(gain * error + dot(drift, direction)) / dt, keep=keep))

    def turn(direction: Vec3, error):
        specs.append(RowSpec(None, direction, direction, -gain * error / dt, keep=keep))

    kind = block.type
    if kind is JointType.SLIDER:
        for t in (pose.ref_b, pose.side_b):
            point(t, dot(pose.error, t))
    elif kind is JointType.PLANAR:            # the anchors stay in the plane normal to axis
        point(pose.axis_b, dot(pose.error, pose.axis_b))
    else:
        for axis, comp in zip((_X, _Y, _Z), pose.error):
            point(axis, comp)
    if kind in (JointType.HINGE, JointType.PLANAR):
        misalign = cross(pose.axis_b, pose.axis_a)
        for t in (pose.ref_b, pose.side_b):
            turn(t, dot(misalign, t))
    elif kind is JointType.UNIVERSAL:
        # d/dt (axis_b . ref_a) = (w_a - w_b) . (ref_a x axis_b)
        turn(cross(pose.ref_a, pose.axis_b), dot(pose.axis_b, pose.ref_a))
    elif kind in (JointType.FIXED, JointType.SLIDER):
        for axis, comp in zip((_X, _Y, _Z), _rotation_error(pose)):
            turn(axis, comp)
    if kind in LIMITED:
        specs += _limit_specs(block, scene, pose, feedback, dt)
    return [row_group(specs, pose.ga, pose.gb, mob)]


def soft_joint(softness: tuple[float, float], dt: float) -> tuple[float, float]:
    """(keep, feedback) of a soft row of natural frequency f (Hz) and
    damping ratio zeta, with h = dt 2 pi f and s = h (2 zeta + h):
    keep = s / (1 + s), feedback = h / (2 zeta + h).

    A spring-damper k = m (2 pi f)^2, c = 2 m zeta (2 pi f) on a row of
    effective mass m is the soft row lam += m_soft (target - Jv - gamma lam)
    with gamma = 1 / (dt (c + dt k)), m_soft = 1 / (1/m + gamma) and the
    error fed back at dt k / (c + dt k) (as for soft contacts); since
    m gamma = 1/s, that update is keep x the stiff one,
    lam <- keep (lam + m (target - Jv)), whatever m is."""
    frequency, damping = softness
    h = dt * 2.0 * math.pi * frequency
    s = h * (2.0 * damping + h)
    return s / (1.0 + s), h / (2.0 * damping + h)


def _point_spec(direction: Vec3, pose: _Pose, target, lower=None, keep=1.0) -> RowSpec:
    """A row on the anchors' relative velocity along `direction`."""
    ang_b = None if pose.gb is None else cross(pose.rb, direction)
    return RowSpec(direction, cross(pose.ra, direction), ang_b, target, lower, keep)


def _axis_spec(kind: JointType, direction: Vec3, pose: _Pose, target, lower=None) -> RowSpec:
    """A row on the joint coordinate's rate along `direction` (+-axis)."""
    if kind in (JointType.HINGE, JointType.UNIVERSAL, JointType.BALL):
        return RowSpec(None, direction, direction, target, lower)
    return _point_spec(direction, pose, target, lower)


def _limit_specs(block: JointBlock, scene: Scene, pose: _Pose, feedback: float,
                 dt: float) -> list[RowSpec]:
    """One-sided rows keeping q in [lo, hi]: for a slack s = q - lo (or
    hi - q) the row lets the joint approach by at most s within the step and
    pushes a violated limit back with position-error feedback. A ball
    joint's cone has only its upper row binding, along the turn's axis."""
    limits = [limit_range(scene.joints[j]) for j in block.joints]
    if all(lim == NO_LIMIT for lim in limits):
        return []
    lo, hi = np.array(limits).T
    q, direction = (ball_turn(pose) if block.type is JointType.BALL
                    else (coordinate(block.type, pose), pose.axis_b))
    specs = []
    for sign, slack in ((1.0, q - lo), (-1.0, hi - q)):
        target = pt.switch(slack < 0, -feedback * slack / dt, -slack / dt)
        specs.append(_axis_spec(block.type, direction.scale(sign), pose, target, lower=0.0))
    return specs


# Joint types with limit rows, and the (lo, hi) slack bounds of a joint
# without limits (a slack that never binds).
LIMITED = (JointType.HINGE, JointType.SLIDER, JointType.BALL)
NO_LIMIT = (-1e30, 1e30)


def limit_range(joint) -> tuple[float, float]:
    """(lo, hi) of a joint's limit rows: its limits, NO_LIMIT's without;
    a ball joint's cone binds on its upper side only."""
    if joint.limits is None:
        return NO_LIMIT
    if joint.type is JointType.BALL:
        return NO_LIMIT[0], joint.limits[1]
    return joint.limits


def joint_rate(kind: JointType, pose: _Pose, v: Vec3, w: Vec3):
    """dq/dt for the current velocities, (B, K)."""
    rel_w = w.map(pose.ga.take)
    if pose.gb is not None:
        rel_w = rel_w - w.map(pose.gb.take)
    if kind is JointType.HINGE:
        return dot(pose.axis_b, rel_w)
    va = v.map(pose.ga.take) + cross(w.map(pose.ga.take), pose.ra)
    if pose.gb is not None:
        va = va - v.map(pose.gb.take) - cross(w.map(pose.gb.take), pose.rb)
    return dot(pose.axis_b, va)
