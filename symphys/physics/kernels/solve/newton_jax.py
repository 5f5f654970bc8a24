"""The converged solve (solver method "newton") in JAX: the Numba kernel's
problem (`solve.newton_numba`) per world, vmapped over the worlds.

The constraints are `newton_numba.constraints`' (equality rows with their
own compliance + stiff A_rr, bounded rows + soft A_rr, contacts that can
act as the edges n +- mu t of their pyramid, LOWER 0). Which row becomes
which constraint is read from the rows table, a constant at trace time:
every row that could become a constraint has a slot, and a slot whose row
cannot act now (a contact that cannot reach the ground, a row that never
acts) is masked out (no Jacobian, no impulse).

Each world minimises f(v) = 1/2 |v - v_free|_M^2 + sum_e phi_e(J_e v) by
Newton steps in a `lax.while_loop`: the Hessian H = M + sum over
unclamped e of J_e^T J_e / c_e (6N x 6N), a Cholesky solve (dense for a
few worlds, by 6x6 blocks for many: `Plan.scatter`), then
`newton_numba._line_search`'s safeguarded Newton search on f' along the
step; it stops when max |M^-1 g| <= tolerance max(|v_free|, |v|, 1e-3).

The pullback is implicit (`jax.custom_vjp`): w = H(v*)^-1 g_v, and the
inputs' cotangents -(dF/d inputs)^T w, where F(v, inputs) = grad_v f is the
optimality condition, by `jax.vjp` of F at fixed v*.

Shapes: v_free (B, N, 6); rows (B, R, ROW.width); rows_table (R, 4); state
(B, N, 18); body (Bp, N, BODY.width) with Bp 1 or B; options (N_OPTIONS,).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_factor, cho_solve

from symphys.errors import BackendError
from symphys.physics.kernels.solve import blocks_jax
from symphys.physics.kernels.layout import BODY, ROW, STATE, Bound, Option, RowColumn

_JAC = ROW.at("jac_a")             # jac_a, jac_b, dir_a, dir_b: 24 columns from here
_MASS, _GAMMA, _TARGET, _KEEP = (ROW.at(k) for k in ("mass", "gamma", "target", "keep"))
_LOWER, _UPPER, _MU = ROW.at("lower"), ROW.at("upper"), ROW.at("mu")
_INV_MASS = BODY.at("inv_mass")
_SEARCH_STEPS = 50                 # as `newton_numba._line_search`
BLOCK_WORLDS = 8                   # from this many worlds on, no scatters (`Plan.scatter`)


@dataclass(frozen=True, eq=False)
class Plan:
    """The constraint slots of a rows table: D direct rows and the edges of
    every contact with friction rows, E slots in all, sorted by body pair.

    direct (D,): the row of each direct slot; normal, friction, sign, count
    (E - D,): each edge's contact normal row, friction row, +-1 and its
    contact's edge count (2 x friction rows); order (E,): which of the
    direct slots then edges (in that order) each sorted slot is. In the
    sorted order: a, b (E,): bodies (b -1: none); free, box (E,): slots that
    are equality / BOX rows; b_index (E,): b, 0 where none (its Jacobian is
    0 there). has_b (R,): rows with a body b. runs: (start, stop, a, b) of
    each range of sorted slots acting on one body pair, the equality rows'
    (the first n_equality slots) first, so that sums over slots by body are
    sums over static slices, not scatters. elimination (N,): the bodies in
    the block Cholesky's order; later (N,): each position's later
    neighbours' positions (with fill), the factor's nonzero blocks; flat
    (E, 4): where each slot's J_e^T J_e adds to the (N x N) 6x6 blocks,
    flat: (a, a), (b, b), (a, b), (b, a) (b 0 where none). scatter: sum
    over slots by scatters and factor H densely (few XLA ops: fastest for
    a few worlds), else by the runs' slices and blocks (elementwise work:
    vmapped over many worlds, XLA on CPU scatters and factors slowly)."""

    direct: np.ndarray
    normal: np.ndarray
    friction: np.ndarray
    sign: np.ndarray
    count: np.ndarray
    order: np.ndarray
    a: np.ndarray
    b: np.ndarray
    has_b: np.ndarray
    free: np.ndarray
    box: np.ndarray
    b_index: np.ndarray
    runs: tuple
    n_equality: int
    elimination: tuple
    later: tuple
    flat: np.ndarray
    scatter: bool


def plan(table: np.ndarray, n_bodies: int, scatter: bool = False) -> Plan:
    """The `Plan` of a rows table (R, 4), as `newton_numba.row_head` reads
    it: a non-friction row followed by friction rows naming it is a contact
    (its edges), any other non-friction row a direct slot."""
    bound, ref = table[:, RowColumn.BOUND], table[:, RowColumn.REF]
    direct, normal, friction, sign, count = [], [], [], [], []
    n_rows = len(table)
    for r in range(n_rows):
        if bound[r] == Bound.FRICTION:
            continue
        q = r + 1
        while q < n_rows and bound[q] == Bound.FRICTION and ref[q] == r:
            q += 1
        if q == r + 1:
            direct.append(r)
            continue
        for j in range(r + 1, q):
            for s in (1.0, -1.0):
                normal.append(r)
                friction.append(j)
                sign.append(s)
                count.append(2.0 * (q - r - 1))
    direct, normal = np.array(direct, dtype=np.int64), np.array(normal, dtype=np.int64)
    source = np.concatenate([direct, normal])
    a, b = table[source, RowColumn.A], table[source, RowColumn.B]
    free = np.concatenate([bound[direct] == Bound.FREE, np.zeros(len(normal), bool)])
    box = np.concatenate([bound[direct] == Bound.BOX, np.zeros(len(normal), bool)])
    order = np.lexsort((b, a, ~free))
    a, b, free, box = a[order], b[order], free[order], box[order]
    key = np.stack([~free, a, b], axis=1)
    starts = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]).any(axis=1)])
    stops = np.r_[starts[1:], len(order)]
    runs = tuple((int(s), int(e), int(a[s]), int(b[s])) for s, e in zip(starts, stops))
    bi = np.maximum(b, 0)
    elimination, later = blocks_jax.elimination(n_bodies, [(a, b) for _, _, a, b in runs])
    return Plan(direct=direct, normal=normal, friction=np.array(friction, dtype=np.int64),
                sign=np.array(sign), count=np.array(count), order=order, a=a, b=b,
                has_b=table[:, RowColumn.B] >= 0, free=free, box=box,
                b_index=bi, runs=runs, n_equality=int(free.sum()),
                elimination=elimination, later=later,
                flat=np.stack([a * n_bodies + a, bi * n_bodies + bi, a * n_bodies + bi,
                               bi * n_bodies + a], axis=1), scatter=scatter)


# ------------------------------------------------------------ one world's problem

@dataclass(frozen=True)
class Problem:
    """One world's constraints and mass matrix. jac_a, jac_b (E, 6) (0 for
    masked slots, jac_b 0 without a body b), target, compliance (1 where
    masked), lower, upper, mask (E,);
    inv_mass, mass (N,); inv_inertia, inertia (N, 3, 3) (world frame)."""

    jac_a: jax.Array
    jac_b: jax.Array
    target: jax.Array
    compliance: jax.Array
    lower: jax.Array
    upper: jax.Array
    mask: jax.Array
    inv_mass: jax.Array
    mass: jax.Array
    inv_inertia: jax.Array
    inertia: jax.Array

    def m_times(self, x):
        """M x for x (N, 6)."""
        return jnp.concatenate([self.mass[:, None] * x[:, :3],
                                jnp.einsum("nij,nj->ni", self.inertia, x[:, 3:])], axis=-1)

    def m_solve(self, x):
        """M^-1 x for x (N, 6)."""
        return jnp.concatenate([self.inv_mass[:, None] * x[:, :3],
                                jnp.einsum("nij,nj->ni", self.inv_inertia, x[:, 3:])], axis=-1)

    def m_blocks(self):
        """M's diagonal 6x6 blocks (N, 6, 6)."""
        blocks = jnp.zeros(self.mass.shape + (6, 6), self.mass.dtype)
        blocks = blocks.at[:, :3, :3].set(self.mass[:, None, None] * jnp.eye(3))
        return blocks.at[:, 3:, 3:].set(self.inertia)


