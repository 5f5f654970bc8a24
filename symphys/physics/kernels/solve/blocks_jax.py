"""A block-sparse Cholesky factorization in JAX for the Newton solve's
Hessian (`solve.newton_jax`): 6x6 blocks over the bodies, eliminated in
minimum-degree order (a tree of bodies leaves first: no fill); a 6x6
product is a sum of six outer products and a 6x6 factor a column
elimination on whole 6x6 arrays. Vmapped over many worlds this stays
elementwise work, where XLA on CPU runs batched 6x6 (or dense 6N x 6N)
LAPACK factorizations and small dots slowly.

Blocks are dicts {(i, j): (6, 6)} of a symmetric matrix's lower blocks
(i >= j); vectors are (N, 6).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def elimination(n_bodies: int, pairs) -> tuple[tuple, tuple]:
    """(the bodies in elimination order, each position's later neighbours'
    positions with fill) by minimum degree on the body graph: a tree
    eliminates leaves first and does not fill in."""
    adj = [set() for _ in range(n_bodies)]
    for a, b in pairs:
        if b >= 0 and a != b:
            adj[a].add(b)
            adj[b].add(a)
    left, order = set(range(n_bodies)), []
    while left:
        k = min(left, key=lambda i: (len(adj[i] & left), i))
        near = adj[k] & left - {k}
        for i in near:
            adj[i] |= near - {i}
        order.append(k)
        left.remove(k)
    pos = {body: k for k, body in enumerate(order)}
    return tuple(order), tuple(tuple(sorted(pos[i] for i in adj[body] if pos[i] > pos[body]))
                               for body in order)


def _mm(x, y):
    """x (6, 6) @ y (6, m) as a sum of outer products (no dot: XLA on CPU
    runs batches of 6x6 dots slowly)."""
    return sum(x[:, k:k + 1] * y[k:k + 1, :] for k in range(6))


def _mv(x, y):
    """x (6, 6) @ y (6,)."""
    return sum(x[:, k] * y[k] for k in range(6))


_BELOW = np.tril(np.ones((6, 6), bool), -1)    # [i, j]: i > j


def _inverse_cholesky6(a):
    """L^-1 (6, 6) of the Cholesky factor L of symmetric positive definite a
    (6, 6): elimination by columns, on whole 6x6 arrays (few XLA ops)."""
    eye = jnp.eye(6, dtype=a.dtype)
    w = eye
    for j in range(6):
        d = jnp.sqrt(a[j, j])
        col = jnp.where(_BELOW[:, j], a[:, j], 0.0) / d          # L[i, j], i > j
        w = w - (col / d)[:, None] * w[j][None, :]                # rows i > j
        w = jnp.where(eye[j][:, None] > 0, w / d, w)              # row j
        a = a - col[:, None] * col[None, :]
    return w


def factor(elimination: tuple, later: tuple, blocks: dict):
    """The block Cholesky factor L of H from its lower blocks {(i, j): (6, 6)}
    (bodies i >= j) in `elimination`'s order (later: each position's later
    neighbours' positions, fill included): (the inverses of L's diagonal
    blocks, a list (N,) of (6, 6); L's blocks below them {(i, k): (6, 6)}
    by position)."""
    pos = {body: k for k, body in enumerate(elimination)}
    a = {}
    for (i, j), x in blocks.items():
        pi, pj = pos[i], pos[j]
        a[(max(pi, pj), min(pi, pj))] = x if pi >= pj else x.T
    inv, low = [], {}
    for k, near in enumerate(later):
        # the barrier keeps XLA from fusing a whole elimination step into one
        # loop that recomputes the 6x6 factor for every entry it feeds
        ik = jax.lax.optimization_barrier(_inverse_cholesky6(a[(k, k)]))
        inv.append(ik)
        for i in near:
            low[(i, k)] = _mm(a[(i, k)], ik.T) if (i, k) in a else None
        for i in near:
            for j in near:
                if j <= i and low[(i, k)] is not None and low[(j, k)] is not None:
                    update = _mm(low[(i, k)], low[(j, k)].T)
                    a[(i, j)] = a[(i, j)] - update if (i, j) in a else -update
    return inv, {key: x for key, x in low.items() if x is not None}


def factor_solve(elimination: tuple, later: tuple, chol, g):
    """H^-1 g (N, 6) for g (N, 6), from `factor`'s chol."""
    inv, low = chol
    n = len(elimination)
    z = []
    for k in range(n):
        r = g[elimination[k]]
        for j in range(k):
            if (k, j) in low:
                r = r - _mv(low[(k, j)], z[j])
        z.append(_mv(inv[k], r))
    x = [None] * n
    for k in range(n - 1, -1, -1):
        r = z[k]
        for i in later[k]:
            if (i, k) in low:
                r = r - _mv(low[(i, k)].T, x[i])
        x[k] = _mv(inv[k].T, r)
    out = [None] * n
    for k, body in enumerate(elimination):
        out[body] = x[k]
    return jnp.stack(out)
