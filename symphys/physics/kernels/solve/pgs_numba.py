"""Numba kernel of the solve stage by the paper's method (solver method
"pgs"): projected Gauss-Seidel sweeps over the rows, and the row columns
every solve reads.

Shapes: v_free, v (B, N, 6); rows (B, R, ROW.width); rows_table (R, 4).
"""

from __future__ import annotations

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.layout import ROW, Bound, RowColumn

jit, leaf = vn.jit, vn.leaf
JA, JB, DA, DB = ROW.at("jac_a"), ROW.at("jac_b"), ROW.at("dir_a"), ROW.at("dir_b")
MASS, GAMMA, TARGET, KEEP = ROW.at("mass"), ROW.at("gamma"), ROW.at("target"), ROW.at("keep")
LOWER, UPPER, MU = ROW.at("lower"), ROW.at("upper"), ROW.at("mu")
COL_A, COL_B, COL_BOUND, COL_REF = (int(RowColumn.A), int(RowColumn.B), int(RowColumn.BOUND),
                                    int(RowColumn.REF))
LOWER_BOUND, BOX, FRICTION = int(Bound.LOWER), int(Bound.BOX), int(Bound.FRICTION)


@leaf
def row_velocity(row, vel, a, b):
    """J v of one row (row: (ROW.width,), vel: (N, 6))."""
    jv = 0.0
    for k in range(6):
        jv += row[JA + k] * vel[a, k]
    if b >= 0:
        jb = 0.0
        for k in range(6):
            jb += row[JB + k] * vel[b, k]
        jv += jb
    return jv


@leaf
def clamp(new, row, bound, lam, ref):
    """The row's impulse after its bound (see `layout.Bound`)."""
    if bound == LOWER_BOUND or bound == BOX:
        lo = row[LOWER]
        new = new if new > lo else lo
        if bound == BOX:
            hi = row[UPPER]
            new = new if new < hi else hi
    elif bound == FRICTION:
        c = row[MU] * lam[ref]
        new = vn.clip(new, -c, c) if c > 0 else 0.0
    return new


@leaf
def apply_impulse(row, vel, a, b, delta):
    for k in range(6):
        vel[a, k] += row[DA + k] * delta
    if b >= 0:
        for k in range(6):
            vel[b, k] += row[DB + k] * delta


@leaf
def sweep_world(rows_w, table, vel, lam):
    """One Gauss-Seidel sweep of one world in place: rows_w (R, width),
    vel (N, 6), lam (R,)."""
    for r in range(table.shape[0]):
        row = rows_w[r]
        a, b = table[r, COL_A], table[r, COL_B]
        jv = row_velocity(row, vel, a, b)
        old = lam[r]
        new = row[KEEP] * (old + row[MASS] * (row[TARGET] - jv - row[GAMMA] * old))
        new = clamp(new, row, table[r, COL_BOUND], lam, table[r, COL_REF])
        apply_impulse(row, vel, a, b, new - old)
        lam[r] = new


@jit
def solve(v_free, rows, rows_table, iterations):
    """v (B, N, 6) after `iterations` sweeps from v_free."""
    v = v_free.copy()
    lam = np.zeros(rows_table.shape[0])
    for w in range(v.shape[0]):
        lam[:] = 0.0
        for _ in range(iterations):
            sweep_world(rows[w], rows_table, v[w], lam)
    return v
