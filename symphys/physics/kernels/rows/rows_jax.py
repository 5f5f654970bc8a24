"""Stage 1 of the fused step in JAX: forces, direct-torque motors and every
solver row at the current pose, from the scene's tables as data.

`rows(state, body, world, joint, motor, action, *build_layout(scene).arrays())`
-> (v_free (B, N, 6), rows (B, R, ROW.width), tau (B, N)). One world is
computed by `_world` (vectorised over the items of each table, every kind's
formula computed and the item's selected by its code) and `jax.vmap` runs
it over the worlds. The reference is `symphys.physics.step.step` (see the stage
spec in `symphys.physics.kernels`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from symphys.physics.kernels.geometry.geometry_jax import (ball_turn, contact_geometry, hinge_angle,
                                                           joint_pose, rotation_error, row_parts,
                                                           universal_angle)
from symphys.physics.kernels.layout import (BODY, INF, JOINT, JOINT_CODES, JOINT_ROWS, MOTOR,
                                            MOTOR_CODES, ROW, STATE, WORLD, Item, Option)
from symphys.physics.kernels.vec_jax import (clip, cross, dot, matTvec, matvec, maximum, minimum,
                                             rotation_coefficients, safe_div, scale, tangent_basis,
                                             unit)
from symphys.scene.elements import JointType, MotorMode

_HINGE, _UNIVERSAL, _SLIDER = (JOINT_CODES[t] for t in (JointType.HINGE, JointType.UNIVERSAL,
                                                         JointType.SLIDER))
_POSITION = MOTOR_CODES[MotorMode.POSITION]
CONTACT_SLOTS, JOINT_SLOTS = 5, 8

# Joint rows: 18 candidate rows per joint (below), and per joint type the
# candidates its slots take, in the reference's order (point rows, angular
# rows, then the two limit rows).
_PX, _PREF, _TREF, _TUNI, _TX, _LH, _LS, _PN, _LB = 0, 3, 5, 7, 8, 11, 13, 15, 16
_SLOTS = {JointType.FIXED: [_PX, _PX + 1, _PX + 2, _TX, _TX + 1, _TX + 2],
          JointType.HINGE: [_PX, _PX + 1, _PX + 2, _TREF, _TREF + 1, _LH, _LH + 1],
          JointType.BALL: [_PX, _PX + 1, _PX + 2, _LB, _LB + 1],
          JointType.SLIDER: [_PREF, _PREF + 1, _TX, _TX + 1, _TX + 2, _LS, _LS + 1],
          JointType.UNIVERSAL: [_PX, _PX + 1, _PX + 2, _TUNI],
          JointType.PLANAR: [_PN, _TREF, _TREF + 1]}
SLOT_MAP = np.zeros((len(JOINT_CODES), JOINT_SLOTS), dtype=np.int64)
EQUALITY_ROWS = np.zeros(len(JOINT_CODES), dtype=np.int64)
for _t, _s in _SLOTS.items():
    SLOT_MAP[JOINT_CODES[_t], :len(_s)] = _s
    EQUALITY_ROWS[JOINT_CODES[_t]] = JOINT_ROWS[_t]


def _pack_rows(jac_a, jac_b, dir_a, dir_b, mass, gamma, target, keep, lower, upper, mu):
    """(..., ROW.width) from the row's columns ((..., 6) or (...))."""
    like = mass
    parts = dict(jac_a=jac_a, jac_b=jac_b, dir_a=dir_a, dir_b=dir_b, mass=mass)
    for name, value in (("gamma", gamma), ("target", target), ("keep", keep),
                        ("lower", lower), ("upper", upper), ("mu", mu)):
        parts[name] = jnp.broadcast_to(jnp.asarray(value, like.dtype), like.shape)
    return ROW.pack(parts, lib=jnp)


def _scatter(rows, table, block, count):
    """Write each item's first `count` slot rows of block (K, S, width) at its
    first row; padding items (a < 0) write nothing."""
    k, s = block.shape[:2]
    if k == 0:
        return rows
    n_rows = rows.shape[0]
    slot = jnp.arange(s)[None, :]
    valid = (slot < count[:, None]) & (table[:, Item.A] >= 0)[:, None] & (
        table[:, Item.ROW] >= 0)[:, None]
    index = jnp.where(valid, table[:, Item.ROW][:, None] + slot, n_rows)
    return rows.at[index.reshape(-1)].set(block.reshape(k * s, -1), mode="drop")