def _dot6(x, y):
    """Row-wise dot products of (..., 6) x and y, as explicit sums (a
    reduction over 6 is slow on XLA CPU)."""
    return sum(x[..., k] * y[..., k] for k in range(6))


def _inverse3(m):
    """The inverses of (N, 3, 3) m by cofactors (as `newton_numba.body_mass`)."""
    m = m.reshape(-1, 9)
    cof = jnp.stack([m[:, 4] * m[:, 8] - m[:, 5] * m[:, 7], m[:, 2] * m[:, 7] - m[:, 1] * m[:, 8],
                     m[:, 1] * m[:, 5] - m[:, 2] * m[:, 4], m[:, 5] * m[:, 6] - m[:, 3] * m[:, 8],
                     m[:, 0] * m[:, 8] - m[:, 2] * m[:, 6], m[:, 2] * m[:, 3] - m[:, 0] * m[:, 5],
                     m[:, 3] * m[:, 7] - m[:, 4] * m[:, 6], m[:, 1] * m[:, 6] - m[:, 0] * m[:, 7],
                     m[:, 0] * m[:, 4] - m[:, 1] * m[:, 3]], axis=-1)
    det = m[:, 0] * cof[:, 0] + m[:, 1] * cof[:, 3] + m[:, 2] * cof[:, 6]
    return (cof / det[:, None]).reshape(-1, 3, 3)


