"""Numba kernel of the converged solve (solver method "newton"): Newton's
method on the convex problem the rows pose, over body velocities, with a
block-sparse Cholesky factorization that follows the bodies' joint tree.

`constraints` turns one world's rows (`layout.ROW`) into constraints e,
each J_e v + c_e lam_e = target_e with lam_e clamped to its bounds:

- equality rows (joints, bearing losses) keep the compliance at which the
  sweeps' update stops moving, c = gamma + (1 - keep) / (keep mass), plus
  `STIFF` A_rr (A_rr = J M^-1 J^T, the row's inverse effective mass);
- bounded rows (limits, servos, dry friction) add `soft` A_rr (MuJoCo's
  (1 - d) / d of an impedance d): smooth enough for Newton's method;
- a contact that can act (its normal row's UPPER column is 1: penetrating,
  or reaching the other side within the step) becomes the edges n +- mu t
  of its friction pyramid (MuJoCo's pyramidal cone), each a LOWER 0 row;
  one that cannot stays out of the problem.

The answer minimises the convex

    f(v) = 1/2 |v - v_free|_M^2 + sum_e phi_e(J_e v),   phi_e' = -lam_e,

whose gradient is g = M (v - v_free) - J^T lam and Hessian
H = M + sum over unclamped e of J_e^T J_e / c_e: (6N x 6N) in 6x6 blocks,
nonzero where a constraint joins two bodies. Eliminating bodies leaves
first (`pattern`) fills nothing on a tree, so a factorization costs O(N).
Each Newton step ends with an exact line search on f (piecewise quadratic
along the step); it stops when max |M^-1 g| is below `tolerance` times the
largest speed.

Shapes: v_free, v (N, 6) per world; rows (R, ROW.width); rows_table (R, 4);
inv_mass (N,); inv_inertia (N, 9) (world, row-major); state (B, N, 18) and
body (Bp, N, BODY.width) in `solve`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.layout import BODY, Bound
from symphys.physics.kernels.rows.rows_numba import inverse_inertia
from symphys.physics.kernels.solve.pgs_numba import (BOX, COL_A, COL_B, COL_BOUND, COL_REF, DA,
                                                     FRICTION, GAMMA, JA, KEEP, LOWER, LOWER_BOUND,
                                                     MASS, MU, TARGET, UPPER)

jit, leaf = vn.jit, vn.leaf
FREE = int(Bound.FREE)
INV_MASS = BODY.at("inv_mass")
# Equality rows' compliance added to their own, relative to their inverse
# effective mass: joints hold to about this fraction of a step's impulse.
STIFF = 1e-8


# ------------------------------------------------------------------ pattern

@dataclass(frozen=True)
class TreePattern:
    """Where the Hessian's blocks are, from which body pairs rows join.

    order (N,): bodies in elimination order; pair (N, N): the index of the
    off-diagonal block of two bodies (holding H[earlier, later]) or -1;
    later (P,): the later body of each block; nb_ptr (N+1,), nb (P,): the
    blocks of each body's later neighbours, the bodies in elimination order
    (CSR over `order`). All int64."""

    order: np.ndarray
    pair: np.ndarray
    later: np.ndarray
    nb_ptr: np.ndarray
    nb: np.ndarray

    def arrays(self) -> list[np.ndarray]:
        """The arrays in field order (the kernels' trailing inputs)."""
        return [getattr(self, f.name) for f in fields(self)]


def pattern(rows_table: np.ndarray, n_bodies: int) -> TreePattern:
    """The `TreePattern` of a scene's rows (R, 4). Minimum degree on the
    body graph: leaves first on a tree, so nothing fills in; loops (contacts
    between bodies of one chain) add the fill blocks they need."""
    adj = [set() for _ in range(n_bodies)]
    for a, b in rows_table[:, :2]:
        if b >= 0 and a != b:
            adj[a].add(int(b))
            adj[b].add(int(a))
    left = set(range(n_bodies))
    order = []
    while left:
        k = min(left, key=lambda i: (len(adj[i] & left), i))
        nbrs = adj[k] & left
        for i in nbrs:
            adj[i] |= nbrs - {i}
        left.remove(k)
        order.append(k)
    rank = {k: t for t, k in enumerate(order)}
    pair = -np.ones((n_bodies, n_bodies), dtype=np.int64)
    later, nb_ptr, nb = [], [0], []
    for k in order:
        for j in sorted((j for j in adj[k] if rank[j] > rank[k]), key=rank.get):
            pair[k, j] = pair[j, k] = len(later)
            later.append(j)
            nb.append(pair[k, j])
        nb_ptr.append(len(nb))
    as_int = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return TreePattern(as_int(order), pair, as_int(later), as_int(nb_ptr), as_int(nb))


# --------------------------------------------------------- 6x6 block algebra

@leaf
def _chol6(m):
    """In place: the lower Cholesky factor of the SPD 6x6 m."""
    for j in range(6):
        d = m[j, j]
        for k in range(j):
            d -= m[j, k] * m[j, k]
        d = np.sqrt(d)
        m[j, j] = d
        for i in range(j + 1, 6):
            s = m[i, j]
            for k in range(j):
                s -= m[i, k] * m[j, k]
            m[i, j] = s / d
        for i in range(j):
            m[i, j] = 0.0


@leaf
def _lsolve6(lo, x):
    """In place x <- L^-1 x for lower L (6x6) and x (6, ncols)."""
    for c in range(x.shape[1]):
        for i in range(6):
            s = x[i, c]
            for k in range(i):
                s -= lo[i, k] * x[k, c]
            x[i, c] = s / lo[i, i]


@leaf
def _ltsolve6(lo, x):
    """In place x <- L^-T x for lower L (6x6) and x (6,)."""
    for i in range(5, -1, -1):
        s = x[i]
        for k in range(i + 1, 6):
            s -= lo[k, i] * x[k]
        x[i] = s / lo[i, i]


@leaf
def factor(diag, off, order, pair, later, nb_ptr, nb):
    """In place block Cholesky of H (diag (N, 6, 6), off (P, 6, 6) holding
    H[earlier, later]): diag[k] becomes L_kk, off[p] W = L_kk^-1 H[k, j]."""
    for t in range(order.shape[0]):
        k = order[t]
        _chol6(diag[k])
        for q in range(nb_ptr[t], nb_ptr[t + 1]):
            _lsolve6(diag[k], off[nb[q]])
        for q1 in range(nb_ptr[t], nb_ptr[t + 1]):
            p1 = nb[q1]
            j1 = later[p1]
            for q2 in range(q1, nb_ptr[t + 1]):
                p2 = nb[q2]
                j2 = later[p2]
                if j1 == j2:
                    target = diag[j1]
                    wa, wb = off[p1], off[p1]
                else:
                    target = off[pair[j1, j2]]
                    # H[earlier, later] of (j1, j2): nb is in elimination order.
                    wa, wb = off[p1], off[p2]
                for r in range(6):
                    for c in range(6):
                        s = 0.0
                        for i in range(6):
                            s += wa[i, r] * wb[i, c]
                        target[r, c] -= s


@leaf
def solve_factored(diag, off, order, later, nb_ptr, nb, x):
    """In place x (N, 6) <- H^-1 x with H factored by `factor`."""
    n = order.shape[0]
    for t in range(n):
        k = order[t]
        xk = x[k]
        for i in range(6):
            s = xk[i]
            for j in range(i):
                s -= diag[k, i, j] * xk[j]
            xk[i] = s / diag[k, i, i]
        for q in range(nb_ptr[t], nb_ptr[t + 1]):
            w, j = off[nb[q]], later[nb[q]]
            for r in range(6):
                s = 0.0
                for i in range(6):
                    s += w[i, r] * xk[i]
                x[j, r] -= s
    for t in range(n - 1, -1, -1):
        k = order[t]
        xk = x[k]
        for q in range(nb_ptr[t], nb_ptr[t + 1]):
            w, j = off[nb[q]], later[nb[q]]
            for i in range(6):
                s = 0.0
                for c in range(6):
                    s += w[i, c] * x[j, c]
                xk[i] -= s
        _ltsolve6(diag[k], xk)


# ------------------------------------------------------------ constraints

# Columns of the constraint table the Newton solve builds from the rows:
# J on both sides, M^-1 J^T on both sides, target, compliance c, bounds.
C_JAC, C_DIR, C_TARGET, C_COMPLIANCE, C_LO, C_HI, C_WIDTH = 0, 12, 24, 25, 26, 27, 28
# Integer columns: bodies a, b, bound (FREE, LOWER, BOX), source row.
K_A, K_B, K_BOUND, K_ROW = 0, 1, 2, 3


@leaf
def _a_rr(row, has_b, jac, dirs):
    """J . M^-1 J^T of a ROW-packed (or constraint) row."""
    acc = 0.0
    for k in range(6):
        acc += row[jac + k] * row[dirs + k]
    if has_b:
        for k in range(6):
            acc += row[jac + 6 + k] * row[dirs + 6 + k]
    return acc


@leaf
def _own_compliance(row, a_rr):
    """The compliance at which the sweeps' update of `row` stops moving:
    gamma + (1 - keep) / (keep mass); -1 for a row that never acts."""
    keep, mass = row[KEEP], row[MASS]
    if keep <= 0.0 or mass <= 0.0 or a_rr <= 0.0:
        return -1.0
    return row[GAMMA] + (1.0 - keep) / (keep * mass)


# What `constraints` makes of a row (`row_head`).
SKIP, DIRECT, EDGES = 0, 1, 2


@leaf
def row_head(rows_w, table, r):
    """(what becomes of row r: SKIP, DIRECT (one constraint) or EDGES (its
    contact's pyramid), has b, A_rr, own compliance, the friction rows that
    follow it in the layout)."""
    has_b = table[r, COL_B] >= 0
    if table[r, COL_BOUND] == FRICTION:
        return SKIP, has_b, 0.0, -1.0, 0
    a_rr = _a_rr(rows_w[r], has_b, JA, DA)
    own = _own_compliance(rows_w[r], a_rr)
    n_fric = 0
    q = r + 1
    while q < table.shape[0] and table[q, COL_BOUND] == FRICTION and table[q, COL_REF] == r:
        n_fric += 1
        q += 1
    if own < 0.0 or (n_fric > 0 and rows_w[r, UPPER] <= 0.0):   # never acts, or not now
        return SKIP, has_b, a_rr, own, n_fric
    return (EDGES if n_fric > 0 else DIRECT), has_b, a_rr, own, n_fric


@leaf
def constraints(rows_w, table, stiff, soft, con, kind):
    """The convex problem's constraints from one world's rows: con (E, C_WIDTH),
    kind (E, 4); returns E.

    Equality rows keep their own compliance plus `stiff` A_rr; bounded rows
    (limits, servos, dry friction) plus `soft` A_rr. A contact that can act
    (its normal row's UPPER column is 1) becomes the edges n +- mu_j t_j of
    its pyramid, one pair per friction row j, each a LOWER 0 row aiming at
    the normal's target with compliance (c_n / A_nn + soft) A_ee x (edge
    count), so that the edges together are as soft along n as the normal;
    one that cannot act stays out."""
    n_rows = table.shape[0]
    e = 0
    for r in range(n_rows):
        bound = table[r, COL_BOUND]
        what, has_b, a_rr, own, n_fric = row_head(rows_w, table, r)
        if what == SKIP:
            continue
        if what == DIRECT:
            for k in range(24):
                con[e, k] = rows_w[r, JA + k]     # jac_a, jac_b, dir_a, dir_b in order
            con[e, C_TARGET] = rows_w[r, TARGET]
            con[e, C_COMPLIANCE] = own + (stiff if bound == FREE else soft) * a_rr
            con[e, C_LO], con[e, C_HI] = rows_w[r, LOWER], rows_w[r, UPPER]
            kind[e, K_A], kind[e, K_B], kind[e, K_ROW] = table[r, COL_A], table[r, COL_B], r
            kind[e, K_BOUND] = bound
            e += 1
            continue
        relative = own / a_rr + soft
        for j in range(r + 1, r + 1 + n_fric):
            mu = rows_w[j, MU]
            for sign in (1.0, -1.0):
                for k in range(24):
                    con[e, k] = rows_w[r, JA + k] + sign * mu * rows_w[j, JA + k]
                a_ee = _a_rr(con[e], has_b, C_JAC, C_DIR)
                con[e, C_TARGET] = rows_w[r, TARGET]
                con[e, C_COMPLIANCE] = relative * a_ee * 2.0 * n_fric
                con[e, C_LO], con[e, C_HI] = 0.0, 0.0
                kind[e, K_A], kind[e, K_B], kind[e, K_ROW] = table[r, COL_A], table[r, COL_B], r
                kind[e, K_BOUND] = LOWER_BOUND
                e += 1
    return e


# ------------------------------------------------------------------- Newton

@leaf
def _rate(con, e, a, b, v):
    """J_e v."""
    y = 0.0
    for k in range(6):
        y += con[e, C_JAC + k] * v[a, k]
    if b >= 0:
        for k in range(6):
            y += con[e, C_JAC + 6 + k] * v[b, k]
    return y


@leaf
def impulse(u, bound, lo, hi):
    """(lam, unclamped) of a constraint whose unclamped impulse is u."""
    if bound == FREE:
        return u, True
    if u < lo:
        return lo, False
    if bound == BOX and u > hi:
        return hi, False
    return u, True


@leaf
def body_mass(inv_mass, inv_i, mass, inertia):
    """mass (N,) and world inertia (N, 3, 3) from their inverses."""
    for i in range(inv_mass.shape[0]):
        mass[i] = 1.0 / inv_mass[i]
        m = inv_i[i]
        cof = (m[4] * m[8] - m[5] * m[7], m[2] * m[7] - m[1] * m[8], m[1] * m[5] - m[2] * m[4],
               m[5] * m[6] - m[3] * m[8], m[0] * m[8] - m[2] * m[6], m[2] * m[3] - m[0] * m[5],
               m[3] * m[7] - m[4] * m[6], m[1] * m[6] - m[0] * m[7], m[0] * m[4] - m[1] * m[3])
        det = m[0] * cof[0] + m[1] * cof[3] + m[2] * cof[6]
        for k in range(9):
            inertia[i, k // 3, k % 3] = cof[k] / det


@leaf
def _m_times(mass, inertia, x, out):
    """out (N, 6) = M x."""
    for i in range(x.shape[0]):
        for k in range(3):
            out[i, k] = mass[i] * x[i, k]
            s = 0.0
            for j in range(3):
                s += inertia[i, k, j] * x[i, 3 + j]
            out[i, 3 + k] = s


@leaf
def _impulses(con, kind, n_con, v, y, lam, act):
    """Each constraint's rate y, impulse lam and whether it is unclamped."""
    for e in range(n_con):
        y[e] = _rate(con, e, kind[e, K_A], kind[e, K_B], v)
        lam[e], act[e] = impulse((con[e, C_TARGET] - y[e]) / con[e, C_COMPLIANCE],
                                 kind[e, K_BOUND], con[e, C_LO], con[e, C_HI])


@leaf
def _mass_blocks(mass, inertia, diag, off):
    """diag, off = the blocks of M."""
    diag[:] = 0.0
    off[:] = 0.0
    for i in range(mass.shape[0]):
        for k in range(3):
            diag[i, k, k] = mass[i]
            for j in range(3):
                diag[i, 3 + k, 3 + j] = inertia[i, k, j]


@leaf
def _add_constraints(con, kind, n_con, act, equalities, pair, later, diag, off):
    """Add J_e^T J_e / c_e of each unclamped e that is an equality row (or,
    with equalities False, bounded) to the blocks: the lower triangles of
    diag (`_mirror` completes them), all of off (H[earlier, later])."""
    for e in range(n_con):
        if not act[e] or (kind[e, K_BOUND] == FREE) != equalities:
            continue
        a, b = kind[e, K_A], kind[e, K_B]
        w = 1.0 / con[e, C_COMPLIANCE]
        for p in range(6):
            wp = w * con[e, C_JAC + p]
            for q in range(p + 1):
                diag[a, p, q] += wp * con[e, C_JAC + q]
        if b >= 0:
            for p in range(6):
                wp = w * con[e, C_JAC + 6 + p]
                for q in range(p + 1):
                    diag[b, p, q] += wp * con[e, C_JAC + 6 + q]
            blk = off[pair[a, b]]           # H[earlier, later]
            first, second = (C_JAC, C_JAC + 6) if later[pair[a, b]] == b else (C_JAC + 6, C_JAC)
            for p in range(6):
                wp = w * con[e, first + p]
                for q in range(6):
                    blk[p, q] += wp * con[e, second + q]


@leaf
def _mirror(diag):
    """Each diagonal block's upper triangle from its lower."""
    for i in range(diag.shape[0]):
        for p in range(6):
            for q in range(p):
                diag[i, q, p] = diag[i, p, q]


@leaf
def _hessian(mass, inertia, con, kind, n_con, act, pair, later, diag, off):
    """diag, off = the blocks of H = M + sum over unclamped e of J_e^T J_e / c_e."""
    _mass_blocks(mass, inertia, diag, off)
    _add_constraints(con, kind, n_con, act, True, pair, later, diag, off)
    _add_constraints(con, kind, n_con, act, False, pair, later, diag, off)
    _mirror(diag)


@leaf
def _line_search(con, kind, n_con, y, dy, quad, lin, slope):
    """The alpha minimising f(v + alpha step) (f piecewise quadratic in alpha:
    f'(alpha) = alpha quad + lin - sum_e lam_e(y_e + alpha dy_e) dy_e),
    by safeguarded Newton steps on f' from alpha = 1 (exact at once where
    no constraint changes sides), to |f'| <= 1e-10 |f'(0)| (slope = f'(0))."""
    alpha, lo_a, hi_a = 1.0, 0.0, np.inf
    for _ in range(50):
        d1, d2 = alpha * quad + lin, quad
        for e in range(n_con):
            if dy[e] == 0.0:
                continue
            c = con[e, C_COMPLIANCE]
            lam, unclamped = impulse((con[e, C_TARGET] - y[e] - alpha * dy[e]) / c,
                                     kind[e, K_BOUND], con[e, C_LO], con[e, C_HI])
            d1 -= lam * dy[e]
            if unclamped:
                d2 += dy[e] * dy[e] / c
        if abs(d1) <= 1e-10 * abs(slope):
            return alpha
        if d1 > 0:
            hi_a = alpha
        else:
            lo_a = alpha
        nxt = alpha - d1 / d2
        if not lo_a < nxt < hi_a:
            nxt = 0.5 * (lo_a + hi_a) if hi_a < np.inf else 2.0 * alpha
        if nxt == alpha:
            return alpha
        alpha = nxt
    return alpha


@jit
def newton_world(v_free, rows_w, table, inv_mass, inv_i, order, pair, later, nb_ptr, nb,
                 stiff, soft, tolerance, max_iterations, v):
    """Solve one world: v (N, 6) in place from v_free (`module docstring`).
    Returns (iterations, residual): the Newton steps taken and the final
    max |M^-1 g| over max(|v_free|, |v|, 1e-3)."""
    n, n_rows = v_free.shape[0], table.shape[0]
    mass, inertia = np.empty(n), np.empty((n, 3, 3))
    body_mass(inv_mass, inv_i, mass, inertia)
    con = np.empty((2 * n_rows, C_WIDTH))
    kind = np.empty((2 * n_rows, 4), dtype=np.int64)
    n_con = constraints(rows_w, table, stiff, soft, con, kind)
    y, dy, lam = np.empty(n_con), np.empty(n_con), np.empty(n_con)
    act = np.zeros(n_con, dtype=np.bool_)
    diag, off = np.empty((n, 6, 6)), np.empty((later.shape[0], 6, 6))
    g, step, mx, dv = np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6))
    # M and the equality rows (never clamped): the Hessian's part that every
    # iteration shares.
    base_diag, base_off = np.empty_like(diag), np.empty_like(off)
    _mass_blocks(mass, inertia, base_diag, base_off)
    act[:] = True
    _add_constraints(con, kind, n_con, act, True, pair, later, base_diag, base_off)
    v[:] = v_free
    residual = 0.0
    for it in range(max_iterations + 1):
        _impulses(con, kind, n_con, v, y, lam, act)
        for i in range(n):
            for k in range(6):
                dv[i, k] = v[i, k] - v_free[i, k]
        _m_times(mass, inertia, dv, g)
        for e in range(n_con):
            if lam[e] != 0.0:
                a, b = kind[e, K_A], kind[e, K_B]
                for k in range(6):
                    g[a, k] -= con[e, C_JAC + k] * lam[e]
                if b >= 0:
                    for k in range(6):
                        g[b, k] -= con[e, C_JAC + 6 + k] * lam[e]
        worst, scale = 0.0, 1e-3
        for i in range(n):
            for k in range(3):
                worst = max(worst, abs(inv_mass[i] * g[i, k]))
                s = 0.0
                for j in range(3):
                    s += inv_i[i, 3 * k + j] * g[i, 3 + j]
                worst = max(worst, abs(s))
            for k in range(6):
                scale = max(scale, abs(v_free[i, k]), abs(v[i, k]))
        residual = worst / scale
        if residual <= tolerance or it == max_iterations:
            return it, residual
        diag[:] = base_diag
        off[:] = base_off
        _add_constraints(con, kind, n_con, act, False, pair, later, diag, off)
        _mirror(diag)
        factor(diag, off, order, pair, later, nb_ptr, nb)
        for i in range(n):
            for k in range(6):
                step[i, k] = -g[i, k]
        solve_factored(diag, off, order, later, nb_ptr, nb, step)
        for e in range(n_con):
            dy[e] = _rate(con, e, kind[e, K_A], kind[e, K_B], step)
        _m_times(mass, inertia, step, mx)
        quad, lin = 0.0, 0.0
        for i in range(n):
            for k in range(6):
                quad += step[i, k] * mx[i, k]
                lin += mx[i, k] * dv[i, k]
        slope = lin
        for e in range(n_con):
            slope -= lam[e] * dy[e]
        alpha = _line_search(con, kind, n_con, y, dy, quad, lin, slope)
        for i in range(n):
            for k in range(6):
                v[i, k] += alpha * step[i, k]
    return max_iterations, residual


@jit
def solve(v_free, rows, rows_table, state, body, options, order, pair, later, nb_ptr, nb,
          iterations, stiff, soft, tolerance):
    """v (B, N, 6): each world solved by `newton_world` (at most `iterations`
    Newton steps); the mass matrix from state (B, N, 18) and body
    (Bp, N, BODY.width)."""
    n_worlds, n = v_free.shape[0], v_free.shape[1]
    v = np.empty_like(v_free)
    inv_i = np.empty((n, 9))
    inv_mass = np.empty(n)
    for w in range(n_worlds):
        pb = body[w if body.shape[0] > 1 else 0]
        inverse_inertia(state[w], pb, options, inv_i)
        for i in range(n):
            inv_mass[i] = pb[i, INV_MASS]
        newton_world(v_free[w], rows[w], rows_table, inv_mass, inv_i, order, pair, later, nb_ptr,
                     nb, stiff, soft, tolerance, iterations, v[w])
    return v
