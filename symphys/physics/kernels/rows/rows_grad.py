"""Hand-written reverse-mode pullback of the Numba rows kernel (`rows_numba`).

rows_vjp(state, body, world, joint, motor, geom, action, *layout tables,
         g_v_free, g_rows, g_tau)
    -> (g_state (B, N, 18), g_body (Bp, N, BODY.width), g_world (Bp, WORLD.width),
        g_joint (Bp, J, JOINT.width), g_motor (Bp, M, MOTOR.width),
        g_geom (Bp, G, GEOM.width), g_action (B, M))

Parameters shared by every world (Bp = 1) get the sum over worlds. Options,
tables and per-item constants get no cotangent.

For each world the forward is recomputed (forces, inverse inertias, the
direct-torque impulses, the contacts' first pass: geometry, approach
velocity, impact fraction), then reversed stage by stage against the
dependencies: servo, drag, joint and contact rows (each adding the
cotangent of the velocities they read, the joint drift's angular
velocities and the contact approach velocities, to that of v_free), the
torque impulses (v_free after them is v_free before them plus dir x
impulse), the forces, and the world inverse inertias R diag(1/I) R^T the
rows shared. Contact tau: each body's impact fraction is 1 - max over its
contacts of 1 - t, whose cotangent goes to the contact that won the max
(Python's max: the later value only when strictly greater); articulated
bodies' are the constant 0. Kinks follow the forward as written (a branch
passes the cotangent to the value it took; clip to lo when x < lo, to hi
when x > hi, else to x). The primitive adjoints live in
`geometry_grad`.
"""

from __future__ import annotations

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry.geometry_grad import (P_ERR, P_RA, P_RB, P_WA, P_WB, add3,
                                                           add_column, add_outer,
                                                           angular_row_vjp, axis_row_vjp,
                                                           ball_turn_vjp, clip_vjp,
                                                           coordinate_vjp, cross_vjp, drift_vjp,
                                                           joint_pose_vjp, point_row_vjp,
                                                           turn_parts_vjp)
from symphys.physics.kernels.layout import STATE
from symphys.physics.kernels.rows import contacts_numba as cn
from symphys.physics.kernels.rows.contacts_grad import contact_vjp
from symphys.physics.kernels.rows.joints_numba import (BALL, axis_row, coordinate, drift,
                                                       joint_pose, limit_parts)
from symphys.physics.kernels.rows.rows_numba import (ARMATURE, DIR_A, DIR_B, DRY, FIXED, GAIN,
                                                     GAMMA, GRAVITY, HINGE, I_A, I_AXIS, I_B,
                                                     I_IMPLICIT, I_INDEX, I_JOINT, I_KIND, I_ROW,
                                                     I_SUB, INERTIA, INV_INERTIA, JAC_A, JAC_B,
                                                     LOWER, MASS, MAX_TORQUE, MAX_VELOCITY,
                                                     MOTOR_DAMPING, O_DAMPING, O_DT, O_FEEDBACK,
                                                     O_GYRO, O_ISOTROPIC, PLANAR, POSITION,
                                                     ROW_WIDTH, SLIDER, SPRING, SPRING_REF,
                                                     STIFFNESS, TARGET, UNIVERSAL, UPPER,
                                                     VELOCITY_DAMPING, VISCOUS, V, W, drag_motor,
                                                     forces, inverse_inertia, start_rate,
                                                     torque_impulses)

jit, leaf = vn.jit, vn.leaf
ROT = STATE.at("rotation")


# ------------------------------------------------------------ forces, inertia