def problem(p: Plan, rows, state, body, options, stiff: float, soft: float) -> Problem:
    """One world's `Problem` from its rows (R, ROW.width), state (N, 18) and
    body (N, BODY.width) (`newton_numba.constraints`, `solve`)."""
    n = state.shape[0]
    rot = state[:, STATE.rotation].reshape(n, 3, 3)
    inv_diag = body[:, BODY.inv_inertia]
    world = (rot[:, :, None, :] * inv_diag[:, None, None, :] * rot[:, None, :, :]).sum(-1)
    inv_i = jnp.where(options[Option.ISOTROPIC] > 0, jnp.eye(3) * inv_diag[:, :1, None], world)
    inv_mass = body[:, _INV_MASS]

    jd = rows[:, _JAC:_JAC + 24]
    has_b = jnp.asarray(p.has_b)
    a_rr = _dot6(jd[:, 0:6], jd[:, 12:18]) + jnp.where(has_b, _dot6(jd[:, 6:12], jd[:, 18:24]),
                                                       0.0)
    keep, mass = rows[:, _KEEP], rows[:, _MASS]
    acts = (keep > 0.0) & (mass > 0.0) & (a_rr > 0.0)
    keep_s, mass_s = jnp.where(acts, keep, 1.0), jnp.where(acts, mass, 1.0)
    own = jnp.where(acts, rows[:, _GAMMA] + (1.0 - keep_s) / (keep_s * mass_s), -1.0)
    a_rr_s = jnp.where(acts, a_rr, 1.0)

    d, r, j = p.direct, p.normal, p.friction
    free_d = np.empty_like(p.free)
    free_d[p.order] = p.free
    free_d = free_d[:len(d)]
    con_d = jd[d]
    c_d = own[d] + jnp.where(free_d, stiff, soft) * a_rr[d]
    mask_d = own[d] >= 0.0
    con_e = jd[r] + (p.sign * rows[j, _MU])[:, None] * jd[j]
    a_ee = _dot6(con_e[:, 0:6], con_e[:, 12:18]) + jnp.where(
        has_b[r], _dot6(con_e[:, 6:12], con_e[:, 18:24]), 0.0)
    c_e = (own[r] / a_rr_s[r] + soft) * a_ee * p.count
    mask_e = (own[r] >= 0.0) & (rows[r, _UPPER] > 0.0)
    zero_e = jnp.zeros(len(r), rows.dtype)

    order = p.order
    mask = jnp.concatenate([mask_d, mask_e])[order]
    con = jnp.where(mask[:, None], jnp.concatenate([con_d[:, :12], con_e[:, :12]])[order], 0.0)
    jac_b = jnp.where((p.b >= 0)[:, None], con[:, 6:12], 0.0)
    compliance = jnp.where(mask, jnp.concatenate([c_d, c_e])[order], 1.0)
    target = jnp.where(mask, jnp.concatenate([rows[d, _TARGET], rows[r, _TARGET]])[order], 0.0)
    lower = jnp.concatenate([rows[d, _LOWER], zero_e])[order]
    upper = jnp.concatenate([rows[d, _UPPER], zero_e])[order]
    return Problem(con[:, :6], jac_b, target, compliance, lower, upper, mask, inv_mass,
                   1.0 / inv_mass, inv_i, _inverse3(inv_i))


