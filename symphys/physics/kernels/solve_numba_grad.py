"""Hand-written reverse-mode pullbacks of the Numba solve and integrate
kernels (`solve_numba`).

solve_vjp(v_free, rows, rows_table, g_v, iterations)
    -> (g_v_free (B, N, 6), g_rows (B, R, ROW.width))
solve_vjp_recompute(...): the same by the other strategy below
integrate_vjp(state, v, v_free, tau, options, g_state, renormalise)
    -> (g_state (B, N, 18), g_v (B, N, 6), g_v_free (B, N, 6), g_tau (B, N))

The gradients are those of reverse-mode autodiff of the forward as written:
each `x if cond else y` passes the cotangent to the branch taken (LOWER:
to `new` when new > lower, else to `lower`; BOX then to `upper` when not
new < upper; FRICTION with c = mu lam[ref] > 0: to -c, c or `new` as
`clip` picks, and through c to mu and to lam[ref] as it was when the row
was swept; c <= 0 gives the constant 0).

The sweeps are replayed backwards one row update at a time. Each update's
tape is (old lam, new lam, lam[ref], branch code); V before an update is
recovered from V after it by subtracting the applied impulse
(V -= dir (new - old)), starting every sweep's reversal from V as it was
at the end of that sweep (so round-off never drifts beyond one sweep).
Two strategies give the same numbers:

- "store" (`solve_vjp`, the stage's pullback, faster): one forward pass
  records every update's tape (iterations x R) and V at every sweep's end;
- "recompute" (`solve_vjp_recompute`, less memory): the forward pass keeps only
  (V, lam) at each sweep's start; each sweep is re-run from its checkpoint
  to record its tape (R entries) just before it is reversed.

Worlds are independent: the scratch arrays are per world and reused.
"""

from __future__ import annotations

import math

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.solve_numba import (BOX, COL_A, COL_B, COL_BOUND, COL_REF, DA, DB, DT,
                                                 FRICTION, GAMMA, JA, JB, KEEP, LOWER, LOWER_BOUND,
                                                 MASS, MU, TARGET, UPPER, R, V, W, X, row_velocity)

jit, leaf = vn.jit, vn.leaf

# Branch codes: where the cotangent of a row's clamped impulse goes.
TO_NEW, TO_LOWER, TO_UPPER, TO_MINUS_C, TO_PLUS_C, TO_NOTHING = 0, 1, 2, 3, 4, 5


# --------------------------------------------------------------------- solve

@leaf
def clamp_branch(new, row, bound, lamref):
    """`solve_numba.clamp` that also says which branch it took:
    (clamped impulse, branch code)."""
    code = TO_NEW
    if bound == LOWER_BOUND or bound == BOX:
        lo = row[LOWER]
        if not new > lo:
            new, code = lo, TO_LOWER
        if bound == BOX:
            hi = row[UPPER]
            if not new < hi:
                new, code = hi, TO_UPPER
    elif bound == FRICTION:
        c = row[MU] * lamref
        if c > 0:
            if new < -c:
                new, code = -c, TO_MINUS_C
            elif new > c:
                new, code = c, TO_PLUS_C
        else:
            new, code = 0.0, TO_NOTHING
    return new, code


@leaf
def sweep_taped(rows_w, table, vel, lam, olds, news, lamrefs, codes):
    """`solve_numba.sweep_world` (same arithmetic, same results) recording
    each update's tape into olds, news, lamrefs, codes (R,)."""
    for r in range(table.shape[0]):
        row = rows_w[r]
        a, b, ref = table[r, COL_A], table[r, COL_B], table[r, COL_REF]
        jv = row_velocity(row, vel, a, b)
        old = lam[r]
        new = row[KEEP] * (old + row[MASS] * (row[TARGET] - jv - row[GAMMA] * old))
        lamref = lam[ref]     # as the forward reads it (FRICTION rows only use it)
        new, code = clamp_branch(new, row, table[r, COL_BOUND], lamref)
        delta = new - old
        for k in range(6):
            vel[a, k] += row[DA + k] * delta
        if b >= 0:
            for k in range(6):
                vel[b, k] += row[DB + k] * delta
        lam[r] = new
        olds[r], news[r], lamrefs[r], codes[r] = old, new, lamref, code