@leaf
def forces_vjp(s, body, world, options, g_vel, g_s, g_body, g_world):
    """Pullback of `rows_numba.forces` of g_vel (N, 6)."""
    dt = options[O_DT]
    damping = options[O_DAMPING] > 0
    keep = 1.0 - world[VELOCITY_DAMPING] * dt
    for i in range(s.shape[0]):
        gv = (g_vel[i, 0], g_vel[i, 1], g_vel[i, 2])
        gw = (g_vel[i, 3], g_vel[i, 4], g_vel[i, 5])
        v0 = (s[i, V], s[i, V + 1], s[i, V + 2])
        w0 = (s[i, W], s[i, W + 1], s[i, W + 2])
        w = vn.scale(w0, keep) if damping else w0
        for k in range(3):
            g_world[GRAVITY + k] += dt * gv[k]
        if options[O_GYRO] > 0:
            p = body[i]
            rot = cn.rotation(s, i)
            wb = vn.matTvec(rot, w)
            iwb = (p[INERTIA] * wb[0], p[INERTIA + 1] * wb[1], p[INERTIA + 2] * wb[2])
            torque = vn.cross(wb, iwb)
            dwb = (-dt * torque[0] * p[INV_INERTIA], -dt * torque[1] * p[INV_INERTIA + 1],
                   -dt * torque[2] * p[INV_INERTIA + 2])
            add_outer(g_s, i, ROT, gw, dwb)
            g_dwb = vn.matTvec(rot, gw)
            g_torque = (-dt * p[INV_INERTIA] * g_dwb[0], -dt * p[INV_INERTIA + 1] * g_dwb[1],
                        -dt * p[INV_INERTIA + 2] * g_dwb[2])
            for k in range(3):
                g_body[i, INV_INERTIA + k] -= dt * torque[k] * g_dwb[k]
            g_wb, g_iwb = cross_vjp(wb, iwb, g_torque)
            g_wb = (g_wb[0] + p[INERTIA] * g_iwb[0], g_wb[1] + p[INERTIA + 1] * g_iwb[1],
                    g_wb[2] + p[INERTIA + 2] * g_iwb[2])
            for k in range(3):
                g_body[i, INERTIA + k] += wb[k] * g_iwb[k]
            add_outer(g_s, i, ROT, w, g_wb)
            gw = vn.add(gw, vn.matvec(rot, g_wb))
        if damping:
            g_keep = vn.dot(v0, gv) + vn.dot(w0, gw)
            g_world[VELOCITY_DAMPING] -= dt * g_keep
            gv, gw = vn.scale(gv, keep), vn.scale(gw, keep)
        for k in range(3):
            g_s[i, V + k] += gv[k]
            g_s[i, W + k] += gw[k]


@leaf
def inverse_inertia_vjp(s, body, options, g_inv_i, g_s, g_body):
    """Pullback of `rows_numba.inverse_inertia` of g_inv_i (N, 9)."""
    for i in range(s.shape[0]):
        if options[O_ISOTROPIC] > 0:
            g_body[i, INV_INERTIA] += g_inv_i[i, 0] + g_inv_i[i, 4] + g_inv_i[i, 8]
            continue
        rot = cn.rotation(s, i)
        for k in range(3):
            inv = body[i, INV_INERTIA + k]
            g_inv = 0.0
            for p in range(3):
                acc = 0.0
                for c in range(3):
                    g_pc = g_inv_i[i, 3 * p + c]
                    acc += (g_pc + g_inv_i[i, 3 * c + p]) * rot[3 * c + k]
                    g_inv += g_pc * rot[3 * p + k] * rot[3 * c + k]
                g_s[i, ROT + 3 * p + k] += inv * acc
            g_body[i, INV_INERTIA + k] += g_inv


# ----------------------------------------------------------------- motors

@leaf
def _direction(kind, axis, pose):
    return vn.column(pose[3], 1) if kind == UNIVERSAL and axis == 1 else vn.column(pose[4], 0)


@leaf
def _direction_vjp(kind, axis, gp, g_d):
    if kind == UNIVERSAL and axis == 1:
        add_column(gp, P_WA, 1, g_d)
    else:
        add_column(gp, P_WB, 0, g_d)


@leaf
def start_rate_vjp(row, s, a, b, g, grow, g_s):
    """Pullback of `rows_numba.start_rate` (J v_start) of its cotangent g:
    into the row's J (grow) and the state's velocities (g_s)."""
    for k in range(3):
        grow[JAC_A + k] += g * s[a, V + k]
        grow[JAC_A + 3 + k] += g * s[a, W + k]
        g_s[a, V + k] += g * row[JAC_A + k]
        g_s[a, W + k] += g * row[JAC_A + 3 + k]
        if b >= 0:
            grow[JAC_B + k] += g * s[b, V + k]
            grow[JAC_B + 3 + k] += g * s[b, W + k]
            g_s[b, V + k] += g * row[JAC_B + k]
            g_s[b, W + k] += g * row[JAC_B + 3 + k]