def impulses(p: Plan, prob: Problem, y):
    """(lam, unclamped) (E,) of the constraints at rates y = J v
    (`newton_numba.impulse`); masked slots give 0 and False."""
    return _sides(p, prob, y)[:2]


def _per_slot(p: Plan, x, body):
    """(E, 6): x (N, 6) at each slot's body a (body 0) or b (body 1; 0
    where none), by broadcasts over the runs."""
    parts = []
    for start, stop, a, b in p.runs:
        k = (a, b)[body]
        row = x[k] if k >= 0 else jnp.zeros_like(x[0])
        parts.append(jnp.broadcast_to(row, (stop - start,) + row.shape))
    return jnp.concatenate(parts)


def rates(p: Plan, prob: Problem, v):
    """J v (E,) for v (N, 6)."""
    if p.scatter:
        return _dot6(prob.jac_a, v[p.a]) + _dot6(prob.jac_b, v[p.b_index])
    return _dot6(prob.jac_a, _per_slot(p, v, 0)) + _dot6(prob.jac_b, _per_slot(p, v, 1))


def _j_transpose(p: Plan, prob: Problem, lam, n: int):
    """J^T lam (N, 6): sums over the runs."""
    fa, fb = prob.jac_a * lam[:, None], prob.jac_b * lam[:, None]
    if p.scatter:
        return jnp.zeros((n, 6), lam.dtype).at[p.a].add(fa).at[p.b_index].add(fb)
    out = [[] for _ in range(n)]
    for start, stop, a, b in p.runs:
        out[a].append(fa[start:stop].sum(0))
        if b >= 0:
            out[b].append(fb[start:stop].sum(0))
    zero = jnp.zeros((6,), lam.dtype)
    return jnp.stack([sum(o[1:], o[0]) if o else zero for o in out])


def gradient(p: Plan, prob: Problem, v, v_free):
    """(g (N, 6), lam, unclamped): g = M (v - v_free) - J^T lam, F of the
    module docstring."""
    lam, act = impulses(p, prob, rates(p, prob, v))
    g = prob.m_times(v - v_free) - _j_transpose(p, prob, lam, v.shape[0])
    return g, lam, act


def _add(blocks: dict, key, x):
    blocks[key] = blocks[key] + x if key in blocks else x