@leaf
def sweep_reverse(rows_w, table, vel, g_rows_w, g_vel, g_lam, olds, news, lamrefs, codes):
    """Reverse one sweep. On entry vel is V at the sweep's end, g_vel and
    g_lam the cotangents of V and lam there; on exit g_vel, g_lam are those
    at the sweep's start, and g_rows_w (R, width) has the sweep's share
    added. vel is rewound to the sweep's start on the way."""
    for r in range(table.shape[0] - 1, -1, -1):
        row, grow = rows_w[r], g_rows_w[r]
        a, b, ref = table[r, COL_A], table[r, COL_B], table[r, COL_REF]
        old, new, code = olds[r], news[r], codes[r]
        delta = new - old
        # V += dir delta: rewind V (and take J v there), and the cotangents
        # of dir and delta
        g_delta = 0.0
        jv = 0.0
        for k in range(6):
            vel[a, k] -= row[DA + k] * delta
            jv += row[JA + k] * vel[a, k]
            g_delta += row[DA + k] * g_vel[a, k]
            grow[DA + k] += g_vel[a, k] * delta
        if b >= 0:
            jb = 0.0
            for k in range(6):
                vel[b, k] -= row[DB + k] * delta
                jb += row[JB + k] * vel[b, k]
                g_delta += row[DB + k] * g_vel[b, k]
                grow[DB + k] += g_vel[b, k] * delta
            jv += jb
        g_new = g_lam[r] + g_delta
        g_old = -g_delta
        # the clamp
        g_pre = 0.0
        if code == TO_NEW:
            g_pre = g_new
        elif code == TO_LOWER:
            grow[LOWER] += g_new
        elif code == TO_UPPER:
            grow[UPPER] += g_new
        elif code == TO_MINUS_C or code == TO_PLUS_C:
            g_c = -g_new if code == TO_MINUS_C else g_new
            grow[MU] += g_c * lamrefs[r]
            g_lam[ref] += g_c * row[MU]
        # pre = keep (old + mass (target - jv - gamma old))
        if g_pre != 0.0:
            t2 = row[TARGET] - jv - row[GAMMA] * old
            grow[KEEP] += g_pre * (old + row[MASS] * t2)
            g_inner = g_pre * row[KEEP]
            g_old += g_inner
            grow[MASS] += g_inner * t2
            g_t2 = g_inner * row[MASS]
            grow[TARGET] += g_t2
            grow[GAMMA] -= g_t2 * old
            g_old -= g_t2 * row[GAMMA]
            for k in range(6):
                grow[JA + k] -= g_t2 * vel[a, k]
                g_vel[a, k] -= g_t2 * row[JA + k]
            if b >= 0:
                for k in range(6):
                    grow[JB + k] -= g_t2 * vel[b, k]
                    g_vel[b, k] -= g_t2 * row[JB + k]
        g_lam[r] = g_old


@jit
def _solve_vjp_store(v_free, rows, rows_table, iterations, g_v):
    nw, n = v_free.shape[0], v_free.shape[1]
    nr = rows_table.shape[0]
    g_v_free = np.empty_like(v_free)
    g_rows = np.zeros_like(rows)
    olds = np.empty((iterations, nr))
    news = np.empty((iterations, nr))
    lamrefs = np.empty((iterations, nr))
    codes = np.empty((iterations, nr), dtype=np.int8)
    ends = np.empty((iterations, n, 6))     # V at each sweep's end
    vel = np.empty((n, 6))
    lam = np.empty(nr)
    g_lam = np.empty(nr)
    for w in range(nw):
        vel[:] = v_free[w]
        lam[:] = 0.0
        for s in range(iterations):
            sweep_taped(rows[w], rows_table, vel, lam, olds[s], news[s], lamrefs[s], codes[s])
            ends[s] = vel
        g_vel = g_v_free[w]
        g_vel[:] = g_v[w]
        g_lam[:] = 0.0
        for s in range(iterations - 1, -1, -1):
            vel[:] = ends[s]
            sweep_reverse(rows[w], rows_table, vel, g_rows[w], g_vel, g_lam, olds[s], news[s],
                          lamrefs[s], codes[s])
    return g_v_free, g_rows


