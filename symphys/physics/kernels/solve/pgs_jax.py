"""The solve stage of the fused step in JAX by the paper's method (solver
method "pgs"): projected Gauss-Seidel sweeps over the rows.

The row update and bounds are the stage spec's (`symphys.physics.kernels`);
the sweep is a `lax.fori_loop` over rows inside one over sweeps, per world,
`jax.vmap`-ed over the worlds. Reference: `symphys.physics.solver.solve` and the end
of `symphys.physics.step.step`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from symphys.physics.kernels.layout import ROW, Bound, RowColumn
from symphys.physics.kernels.vec_jax import clip

_JAC_A, _JAC_B, _DIR_A, _DIR_B = ROW.jac_a, ROW.jac_b, ROW.dir_a, ROW.dir_b
_MASS, _GAMMA, _TARGET, _KEEP = (ROW.at(k) for k in ("mass", "gamma", "target", "keep"))
_LOWER, _UPPER, _MU = ROW.at("lower"), ROW.at("upper"), ROW.at("mu")


def _solve_world(V, rows, table, iterations: int):
    n, n_rows = V.shape[0], rows.shape[0]
    if n_rows == 0 or iterations <= 0:
        return V
    a_col, b_col = table[:, RowColumn.A], table[:, RowColumn.B]
    bound_col, ref_col = table[:, RowColumn.BOUND], table[:, RowColumn.REF]

    def update(r, carry):
        V, lam = carry
        row = rows[r]
        a, b = a_col[r], b_col[r]
        a_in = jnp.where(a >= 0, a, 0)
        b_in = jnp.where(b >= 0, b, 0)
        jv = (row[_JAC_A] * V[a_in]).sum() + (row[_JAC_B] * V[b_in]).sum()
        old = lam[r]
        new = row[_KEEP] * (old + row[_MASS] * (row[_TARGET] - jv - row[_GAMMA] * old))
        kind = bound_col[r]
        lower, upper = row[_LOWER], row[_UPPER]
        low = jnp.where(new > lower, new, lower)
        box = jnp.where(low < upper, low, upper)
        c = row[_MU] * lam[jnp.maximum(ref_col[r], 0)]
        fric = jnp.where(c > 0, clip(new, -c, c), 0.0)
        new = jnp.where(kind == Bound.LOWER, low,
                        jnp.where(kind == Bound.BOX, box,
                                  jnp.where(kind == Bound.FRICTION, fric, new)))
        delta = new - old
        V = V.at[jnp.where(a >= 0, a, n)].add(row[_DIR_A] * delta, mode="drop")
        V = V.at[jnp.where(b >= 0, b, n)].add(row[_DIR_B] * delta, mode="drop")
        return V, lam.at[r].set(new)

    def sweep(_, carry):
        return jax.lax.fori_loop(0, n_rows, update, carry)

    lam = jnp.zeros(n_rows, V.dtype)
    V, _ = jax.lax.fori_loop(0, iterations, sweep, (V, lam))
    return V


def solve(v_free, rows, rows_table, iterations: int):
    """-> v (B, N, 6): `iterations` projected Gauss-Seidel sweeps from
    v_free (B, N, 6) over rows (B, R, ROW.width), every impulse 0 before
    the first sweep."""
    table = jnp.asarray(rows_table)
    return jax.vmap(_solve_world, in_axes=(0, 0, None, None))(
        jnp.asarray(v_free), jnp.asarray(rows), table, int(iterations))
