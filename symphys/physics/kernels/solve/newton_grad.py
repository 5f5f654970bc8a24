"""Pullback of the converged solve (`newton_numba.solve`) by implicit
differentiation: one solve with the Hessian at the answer.

At the answer v, with U the unclamped constraints and K the clamped ones,

    F(v, theta) = M (v - v_free) - sum_U J_e^T (t_e - J_e v) / c_e
                  - sum_K J_e^T b_e = 0,

so for a cotangent g_v, w = H^-1 g_v (H = dF/dv, the forward's Hessian)
gives every input's cotangent as -w^T dF/dtheta:

    v_free: M w;  t_e: J_e w / c_e;  c_e: -(J_e w) lam_e / c_e;
    b_e (clamped): J_e w;  J_e: lam_e w - (J_e w / c_e) v (U), lam_e w (K);
    M: -w (v - v_free)^T, read back to the inverse mass and world inverse
    inertia and from there to the state's rotation and the body's columns.

It is the derivative of the converged answer: exact where the forward
converged and no constraint sits exactly on its bound's edge (there the
answer has a kink and this is one of its one-sided derivatives).
"""

from __future__ import annotations

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.rows.rows_grad import inverse_inertia_vjp
from symphys.physics.kernels.rows.rows_numba import inverse_inertia
from symphys.physics.kernels.solve.newton_numba import (C_COMPLIANCE, C_DIR, C_HI, C_JAC, C_LO,
                                                        C_TARGET, C_WIDTH, COL_BOUND, DIRECT, FREE,
                                                        GAMMA, INV_MASS, JA, K_A, K_B, KEEP, LOWER,
                                                        MASS, MU, SKIP, TARGET, UPPER, _a_rr,
                                                        _hessian, _impulses, _m_times, body_mass,
                                                        constraints, factor, row_head,
                                                        solve_factored)

jit, leaf = vn.jit, vn.leaf


@leaf
def _a_rr_vjp(row, has_b, jac, dirs, g_a, g_row):
    """Add the pullback of `_a_rr` (cotangent g_a) to g_row."""
    for k in range(6 + (6 if has_b else 0)):
        g_row[jac + k] += g_a * row[dirs + k]
        g_row[dirs + k] += g_a * row[jac + k]


@leaf
def _own_compliance_vjp(row, g_own, g_row):
    """Add the pullback of `_own_compliance` (for a row that acts) to g_row."""
    keep, mass = row[KEEP], row[MASS]
    g_row[GAMMA] += g_own
    g_row[KEEP] += -g_own / (keep * keep * mass)
    g_row[MASS] += -g_own * (1.0 - keep) / (keep * mass * mass)


@leaf
def constraints_vjp(rows_w, table, stiff, soft, con, gcon, g_rows):
    """Add the rows' cotangents (R, ROW.width) from the constraints' gcon
    (E, C_WIDTH), reversing `newton_numba.constraints` step by step."""
    n_rows = table.shape[0]
    e = 0
    for r in range(n_rows):
        bound = table[r, COL_BOUND]
        what, has_b, a_rr, own, n_fric = row_head(rows_w, table, r)
        if what == SKIP:
            continue
        if what == DIRECT:
            for k in range(24):
                g_rows[r, JA + k] += gcon[e, k]
            g_rows[r, TARGET] += gcon[e, C_TARGET]
            g_rows[r, LOWER] += gcon[e, C_LO]
            g_rows[r, UPPER] += gcon[e, C_HI]
            g_c = gcon[e, C_COMPLIANCE]
            _own_compliance_vjp(rows_w[r], g_c, g_rows[r])
            _a_rr_vjp(rows_w[r], has_b, JA, JA + 12,
                      g_c * (stiff if bound == FREE else soft), g_rows[r])
            e += 1
            continue
        relative = own / a_rr + soft
        count = 2.0 * n_fric
        g_own, g_ann = 0.0, 0.0
        for j in range(r + 1, r + 1 + n_fric):
            mu = rows_w[j, MU]
            for sign in (1.0, -1.0):
                a_ee = _a_rr(con[e], has_b, C_JAC, C_DIR)
                g_c = gcon[e, C_COMPLIANCE]
                g_own += g_c * a_ee * count / a_rr
                g_ann -= g_c * a_ee * count * own / (a_rr * a_rr)
                # con[e] = row r + sign mu row j over jac and dir; A_ee reads both.
                _a_rr_vjp(con[e], has_b, C_JAC, C_DIR, g_c * relative * count, gcon[e])
                g_mu = 0.0
                for k in range(24):
                    g_rows[r, JA + k] += gcon[e, k]
                    g_rows[j, JA + k] += sign * mu * gcon[e, k]
                    g_mu += gcon[e, k] * rows_w[j, JA + k]
                g_rows[j, MU] += sign * g_mu
                g_rows[r, TARGET] += gcon[e, C_TARGET]
                e += 1
        _own_compliance_vjp(rows_w[r], g_own, g_rows[r])
        _a_rr_vjp(rows_w[r], has_b, JA, JA + 12, g_ann, g_rows[r])


