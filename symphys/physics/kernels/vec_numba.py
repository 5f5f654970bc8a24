"""3-vector and 3x3 helpers for the Numba kernels: vectors are 3-tuples,
matrices 9-tuples (row-major), so a kernel keeps them in registers.

Each follows the reference's order of operations (`symphys.physics.algebra`), so
the kernels agree with the reference graph to round-off.
"""

from __future__ import annotations

import math

import numba

EPS = 1e-12
jit = numba.njit(cache=True, error_model="numpy")
# Helpers that allocate nothing are compiled without Numba's reference
# counting: an array view handed to one then costs no atomic increment and
# decrement (perf put 40% of the rows kernel's samples in them).
leaf = numba.njit(cache=True, error_model="numpy", _nrt=False)


@leaf
def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@leaf
def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@leaf
def scale(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


@leaf
def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@leaf
def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@leaf
def matvec(m, v):
    return (m[0] * v[0] + m[1] * v[1] + m[2] * v[2],
            m[3] * v[0] + m[4] * v[1] + m[5] * v[2],
            m[6] * v[0] + m[7] * v[1] + m[8] * v[2])


@leaf
def matTvec(m, v):
    return (m[0] * v[0] + m[3] * v[1] + m[6] * v[2],
            m[1] * v[0] + m[4] * v[1] + m[7] * v[2],
            m[2] * v[0] + m[5] * v[1] + m[8] * v[2])


@leaf
def matmul(a, b):
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8],
            a[3] * b[0] + a[4] * b[3] + a[5] * b[6], a[3] * b[1] + a[4] * b[4] + a[5] * b[7],
            a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


@leaf
def transpose(m):
    return (m[0], m[3], m[6], m[1], m[4], m[7], m[2], m[5], m[8])


@leaf
def column(m, k):
    return (m[k], m[3 + k], m[6 + k])


@leaf
def safe_norm(a):
    sq = dot(a, a)
    return math.sqrt(sq) if sq > EPS * EPS else 0.0


@leaf
def safe_div(num, den):
    return num / den if abs(den) > EPS else 0.0


@leaf
def normalize(a):
    """(unit vector or 0, norm)."""
    n = safe_norm(a)
    return scale(a, safe_div(1.0, n)), n


@leaf
def clip(x, lo, hi):
    """PyTensor's clip: lo where x < lo, else hi where x > hi, else x."""
    return lo if x < lo else (hi if x > hi else x)


@leaf
def rotation_coefficients(u):
    """(sin t / t, (1 - cos t) / t^2) for t = |u| (`algebra.rotation_coefficients`)."""
    t2 = dot(u, u)
    if t2 < 1e-2:
        return (1.0 - t2 / 6.0 * (1.0 - t2 / 20.0 * (1.0 - t2 / 42.0)),
                0.5 - t2 / 24.0 * (1.0 - t2 / 30.0 * (1.0 - t2 / 56.0)))
    t = math.sqrt(t2)
    return math.sin(t) / t, (1.0 - math.cos(t)) / t2


@leaf
def skew_times(w, m):
    """[w]_x m, column by column."""
    c0 = cross(w, column(m, 0))
    c1 = cross(w, column(m, 1))
    c2 = cross(w, column(m, 2))
    return (c0[0], c1[0], c2[0], c0[1], c1[1], c2[1], c0[2], c1[2], c2[2])


@leaf
def rotate_by(u, m):
    """exp([u]_x) m (Rodrigues)."""
    sinc, cosc = rotation_coefficients(u)
    once = skew_times(u, m)
    twice = skew_times(u, once)
    return (m[0] + sinc * once[0] + cosc * twice[0], m[1] + sinc * once[1] + cosc * twice[1],
            m[2] + sinc * once[2] + cosc * twice[2], m[3] + sinc * once[3] + cosc * twice[3],
            m[4] + sinc * once[4] + cosc * twice[4], m[5] + sinc * once[5] + cosc * twice[5],
            m[6] + sinc * once[6] + cosc * twice[6], m[7] + sinc * once[7] + cosc * twice[7],
            m[8] + sinc * once[8] + cosc * twice[8])


@leaf
def renormalise_once(a):
    """(3a - a a^T a) / 2 (`algebra.renormalise`, one iteration)."""
    r0 = (a[0], a[1], a[2])
    r1 = (a[3], a[4], a[5])
    r2 = (a[6], a[7], a[8])
    xx, yy, zz = dot(r0, r0), dot(r1, r1), dot(r2, r2)
    xy, xz, yz = dot(r0, r1), dot(r0, r2), dot(r1, r2)
    g = matmul((xx, xy, xz, xy, yy, yz, xz, yz, zz), a)
    return ((3.0 * a[0] - g[0]) * 0.5, (3.0 * a[1] - g[1]) * 0.5, (3.0 * a[2] - g[2]) * 0.5,
            (3.0 * a[3] - g[3]) * 0.5, (3.0 * a[4] - g[4]) * 0.5, (3.0 * a[5] - g[5]) * 0.5,
            (3.0 * a[6] - g[6]) * 0.5, (3.0 * a[7] - g[7]) * 0.5, (3.0 * a[8] - g[8]) * 0.5)


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
