"""The integrate stage of the fused step in JAX: the time-of-impact pose
update (`symphys.physics.kernels.integrate.integrate_numba` in JAX;
reference: the end of `symphys.physics.step.step`)."""

from __future__ import annotations

import jax.numpy as jnp

from symphys.physics.kernels.layout import STATE, Option
from symphys.physics.kernels.vec_jax import rotation_coefficients


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