@leaf
def torque_vjp(s, joint, motor, action, torques, motor_consts, dt, body, inv_i, g_vel, g_s,
               g_body, g_joint, g_motor, g_action, g_inv_i, gp, row, grow):
    """Pullback of `rows_numba.torque_impulses` (g_vel: the cotangent of the
    velocities after them, and so before them too)."""
    for q in range(torques.shape[0]):
        item = torques[q]
        kind, a, b, m, j, axis = (item[I_SUB], item[I_A], item[I_B], item[I_INDEX],
                                  item[I_JOINT], item[I_AXIS])
        pose = joint_pose(s, joint[j], a, b)
        direction = _direction(kind, axis, pose)
        row[:] = 0.0
        axis_row(row, kind, direction, pose, a, b, body, inv_i)
        lo, hi = motor_consts[m, 0], motor_consts[m, 1]
        command = vn.clip(action[m], lo, hi)
        most = motor[m, MAX_TORQUE] * dt
        gain, stiffness, damping = motor[m, GAIN], motor[m, STIFFNESS], motor[m, MOTOR_DAMPING]
        coord = coordinate(kind, axis, pose)
        rate = start_rate(row, s, a, b)
        torque = gain * command - stiffness * coord - damping * rate
        impulse = vn.clip(torque * dt, -most, most)
        grow[:] = 0.0
        g_imp = 0.0
        for k in range(6):
            g_imp += row[DIR_A + k] * g_vel[a, k]
            grow[DIR_A + k] = g_vel[a, k] * impulse
        if b >= 0:
            for k in range(6):
                g_imp += row[DIR_B + k] * g_vel[b, k]
                grow[DIR_B + k] = g_vel[b, k] * impulse
        g_x, g_lo, g_hi = clip_vjp(torque * dt, -most, most, g_imp)
        g_torque = dt * g_x
        g_motor[m, MAX_TORQUE] += dt * (g_hi - g_lo)
        g_motor[m, GAIN] += command * g_torque
        g_motor[m, STIFFNESS] -= coord * g_torque
        g_motor[m, MOTOR_DAMPING] -= rate * g_torque
        start_rate_vjp(row, s, a, b, -damping * g_torque, grow, g_s)
        gp[:] = 0.0
        coordinate_vjp(kind, axis, pose, -stiffness * g_torque, gp)
        g_d = axis_row_vjp(grow, 0.0, kind, direction, pose, a, b, body, inv_i, g_body, g_inv_i,
                           gp)
        _direction_vjp(kind, axis, gp, g_d)
        joint_pose_vjp(s, joint[j], a, b, gp, g_s, g_joint[j])
        g_act, _, _ = clip_vjp(action[m], lo, hi, gain * g_torque)
        g_action[m] += g_act


@leaf
def servo_vjp(s, joint, motor, action, servos, motor_consts, dt, body, inv_i, g_rows, g_s,
              g_body, g_joint, g_motor, g_action, g_inv_i, gp):
    """Pullback of `rows_numba.servo_rows`."""
    for q in range(servos.shape[0]):
        item = servos[q]
        kind, a, b, m, j, axis, r = (item[I_SUB], item[I_A], item[I_B], item[I_INDEX],
                                     item[I_JOINT], item[I_AXIS], item[I_ROW])
        pose = joint_pose(s, joint[j], a, b)
        direction = _direction(kind, axis, pose)
        g_row = g_rows[r]
        lo, hi = motor_consts[m, 0], motor_consts[m, 1]
        command = vn.clip(action[m], lo, hi)
        gp[:] = 0.0
        position = item[I_KIND] == POSITION
        coord = 0.0
        if position:
            coord = coordinate(kind, axis, pose)
            rate = motor[m, GAIN] * (command - coord)
        else:
            rate = command
        top = motor[m, MAX_VELOCITY]
        g_rate, g_lo, g_hi = clip_vjp(rate, -top, top, g_row[TARGET])
        g_motor[m, MAX_VELOCITY] += g_hi - g_lo
        if position:
            g_motor[m, GAIN] += g_rate * (command - coord)
            g_command = motor[m, GAIN] * g_rate
            coordinate_vjp(kind, axis, pose, -g_command, gp)
        else:
            g_command = g_rate
        g_act, _, _ = clip_vjp(action[m], lo, hi, g_command)
        g_action[m] += g_act
        g_motor[m, MAX_TORQUE] += dt * (g_row[UPPER] - g_row[LOWER])
        g_d = axis_row_vjp(g_row, g_row[MASS], kind, direction, pose, a, b, body, inv_i, g_body,
                           g_inv_i, gp)
        _direction_vjp(kind, axis, gp, g_d)
        joint_pose_vjp(s, joint[j], a, b, gp, g_s, g_joint[j])