def _blocks(p: Plan, prob: Problem, act, runs, blocks=None) -> dict:
    """The Hessian's lower 6x6 blocks {(i, j): (6, 6), i >= j} (those
    given in `blocks` plus) the unclamped constraints' among `runs`: sums
    of J_e^T J_e / c_e, each over a run's static slice."""
    blocks = dict(blocks or {})
    weight = jnp.where(act, 1.0 / prob.compliance, 0.0)[:, None]
    wa, wb = weight * prob.jac_a, weight * prob.jac_b
    for start, stop, a, b in runs:
        ja = prob.jac_a[start:stop]
        _add(blocks, (a, a), ja.T @ wa[start:stop])
        if b < 0:
            continue
        _add(blocks, (b, b), prob.jac_b[start:stop].T @ wb[start:stop])
        ab = ja.T @ wb[start:stop]
        if a == b:
            _add(blocks, (a, a), ab + ab.T)
        else:
            _add(blocks, (max(a, b), min(a, b)), ab if a > b else ab.T)
    return blocks


def _base(p: Plan, prob: Problem) -> dict:
    """The blocks of M + the equality constraints (never clamped)."""
    m = prob.m_blocks()
    blocks = {(i, i): m[i] for i in range(m.shape[0])}
    return _blocks(p, prob, prob.mask, p.runs[:_n_runs(p)], blocks)


def _n_runs(p: Plan) -> int:
    """How many runs are the equality rows'."""
    return sum(start < p.n_equality for start, _, _, _ in p.runs)


def hessian(p: Plan, prob: Problem, act, base=None) -> dict:
    """H's lower 6x6 blocks {(i, j): (6, 6)}, H = M + sum over unclamped e
    of J_e^T J_e / c_e; base: the blocks `_base` gives, if already computed."""
    base = _base(p, prob) if base is None else base
    return _blocks(p, prob, act, p.runs[_n_runs(p):], base)


def _scattered(p: Plan, prob: Problem, act, start: int, stop: int):
    """(N * N, 6, 6): H's 6x6 blocks (flat over body pairs) of the unclamped
    constraints among slots start:stop, by one scatter-add (few XLA ops:
    fastest for a few worlds; vmapped over many, XLA on CPU scatters
    slowly)."""
    n = prob.mass.shape[0]
    cut = slice(start, stop)
    weight = jnp.where(act[cut], 1.0 / prob.compliance[cut], 0.0)[:, None, None]
    ja, jb = prob.jac_a[cut], prob.jac_b[cut]
    wa = weight * ja[:, :, None]
    outer = jnp.stack([wa * ja[:, None, :], weight * jb[:, :, None] * jb[:, None, :],
                       wa * jb[:, None, :]], axis=1)
    outer = jnp.concatenate([outer, jnp.swapaxes(outer[:, 2:], -1, -2)], axis=1)
    return jnp.zeros((n * n, 6, 6), ja.dtype).at[p.flat[cut].reshape(-1)].add(
        outer.reshape(-1, 6, 6))


def _dense_base(p: Plan, prob: Problem):
    """`_scattered`'s blocks of M + the equality constraints."""
    n = prob.mass.shape[0]
    return _scattered(p, prob, prob.mask, 0, p.n_equality).at[np.arange(n) * (n + 1)].add(
        prob.m_blocks())


def _dense_solve(p: Plan, prob: Problem, act, base, g):
    """H^-1 g (N, 6) by a dense Cholesky factorization of H (6N, 6N), given
    `_dense_base`."""
    n = g.shape[0]
    blocks = base + _scattered(p, prob, act, p.n_equality, len(p.a))
    h = blocks.reshape(n, n, 6, 6).transpose(0, 2, 1, 3).reshape(6 * n, 6 * n)
    return cho_solve(cho_factor(h, lower=True), g.reshape(-1)).reshape(g.shape)


def _block_solve(p: Plan, blocks: dict, g):
    """H^-1 g (N, 6) by `blocks_jax`'s block factorization of H's lower
    blocks (elementwise work: fastest vmapped over many worlds)."""
    return blocks_jax.factor_solve(p.elimination, p.later,
                                   blocks_jax.factor(p.elimination, p.later, blocks), g)