@jit
def solve_vjp(v_free, rows, rows_table, state, body, options, order, pair, later, nb_ptr, nb,
              v, g_v, iterations, stiff, soft, tolerance):
    """(g_v_free (B, N, 6), g_rows (B, R, ROW.width), g_state (B, N, 18),
    g_body (Bp, N, BODY.width)) of the cotangent g_v of `newton_numba.solve`'s
    answer v (module docstring)."""
    n_worlds, n, n_rows = v_free.shape[0], v_free.shape[1], rows_table.shape[0]
    g_v_free = np.zeros_like(v_free)
    g_rows = np.zeros_like(rows)
    g_state = np.zeros_like(state)
    g_body = np.zeros_like(body)
    inv_i, g_inv_i = np.empty((n, 9)), np.empty((n, 9))
    inv_mass = np.empty(n)
    mass, inertia = np.empty(n), np.empty((n, 3, 3))
    con = np.empty((2 * n_rows, C_WIDTH))
    gcon = np.empty((2 * n_rows, C_WIDTH))
    kind = np.empty((2 * n_rows, 4), dtype=np.int64)
    y, lam = np.empty(2 * n_rows), np.empty(2 * n_rows)
    act = np.zeros(2 * n_rows, dtype=np.bool_)
    diag, off = np.empty((n, 6, 6)), np.empty((later.shape[0], 6, 6))
    w_v, mw, dv = np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6))
    for w in range(n_worlds):
        wb = w if body.shape[0] > 1 else 0
        pb = body[wb]
        inverse_inertia(state[w], pb, options, inv_i)
        for i in range(n):
            inv_mass[i] = pb[i, INV_MASS]
        body_mass(inv_mass, inv_i, mass, inertia)
        n_con = constraints(rows[w], rows_table, stiff, soft, con, kind)
        vw = v[w]
        _impulses(con, kind, n_con, vw, y, lam, act)
        _hessian(mass, inertia, con, kind, n_con, act, pair, later, diag, off)
        factor(diag, off, order, pair, later, nb_ptr, nb)
        w_v[:] = g_v[w]
        solve_factored(diag, off, order, later, nb_ptr, nb, w_v)
        _m_times(mass, inertia, w_v, mw)
        for i in range(n):
            for k in range(6):
                g_v_free[w, i, k] += mw[i, k]
                dv[i, k] = vw[i, k] - v_free[w, i, k]
        # Constraints.
        gcon[:n_con] = 0.0
        for e in range(n_con):
            a, b = kind[e, K_A], kind[e, K_B]
            jw = 0.0
            for k in range(6):
                jw += con[e, C_JAC + k] * w_v[a, k]
            if b >= 0:
                for k in range(6):
                    jw += con[e, C_JAC + 6 + k] * w_v[b, k]
            c = con[e, C_COMPLIANCE]
            if act[e]:
                gcon[e, C_TARGET] = jw / c
                gcon[e, C_COMPLIANCE] = -jw * lam[e] / c
                for k in range(6):
                    gcon[e, C_JAC + k] = lam[e] * w_v[a, k] - jw / c * vw[a, k]
                if b >= 0:
                    for k in range(6):
                        gcon[e, C_JAC + 6 + k] = lam[e] * w_v[b, k] - jw / c * vw[b, k]
            else:
                # The side its unclamped impulse left by (not lam == lo: a box
                # of zero width, dry friction 0, has lo == hi).
                if con[e, C_TARGET] - y[e] < c * con[e, C_LO]:
                    gcon[e, C_LO] = jw
                else:
                    gcon[e, C_HI] = jw
                for k in range(6):
                    gcon[e, C_JAC + k] = lam[e] * w_v[a, k]
                if b >= 0:
                    for k in range(6):
                        gcon[e, C_JAC + 6 + k] = lam[e] * w_v[b, k]
        constraints_vjp(rows[w], rows_table, stiff, soft, con, gcon, g_rows[w])
        # The mass matrix: dF/dM = (v - v_free), M from its inverses.
        g_inv_i[:] = 0.0
        for i in range(n):
            g_m = 0.0
            for k in range(3):
                g_m -= w_v[i, k] * dv[i, k]
            g_body[wb, i, INV_MASS] -= g_m * mass[i] * mass[i]
            # g_I = -w_ang dv_ang^T; g_(I^-1) = -I^T g_I I^T.
            for p in range(3):
                for q in range(3):
                    acc = 0.0
                    for s in range(3):
                        for t in range(3):
                            acc += inertia[i, s, p] * w_v[i, 3 + s] * dv[i, 3 + t] * \
                                inertia[i, q, t]
                    g_inv_i[i, 3 * p + q] = acc
        inverse_inertia_vjp(state[w], pb, options, g_inv_i, g_state[w], g_body[wb])
    return g_v_free, g_rows, g_state, g_body