# ---------------------------------------------------------- drags and joints

@leaf
def drag_vjp(s, joint, motor, action, drags, motor_consts, dt, body, inv_i, g_rows, g_s, g_body,
             g_joint, g_motor, g_action, g_inv_i, gp, row, grow):
    """Pullback of `rows_numba.drag_rows` (K = I_a + (c + kv) dt + (k + kp)
    dt^2; the target (I_a q'_start - k dt (q_start - q_s) - kp dt q_start
    + gain command dt) / K reads the row's J, the state's velocities, the
    joint coordinate and the implicit motor's gains and command)."""
    for q in range(drags.shape[0]):
        kind, a, b, j, r = (drags[q, I_KIND], drags[q, I_A], drags[q, I_B], drags[q, I_INDEX],
                            drags[q, I_ROW])
        m = drags[q, I_IMPLICIT]
        kp, kv, gain, command = drag_motor(motor, action, motor_consts, m)
        pose = joint_pose(s, joint[j], a, b)
        axis_b = vn.column(pose[4], 0)
        row[:] = 0.0
        m_eff = axis_row(row, kind, axis_b, pose, a, b, body, inv_i)
        armature, spring = joint[j, ARMATURE], joint[j, SPRING]
        big_k = armature + (joint[j, VISCOUS] + kv) * dt + (spring + kp) * dt * dt
        coord = coordinate(kind, 0, pose)
        stretch = coord - joint[j, SPRING_REF]
        for k in range(ROW_WIDTH):
            grow[k] = g_rows[r, k] + g_rows[r + 1, k]
        g_mass = g_rows[r, MASS]
        g_m = g_rows[r + 1, MASS]
        g_k = 0.0
        den = big_k + m_eff
        if den != 0.0:
            g_m += g_mass * big_k * big_k / (den * den)
            g_k += g_mass * m_eff * m_eff / (den * den)
        g_armature = 0.0
        g_coord = 0.0
        g_kp = 0.0
        g_drive = 0.0         # of gain command
        if abs(big_k) > vn.EPS:
            g_k -= g_rows[r, GAMMA] / (big_k * big_k)
            # target = N / K, N = I_a jv - k dt stretch + (g u - kp q) dt, jv = J v_start
            jv = start_rate(row, s, a, b)
            numerator = armature * jv - spring * dt * stretch + (gain * command - kp * coord) * dt
            g_n = g_rows[r, TARGET] / big_k
            g_k -= g_n * numerator / big_k
            g_armature += g_n * jv
            g_joint[j, SPRING] -= g_n * dt * stretch
            g_stretch = -g_n * spring * dt
            g_joint[j, SPRING_REF] -= g_stretch
            g_kp -= g_n * dt * coord
            g_drive = g_n * dt
            g_coord = g_stretch - g_n * kp * dt
            start_rate_vjp(row, s, a, b, g_n * armature, grow, g_s)
        g_joint[j, VISCOUS] += dt * g_k
        g_joint[j, ARMATURE] += g_k + g_armature
        g_joint[j, SPRING] += dt * dt * g_k
        g_joint[j, DRY] += dt * (g_rows[r + 1, UPPER] - g_rows[r + 1, LOWER])
        if m >= 0:
            g_motor[m, MOTOR_DAMPING] += dt * g_k
            g_motor[m, STIFFNESS] += dt * dt * g_k + g_kp
            g_motor[m, GAIN] += g_drive * command
            g_act, _, _ = clip_vjp(action[m], motor_consts[m, 0], motor_consts[m, 1],
                                   g_drive * gain)
            g_action[m] += g_act
        gp[:] = 0.0
        coordinate_vjp(kind, 0, pose, g_coord, gp)
        g_d = axis_row_vjp(grow, g_m, kind, axis_b, pose, a, b, body, inv_i, g_body, g_inv_i, gp)
        add_column(gp, P_WB, 0, g_d)
        joint_pose_vjp(s, joint[j], a, b, gp, g_s, g_joint[j])


@leaf
def _unit(k):
    return (1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0)