@jit
def _solve_vjp_recompute(v_free, rows, rows_table, iterations, g_v):
    nw, n = v_free.shape[0], v_free.shape[1]
    nr = rows_table.shape[0]
    g_v_free = np.empty_like(v_free)
    g_rows = np.zeros_like(rows)
    olds = np.empty(nr)
    news = np.empty(nr)
    lamrefs = np.empty(nr)
    codes = np.empty(nr, dtype=np.int8)
    v_starts = np.empty((iterations, n, 6))     # (V, lam) at each sweep's start
    lam_starts = np.empty((iterations, nr))
    vel = np.empty((n, 6))
    lam = np.empty(nr)
    g_lam = np.empty(nr)
    for w in range(nw):
        vel[:] = v_free[w]
        lam[:] = 0.0
        for s in range(iterations - 1):
            v_starts[s] = vel
            lam_starts[s] = lam
            sweep_taped(rows[w], rows_table, vel, lam, olds, news, lamrefs, codes)
        if iterations > 0:
            v_starts[iterations - 1] = vel
            lam_starts[iterations - 1] = lam
        g_vel = g_v_free[w]
        g_vel[:] = g_v[w]
        g_lam[:] = 0.0
        for s in range(iterations - 1, -1, -1):
            vel[:] = v_starts[s]
            lam[:] = lam_starts[s]
            sweep_taped(rows[w], rows_table, vel, lam, olds, news, lamrefs, codes)
            sweep_reverse(rows[w], rows_table, vel, g_rows[w], g_vel, g_lam, olds, news,
                          lamrefs, codes)
    return g_v_free, g_rows


@jit
def solve_vjp(v_free, rows, rows_table, g_v, iterations):
    """(g_v_free (B, N, 6), g_rows (B, R, ROW.width)): the pullback of
    `solve_numba.solve` at (v_free, rows) of the cotangent g_v (B, N, 6),
    from a tape of every update (the stage's pullback)."""
    return _solve_vjp_store(v_free, rows, rows_table, iterations, g_v)


@jit
def solve_vjp_recompute(v_free, rows, rows_table, g_v, iterations):
    """`solve_vjp`, re-running each sweep from per-sweep checkpoints
    instead of storing every update's tape (same result, less memory,
    slower; kept to measure the two against each other)."""
    return _solve_vjp_recompute(v_free, rows, rows_table, iterations, g_v)


# ----------------------------------------------------------------- integrate

@leaf
def rotation_coefficients_grad(t2):
    """d/dt2 of `vn.rotation_coefficients`' (sinc, cosc), branch by branch
    as the forward computes them."""
    if t2 < 1e-2:
        q = 1.0 - t2 / 42.0
        p = 1.0 - t2 / 20.0 * q
        d_p = -q / 20.0 + t2 / 20.0 / 42.0
        d_sinc = -p / 6.0 - t2 / 6.0 * d_p
        q = 1.0 - t2 / 56.0
        p = 1.0 - t2 / 30.0 * q
        d_p = -q / 30.0 + t2 / 30.0 / 56.0
        d_cosc = -p / 24.0 - t2 / 24.0 * d_p
        return d_sinc, d_cosc
    t = math.sqrt(t2)
    s, c = math.sin(t), math.cos(t)
    d_sinc = (c / t - s / t2) / (2.0 * t)          # d(sin t / t)/dt / (2t)
    d_cosc = (s / (2.0 * t) - (1.0 - c) / t2) / t2  # d((1 - cos t) / t2)/dt2
    return d_sinc, d_cosc


@leaf
def _columns_cross_sum(m, g):
    """sum_j m[:, j] x g[:, j] (the cotangent of u in <g, [u]_x m>)."""
    acc = (0.0, 0.0, 0.0)
    for j in range(3):
        acc = vn.add(acc, vn.cross(vn.column(m, j), vn.column(g, j)))
    return acc


@leaf
def rotate_by_vjp(u, m, g):
    """(g_u, g_m) of out = exp([u]_x) m = m + sinc [u] m + cosc [u]^2 m."""
    sinc, cosc = vn.rotation_coefficients(u)
    once = vn.skew_times(u, m)
    twice = vn.skew_times(u, once)
    g_sinc = 0.0
    g_cosc = 0.0
    for k in range(9):
        g_sinc += g[k] * once[k]
        g_cosc += g[k] * twice[k]
    # twice = [u] once: g_once = [u]^T (cosc g) = -[u] (cosc g)
    g_twice = (g[0] * cosc, g[1] * cosc, g[2] * cosc, g[3] * cosc, g[4] * cosc, g[5] * cosc,
               g[6] * cosc, g[7] * cosc, g[8] * cosc)
    back = vn.skew_times(u, g_twice)
    g_once = (g[0] * sinc - back[0], g[1] * sinc - back[1], g[2] * sinc - back[2],
              g[3] * sinc - back[3], g[4] * sinc - back[4], g[5] * sinc - back[5],
              g[6] * sinc - back[6], g[7] * sinc - back[7], g[8] * sinc - back[8])
    back = vn.skew_times(u, g_once)
    g_m = (g[0] - back[0], g[1] - back[1], g[2] - back[2], g[3] - back[3], g[4] - back[4],
           g[5] - back[5], g[6] - back[6], g[7] - back[7], g[8] - back[8])
    g_u = vn.add(_columns_cross_sum(once, g_twice), _columns_cross_sum(m, g_once))
    d_sinc, d_cosc = rotation_coefficients_grad(vn.dot(u, u))
    g_u = vn.add(g_u, vn.scale(u, 2.0 * (g_sinc * d_sinc + g_cosc * d_cosc)))
    return g_u, g_m


