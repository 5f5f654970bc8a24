"""Numba kernel of the rows stage (see the package docstring): forces,
direct-torque motors, then every solver row at the current pose.

rows(state, body, world, joint, motor, geom, action, *layout tables)
    -> (v_free (B, N, 6), rows (B, R, ROW.width), tau (B, N))

The reference for each quantity is named where it is computed.
"""

from __future__ import annotations

import math

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry import geoms_numba as geo
from symphys.physics.kernels.layout import (BODY, JOINT, JOINT_CODES, MOTOR, MOTOR_CODES, ROW,
                                            STATE, WORLD, Item, Option)
from symphys.physics.kernels.rows import contacts_numba as cn
from symphys.physics.kernels.rows.joints_numba import (angular_row, axis_row, coordinate, drift,
                                                       joint_pose, limit_parts, point_row,
                                                       turn_parts)
from symphys.physics.kernels.solve.pgs_numba import apply_impulse
from symphys.scene.elements import JointType, MotorMode

jit, leaf = vn.jit, vn.leaf
I_KIND, I_SUB, I_A, I_B = int(Item.KIND), int(Item.SUB), int(Item.A), int(Item.B)
I_INDEX, I_JOINT, I_AXIS, I_ROW = int(Item.INDEX), int(Item.JOINT), int(Item.AXIS), int(Item.ROW)
I_GA, I_GB, I_FLIP, I_IMPLICIT = int(Item.GA), int(Item.GB), int(Item.FLIP), \
    int(Item.IMPLICIT)
O_DT, O_FEEDBACK, O_THRESHOLD = int(Option.DT), int(Option.FEEDBACK), \
    int(Option.RESTITUTION_THRESHOLD)
O_SOFT, O_GYRO, O_DAMPING, O_ROLLING = int(Option.SOFT_CONTACTS), int(Option.GYROSCOPIC), \
    int(Option.DAMPING), int(Option.ROLLING)
O_ISOTROPIC = int(Option.ISOTROPIC)
R, V, W = STATE.at("rotation"), STATE.at("velocity"), STATE.at("angular_velocity")
INV_MASS, INV_INERTIA, INERTIA = BODY.at("inv_mass"), BODY.at("inv_inertia"), BODY.at("inertia")
FRICTION, RESTITUTION, ROLL = BODY.at("friction"), BODY.at("restitution"), \
    BODY.at("rolling_friction")
GRAVITY, HEIGHT = WORLD.at("world.gravity"), WORLD.at("ground.height")
G_FRICTION, G_RESTITUTION, G_ROLL = WORLD.at("ground.friction"), \
    WORLD.at("ground.restitution"), WORLD.at("ground.rolling_friction")
FREQUENCY, DAMPING_RATIO, VELOCITY_DAMPING = WORLD.at("solver.constraint_frequency"), \
    WORLD.at("solver.constraint_damping"), WORLD.at("solver.velocity_damping")
VISCOUS, DRY, ARMATURE = JOINT.at("viscous_damping"), JOINT.at("dry_friction"), \
    JOINT.at("armature")
SPRING, SPRING_REF = JOINT.at("spring_stiffness"), JOINT.at("spring_reference")
GAIN, MAX_VELOCITY, MAX_TORQUE = MOTOR.at("gain"), MOTOR.at("max_velocity"), \
    MOTOR.at("max_torque")
STIFFNESS, MOTOR_DAMPING = MOTOR.at("stiffness"), MOTOR.at("damping")
JAC_A, JAC_B = ROW.at("jac_a"), ROW.at("jac_b")
DIR_A, DIR_B, ROW_WIDTH = ROW.at("dir_a"), ROW.at("dir_b"), ROW.width
MASS, GAMMA, TARGET, KEEP = ROW.at("mass"), ROW.at("gamma"), ROW.at("target"), ROW.at("keep")
LOWER, UPPER, MU = ROW.at("lower"), ROW.at("upper"), ROW.at("mu")
HINGE, SLIDER, UNIVERSAL = (JOINT_CODES[JointType.HINGE], JOINT_CODES[JointType.SLIDER],
                            JOINT_CODES[JointType.UNIVERSAL])