def _sides(p: Plan, prob: Problem, y):
    """(lam, unclamped, side) (E,) at rates y: `impulses`, and which side
    each slot is on (0 unclamped, 1 at its lower bound, 2 at its upper)."""
    u = (prob.target - y) / prob.compliance
    below = ~p.free & (u < prob.lower)
    above = p.box & (u > prob.upper) & ~below
    lam = jnp.where(below, prob.lower, jnp.where(above, prob.upper, u))
    side = below.astype(jnp.int8) + 2 * above.astype(jnp.int8)
    return jnp.where(prob.mask, lam, 0.0), prob.mask & ~below & ~above, side


def _line_search(p: Plan, prob: Problem, y, dy, quad, lin, slope, live):
    """`newton_numba._line_search`: the alpha minimising f(v + alpha step)
    by safeguarded Newton steps on f'(alpha) from 1. f' is linear while no
    constraint changes sides, so a Newton step that lands on the sides it
    was taken from is the root: the search stops there as well (a batch of
    worlds waits for its slowest, and near the answer roundoff keeps |f'|
    above the tolerance). A world that is not live (done) does not search."""
    def body(carry):
        k, alpha, lo, hi, _, before, newton = carry
        lam, act, side = _sides(p, prob, y + alpha * dy)
        d1 = alpha * quad + lin - (lam * dy).sum()
        d2 = quad + jnp.where(act, dy * dy / prob.compliance, 0.0).sum()
        found = (jnp.abs(d1) <= 1e-10 * jnp.abs(slope)) | (newton & (side == before).all())
        hi = jnp.where(d1 > 0, alpha, hi)
        lo = jnp.where(d1 > 0, lo, alpha)
        nxt = alpha - d1 / d2
        newton = (lo < nxt) & (nxt < hi)
        nxt = jnp.where(newton, nxt, jnp.where(hi < jnp.inf, 0.5 * (lo + hi), 2.0 * alpha))
        return (k + 1, jnp.where(found, alpha, nxt), lo, hi, found | (nxt == alpha), side,
                newton)

    one = jnp.ones((), y.dtype)
    start = (0, one, 0.0 * one, jnp.inf * one, ~live, jnp.zeros(y.shape, jnp.int8),
             jnp.zeros((), bool))
    return jax.lax.while_loop(lambda c: (c[0] < _SEARCH_STEPS) & ~c[4], body, start)[1]


def _residual(prob: Problem, g, v, v_free):
    """max |M^-1 g| over max(|v_free|, |v|, 1e-3)."""
    scale = jnp.maximum(jnp.maximum(jnp.abs(v_free).max(), jnp.abs(v).max()), 1e-3)
    return jnp.abs(prob.m_solve(g)).max() / scale


def newton_world(p: Plan, v_free, rows, state, body, options, iterations: int, stiff: float,
                 soft: float, tolerance: float):
    """(v (N, 6), Newton steps taken, residual) of one world."""
    prob = problem(p, rows, state, body, options, stiff, soft)
    base = _dense_base(p, prob) if p.scatter else _base(p, prob)

    def advance(carry):
        it, v, g, lam, act, residual = carry
        if p.scatter:
            step = -_dense_solve(p, prob, act, base, g)
        else:
            step = -_block_solve(p, hessian(p, prob, act, base), g)
        y, dy = rates(p, prob, v), rates(p, prob, step)
        mx = prob.m_times(step)
        quad, lin = (step * mx).sum(), (mx * (v - v_free)).sum()
        alpha = _line_search(p, prob, y, dy, quad, lin, lin - (lam * dy).sum(),
                             residual > tolerance)
        v = v + alpha * step
        g, lam, act = gradient(p, prob, v, v_free)
        return it + 1, v, g, lam, act, _residual(prob, g, v, v_free)

    g, lam, act = gradient(p, prob, v_free, v_free)
    start = (0, v_free, g, lam, act, _residual(prob, g, v_free, v_free))
    it, v, _, _, _, residual = jax.lax.while_loop(
        lambda c: (c[0] < iterations) & (c[5] > tolerance), advance, start)
    return v, it, residual