class _Bodies:
    """Per-body quantities of one world the rows read (gathered by item)."""

    def __init__(self, x, rot, inv_m, inv_i):
        self.x, self.rot, self.inv_m, self.inv_i = x, rot, inv_m, inv_i

    def row(self, lin, ang_a, ang_b, a, b):
        """row_parts for items (K,) broadcast against extra slot axes of lin."""
        two = b >= 0
        bi = jnp.where(two, b, 0)
        extra = lin.ndim - 2
        ex = lambda v: v.reshape(v.shape[:1] + (1,) * extra + v.shape[1:])
        return row_parts(lin, ang_a, ang_b, jnp.broadcast_to(ex(two), lin.shape[:-1]),
                         ex(self.inv_m[a]), ex(self.inv_i[a]), ex(self.inv_m[bi]),
                         ex(self.inv_i[bi]))

    def axis_row(self, angular, d, pose, a, b):
        """A row on a joint coordinate's rate along d: angular (hinges,
        universal joints) or on the anchors' relative velocity."""
        ang = angular[:, None]
        lin = jnp.where(ang, 0.0, d)
        ang_a = jnp.where(ang, d, cross(pose["ra"], d))
        ang_b = jnp.where(ang, d, cross(pose["rb"], d))
        return self.row(lin, ang_a, ang_b, a, b)


def _forces(state, body, world, options):
    """(v, w) after velocity damping, gravity and the gyroscopic torque."""
    dt = options[Option.DT]
    rot = state[:, STATE.rotation].reshape(-1, 3, 3)
    v, w = state[:, STATE.velocity], state[:, STATE.angular_velocity]
    keep = 1.0 - world[WORLD.at("solver.velocity_damping")] * dt
    damp = options[Option.DAMPING] > 0
    v, w = jnp.where(damp, v * keep, v), jnp.where(damp, w * keep, w)
    v = v + dt * world[WORLD.span("world.gravity")]
    wb = matTvec(rot, w)
    torque = cross(wb, body[:, BODY.inertia] * wb)
    dwb = -dt * torque * body[:, BODY.inv_inertia]
    w = jnp.where(options[Option.GYROSCOPIC] > 0, w + matvec(rot, dwb), w)
    return v, w


def _motor_axis(table, joint, bodies):
    """(pose, angular, direction, q) of motor items: the joint's pose, the
    direction of the driven coordinate's rate and the coordinate."""
    jt, axis = table[:, Item.SUB], table[:, Item.AXIS]
    pose = joint_pose(joint[table[:, Item.JOINT]], table[:, Item.A], table[:, Item.B],
                      bodies.x, bodies.rot)
    second = (jt == _UNIVERSAL) & (axis == 1)
    angular = (jt == _HINGE) | (jt == _UNIVERSAL)
    direction = jnp.where(second[:, None], pose["ref_a"], pose["axis_b"])
    q = jnp.where(second, universal_angle(pose),
                  jnp.where(angular, hinge_angle(pose), dot(pose["error"], pose["axis_b"])))
    return pose, angular, direction, q


def _latest(val, a, b, real, n_bodies):
    """(N,) each body's largest val (K,) over its contacts (as a or b; b < 0:
    none), 0 where none is positive, its gradient going to the first
    contact that holds it, as in the Numba pullback (a scatter max would
    split it among ties: the 4 corners of a box lying flat)."""
    late = jnp.zeros(n_bodies, val.dtype).at[jnp.where(real, a, n_bodies)].max(
        val, mode="drop")
    late = late.at[jnp.where(b >= 0, b, n_bodies)].max(val, mode="drop")
    count = val.shape[0]
    if count == 0:
        return late
    late = jax.lax.stop_gradient(late)
    index = jnp.arange(count)
    first = jnp.full(n_bodies, count)
    for side, ok in ((a, real), (b, b >= 0)):
        at = jnp.where(ok, side, 0)
        holds = ok & (val > 0.0) & (val == late[at])
        first = first.at[jnp.where(holds, at, n_bodies)].min(index, mode="drop")
    won = first < count
    return jnp.where(won, val[jnp.minimum(first, count - 1)], 0.0)