FIXED, PLANAR = JOINT_CODES[JointType.FIXED], JOINT_CODES[JointType.PLANAR]
POSITION = MOTOR_CODES[MotorMode.POSITION]


@leaf
def forces(s, body, world, options, out):
    """`step.apply_forces` for one world: out (N, 6) = [v, w]."""
    dt = options[O_DT]
    for i in range(s.shape[0]):
        v = (s[i, V], s[i, V + 1], s[i, V + 2])
        w = (s[i, W], s[i, W + 1], s[i, W + 2])
        if options[O_DAMPING] > 0:
            keep = 1.0 - world[VELOCITY_DAMPING] * dt
            v, w = vn.scale(v, keep), vn.scale(w, keep)
        v = (v[0] + dt * world[GRAVITY], v[1] + dt * world[GRAVITY + 1],
             v[2] + dt * world[GRAVITY + 2])
        if options[O_GYRO] > 0:
            p = body[i]
            rot = cn.rotation(s, i)
            wb = vn.matTvec(rot, w)
            torque = vn.cross(wb, (p[INERTIA] * wb[0], p[INERTIA + 1] * wb[1],
                                   p[INERTIA + 2] * wb[2]))
            dwb = (-dt * torque[0] * p[INV_INERTIA], -dt * torque[1] * p[INV_INERTIA + 1],
                   -dt * torque[2] * p[INV_INERTIA + 2])
            w = vn.add(w, vn.matvec(rot, dwb))
        for k in range(3):
            out[i, k] = v[k]
            out[i, 3 + k] = w[k]


@leaf
def inverse_inertia(s, body, options, out):
    """World inverse inertia R diag(1/I) R^T per body, out (N, 9); when
    every body is a sphere (Option.ISOTROPIC) the scalar 1/I_x times the
    identity, as the reference (`solver.mobility`): no rotation enters."""
    isotropic = options[O_ISOTROPIC] > 0
    for i in range(s.shape[0]):
        if isotropic:
            for k in range(9):
                out[i, k] = body[i, INV_INERTIA] if k % 4 == 0 else 0.0
            continue
        rot = cn.rotation(s, i)
        inv = (body[i, INV_INERTIA], body[i, INV_INERTIA + 1], body[i, INV_INERTIA + 2])
        for r in range(3):
            for c in range(3):
                acc = 0.0
                for k in range(3):
                    acc += rot[3 * r + k] * inv[k] * rot[3 * c + k]
                out[i, 3 * r + c] = acc


@leaf
def _combine(x, y):
    """sqrt(x y) when x y > 0, else 0 (`contacts._combine`)."""
    prod = x * y
    return math.sqrt(prod) if prod > 0 else 0.0


@leaf
def _softness(m_eff, frequency, damping, dt):
    """(gamma, beta) of `solver.softness`."""
    omega = 2.0 * math.pi * frequency
    k = m_eff * omega ** 2
    c = 2.0 * m_eff * damping * omega
    return vn.safe_div(1.0, dt * (c + dt * k)), dt * omega / (2.0 * damping + dt * omega)