@leaf
def joint_vjp(s, joint, joints, joint_consts, options, body, inv_i, vel, g_rows, g_vel, g_s,
              g_body, g_joint, g_inv_i, gp):
    """Pullback of `rows_numba.joint_rows`; the drift's angular velocities'
    cotangents go to g_vel."""
    dt = options[O_DT]
    for q in range(joints.shape[0]):
        kind, a, b, j, r = (joints[q, I_KIND], joints[q, I_A], joints[q, I_B],
                            joints[q, I_INDEX], joints[q, I_ROW])
        pose = joint_pose(s, joint[j], a, b)
        ra, rb, error, wa, wb = pose
        dft = drift(vel, a, b, ra, rb, dt)
        gain = joint_consts[j, 1]
        gp[:] = 0.0
        g_dft = (0.0, 0.0, 0.0)
        axis_a, ref_a, axis_b = vn.column(wa, 0), vn.column(wa, 1), vn.column(wb, 0)
        # Point rows: a slider's across its axis, a planar joint's along its
        # normal (both along the parent's frame), the others' along x, y, z.
        along_frame = kind == SLIDER or kind == PLANAR
        for k in range(3):
            if (kind == SLIDER and k == 0) or (kind == PLANAR and k > 0):
                continue
            d = vn.column(wb, k) if along_frame else _unit(k)
            g_t = g_rows[r, TARGET]
            g_d, g_ra, g_rb = point_row_vjp(g_rows[r], g_rows[r, MASS], d, ra, rb, a, b, body,
                                            inv_i, g_body, g_inv_i)
            add3(gp, P_RA, g_ra)
            add3(gp, P_RB, g_rb)
            add3(gp, P_ERR, vn.scale(d, -gain * g_t / dt))
            g_dft = vn.add(g_dft, vn.scale(d, -g_t / dt))
            if along_frame:
                g_d = vn.add(g_d, vn.scale(vn.add(vn.scale(error, gain), dft), -g_t / dt))
                add_column(gp, P_WB, k, g_d)
            r += 1
        if kind == HINGE or kind == PLANAR:
            mis = vn.cross(axis_b, axis_a)
            g_mis = (0.0, 0.0, 0.0)
            for k in range(1, 3):
                d = vn.column(wb, k)
                g_t = g_rows[r, TARGET]
                g_d = angular_row_vjp(g_rows[r], g_rows[r, MASS], d, a, b, inv_i, g_inv_i)
                g_mis = vn.add(g_mis, vn.scale(d, -gain * g_t / dt))
                add_column(gp, P_WB, k, vn.add(g_d, vn.scale(mis, -gain * g_t / dt)))
                r += 1
            g_ab, g_aa = cross_vjp(axis_b, axis_a, g_mis)
            add_column(gp, P_WB, 0, g_ab)
            add_column(gp, P_WA, 0, g_aa)
        elif kind == UNIVERSAL:
            g_t = g_rows[r, TARGET]
            g_d = angular_row_vjp(g_rows[r], g_rows[r, MASS], vn.cross(ref_a, axis_b), a, b,
                                  inv_i, g_inv_i)
            g_ref, g_ab = cross_vjp(ref_a, axis_b, g_d)
            add_column(gp, P_WA, 1, vn.add(g_ref, vn.scale(axis_b, -gain * g_t / dt)))
            add_column(gp, P_WB, 0, vn.add(g_ab, vn.scale(ref_a, -gain * g_t / dt)))
            r += 1
        elif kind == FIXED or kind == SLIDER:
            f = -gain / dt
            g_err = (f * g_rows[r, TARGET], f * g_rows[r + 1, TARGET], f * g_rows[r + 2, TARGET])
            for k in range(3):
                angular_row_vjp(g_rows[r], g_rows[r, MASS], _unit(k), a, b, inv_i, g_inv_i)
                r += 1
            turn_parts_vjp(wa, wb, g_err, 0.0, gp)
        if joints[q, I_AXIS] > 0:
            lo, hi = joint_consts[j, 2], joint_consts[j, 3]
            fb = options[O_FEEDBACK]
            value, direction = limit_parts(kind, pose)
            g_value, g_direction = 0.0, (0.0, 0.0, 0.0)
            for side in range(2):
                sign = 1.0 if side == 0 else -1.0
                slack = value - lo if side == 0 else hi - value
                g_t = g_rows[r, TARGET]
                g_d = axis_row_vjp(g_rows[r], g_rows[r, MASS], kind, vn.scale(direction, sign),
                                   pose, a, b, body, inv_i, g_body, g_inv_i, gp)
                g_direction = vn.add(g_direction, vn.scale(g_d, sign))
                g_slack = -fb * g_t / dt if slack < 0 else -g_t / dt
                g_value += sign * g_slack
                r += 1
            if kind == BALL:
                ball_turn_vjp(pose[3], pose[4], g_value, g_direction, gp)
            else:
                add_column(gp, P_WB, 0, g_direction)
                coordinate_vjp(kind, 0, pose, g_value, gp)
        drift_vjp(vel, a, b, ra, rb, dt, g_dft, g_vel, gp)
        joint_pose_vjp(s, joint[j], a, b, gp, g_s, g_joint[j])


