"""Numba kernel of the integrate stage (see the package docstring): each
body's pose moved by its solved velocity.

Shapes: state (B, N, 18); v, v_free (B, N, 6); tau (B, N); options
(N_OPTIONS,).
"""

from __future__ import annotations

import numpy as np

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.layout import STATE, Option

jit = vn.jit
X, R, V, W = STATE.at("position"), STATE.at("rotation"), STATE.at("velocity"), \
    STATE.at("angular_velocity")
DT = int(Option.DT)


@jit
def integrate(state, v, v_free, tau, options, renormalise):
    """The next state (B, N, 18): positions and rotations moved with
    v_move = v + tau (v_free - v); velocities the solved v."""
    out = np.empty_like(state)
    dt = options[DT]
    move = np.empty(6)
    for w in range(state.shape[0]):
        for i in range(state.shape[1]):
            s = state[w, i]
            t = tau[w, i]
            for k in range(6):
                move[k] = v[w, i, k] + t * (v_free[w, i, k] - v[w, i, k])
            for k in range(3):
                out[w, i, X + k] = s[X + k] + move[k] * dt
            rot = (s[R], s[R + 1], s[R + 2], s[R + 3], s[R + 4], s[R + 5], s[R + 6], s[R + 7],
                   s[R + 8])
            rot = vn.rotate_by((move[3] * dt, move[4] * dt, move[5] * dt), rot)
            for _ in range(renormalise):
                rot = vn.renormalise_once(rot)
            for k in range(9):
                out[w, i, R + k] = rot[k]
            for k in range(3):
                out[w, i, V + k] = v[w, i, k]
                out[w, i, W + k] = v[w, i, 3 + k]
    return out