@leaf
def contact_rows(s, body, geom, world, options, contacts, articulated, inv_i, vel, out, tau,
                 tape, late, cs, cb):
    """Every contact point's rows (`solver.approach`, `solver.contact_rows`)
    and each body's impact fraction tau (`step.body_impact_fraction`).
    Scratch: tape (C, 4) [gap, approach velocity, impact fraction, reaches],
    late (N,), and a contact's sides cs (2, 18), cb (2, BODY.width)
    (`geoms_numba`)."""
    n_c = contacts.shape[0]
    dt = options[O_DT]
    late[:] = 0.0
    height = world[HEIGHT]
    for c in range(n_c):
        kind, a, b, r0 = contacts[c, I_KIND], contacts[c, I_A], contacts[c, I_B], contacts[c, I_ROW]
        ga, gb = contacts[c, I_GA], contacts[c, I_GB]
        gap, n, ra, rb = geo.side_geometry(kind, contacts[c, I_SUB], a, b, ga, gb,
                                          contacts[c, I_FLIP], s, body, geom, height, cs, cb)
        m = point_row(out[r0], n, ra, rb, a, b, body, inv_i)
        out[r0, MASS] = m
        v0 = 0.0
        for k in range(6):
            v0 += out[r0, k] * vel[a, k]
        if b >= 0:
            vb = 0.0
            for k in range(6):
                vb += out[r0, 6 + k] * vel[b, k]
            v0 += vb
        reaches, t = cn.impact_fraction(gap, v0, dt)
        tape[c, 0], tape[c, 1], tape[c, 2] = gap, v0, t
        tape[c, 3] = 1.0 if reaches else 0.0
        late[a] = max(late[a], 1.0 - t)
        if b >= 0:
            late[b] = max(late[b], 1.0 - t)
        # Friction and rolling rows.
        f_a, r_a = (geo.side_value(a, ga, FRICTION, body, geom),
                    geo.side_value(a, ga, ROLL, body, geom))
        if b < 0 and gb < 0:
            t1, t2 = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)
            mu = _combine(f_a, world[G_FRICTION])
            roll = max(r_a, world[G_ROLL])
        else:
            t1, t2 = cn.tangent_basis(n)
            mu = _combine(f_a, geo.side_value(b, gb, FRICTION, body, geom))
            roll = max(r_a, geo.side_value(b, gb, ROLL, body, geom))
        for k, t_dir in ((1, t1), (2, t2)):
            out[r0 + k, MASS] = point_row(out[r0 + k], t_dir, ra, rb, a, b, body, inv_i)
            out[r0 + k, KEEP] = 1.0
            out[r0 + k, MU] = mu
        if options[O_ROLLING] > 0:
            for k, t_dir in ((3, t1), (4, t2)):
                out[r0 + k, MASS] = angular_row(out[r0 + k], t_dir, a, b, inv_i)
                out[r0 + k, KEEP] = 1.0
                out[r0 + k, MU] = roll
    for i in range(s.shape[0]):
        tau[i] = 0.0 if n_c == 0 or articulated[i] > 0 else 1.0 - late[i]
    soft = options[O_SOFT] > 0
    for c in range(n_c):
        a, b, r0 = contacts[c, I_A], contacts[c, I_B], contacts[c, I_ROW]
        gap, v0, t, reaches = tape[c, 0], tape[c, 1], tape[c, 2], tape[c, 3] > 0
        m_eff = out[r0, MASS]
        e_a, e_o = restitutions(a, b, contacts[c, I_GA], contacts[c, I_GB], body, geom, world)
        parts = normal_target(a, b, gap, v0, t, reaches, m_eff, tau, world, e_a, e_o, options)
        gamma = parts[0]
        out[r0, TARGET] = parts[-1]
        out[r0, MASS] = vn.safe_div(1.0, 1.0 / m_eff + gamma) if soft else m_eff
        out[r0, GAMMA] = gamma
        out[r0, KEEP] = 1.0
        out[r0, LOWER] = 0.0
        # Whether the contact can act this step (the sweeps read no UPPER on
        # a LOWER row; the converged solve builds friction only where it can).
        out[r0, UPPER] = 1.0 if gap <= 0 or reaches else 0.0