def _contact_rows(V, contacts, bodies, body, geom, world, articulated, options):
    """(rows block (K, 5, width), counts (K,), body tau (N,))."""
    dt = options[Option.DT]
    kind, point = contacts[:, Item.KIND], contacts[:, Item.SUB]
    a, b = contacts[:, Item.A], contacts[:, Item.B]
    n_bodies = V.shape[0]
    real = a >= 0
    a = jnp.where(real, a, 0)
    two = b >= 0
    bi = jnp.where(two, b, 0)
    ga, gb = contacts[:, Item.GA], contacts[:, Item.GB]
    gap, n, ra, rb, mu, e, roll = contact_geometry(kind, point, a, b, ga, gb,
                                                   contacts[:, Item.FLIP], bodies.x, bodies.rot,
                                                   body, geom, world)
    jac_a, jac_b, dir_a, dir_b, m_eff = bodies.row(n, cross(ra, n), cross(rb, n), a, b)
    vn0 = (jac_a * V[a]).sum(-1) + (jac_b * V[bi]).sum(-1)
    approach = -vn0 * dt
    reaches = (gap > 0) & (approach > gap)
    tau_c = jnp.where(reaches, gap / jnp.where(reaches, approach, 1.0),
                      jnp.where(gap > 0, 1.0, 0.0))
    late = _latest(1.0 - tau_c, a, jnp.where(real & two, b, -1), real, n_bodies)
    tau = jnp.where(articulated > 0, 0.0, 1.0 - late)
    tau = jnp.where(jnp.any(real), tau, 0.0)
    tau_b = jnp.where(two, minimum(tau[a], tau[bi]), tau[a])

    # softness (`solver.softness`) and the normal row's target (`contact_rows`)
    soft = options[Option.SOFT_CONTACTS] > 0
    omega = 2.0 * np.pi * world[WORLD.at("solver.constraint_frequency")]
    zeta = world[WORLD.at("solver.constraint_damping")]
    k, c = m_eff * omega ** 2, 2.0 * m_eff * zeta * omega
    gamma_soft = safe_div(1.0, dt * (c + dt * k))
    den = 2.0 * zeta + dt * omega
    beta = jnp.where(soft, dt * omega / jnp.where(soft & (den != 0), den, 1.0),
                     options[Option.FEEDBACK])
    penetrating = gap < 0
    gamma = jnp.where(soft & penetrating, gamma_soft, 0.0)
    has_m = m_eff != 0
    inv_m = jnp.where(has_m, 1.0 / jnp.where(has_m, m_eff, 1.0), jnp.inf)
    m_soft = jnp.where(soft, safe_div(1.0, inv_m + gamma), m_eff)
    rest = jnp.where(reaches, 1.0 - tau_b, 1.0)
    closing = vn0 * (tau_c - tau_b) / jnp.where(rest > 0, rest, 1.0)
    separation = jnp.where(penetrating, -beta * gap / dt,
                           jnp.where(reaches, closing, -gap / dt))
    u0 = options[Option.RESTITUTION_THRESHOLD]
    ramp = jnp.where(u0 > 0, clip((-vn0 - u0) / jnp.where(u0 > 0, u0, 1.0), 0.0, 1.0),
                     (vn0 < 0).astype(V.dtype))
    hits = (gap + dt * vn0 < 0) & (vn0 < -u0)
    bounce = -e * ramp * vn0
    target = jnp.where(hits, maximum(bounce, separation), separation)
    # UPPER (read by no sweep on a LOWER row): whether the contact can act this step.
    can_act = jnp.where(penetrating | (gap == 0) | reaches, 1.0, 0.0)
    normal = _pack_rows(jac_a, jac_b, dir_a, dir_b, m_soft, gamma, target, 1.0, 0.0, can_act, 0.0)

    # friction rows (x, y on the ground) and rolling rows about the tangents
    t1, t2 = tangent_basis(n)
    ground = (b < 0) & (gb < 0)
    t1 = jnp.where(ground[:, None], unit(0, n), t1)
    t2 = jnp.where(ground[:, None], unit(1, n), t2)
    ts = jnp.stack([t1, t2], axis=1)                                    # (K, 2, 3)
    fa, fb, fda, fdb, fm = bodies.row(ts, cross(ra[:, None], ts), cross(rb[:, None], ts), a, b)
    friction = _pack_rows(fa, fb, fda, fdb, fm, 0.0, 0.0, 1.0, -INF, INF, mu[:, None])
    ra_, rb_, rda, rdb, rm = bodies.row(jnp.zeros_like(ts), ts, ts, a, b)
    rolling = _pack_rows(ra_, rb_, rda, rdb, rm, 0.0, 0.0, 1.0, -INF, INF, roll[:, None])
    block = jnp.concatenate([normal[:, None], friction, rolling], axis=1)
    count = jnp.where(options[Option.ROLLING] > 0, 5, 3) + 0 * a
    return block, count, tau