@leaf
def renormalise_once_vjp(a, g):
    """g_a of out = (3a - a a^T a) / 2:
    g_a = (3g - g a^T a - a g^T a - a a^T g) / 2."""
    ata = vn.matmul(vn.transpose(a), a)
    aat = vn.matmul(a, vn.transpose(a))
    t1 = vn.matmul(g, ata)
    t2 = vn.matmul(vn.matmul(a, vn.transpose(g)), a)
    t3 = vn.matmul(aat, g)
    return ((3.0 * g[0] - t1[0] - t2[0] - t3[0]) * 0.5, (3.0 * g[1] - t1[1] - t2[1] - t3[1]) * 0.5,
            (3.0 * g[2] - t1[2] - t2[2] - t3[2]) * 0.5, (3.0 * g[3] - t1[3] - t2[3] - t3[3]) * 0.5,
            (3.0 * g[4] - t1[4] - t2[4] - t3[4]) * 0.5, (3.0 * g[5] - t1[5] - t2[5] - t3[5]) * 0.5,
            (3.0 * g[6] - t1[6] - t2[6] - t3[6]) * 0.5, (3.0 * g[7] - t1[7] - t2[7] - t3[7]) * 0.5,
            (3.0 * g[8] - t1[8] - t2[8] - t3[8]) * 0.5)


@jit
def integrate_vjp(state, v, v_free, tau, options, g_state, renormalise):
    """(g_state, g_v, g_v_free, g_tau): the pullback of
    `solve_numba.integrate` of the cotangent g_state (B, N, 18) of its
    output (options, dt included, get none)."""
    dt = options[DT]
    g_in = np.zeros_like(state)
    g_v = np.empty_like(v)
    g_vf = np.empty_like(v_free)
    g_tau = np.empty_like(tau)
    rots = np.empty((max(renormalise, 0) + 1, 9))   # rotation before each renormalisation
    move, g_move = np.empty(6), np.empty(6)
    for w in range(state.shape[0]):
        for i in range(state.shape[1]):
            s, g = state[w, i], g_state[w, i]
            t = tau[w, i]
            for k in range(6):
                move[k] = v[w, i, k] + t * (v_free[w, i, k] - v[w, i, k])
            u = (move[3] * dt, move[4] * dt, move[5] * dt)
            rot0 = (s[R], s[R + 1], s[R + 2], s[R + 3], s[R + 4], s[R + 5], s[R + 6], s[R + 7],
                    s[R + 8])
            rot = vn.rotate_by(u, rot0)
            for it in range(renormalise):
                for k in range(9):
                    rots[it, k] = rot[k]
                rot = vn.renormalise_once(rot)
            g_rot = (g[R], g[R + 1], g[R + 2], g[R + 3], g[R + 4], g[R + 5], g[R + 6], g[R + 7],
                     g[R + 8])
            for it in range(renormalise - 1, -1, -1):
                a = (rots[it, 0], rots[it, 1], rots[it, 2], rots[it, 3], rots[it, 4],
                     rots[it, 5], rots[it, 6], rots[it, 7], rots[it, 8])
                g_rot = renormalise_once_vjp(a, g_rot)
            g_u, g_rot0 = rotate_by_vjp(u, rot0, g_rot)
            for k in range(9):
                g_in[w, i, R + k] = g_rot0[k]
            for k in range(3):
                g_in[w, i, X + k] = g[X + k]
                g_move[k] = g[X + k] * dt
                g_move[3 + k] = g_u[k] * dt
            g_t = 0.0
            for k in range(6):
                g_vf[w, i, k] = t * g_move[k]
                g_v[w, i, k] = g_move[k] - t * g_move[k]
                g_t += g_move[k] * (v_free[w, i, k] - v[w, i, k])
            for k in range(3):
                g_v[w, i, k] += g[V + k]
                g_v[w, i, 3 + k] += g[W + k]
            g_tau[w, i] = g_t
    return g_in, g_v, g_vf, g_tau