@leaf
def joint_rows(s, joint, joints, joint_consts, options, body, inv_i, vel, out):
    """Equality and limit rows of every joint (`joints.joint_rows`)."""
    dt = options[O_DT]
    for q in range(joints.shape[0]):
        kind, a, b, j, r = (joints[q, I_KIND], joints[q, I_A], joints[q, I_B],
                            joints[q, I_INDEX], joints[q, I_ROW])
        pose = joint_pose(s, joint[j], a, b)
        ra, rb, error, wa, wb = pose
        dft = drift(vel, a, b, ra, rb, dt)
        keep, gain = joint_consts[j, 0], joint_consts[j, 1]
        axis_a, ref_a = vn.column(wa, 0), vn.column(wa, 1)
        axis_b, ref_b, side_b = vn.column(wb, 0), vn.column(wb, 1), vn.column(wb, 2)
        if kind == SLIDER:
            for d in (ref_b, side_b):
                out[r, MASS] = point_row(out[r], d, ra, rb, a, b, body, inv_i)
                out[r, TARGET] = -(gain * vn.dot(error, d) + vn.dot(dft, d)) / dt
                out[r, KEEP] = keep
                r += 1
        elif kind == PLANAR:
            out[r, MASS] = point_row(out[r], axis_b, ra, rb, a, b, body, inv_i)
            out[r, TARGET] = -(gain * vn.dot(error, axis_b) + vn.dot(dft, axis_b)) / dt
            out[r, KEEP] = keep
            r += 1
        else:
            for k in range(3):
                d = (1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0)
                out[r, MASS] = point_row(out[r], d, ra, rb, a, b, body, inv_i)
                out[r, TARGET] = -(gain * error[k] + dft[k]) / dt
                out[r, KEEP] = keep
                r += 1
        if kind == HINGE or kind == PLANAR:
            mis = vn.cross(axis_b, axis_a)
            for d in (ref_b, side_b):
                out[r, MASS] = angular_row(out[r], d, a, b, inv_i)
                out[r, TARGET] = -gain * vn.dot(mis, d) / dt
                out[r, KEEP] = keep
                r += 1
        elif kind == UNIVERSAL:
            out[r, MASS] = angular_row(out[r], vn.cross(ref_a, axis_b), a, b, inv_i)
            out[r, TARGET] = -gain * vn.dot(axis_b, ref_a) / dt
            out[r, KEEP] = keep
            r += 1
        elif kind == FIXED or kind == SLIDER:
            err = turn_parts(wa, wb)[0]
            for k in range(3):
                d = (1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0)
                out[r, MASS] = angular_row(out[r], d, a, b, inv_i)
                out[r, TARGET] = -gain * err[k] / dt
                out[r, KEEP] = keep
                r += 1
        if joints[q, I_AXIS] > 0:
            lo, hi = joint_consts[j, 2], joint_consts[j, 3]
            fb = options[O_FEEDBACK]
            value, direction = limit_parts(kind, pose)
            for sign, slack in ((1.0, value - lo), (-1.0, hi - value)):
                out[r, MASS] = axis_row(out[r], kind, vn.scale(direction, sign), pose, a, b, body,
                                        inv_i)
                out[r, TARGET] = -fb * slack / dt if slack < 0 else -slack / dt
                out[r, KEEP] = 1.0
                out[r, LOWER] = 0.0
                r += 1


@leaf
def restitutions(a, b, ga, gb, body, geom, world):
    """(e_a, e_o): the restitution of a contact's side a and of the other
    side (the ground's when b is the ground)."""
    e_a = geo.side_value(a, ga, RESTITUTION, body, geom)
    if b < 0 and gb < 0:
        return e_a, world[G_RESTITUTION]
    return e_a, geo.side_value(b, gb, RESTITUTION, body, geom)


@leaf
def normal_target(a, b, gap, v0, t, reaches, m_eff, tau, world, e_a, e_o, options):
    """A contact's normal row from its first pass (gap, approach speed v0,
    impact fraction t, whether it `reaches` within the step) and the bodies'
    free fractions tau: (gamma, beta, tb (the body whose tau counts),
    rest, restd, closing, separation, ramp, e_a, e_o (a's and the other's
    restitution), e, bounce, hits, target). `contacts_grad` reverses
    it from the same values."""
    dt, soft, u0 = options[O_DT], options[O_SOFT] > 0, options[O_THRESHOLD]
    penetrating = gap < 0
    gamma, beta = 0.0, options[O_FEEDBACK]
    if soft:
        gamma, beta = _softness(m_eff, world[FREQUENCY], world[DAMPING_RATIO], dt)
        gamma = gamma if penetrating else 0.0
    tb = a
    if b >= 0 and tau[b] < tau[a]:
        tb = b
    rest = 1.0 - tau[tb] if reaches else 1.0
    restd = rest if rest > 0 else 1.0
    closing = v0 * (t - tau[tb]) / restd
    if penetrating:
        separation = -beta * gap / dt
    else:
        separation = closing if reaches else -gap / dt
    if u0 > 0:
        ramp = vn.clip((-v0 - u0) / u0, 0.0, 1.0)
    else:
        ramp = 1.0 if v0 < 0 else 0.0
    e = e_o if e_o > e_a else e_a
    bounce = -e * ramp * v0
    hits = gap + dt * v0 < 0 and v0 < -u0
    target = max(bounce, separation) if hits else separation
    return (gamma, beta, tb, rest, restd, closing, separation, ramp, e_a, e_o, e, bounce, hits,
            target)


