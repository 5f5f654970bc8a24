"""Stages 2 and 3 of the fused step in JAX: projected Gauss-Seidel sweeps
over the rows (`solve`) and the time-of-impact integration (`integrate`).

The row update and bounds are the stage spec's (`symphys.physics.kernels`);
the sweep is a `lax.fori_loop` over rows inside one over sweeps, per world,
`jax.vmap`-ed over the worlds. Reference: `symphys.physics.solver.solve` and the end
of `symphys.physics.step.step`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from symphys.physics.kernels.layout import ROW, STATE, Bound, Option, RowColumn
from symphys.physics.kernels.vec_jax import clip, rotation_coefficients

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


def _skew_times(u, m):
    """[u]_x m for u (..., 3), m (..., 3, 3): u x each column."""
    ux, uy, uz = (u[..., k, None] for k in range(3))
    x, y, z = m[..., 0, :], m[..., 1, :], m[..., 2, :]
    return jnp.stack([uy * z - uz * y, uz * x - ux * z, ux * y - uy * x], axis=-2)


def integrate(state, v, v_free, tau, options, renormalise: int):
    """-> next state (B, N, 18): x + dt v_move, R <- renormalise(exp(dt
    [w_move]) R) `renormalise` times, velocities the solved v, with
    v_move = v + tau (v_free - v)."""
    state, v, v_free = jnp.asarray(state), jnp.asarray(v), jnp.asarray(v_free)
    dt = jnp.asarray(options)[Option.DT]
    move = v + jnp.asarray(tau)[..., None] * (v_free - v)
    position = state[..., STATE.position] + move[..., :3] * dt
    rot = state[..., STATE.rotation].reshape(state.shape[:-1] + (3, 3))
    u = move[..., 3:] * dt
    sinc, cosc = rotation_coefficients(u)
    once = _skew_times(u, rot)
    twice = _skew_times(u, once)
    rot = rot + sinc[..., None, None] * once + cosc[..., None, None] * twice
    for _ in range(int(renormalise)):
        gram = (rot[..., :, None, :] * rot[..., None, :, :]).sum(-1)       # a a^T
        aat_a = (gram[..., :, :, None] * rot[..., None, :, :]).sum(-2)
        rot = (3.0 * rot - aat_a) * 0.5
    return jnp.concatenate([position, rot.reshape(rot.shape[:-2] + (9,)), v[..., :3],
                            v[..., 3:]], axis=-1)