def _joint_rows(w, joints, consts, joint, bodies, options):
    """(rows block (K, 8, width), counts (K,)) of the joint items."""
    dt, feedback = options[Option.DT], options[Option.FEEDBACK]
    kind, a, b = joints[:, Item.KIND], joints[:, Item.A], joints[:, Item.B]
    index = joints[:, Item.INDEX]
    pose = joint_pose(joint[index], a, b, bodies.x, bodies.rot)
    keep, gain, lo, hi = (consts[index, i] for i in range(4))
    two = b >= 0
    bi = jnp.where(two, b, 0)

    def beyond_first_order(wv, r):
        sinc, cosc = rotation_coefficients(wv * dt)
        turn = cross(wv, r)
        return scale(turn, (sinc - 1.0) * dt) + scale(cross(wv, turn), cosc * dt * dt)

    drift = beyond_first_order(w[a], pose["ra"]) - jnp.where(
        two[:, None], beyond_first_order(w[bi], pose["rb"]), 0.0)
    ra, rb, error = pose["ra"], pose["rb"], pose["error"]
    axis_a, axis_b, ref_a = pose["axis_a"], pose["axis_b"], pose["ref_a"]
    ref_b, side_b = pose["ref_b"], pose["side_b"]
    zero = jnp.zeros_like(ra)
    ones = jnp.ones_like(keep)
    cands = []          # (lin, ang_a, ang_b, target, keep)

    def point(d, err, target=None, kp=keep):
        t = -(gain * err + dot(drift, d)) / dt if target is None else target
        cands.append((d, cross(ra, d), cross(rb, d), t, kp))

    def turn(d, err, target=None, kp=keep):
        cands.append((zero, d, d, -gain * err / dt if target is None else target, kp))

    for k in range(3):                                                 # _PX
        point(unit(k, ra), error[:, k])
    for d in (ref_b, side_b):                                          # _PREF
        point(d, dot(error, d))
    misalign = cross(axis_b, axis_a)
    for d in (ref_b, side_b):                                          # _TREF
        turn(d, dot(misalign, d))
    turn(cross(ref_a, axis_b), dot(axis_b, ref_a))                     # _TUNI
    rot_err = rotation_error(pose)
    for k in range(3):                                                 # _TX
        turn(unit(k, ra), rot_err[:, k])

    def limit_targets(q):
        out = []
        for slack in (q - lo, hi - q):
            out.append(jnp.where(slack < 0, -feedback * slack / dt, -slack / dt))
        return out

    for sign, t in zip((1.0, -1.0), limit_targets(hinge_angle(pose))):  # _LH
        turn(axis_b * sign, None, target=t, kp=ones)
    for sign, t in zip((1.0, -1.0), limit_targets(dot(error, axis_b))):  # _LS
        point(axis_b * sign, None, target=t, kp=ones)
    point(axis_b, dot(error, axis_b))                                  # _PN
    angle, turn_axis = ball_turn(pose)
    for sign, t in zip((1.0, -1.0), limit_targets(angle)):             # _LB
        turn(turn_axis * sign, None, target=t, kp=ones)

    lin, ang_a, ang_b = (jnp.stack([c[i] for c in cands], axis=1) for i in range(3))
    target, kp = (jnp.stack([c[i] for c in cands], axis=1) for i in (3, 4))
    jac_a, jac_b, dir_a, dir_b, m_eff = bodies.row(lin, ang_a, ang_b, a, b)
    block = _pack_rows(jac_a, jac_b, dir_a, dir_b, m_eff, 0.0, target, kp, 0.0, INF, 0.0)
    slots = jnp.asarray(SLOT_MAP)[kind]                                # (K, 8)
    block = jnp.take_along_axis(block, slots[:, :, None], axis=1)
    count = jnp.asarray(EQUALITY_ROWS)[kind] + 2 * (joints[:, Item.AXIS] == 1)
    return block, count