@leaf
def start_rate(row, s, a, b):
    """J v of `row` at the state's velocities s (N, 18) (b < 0: the world)."""
    jv = 0.0
    for k in range(3):
        jv += row[JAC_A + k] * s[a, V + k] + row[JAC_A + 3 + k] * s[a, W + k]
        if b >= 0:
            jv += row[JAC_B + k] * s[b, V + k] + row[JAC_B + 3 + k] * s[b, W + k]
    return jv


@leaf
def drag_motor(motor, action, motor_consts, m):
    """(kp, kv, gain, command): the stiffness, damping, gain and clipped
    command of the implicit motor m a drag row carries; zeros when m < 0."""
    if m < 0:
        return 0.0, 0.0, 0.0, 0.0
    return (motor[m, STIFFNESS], motor[m, MOTOR_DAMPING], motor[m, GAIN],
            vn.clip(action[m], motor_consts[m, 0], motor_consts[m, 1]))


@leaf
def drag_rows(s, joint, motor, action, drags, motor_consts, options, body, inv_i, out):
    """Bearing-loss, armature, spring and implicit-motor rows
    (`drives.drag_rows`): with K = I_a + (c + kv) dt + (k + kp) dt^2, a soft
    row of gamma 1/K aiming at (I_a q'_start - k dt (q_start - q_s)
    - kp dt q_start + gain command dt) / K, and the dry row."""
    dt = options[O_DT]
    for q in range(drags.shape[0]):
        kind, a, b, j, r = (drags[q, I_KIND], drags[q, I_A], drags[q, I_B], drags[q, I_INDEX],
                            drags[q, I_ROW])
        kp, kv, gain, command = drag_motor(motor, action, motor_consts, drags[q, I_IMPLICIT])
        pose = joint_pose(s, joint[j], a, b)
        axis_b = vn.column(pose[4], 0)
        m_eff = axis_row(out[r], kind, axis_b, pose, a, b, body, inv_i)
        for k in range(ROW_WIDTH):
            out[r + 1, k] = out[r, k]
        armature, spring = joint[j, ARMATURE], joint[j, SPRING]
        big_k = armature + (joint[j, VISCOUS] + kv) * dt + (spring + kp) * dt * dt
        coord = coordinate(kind, 0, pose)
        stretch = coord - joint[j, SPRING_REF]
        out[r, MASS] = big_k * m_eff / (big_k + m_eff)
        out[r, GAMMA] = vn.safe_div(1.0, big_k)
        out[r, TARGET] = vn.safe_div(armature * start_rate(out[r], s, a, b)
                                     - spring * dt * stretch
                                     + (gain * command - kp * coord) * dt, big_k)
        out[r, KEEP] = 1.0
        bound = joint[j, DRY] * dt
        out[r + 1, MASS] = m_eff
        out[r + 1, KEEP] = 1.0
        out[r + 1, LOWER] = -bound
        out[r + 1, UPPER] = bound


@leaf
def _motor_row(s, joint, motor, action, item, motor_consts, dt, body, inv_i, row):
    """Write a motor's axis row into `row`; (effective mass, clipped command,
    max impulse, pose)."""
    kind, a, b, m, j, axis = (item[I_SUB], item[I_A], item[I_B], item[I_INDEX], item[I_JOINT],
                              item[I_AXIS])
    pose = joint_pose(s, joint[j], a, b)
    direction = vn.column(pose[3], 1) if kind == UNIVERSAL and axis == 1 else \
        vn.column(pose[4], 0)
    m_eff = axis_row(row, kind, direction, pose, a, b, body, inv_i)
    command = vn.clip(action[m], motor_consts[m, 0], motor_consts[m, 1])
    return m_eff, command, motor[m, MAX_TORQUE] * dt, pose


