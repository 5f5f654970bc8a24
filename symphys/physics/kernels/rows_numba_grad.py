"""Hand-written reverse-mode pullback of the Numba rows kernel (`rows_numba`).

rows_vjp(state, body, world, joint, motor, action, *layout tables,
         g_v_free, g_rows, g_tau)
    -> (g_state (B, N, 18), g_body (Bp, N, BODY.width), g_world (Bp, WORLD.width),
        g_joint (Bp, J, JOINT.width), g_motor (Bp, M, MOTOR.width), g_action (B, M))

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
`geometry_numba_grad`.
"""

from __future__ import annotations

import math

import numpy as np

from symphys.physics.kernels import contacts_numba as cn
from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry_numba_grad import (P_ERR, P_RA, P_RB, P_WA, P_WB, add3,
                                                         add_column, add_outer, angular_row_vjp,
                                                         axis_row_vjp, clip_vjp, coordinate_vjp,
                                                         cross_vjp, drift_vjp, geometry_vjp,
                                                         joint_pose_vjp, point_row_vjp,
                                                         tangent_basis_vjp)
from symphys.physics.kernels.joints_numba import axis_row, coordinate, drift, joint_pose, point_row
from symphys.physics.kernels.layout import STATE
from symphys.physics.kernels.rows_numba import (DAMPING_RATIO, DIR_A, DIR_B, DRY, FIXED, FREQUENCY,
                                                FRICTION, G_FRICTION, G_RESTITUTION, G_ROLL, GAIN,
                                                GAMMA, GRAVITY, HEIGHT, HINGE, I_A, I_AXIS, I_B,
                                                I_INDEX, I_JOINT, I_KIND, I_ROW, I_SUB, INERTIA,
                                                INV_INERTIA, LOWER, MASS, MAX_TORQUE, MAX_VELOCITY,
                                                MU, O_DAMPING, O_DT, O_FEEDBACK, O_GYRO,
                                                O_ISOTROPIC, O_ROLLING, O_SOFT, O_THRESHOLD,
                                                POSITION, RESTITUTION, ROLL, ROW_WIDTH, SLIDER,
                                                TARGET, UNIVERSAL, UPPER, VELOCITY_DAMPING, VISCOUS,
                                                V, W, _softness, forces, inverse_inertia,
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
        impulse = vn.clip(command * dt, -most, most)
        grow[:] = 0.0
        g_imp = 0.0
        for k in range(6):
            g_imp += row[DIR_A + k] * g_vel[a, k]
            grow[DIR_A + k] = g_vel[a, k] * impulse
        if b >= 0:
            for k in range(6):
                g_imp += row[DIR_B + k] * g_vel[b, k]
                grow[DIR_B + k] = g_vel[b, k] * impulse
        gp[:] = 0.0
        g_d = axis_row_vjp(grow, 0.0, kind, direction, pose, a, b, body, inv_i, g_body, g_inv_i,
                           gp)
        _direction_vjp(kind, axis, gp, g_d)
        joint_pose_vjp(s, joint[j], a, b, gp, g_s, g_joint[j])
        g_x, g_lo, g_hi = clip_vjp(command * dt, -most, most, g_imp)
        g_motor[m, MAX_TORQUE] += dt * (g_hi - g_lo)
        g_act, _, _ = clip_vjp(action[m], lo, hi, dt * g_x)
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
def drag_vjp(s, joint, drags, dt, body, inv_i, g_rows, g_s, g_body, g_joint, g_inv_i, gp, row,
             grow):
    """Pullback of `rows_numba.drag_rows`."""
    for q in range(drags.shape[0]):
        kind, a, b, j, r = (drags[q, I_KIND], drags[q, I_A], drags[q, I_B], drags[q, I_INDEX],
                            drags[q, I_ROW])
        pose = joint_pose(s, joint[j], a, b)
        axis_b = vn.column(pose[4], 0)
        row[:] = 0.0
        m_eff = axis_row(row, kind, axis_b, pose, a, b, body, inv_i)
        cdt = joint[j, VISCOUS] * dt
        for k in range(ROW_WIDTH):
            grow[k] = g_rows[r, k] + g_rows[r + 1, k]
        g_mass = g_rows[r, MASS]
        g_m = g_rows[r + 1, MASS]
        g_cdt = 0.0
        den = cdt + m_eff
        if den != 0.0:
            g_m += g_mass * cdt * cdt / (den * den)
            g_cdt += g_mass * m_eff * m_eff / (den * den)
        if abs(cdt) > vn.EPS:
            g_cdt -= g_rows[r, GAMMA] / (cdt * cdt)
        g_joint[j, VISCOUS] += dt * g_cdt
        g_joint[j, DRY] += dt * (g_rows[r + 1, UPPER] - g_rows[r + 1, LOWER])
        gp[:] = 0.0
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
        for k in range(3):
            if kind == SLIDER and k == 0:
                continue
            d = vn.column(wb, k) if kind == SLIDER else _unit(k)
            g_t = g_rows[r, TARGET]
            g_d, g_ra, g_rb = point_row_vjp(g_rows[r], g_rows[r, MASS], d, ra, rb, a, b, body,
                                            inv_i, g_body, g_inv_i)
            add3(gp, P_RA, g_ra)
            add3(gp, P_RB, g_rb)
            add3(gp, P_ERR, vn.scale(d, -gain * g_t / dt))
            g_dft = vn.add(g_dft, vn.scale(d, -g_t / dt))
            if kind == SLIDER:
                g_d = vn.add(g_d, vn.scale(vn.add(vn.scale(error, gain), dft), -g_t / dt))
                add_column(gp, P_WB, k, g_d)
            r += 1
        if kind == HINGE:
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
            f = -gain / dt * 0.5
            g0 = f * g_rows[r, TARGET]
            g1 = f * g_rows[r + 1, TARGET]
            g2 = f * g_rows[r + 2, TARGET]
            for k in range(3):
                angular_row_vjp(g_rows[r], g_rows[r, MASS], _unit(k), a, b, inv_i, g_inv_i)
                r += 1
            g_e = (0.0, -g2, g1, g2, 0.0, -g0, -g1, g0, 0.0)
            ga = vn.matmul(g_e, wb)
            gb = vn.matmul(vn.transpose(g_e), wa)
            for k in range(9):
                gp[P_WA, k] += ga[k]
                gp[P_WB, k] += gb[k]
        if joints[q, I_AXIS] > 0:
            lo, hi = joint_consts[j, 2], joint_consts[j, 3]
            fb = options[O_FEEDBACK]
            value = coordinate(kind, 0, pose)
            g_value = 0.0
            for side in range(2):
                sign = 1.0 if side == 0 else -1.0
                slack = value - lo if side == 0 else hi - value
                g_t = g_rows[r, TARGET]
                g_d = axis_row_vjp(g_rows[r], g_rows[r, MASS], kind, vn.scale(axis_b, sign),
                                   pose, a, b, body, inv_i, g_body, g_inv_i, gp)
                add_column(gp, P_WB, 0, vn.scale(g_d, sign))
                g_slack = -fb * g_t / dt if slack < 0 else -g_t / dt
                g_value += sign * g_slack
                r += 1
            coordinate_vjp(kind, 0, pose, g_value, gp)
        drift_vjp(vel, a, b, ra, rb, dt, g_dft, g_vel, gp)
        joint_pose_vjp(s, joint[j], a, b, gp, g_s, g_joint[j])


# ------------------------------------------------------------------- contacts

@leaf
def _combine_vjp(x, y, g):
    """(g_x, g_y) of `rows_numba._combine`."""
    prod = x * y
    if prod > 0:
        g_prod = g / (2.0 * math.sqrt(prod))
        return g_prod * y, g_prod * x
    return 0.0, 0.0


@leaf
def softness_vjp(m, frequency, damping, dt, g_gamma, g_beta):
    """(g_m, g_frequency, g_damping) of `rows_numba._softness`."""
    omega = 2.0 * math.pi * frequency
    k = m * omega ** 2
    c = 2.0 * m * damping * omega
    den = dt * (c + dt * k)
    g_m, g_w, g_z = 0.0, 0.0, 0.0
    if abs(den) > vn.EPS:
        g_den = -g_gamma / (den * den)
        g_c, g_k = dt * g_den, dt * dt * g_den
        g_m += omega * omega * g_k + 2.0 * damping * omega * g_c
        g_w += 2.0 * m * omega * g_k + 2.0 * m * damping * g_c
        g_z += 2.0 * m * omega * g_c
    dd = 2.0 * damping + dt * omega
    g_w += g_beta * (dt / dd - dt * omega * dt / (dd * dd))
    g_z -= g_beta * 2.0 * dt * omega / (dd * dd)
    return g_m, 2.0 * math.pi * g_w, g_z


@leaf
def _normal_vjp(c, a, b, r0, gap, v0, t, reaches, m_eff, tau, world, body, options, g_rows,
                g_tau, g_world, g_body):
    """Reverse of the second contact pass for contact c (target, soft mass,
    gamma): (g_gap, g_v0, g_t, g_m_eff); tau's cotangent goes to g_tau."""
    dt = options[O_DT]
    soft = options[O_SOFT] > 0
    u0 = options[O_THRESHOLD]
    penetrating = gap < 0
    gamma, beta = 0.0, options[O_FEEDBACK]
    if soft:
        gamma, beta = _softness(m_eff, world[FREQUENCY], world[DAMPING_RATIO], dt)
        gamma = gamma if penetrating else 0.0
    tb = a
    if b >= 0 and tau[b] < tau[a]:
        tb = b
    tau_b = tau[tb]
    rest = 1.0 - tau_b if reaches else 1.0
    restd = rest if rest > 0 else 1.0
    closing = v0 * (t - tau_b) / restd
    if penetrating:
        separation = -beta * gap / dt
    else:
        separation = closing if reaches else -gap / dt
    if u0 > 0:
        ramp = vn.clip((-v0 - u0) / u0, 0.0, 1.0)
    else:
        ramp = 1.0 if v0 < 0 else 0.0
    e_a = body[a, RESTITUTION]
    e_o = world[G_RESTITUTION] if b < 0 else body[b, RESTITUTION]
    e = e_o if e_o > e_a else e_a
    bounce = -e * ramp * v0
    hits = gap + dt * v0 < 0 and v0 < -u0
    g_target, g_mass = g_rows[r0, TARGET], g_rows[r0, MASS]
    g_sep, g_bounce = g_target, 0.0
    if hits and not separation > bounce:
        g_sep, g_bounce = 0.0, g_target
    g_m, g_gamma = 0.0, g_rows[r0, GAMMA]
    if soft:
        den = 1.0 / m_eff + gamma
        if abs(den) > vn.EPS:
            g_den = -g_mass / (den * den)
            g_gamma += g_den
            if m_eff != 0.0:
                g_m -= g_den / (m_eff * m_eff)
    else:
        g_m += g_mass
    g_e = -ramp * v0 * g_bounce
    g_ramp = -e * v0 * g_bounce
    g_v0 = -e * ramp * g_bounce
    if not e_o > e_a:
        g_body[a, RESTITUTION] += g_e
    elif b < 0:
        g_world[G_RESTITUTION] += g_e
    else:
        g_body[b, RESTITUTION] += g_e
    if u0 > 0:
        g_x, _, _ = clip_vjp((-v0 - u0) / u0, 0.0, 1.0, g_ramp)
        g_v0 -= g_x / u0
    g_beta, g_gap, g_closing = 0.0, 0.0, 0.0
    if penetrating:
        g_beta = -gap / dt * g_sep
        g_gap = -beta / dt * g_sep
    elif reaches:
        g_closing = g_sep
    else:
        g_gap = -g_sep / dt
    g_v0 += (t - tau_b) / restd * g_closing
    g_t = v0 / restd * g_closing
    g_taub = -v0 / restd * g_closing
    if reaches and rest > 0:
        g_taub += closing / restd * g_closing      # rest = 1 - tau_b
    g_tau[tb] += g_taub
    if soft:
        g_sm, g_f, g_z = softness_vjp(m_eff, world[FREQUENCY], world[DAMPING_RATIO], dt,
                                      g_gamma if penetrating else 0.0, g_beta)
        g_m += g_sm
        g_world[FREQUENCY] += g_f
        g_world[DAMPING_RATIO] += g_z
    return g_gap, g_v0, g_t, g_m


@leaf
def contact_vjp(s, body, world, options, contacts, articulated, inv_i, vel, g_rows, g_tau_w,
                g_vel, g_s, g_body, g_world, g_inv_i, row, grow, tape, per_body, winner):
    """Pullback of `rows_numba.contact_rows`; the approach velocities'
    cotangents go to g_vel. Scratch: tape (C, 9), per_body (N, 3), winner
    (N,) int64."""
    n_c, n = contacts.shape[0], s.shape[0]
    dt = options[O_DT]
    height = world[HEIGHT]
    gaps, v0s, ts, m0s = tape[:, 0], tape[:, 1], tape[:, 2], tape[:, 3]
    reach = tape[:, 4]
    g_gap, g_v0, g_t, g_m0 = tape[:, 5], tape[:, 6], tape[:, 7], tape[:, 8]
    late, tau, g_tau = per_body[:, 0], per_body[:, 1], per_body[:, 2]
    late[:] = 0.0
    winner[:] = -1
    for c in range(n_c):      # the first pass, taped
        kind, a, b, r0 = contacts[c, I_KIND], contacts[c, I_A], contacts[c, I_B], contacts[c, I_ROW]
        gap, nrm, ra, rb = cn.geometry(kind, contacts[c, I_SUB], a, b, s, body, height)
        row[:] = 0.0
        m0s[c] = point_row(row, nrm, ra, rb, a, b, body, inv_i)
        v0 = 0.0
        for k in range(6):
            v0 += row[k] * vel[a, k]
        if b >= 0:
            vb = 0.0
            for k in range(6):
                vb += row[6 + k] * vel[b, k]
            v0 += vb
        reaches, t = cn.impact_fraction(gap, v0, dt)
        gaps[c], v0s[c], ts[c] = gap, v0, t
        reach[c] = 1.0 if reaches else 0.0
        if 1.0 - t > late[a]:
            late[a], winner[a] = 1.0 - t, c
        if b >= 0 and 1.0 - t > late[b]:
            late[b], winner[b] = 1.0 - t, c
    for i in range(n):
        tau[i] = 0.0 if n_c == 0 or articulated[i] > 0 else 1.0 - late[i]
        g_tau[i] = g_tau_w[i]
    for c in range(n_c):      # the second pass, reversed
        g_gap[c], g_v0[c], g_t[c], g_m0[c] = _normal_vjp(
            c, contacts[c, I_A], contacts[c, I_B], contacts[c, I_ROW], gaps[c], v0s[c], ts[c],
            reach[c] > 0, m0s[c], tau, world, body, options, g_rows, g_tau, g_world, g_body)
    for i in range(n):        # tau = 1 - late, late = max(late, 1 - t)
        if n_c > 0 and not articulated[i] > 0 and winner[i] >= 0:
            g_t[winner[i]] += g_tau[i]
    rolling = options[O_ROLLING] > 0
    for c in range(n_c - 1, -1, -1):
        kind, a, b, r0 = contacts[c, I_KIND], contacts[c, I_A], contacts[c, I_B], contacts[c, I_ROW]
        gap, nrm, ra, rb = cn.geometry(kind, contacts[c, I_SUB], a, b, s, body, height)
        gg, gv0 = g_gap[c], g_v0[c]
        if reach[c] > 0:
            approach = -v0s[c] * dt
            gg += g_t[c] / approach
            gv0 += dt * g_t[c] * gap / (approach * approach)
        # friction and rolling rows
        if b < 0:
            t1, t2 = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)
            f_o, r_o = world[G_FRICTION], world[G_ROLL]
        else:
            t1, t2 = cn.tangent_basis(nrm)
            f_o, r_o = body[b, FRICTION], body[b, ROLL]
        g_mu = g_rows[r0 + 1, MU] + g_rows[r0 + 2, MU]
        g_fa, g_fo = _combine_vjp(body[a, FRICTION], f_o, g_mu)
        g_ra, g_rb = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        g_t1, g_t2 = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
        for k in range(1, 3):
            g_d, g_ra_k, g_rb_k = point_row_vjp(g_rows[r0 + k], g_rows[r0 + k, MASS],
                                                t1 if k == 1 else t2, ra, rb, a, b, body,
                                                inv_i, g_body, g_inv_i)
            g_ra, g_rb = vn.add(g_ra, g_ra_k), vn.add(g_rb, g_rb_k)
            if k == 1:
                g_t1 = vn.add(g_t1, g_d)
            else:
                g_t2 = vn.add(g_t2, g_d)
        g_roll = 0.0
        if rolling:
            g_roll = g_rows[r0 + 3, MU] + g_rows[r0 + 4, MU]
            g_t1 = vn.add(g_t1, angular_row_vjp(g_rows[r0 + 3], g_rows[r0 + 3, MASS], t1, a, b,
                                                inv_i, g_inv_i))
            g_t2 = vn.add(g_t2, angular_row_vjp(g_rows[r0 + 4], g_rows[r0 + 4, MASS], t2, a, b,
                                                inv_i, g_inv_i))
        roll_o = r_o > body[a, ROLL]
        g_body[a, FRICTION] += g_fa
        if not roll_o:
            g_body[a, ROLL] += g_roll
        if b < 0:
            g_world[G_FRICTION] += g_fo
            if roll_o:
                g_world[G_ROLL] += g_roll
            g_n = (0.0, 0.0, 0.0)
        else:
            g_body[b, FRICTION] += g_fo
            if roll_o:
                g_body[b, ROLL] += g_roll
            g_n = tangent_basis_vjp(nrm, g_t1, g_t2)
        # the normal row, read by v0
        row[:] = 0.0
        point_row(row, nrm, ra, rb, a, b, body, inv_i)
        for k in range(ROW_WIDTH):
            grow[k] = g_rows[r0, k]
        for k in range(6):
            grow[k] += gv0 * vel[a, k]
            g_vel[a, k] += gv0 * row[k]
        if b >= 0:
            for k in range(6):
                grow[6 + k] += gv0 * vel[b, k]
                g_vel[b, k] += gv0 * row[6 + k]
        g_d, g_ra_k, g_rb_k = point_row_vjp(grow, g_m0[c], nrm, ra, rb, a, b, body, inv_i,
                                            g_body, g_inv_i)
        g_n = vn.add(g_n, g_d)
        g_ra, g_rb = vn.add(g_ra, g_ra_k), vn.add(g_rb, g_rb_k)
        g_world[HEIGHT] += geometry_vjp(kind, contacts[c, I_SUB], a, b, s, body, gg, g_n, g_ra,
                                        g_rb, g_s, g_body)


