"""Hand-written reverse-mode pullback of the Numba Gauss-Seidel solve
(`pgs_numba`).

solve_vjp(v_free, rows, rows_table, g_v, iterations)
    -> (g_v_free (B, N, 6), g_rows (B, R, ROW.width))
solve_vjp_recompute(...): the same by the other strategy below

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

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.solve.pgs_numba import (BOX, COL_A, COL_B, COL_BOUND, COL_REF, DA, DB,
                                                     FRICTION, GAMMA, JA, JB, KEEP, LOWER,
                                                     LOWER_BOUND, MASS, MU, TARGET, UPPER,
                                                     row_velocity)

jit, leaf = vn.jit, vn.leaf

# Branch codes: where the cotangent of a row's clamped impulse goes.
TO_NEW, TO_LOWER, TO_UPPER, TO_MINUS_C, TO_PLUS_C, TO_NOTHING = 0, 1, 2, 3, 4, 5


# --------------------------------------------------------------------- solve

@leaf
def clamp_branch(new, row, bound, lamref):
    """`pgs_numba.clamp` that also says which branch it took:
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
    """`pgs_numba.sweep_world` (same arithmetic, same results) recording
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
    `pgs_numba.solve` at (v_free, rows) of the cotangent g_v (B, N, 6),
    from a tape of every update (the stage's pullback)."""
    return _solve_vjp_store(v_free, rows, rows_table, iterations, g_v)


@jit
def solve_vjp_recompute(v_free, rows, rows_table, g_v, iterations):
    """`solve_vjp`, re-running each sweep from per-sweep checkpoints
    instead of storing every update's tape (same result, less memory,
    slower; kept to measure the two against each other)."""
    return _solve_vjp_recompute(v_free, rows, rows_table, iterations, g_v)