@leaf
def torque_impulses(s, joint, motor, action, torques, motor_consts, options, body, inv_i,
                    vel, row):
    """Direct-torque motors' impulses clip(torque dt, +-max_torque dt),
    torque = gain command - stiffness q - damping q' (q, q' at the step's
    start), applied to vel (N, 6) in place; row (ROW.width,) is scratch
    (implicit motors are not among them: their joints' drag rows hold them)."""
    dt = options[O_DT]
    for q in range(torques.shape[0]):
        row[:] = 0.0
        _, command, most, pose = _motor_row(s, joint, motor, action, torques[q], motor_consts,
                                            dt, body, inv_i, row)
        a, b, m = torques[q, I_A], torques[q, I_B], torques[q, I_INDEX]
        torque = (motor[m, GAIN] * command
                  - motor[m, STIFFNESS] * coordinate(torques[q, I_SUB], torques[q, I_AXIS], pose)
                  - motor[m, MOTOR_DAMPING] * start_rate(row, s, a, b))
        apply_impulse(row, vel, a, b, vn.clip(torque * dt, -most, most))


@leaf
def servo_rows(s, joint, motor, action, servos, motor_consts, options, body, inv_i, out):
    """Position and velocity servo rows (`drives.motor_rows`)."""
    dt = options[O_DT]
    for q in range(servos.shape[0]):
        r, m, kind, axis = servos[q, I_ROW], servos[q, I_INDEX], servos[q, I_SUB], \
            servos[q, I_AXIS]
        m_eff, command, most, pose = _motor_row(s, joint, motor, action, servos[q],
                                                motor_consts, dt, body, inv_i, out[r])
        if servos[q, I_KIND] == POSITION:
            rate = motor[m, GAIN] * (command - coordinate(kind, axis, pose))
        else:
            rate = command
        top = motor[m, MAX_VELOCITY]
        out[r, MASS] = m_eff
        out[r, TARGET] = vn.clip(rate, -top, top)
        out[r, KEEP] = 1.0
        out[r, LOWER] = -most
        out[r, UPPER] = most


@jit
def rows(state, body, world, joint, motor, geom, action, contacts, joints, drags, servos,
         torques, joint_consts, motor_consts, rows_table, articulated, options):
    n_worlds, n = state.shape[0], state.shape[1]
    v_free = np.empty((n_worlds, n, 6))
    out = np.zeros((n_worlds, rows_table.shape[0], ROW_WIDTH))
    tau = np.zeros((n_worlds, n))
    inv_i = np.empty((n, 9))
    row, tape, late = np.empty(ROW_WIDTH), np.empty((contacts.shape[0], 4)), np.empty(n)
    cs, cb = np.empty((2, state.shape[2])), np.empty((2, body.shape[2]))
    before = np.empty((n, 6))     # velocities before the motors' impulses (the joints' drift)
    for w in range(n_worlds):
        s = state[w]
        pb = body[w if body.shape[0] > 1 else 0]
        pw = world[w if world.shape[0] > 1 else 0]
        pj = joint[w if joint.shape[0] > 1 else 0]
        pm = motor[w if motor.shape[0] > 1 else 0]
        pg = geom[w if geom.shape[0] > 1 else 0]
        forces(s, pb, pw, options, v_free[w])
        inverse_inertia(s, pb, options, inv_i)
        before[:] = v_free[w]
        torque_impulses(s, pj, pm, action[w], torques, motor_consts, options, pb, inv_i,
                        v_free[w], row)
        contact_rows(s, pb, pg, pw, options, contacts, articulated, inv_i, v_free[w], out[w],
                     tau[w], tape, late, cs, cb)
        joint_rows(s, pj, joints, joint_consts, options, pb, inv_i, before, out[w])
        drag_rows(s, pj, pm, action[w], drags, motor_consts, options, pb, inv_i, out[w])
        servo_rows(s, pj, pm, action[w], servos, motor_consts, options, pb, inv_i, out[w])
    return v_free, out, tau