# ----------------------------------------------------------------------- all

@jit
def rows_vjp(state, body, world, joint, motor, action, contacts, joints, drags, servos, torques,
             joint_consts, motor_consts, rows_table, articulated, options, g_v_free, g_rows,
             g_tau):
    """(g_state, g_body, g_world, g_joint, g_motor, g_action): the pullback
    of `rows_numba.rows` at its inputs of the cotangents of its outputs
    (v_free (B, N, 6), rows (B, R, ROW.width), tau (B, N))."""
    n_worlds, n = state.shape[0], state.shape[1]
    g_state = np.zeros_like(state)
    g_body = np.zeros_like(body)
    g_world = np.zeros_like(world)
    g_joint = np.zeros_like(joint)
    g_motor = np.zeros_like(motor)
    g_action = np.zeros_like(action)
    vel = np.empty((n, 6))
    g_vel = np.empty((n, 6))
    inv_i = np.empty((n, 9))
    g_inv_i = np.empty((n, 9))
    gp = np.zeros((5, 9))
    row = np.zeros(ROW_WIDTH)
    grow = np.zeros(ROW_WIDTH)
    tape, per_body = np.empty((contacts.shape[0], 9)), np.empty((n, 3))
    winner = np.empty(n, dtype=np.int64)
    dt = options[O_DT]
    for w in range(n_worlds):
        s = state[w]
        ib = w if body.shape[0] > 1 else 0
        iw = w if world.shape[0] > 1 else 0
        ij = w if joint.shape[0] > 1 else 0
        im = w if motor.shape[0] > 1 else 0
        pb, pw, pj, pm = body[ib], world[iw], joint[ij], motor[im]
        gs, gb, gw, gj, gm = g_state[w], g_body[ib], g_world[iw], g_joint[ij], g_motor[im]
        forces(s, pb, pw, options, vel)
        inverse_inertia(s, pb, options, inv_i)
        torque_impulses(s, pj, pm, action[w], torques, motor_consts, options, pb, inv_i, vel,
                        row)
        g_vel[:] = g_v_free[w]
        g_inv_i[:] = 0.0
        gr = g_rows[w]
        servo_vjp(s, pj, pm, action[w], servos, motor_consts, dt, pb, inv_i, gr, gs, gb, gj, gm,
                  g_action[w], g_inv_i, gp)
        drag_vjp(s, pj, drags, dt, pb, inv_i, gr, gs, gb, gj, g_inv_i, gp, row, grow)
        joint_vjp(s, pj, joints, joint_consts, options, pb, inv_i, vel, gr, g_vel, gs, gb, gj,
                  g_inv_i, gp)
        contact_vjp(s, pb, pw, options, contacts, articulated, inv_i, vel, gr, g_tau[w], g_vel,
                    gs, gb, gw, g_inv_i, row, grow, tape, per_body, winner)
        torque_vjp(s, pj, pm, action[w], torques, motor_consts, dt, pb, inv_i, g_vel, gs, gb,
                   gj, gm, g_action[w], g_inv_i, gp, row, grow)
        forces_vjp(s, pb, pw, options, g_vel, gs, gb, gw)
        inverse_inertia_vjp(s, pb, options, g_inv_i, gs, gb)
    return g_state, g_body, g_world, g_joint, g_motor, g_action