def _drag_motor(drags, motor, action, consts):
    """(kp, kv, gain command) (K,) of the implicit motor each drag item
    carries (`Item.IMPLICIT`), 0 where none."""
    m = drags[:, Item.IMPLICIT]
    if motor.shape[0] == 0:
        zero = jnp.zeros(m.shape, motor.dtype)
        return zero, zero, zero
    held = m >= 0
    mi = jnp.clip(m, 0, motor.shape[0] - 1)
    mp = motor[mi]
    drive = mp[:, MOTOR.at("gain")] * clip(action[mi], consts[mi, 0], consts[mi, 1])
    return tuple(jnp.where(held, x, 0.0) for x in (mp[:, MOTOR.at("stiffness")],
                                                   mp[:, MOTOR.at("damping")], drive))


def _drag_rows(drags, joint, motor, action, consts, bodies, start, options):
    """Bearing losses, armature, springs and implicit motors: a soft (FREE)
    row of gamma 1/K aiming at (I_a q'_start - k dt (q_start - q_s)
    + (gain command - kp q_start) dt) / K (K = I_a + (c + kv) dt + (k + kp)
    dt^2; start (N, 6): the step's starting velocities) and a dry-friction
    (BOX) row per item."""
    dt = options[Option.DT]
    kind, a, b = drags[:, Item.KIND], drags[:, Item.A], drags[:, Item.B]
    jp = joint[drags[:, Item.INDEX]]
    kp, kv, drive = _drag_motor(drags, motor, action, consts)
    pose = joint_pose(jp, a, b, bodies.x, bodies.rot)
    angular = (kind == _HINGE) | (kind == _UNIVERSAL)
    jac_a, jac_b, dir_a, dir_b, m_eff = bodies.axis_row(angular, pose["axis_b"], pose, a, b)
    armature, spring = jp[:, JOINT.at("armature")], jp[:, JOINT.at("spring_stiffness")]
    big_k = armature + (jp[:, JOINT.at("viscous_damping")] + kv) * dt + (spring + kp) * dt * dt
    q = jnp.where(angular, hinge_angle(pose), dot(pose["error"], pose["axis_b"]))
    stretch = q - jp[:, JOINT.at("spring_reference")]
    den = big_k + m_eff
    ok = den != 0
    m_visc = jnp.where(ok, big_k * m_eff / jnp.where(ok, den, 1.0), 0.0)
    rate = _start_rate(jac_a, jac_b, start, a, b)
    bound = jp[:, JOINT.at("dry_friction")] * dt
    viscous = _pack_rows(jac_a, jac_b, dir_a, dir_b, m_visc, safe_div(1.0, big_k),
                         safe_div(armature * rate - spring * dt * stretch + (drive - kp * q) * dt,
                                  big_k),
                         1.0, -INF, INF, 0.0)
    dry = _pack_rows(jac_a, jac_b, dir_a, dir_b, m_eff, 0.0, 0.0, 1.0, -bound, bound, 0.0)
    return jnp.stack([viscous, dry], axis=1), 2 + 0 * a


def _start_rate(jac_a, jac_b, start, a, b):
    """(K,) J v of K axis rows at the starting velocities start (N, 6)."""
    n = start.shape[0]
    return (jac_a * start[jnp.clip(a, 0, n - 1)]).sum(-1) + jnp.where(
        b >= 0, (jac_b * start[jnp.clip(b, 0, n - 1)]).sum(-1), 0.0)


def _command(table, motor, action, consts):
    m = table[:, Item.INDEX]
    return clip(action[m], consts[m, 0], consts[m, 1]), motor[m]


def _servo_rows(servos, joint, motor, action, consts, bodies, options):
    """One BOX row per position / velocity servo."""
    dt = options[Option.DT]
    a, b = servos[:, Item.A], servos[:, Item.B]
    command, mp = _command(servos, motor, action, consts)
    pose, angular, direction, q = _motor_axis(servos, joint, bodies)
    jac_a, jac_b, dir_a, dir_b, m_eff = bodies.axis_row(angular, direction, pose, a, b)
    max_rate = mp[:, MOTOR.at("max_velocity")]
    rate = jnp.where(servos[:, Item.KIND] == _POSITION,
                     mp[:, MOTOR.at("gain")] * (command - q), command)
    target = clip(rate, -max_rate, max_rate)
    bound = mp[:, MOTOR.at("max_torque")] * dt
    row = _pack_rows(jac_a, jac_b, dir_a, dir_b, m_eff, 0.0, target, 1.0, -bound, bound, 0.0)
    return row[:, None], 1 + 0 * a