# ------------------------------------------------------------------ batched solve

@functools.lru_cache(maxsize=64)
def _solver(p: Plan, iterations: int, stiff: float, soft: float, tolerance: float):
    """solve(v_free, rows, state, body, options) -> v over the worlds, with
    its implicit pullback."""
    def per_world(f):
        return lambda v_free, rows, state, body, options: jax.vmap(
            f, in_axes=(0, 0, 0, 0, None))(v_free, rows, state,
                                           jnp.broadcast_to(body, (v_free.shape[0],)
                                                            + body.shape[1:]), options)

    def forward(v_free, rows, state, body, options):
        return per_world(lambda *a: newton_world(p, *a, iterations, stiff, soft, tolerance)[0])(
            v_free, rows, state, body, options)

    @jax.custom_vjp
    def solve(v_free, rows, state, body, options):
        return forward(v_free, rows, state, body, options)

    def solve_fwd(v_free, rows, state, body, options):
        v = forward(v_free, rows, state, body, options)
        return v, (v_free, rows, state, body, options, v)

    def solve_bwd(res, g_v):
        v_free, rows, state, body, options, v = res

        def pull_world(v_free, rows, state, body, options, v, g_v):
            prob = problem(p, rows, state, body, options, stiff, soft)
            _, _, act = gradient(p, prob, v, v_free)
            if p.scatter:
                return _dense_solve(p, prob, act, _dense_base(p, prob), g_v)
            return _block_solve(p, hessian(p, prob, act), g_v)

        def optimality(v_free, rows, state, body, options):
            def world(v_free, rows, state, body, v):
                prob = problem(p, rows, state, body, options, stiff, soft)
                return gradient(p, prob, v, v_free)[0]
            return jax.vmap(world)(v_free, rows, state,
                                   jnp.broadcast_to(body, (v.shape[0],) + body.shape[1:]), v)

        body_b = jnp.broadcast_to(body, (v.shape[0],) + body.shape[1:])
        w = jax.vmap(pull_world, in_axes=(0, 0, 0, 0, None, 0, 0))(
            v_free, rows, state, body_b, options, v, g_v)
        _, pull = jax.vjp(optimality, v_free, rows, state, body, options)
        return pull(-w)

    solve.defvjp(solve_fwd, solve_bwd)
    return solve


def _concrete_table(rows_table) -> np.ndarray:
    try:
        return np.asarray(rows_table, dtype=np.int64)
    except jax.errors.TracerArrayConversionError:
        raise BackendError("the Newton solve on JAX reads the rows table when it traces: pass "
                           "the layout's rows table as a constant, not a traced input") from None


@functools.lru_cache(maxsize=64)
def _plan_of(table_bytes: bytes, n_rows: int, n_bodies: int, scatter: bool) -> Plan:
    return plan(np.frombuffer(table_bytes, dtype=np.int64).reshape(n_rows, -1), n_bodies,
                scatter)


def solve(v_free, rows, rows_table, state, body, options, order, pair, later, nb_ptr, nb,
          iterations: int, stiff: float, soft: float, tolerance: float):
    """v (B, N, 6): each world solved by Newton's method (at most `iterations`
    steps), as `newton_numba.solve`; the tree pattern (order .. nb) is not
    read (the plan orders its own block elimination)."""
    table = np.ascontiguousarray(_concrete_table(rows_table))
    v_free = jnp.asarray(v_free)
    if table.shape[0] == 0:
        return v_free + 0.0
    p = _plan_of(table.tobytes(), table.shape[0], v_free.shape[1],
                 v_free.shape[0] < BLOCK_WORLDS)
    f = _solver(p, int(iterations), float(stiff), float(soft), float(tolerance))
    dtype = v_free.dtype
    return f(v_free, jnp.asarray(rows, dtype), jnp.asarray(state, dtype),
             jnp.asarray(body, dtype), jnp.asarray(options, dtype))