# ----------------------------------------------------------------------- all

@jit
def rows_vjp(state, body, world, joint, motor, geom, action, contacts, joints, drags, servos,
             torques, joint_consts, motor_consts, rows_table, articulated, options, g_v_free,
             g_rows, g_tau):
    """(g_state, g_body, g_world, g_joint, g_motor, g_geom, g_action): the pullback
    of `rows_numba.rows` at its inputs of the cotangents of its outputs
    (v_free (B, N, 6), rows (B, R, ROW.width), tau (B, N))."""
    n_worlds, n = state.shape[0], state.shape[1]
    g_state = np.zeros_like(state)
    g_body = np.zeros_like(body)
    g_world = np.zeros_like(world)
    g_joint = np.zeros_like(joint)
    g_motor = np.zeros_like(motor)
    g_geom = np.zeros_like(geom)
    g_action = np.zeros_like(action)
    vel = np.empty((n, 6))
    g_vel = np.empty((n, 6))
    before, g_before = np.empty((n, 6)), np.empty((n, 6))   # before the motors' impulses
    inv_i = np.empty((n, 9))
    g_inv_i = np.empty((n, 9))
    gp = np.zeros((5, 9))
    row = np.zeros(ROW_WIDTH)
    grow = np.zeros(ROW_WIDTH)
    tape, per_body = np.empty((contacts.shape[0], 9)), np.empty((n, 3))
    winner = np.empty(n, dtype=np.int64)
    cs, gcs = np.empty((2, state.shape[2])), np.empty((2, state.shape[2]))
    cb, gcb = np.empty((2, body.shape[2])), np.empty((2, body.shape[2]))
    dt = options[O_DT]
    for w in range(n_worlds):
        s = state[w]
        ib = w if body.shape[0] > 1 else 0
        iw = w if world.shape[0] > 1 else 0
        ij = w if joint.shape[0] > 1 else 0
        im = w if motor.shape[0] > 1 else 0
        pb, pw, pj, pm = body[ib], world[iw], joint[ij], motor[im]
        ig = w if geom.shape[0] > 1 else 0
        pg, gg = geom[ig], g_geom[ig]
        gs, gb, gw, gj, gm = g_state[w], g_body[ib], g_world[iw], g_joint[ij], g_motor[im]
        forces(s, pb, pw, options, vel)
        inverse_inertia(s, pb, options, inv_i)
        before[:] = vel
        torque_impulses(s, pj, pm, action[w], torques, motor_consts, options, pb, inv_i, vel,
                        row)
        g_vel[:] = g_v_free[w]
        g_before[:] = 0.0
        g_inv_i[:] = 0.0
        gr = g_rows[w]
        servo_vjp(s, pj, pm, action[w], servos, motor_consts, dt, pb, inv_i, gr, gs, gb, gj, gm,
                  g_action[w], g_inv_i, gp)
        drag_vjp(s, pj, pm, action[w], drags, motor_consts, dt, pb, inv_i, gr, gs, gb, gj, gm,
                 g_action[w], g_inv_i, gp, row, grow)
        joint_vjp(s, pj, joints, joint_consts, options, pb, inv_i, before, gr, g_before, gs, gb,
                  gj, g_inv_i, gp)
        contact_vjp(s, pb, pg, pw, options, contacts, articulated, inv_i, vel, gr, g_tau[w],
                    g_vel, gs, gb, gg, gw, g_inv_i, row, grow, tape, per_body, winner, cs, cb,
                    gcs, gcb)
        torque_vjp(s, pj, pm, action[w], torques, motor_consts, dt, pb, inv_i, g_vel, gs, gb,
                   gj, gm, g_action[w], g_inv_i, gp, row, grow)
        g_vel += g_before
        forces_vjp(s, pb, pw, options, g_vel, gs, gb, gw)
        inverse_inertia_vjp(s, pb, options, g_inv_i, gs, gb)
    return g_state, g_body, g_world, g_joint, g_motor, g_geom, g_action
