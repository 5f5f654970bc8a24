"""Hand-written pullback of the contact rows of the Numba rows kernel
(`rows_numba`): each contact's normal, friction and rolling rows, its
softness and its impact fraction, reversed against the recomputed forward
(`contact_vjp`, called by `rows_grad.rows_vjp`). Kinks follow the
forward as written, as in `rows_grad`.
"""

from __future__ import annotations

import math

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry import geoms_numba as geo
from symphys.physics.kernels.geometry.contact_geometry_grad import tangent_basis_vjp
from symphys.physics.kernels.geometry.geometry_grad import angular_row_vjp, clip_vjp, point_row_vjp
from symphys.physics.kernels.geometry.geoms_grad import side_geometry_vjp
from symphys.physics.kernels.layout import STATE
from symphys.physics.kernels.rows import contacts_numba as cn
from symphys.physics.kernels.rows.joints_numba import point_row
from symphys.physics.kernels.rows.rows_numba import (DAMPING_RATIO, FREQUENCY, FRICTION, G_FRICTION,
                                                     G_RESTITUTION, G_ROLL, GAMMA, HEIGHT, I_A, I_B,
                                                     I_FLIP, I_GA, I_GB, I_KIND, I_ROW, I_SUB, MASS,
                                                     MU, O_DT, O_ROLLING, O_SOFT, O_THRESHOLD,
                                                     RESTITUTION, ROLL, ROW_WIDTH, TARGET,
                                                     normal_target, restitutions)

jit, leaf = vn.jit, vn.leaf
ROT = STATE.at("rotation")


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
def _normal_vjp(c, a, b, ga, gb, r0, gap, v0, t, reaches, m_eff, tau, world, body, geom,
                options, g_rows, g_tau, g_world, g_body, g_geom):
    """Reverse of the second contact pass for contact c (target, soft mass,
    gamma): (g_gap, g_v0, g_t, g_m_eff); tau's cotangent goes to g_tau."""
    dt = options[O_DT]
    soft = options[O_SOFT] > 0
    u0 = options[O_THRESHOLD]
    penetrating = gap < 0
    (gamma, beta, tb, rest, restd, closing, separation, ramp, e_a, e_o, e, bounce, hits,
     _) = normal_target(a, b, gap, v0, t, reaches, m_eff, tau, world,
                        *restitutions(a, b, ga, gb, body, geom, world), options)
    tau_b = tau[tb]
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
        geo.side_add(a, ga, RESTITUTION, g_e, g_body, g_geom)
    elif b < 0 and gb < 0:
        g_world[G_RESTITUTION] += g_e
    else:
        geo.side_add(b, gb, RESTITUTION, g_e, g_body, g_geom)
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
def contact_vjp(s, body, geom, world, options, contacts, articulated, inv_i, vel, g_rows,
                g_tau_w, g_vel, g_s, g_body, g_geom, g_world, g_inv_i, row, grow, tape, per_body,
                winner, cs, cb, gcs, gcb):
    """Pullback of `rows_numba.contact_rows`; the approach velocities'
    cotangents go to g_vel. Scratch: tape (C, 9), per_body (N, 3), winner
    (N,) int64, a contact's sides cs, gcs (2, 18), cb, gcb (2, BODY.width)."""
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
        gap, nrm, ra, rb = geo.side_geometry(kind, contacts[c, I_SUB], a, b, contacts[c, I_GA],
                                             contacts[c, I_GB], contacts[c, I_FLIP], s, body,
                                             geom, height, cs, cb)
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
            c, contacts[c, I_A], contacts[c, I_B], contacts[c, I_GA], contacts[c, I_GB],
            contacts[c, I_ROW], gaps[c], v0s[c], ts[c], reach[c] > 0, m0s[c], tau, world, body,
            geom, options, g_rows, g_tau, g_world, g_body, g_geom)
    for i in range(n):        # tau = 1 - late, late = max(late, 1 - t)
        if n_c > 0 and not articulated[i] > 0 and winner[i] >= 0:
            g_t[winner[i]] += g_tau[i]
    rolling = options[O_ROLLING] > 0
    for c in range(n_c - 1, -1, -1):
        kind, a, b, r0 = contacts[c, I_KIND], contacts[c, I_A], contacts[c, I_B], contacts[c, I_ROW]
        ga, gb = contacts[c, I_GA], contacts[c, I_GB]
        flip = contacts[c, I_FLIP]
        gap, nrm, ra, rb = geo.side_geometry(kind, contacts[c, I_SUB], a, b, ga, gb, flip, s,
                                             body, geom, height, cs, cb)
        gg, gv0 = g_gap[c], g_v0[c]
        if reach[c] > 0:
            approach = -v0s[c] * dt
            gg += g_t[c] / approach
            gv0 += dt * g_t[c] * gap / (approach * approach)
        # friction and rolling rows
        ground = b < 0 and gb < 0
        f_a, r_a = (geo.side_value(a, ga, FRICTION, body, geom),
                    geo.side_value(a, ga, ROLL, body, geom))
        if ground:
            t1, t2 = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)
            f_o, r_o = world[G_FRICTION], world[G_ROLL]
        else:
            t1, t2 = cn.tangent_basis(nrm)
            f_o, r_o = (geo.side_value(b, gb, FRICTION, body, geom),
                        geo.side_value(b, gb, ROLL, body, geom))
        g_mu = g_rows[r0 + 1, MU] + g_rows[r0 + 2, MU]
        g_fa, g_fo = _combine_vjp(f_a, f_o, g_mu)
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
        roll_o = r_o > r_a
        geo.side_add(a, ga, FRICTION, g_fa, g_body, g_geom)
        if not roll_o:
            geo.side_add(a, ga, ROLL, g_roll, g_body, g_geom)
        if ground:
            g_world[G_FRICTION] += g_fo
            if roll_o:
                g_world[G_ROLL] += g_roll
            g_n = (0.0, 0.0, 0.0)
        else:
            geo.side_add(b, gb, FRICTION, g_fo, g_body, g_geom)
            if roll_o:
                geo.side_add(b, gb, ROLL, g_roll, g_body, g_geom)
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
        g_world[HEIGHT] += side_geometry_vjp(kind, contacts[c, I_SUB], a, b, ga, gb, flip, s,
                                             body, geom, gg, g_n, g_ra, g_rb, g_s, g_body, g_geom,
                                             cs, cb, gcs, gcb)
