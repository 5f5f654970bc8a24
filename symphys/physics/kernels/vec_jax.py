"""Vector algebra on (..., 3) JAX arrays for the fused step's JAX kernels,
after `symphys.physics.algebra` (the reference): every function is
vectorised over leading item axes and gradient-safe (no NaN, nor a NaN
gradient, at zero vectors or ties).
"""

from __future__ import annotations

import jax.numpy as jnp

EPS = 1e-12


def dot(a, b):
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def cross(a, b):
    return jnp.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
                      a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                      a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)


def matvec(m, v):
    """m (..., 3, 3) times v (..., 3)."""
    return (m * v[..., None, :]).sum(axis=-1)


def matTvec(m, v):
    """m^T v."""
    return (m * v[..., :, None]).sum(axis=-2)


def matmul(a, b):
    return (a[..., :, :, None] * b[..., None, :, :]).sum(axis=-2)


def scale(v, s):
    """v (..., 3) times a scalar per item (...)."""
    return v * s[..., None]


def safe_norm(a):
    sq = dot(a, a)
    ok = sq > EPS * EPS
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, sq, 1.0)), 0.0)


def clip(x, lo, hi):
    """lo where x < lo, else hi where x > hi, else x: at a tie the gradient
    goes to x, as in the Numba kernels (jnp.clip splits it)."""
    return jnp.where(x < lo, lo, jnp.where(x > hi, hi, x))


def maximum(a, b):
    """b where b > a, else a (Python's max: a tie picks a)."""
    return jnp.where(b > a, b, a)


def minimum(a, b):
    """b where b < a, else a (Python's min: a tie picks a)."""
    return jnp.where(b < a, b, a)


def safe_div(num, den):
    ok = jnp.abs(den) > EPS
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), 0.0)


def normalize(a, fallback=None):
    """(unit vector, norm) as `algebra.normalize`."""
    n = safe_norm(a)
    unit = scale(a, safe_div(1.0, n))
    if fallback is not None:
        unit = jnp.where((n <= EPS)[..., None], fallback, unit)
    return unit, n


def safe_atan2(y, x):
    """arctan2 with a finite gradient where both arguments vanish."""
    ok = (y * y + x * x) > 0.0
    return jnp.where(ok, jnp.arctan2(y, jnp.where(ok, x, 1.0)), 0.0)


def rotation_coefficients(u):
    """(sin t / t, (1 - cos t) / t^2) for t = |u| (`algebra`'s series)."""
    t2 = dot(u, u)
    small = t2 < 1e-2
    t2s = jnp.where(small, 1.0, t2)
    t = jnp.sqrt(t2s)
    sinc = jnp.where(small, 1.0 - t2 / 6.0 * (1.0 - t2 / 20.0 * (1.0 - t2 / 42.0)),
                     jnp.sin(t) / t)
    cosc = jnp.where(small, 0.5 - t2 / 24.0 * (1.0 - t2 / 30.0 * (1.0 - t2 / 56.0)),
                     (1.0 - jnp.cos(t)) / t2s)
    return sinc, cosc


def tangent_basis(n):
    """Two unit tangents orthogonal to the unit normal n (`algebra`)."""
    use_x = jnp.abs(n[..., 0]) < 0.57
    one, zero = jnp.ones_like(n[..., 0]), jnp.zeros_like(n[..., 0])
    helper = jnp.stack([jnp.where(use_x, one, zero), jnp.where(use_x, zero, one),
                        0.0 * n[..., 2]], axis=-1)
    t1, _ = normalize(cross(cross(n, helper), n))
    return t1, cross(n, t1)


def unit(axis: int, like):
    """The world axis `axis` broadcast to like's shape (..., 3)."""
    return jnp.zeros_like(like).at[..., axis].set(1.0)
