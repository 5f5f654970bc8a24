"""Hand-written reverse-mode pullback of the Numba integrate kernel
(`integrate_numba`).

integrate_vjp(state, v, v_free, tau, options, g_state, renormalise)
    -> (g_state (B, N, 18), g_v (B, N, 6), g_v_free (B, N, 6), g_tau (B, N))
"""

from __future__ import annotations

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.integrate.integrate_numba import DT, R, V, W, X

jit, leaf = vn.jit, vn.leaf


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
    d_sinc, d_cosc = vn.rotation_coefficients_grad(vn.dot(u, u))
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
    `integrate_numba.integrate` of the cotangent g_state (B, N, 18) of its
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