def _apply_torques(V, torques, joint, motor, action, consts, bodies, start, options):
    """V after the direct-torque motors' impulses clip(torque dt, +-max_torque
    dt), torque = gain command - stiffness q - damping q' (q, q' at the
    step's start; start (N, 6): the starting velocities)."""
    if torques.shape[0] == 0:
        return V
    dt = options[Option.DT]
    n = V.shape[0]
    a, b = torques[:, Item.A], torques[:, Item.B]
    real = a >= 0
    a = jnp.where(real, a, 0)
    command, mp = _command(torques, motor, action, consts)
    pose, angular, direction, q = _motor_axis(torques, joint, bodies)
    jac_a, jac_b, dir_a, dir_b, _ = bodies.axis_row(angular, direction, pose, a, b)
    bound = mp[:, MOTOR.at("max_torque")] * dt
    rate = _start_rate(jac_a, jac_b, start, a, b)
    torque = (mp[:, MOTOR.at("gain")] * command - mp[:, MOTOR.at("stiffness")] * q
              - mp[:, MOTOR.at("damping")] * rate)
    impulse = jnp.where(real, clip(torque * dt, -bound, bound), 0.0)[:, None]
    V = V.at[jnp.where(real, a, n)].add(dir_a * impulse, mode="drop")
    return V.at[jnp.where(real & (b >= 0), b, n)].add(dir_b * impulse, mode="drop")


def _world(state, body, world, joint, motor, geom, action, contacts, joints, drags, servos,
           torques, joint_consts, motor_consts, rows_table, articulated, options):
    n = state.shape[0]
    rot = state[:, STATE.rotation].reshape(n, 3, 3)
    v, w = _forces(state, body, world, options)
    inv_i = body[:, BODY.inv_inertia]
    world_inv = (rot[:, :, None, :] * inv_i[:, None, None, :] * rot[:, None, :, :]).sum(-1)
    iso = jnp.eye(3) * inv_i[:, :1, None]
    inv_i = jnp.where(options[Option.ISOTROPIC] > 0, iso, world_inv)
    bodies = _Bodies(state[:, STATE.position], rot, body[:, BODY.at("inv_mass")], inv_i)
    V = jnp.concatenate([v, w], axis=-1)
    before = V          # before the motors' impulses: the joints' drift reads these
    start = jnp.concatenate([state[:, STATE.velocity], state[:, STATE.angular_velocity]], axis=-1)
    V = _apply_torques(V, torques, joint, motor, action, motor_consts, bodies, start, options)
    rows = jnp.zeros((rows_table.shape[0], ROW.width), V.dtype)
    tau = jnp.zeros(n, V.dtype)
    if contacts.shape[0]:
        block, count, tau = _contact_rows(V, contacts, bodies, body, geom, world, articulated,
                                          options)
        rows = _scatter(rows, contacts, block, count)
    if joints.shape[0]:
        block, count = _joint_rows(before[:, 3:], joints, joint_consts, joint, bodies, options)
        rows = _scatter(rows, joints, block, count)
    if drags.shape[0]:
        rows = _scatter(rows, drags, *_drag_rows(drags, joint, motor, action, motor_consts,
                                                 bodies, start, options))
    if servos.shape[0]:
        rows = _scatter(rows, servos, *_servo_rows(servos, joint, motor, action, motor_consts,
                                                   bodies, options))
    return V, rows, tau


def rows(state, body, world, joint, motor, geom, action, contacts, joints, drags, servos,
         torques, joint_consts, motor_consts, rows_table, articulated, options):
    """-> (v_free (B, N, 6), rows (B, R, ROW.width), tau (B, N)); parameters
    with a leading axis of 1 are broadcast to the B worlds."""
    state = jnp.asarray(state)
    nb = state.shape[0]

    def worlds(x):
        x = jnp.asarray(x, state.dtype)
        return jnp.broadcast_to(x, (nb,) + x.shape[1:])

    per_world = [worlds(x) for x in (body, world, joint, motor, geom, action)]
    tables = [jnp.asarray(t) for t in (contacts, joints, drags, servos, torques, joint_consts,
                                       motor_consts, rows_table, articulated, options)]
    return jax.vmap(_world, in_axes=(0,) * 7 + (None,) * 10)(state, *per_world, *tables)
