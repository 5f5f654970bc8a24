"""The converged solve (solver method "newton") in JAX: the Numba kernel's
problem (`solve.newton_numba`) with a dense Hessian per world.

The constraints are `newton_numba.constraints`' (equality rows with their
own compliance + stiff A_rr, bounded rows + soft A_rr, contacts that can
act as the edges n +- mu t of their pyramid, LOWER 0). Which row becomes
which constraint is read from the rows table, a constant at trace time:
every row that could become a constraint has a slot, and a slot whose row
cannot act now (a contact that cannot reach the ground, a row that never
acts) is masked out (no Jacobian, no impulse).

Each world minimises f(v) = 1/2 |v - v_free|_M^2 + sum_e phi_e(J_e v) by
Newton steps in a `lax.while_loop`: the dense Hessian H = M + sum over
unclamped e of J_e^T J_e / c_e (6N x 6N), a Cholesky solve, then
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
from symphys.physics.kernels.layout import BODY, ROW, STATE, Bound, Option, RowColumn

_JAC = ROW.at("jac_a")             # jac_a, jac_b, dir_a, dir_b: 24 columns from here
_MASS, _GAMMA, _TARGET, _KEEP = (ROW.at(k) for k in ("mass", "gamma", "target", "keep"))
_LOWER, _UPPER, _MU = ROW.at("lower"), ROW.at("upper"), ROW.at("mu")
_INV_MASS = BODY.at("inv_mass")
_SEARCH_STEPS = 50                 # as `newton_numba._line_search`


@dataclass(frozen=True, eq=False)
class Plan:
    """The constraint slots of a rows table: E = D direct rows, then the
    edges of every contact with friction rows.

    direct (D,): the row of each direct slot; normal, friction, sign, count
    (E - D,): each edge's contact normal row, friction row, +-1 and its
    contact's edge count (2 x friction rows); a, b (E,): bodies (b -1:
    none); has_b (R,): rows with a body b; free, box (E,): slots that are
    equality / BOX rows; b_index (E,): b, 0 where none (its Jacobian is 0
    there); blocks (E, 4): where each slot's J_e^T J_e adds to the Hessian's
    (N x N) 6x6 blocks, flat: (a, a), (b, b), (a, b), (b, a); equality,
    bounded: the slots that are equality rows, and the others."""

    direct: np.ndarray
    normal: np.ndarray
    friction: np.ndarray
    sign: np.ndarray
    count: np.ndarray
    a: np.ndarray
    b: np.ndarray
    has_b: np.ndarray
    free: np.ndarray
    box: np.ndarray
    b_index: np.ndarray
    blocks: np.ndarray
    equality: np.ndarray
    bounded: np.ndarray


def plan(table: np.ndarray, n_bodies: int) -> Plan:
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
    bi = np.maximum(b, 0)
    free = np.concatenate([bound[direct] == Bound.FREE, np.zeros(len(normal), bool)])
    return Plan(direct=direct, normal=normal, friction=np.array(friction, dtype=np.int64),
                sign=np.array(sign), count=np.array(count), a=a, b=b,
                has_b=table[:, RowColumn.B] >= 0,
                free=free, equality=np.flatnonzero(free), bounded=np.flatnonzero(~free),
                box=np.concatenate([bound[direct] == Bound.BOX, np.zeros(len(normal), bool)]),
                b_index=bi, blocks=np.stack([a * n_bodies + a, bi * n_bodies + bi,
                                             a * n_bodies + bi, bi * n_bodies + a], axis=1))


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
    return (x * y).sum(-1)


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
    free_d = p.free[:len(d)]
    con_d = jd[d]
    c_d = own[d] + jnp.where(free_d, stiff, soft) * a_rr[d]
    mask_d = own[d] >= 0.0
    con_e = jd[r] + (p.sign * rows[j, _MU])[:, None] * jd[j]
    a_ee = _dot6(con_e[:, 0:6], con_e[:, 12:18]) + jnp.where(
        has_b[r], _dot6(con_e[:, 6:12], con_e[:, 18:24]), 0.0)
    c_e = (own[r] / a_rr_s[r] + soft) * a_ee * p.count
    mask_e = (own[r] >= 0.0) & (rows[r, _UPPER] > 0.0)
    zero_e = jnp.zeros(len(r), rows.dtype)

    mask = jnp.concatenate([mask_d, mask_e])
    con = jnp.where(mask[:, None], jnp.concatenate([con_d, con_e])[:, :12], 0.0)
    jac_b = jnp.where((p.b >= 0)[:, None], con[:, 6:12], 0.0)
    compliance = jnp.where(mask, jnp.concatenate([c_d, c_e]), 1.0)
    target = jnp.where(mask, jnp.concatenate([rows[d, _TARGET], rows[r, _TARGET]]), 0.0)
    lower = jnp.concatenate([rows[d, _LOWER], zero_e])
    upper = jnp.concatenate([rows[d, _UPPER], zero_e])
    return Problem(con[:, :6], jac_b, target, compliance, lower, upper, mask, inv_mass, 1.0 / inv_mass, inv_i,
                   _inverse3(inv_i))


def impulses(p: Plan, prob: Problem, y):
    """(lam, unclamped) (E,) of the constraints at rates y = J v
    (`newton_numba.impulse`); masked slots give 0 and False."""
    u = (prob.target - y) / prob.compliance
    below = ~p.free & (u < prob.lower)
    above = p.box & (u > prob.upper) & ~below
    lam = jnp.where(below, prob.lower, jnp.where(above, prob.upper, u))
    return jnp.where(prob.mask, lam, 0.0), prob.mask & ~below & ~above


def rates(p: Plan, prob: Problem, v):
    """J v (E,) for v (N, 6)."""
    return _dot6(prob.jac_a, v[p.a]) + _dot6(prob.jac_b, v[p.b_index])


def _j_transpose(p: Plan, prob: Problem, lam, n: int):
    """J^T lam (N, 6)."""
    out = jnp.zeros((n, 6), lam.dtype).at[p.a].add(prob.jac_a * lam[:, None])
    return out.at[p.b_index].add(prob.jac_b * lam[:, None])


def gradient(p: Plan, prob: Problem, v, v_free):
    """(g (N, 6), lam, unclamped): g = M (v - v_free) - J^T lam, F of the
    module docstring."""
    lam, act = impulses(p, prob, rates(p, prob, v))
    g = prob.m_times(v - v_free) - _j_transpose(p, prob, lam, v.shape[0])
    return g, lam, act


def _blocks(p: Plan, prob: Problem, act, slots: np.ndarray):
    """(N * N, 6, 6): the Hessian's 6x6 blocks (flat over body pairs) of the
    unclamped constraints among `slots`, sum of J_e^T J_e / c_e."""
    n = prob.mass.shape[0]
    weight = jnp.where(act[slots], 1.0 / prob.compliance[slots], 0.0)[:, None, None]
    ja, jb = prob.jac_a[slots], prob.jac_b[slots]
    wa = weight * ja[:, :, None]
    outer = jnp.stack([wa * ja[:, None, :], weight * jb[:, :, None] * jb[:, None, :],
                       wa * jb[:, None, :]], axis=1)
    outer = jnp.concatenate([outer, jnp.swapaxes(outer[:, 2:], -1, -2)], axis=1)
    return jnp.zeros((n * n, 6, 6), ja.dtype).at[p.blocks[slots].reshape(-1)].add(
        outer.reshape(-1, 6, 6))


def _base(p: Plan, prob: Problem):
    """The blocks of M + the equality constraints (never clamped)."""
    n = prob.mass.shape[0]
    return _blocks(p, prob, prob.mask, p.equality).at[np.arange(n) * (n + 1)].add(
        prob.m_blocks())


def _dense(blocks):
    """(6N, 6N) from the (N * N, 6, 6) blocks."""
    n = int(round(blocks.shape[0] ** 0.5))
    return blocks.reshape(n, n, 6, 6).transpose(0, 2, 1, 3).reshape(6 * n, 6 * n)


def hessian(p: Plan, prob: Problem, act, base=None):
    """H (6N, 6N) = M + sum over unclamped e of J_e^T J_e / c_e; base: the
    blocks `_base` gives, if already computed."""
    base = _base(p, prob) if base is None else base
    return _dense(base + _blocks(p, prob, act, p.bounded))


def _line_search(p: Plan, prob: Problem, y, dy, quad, lin, slope):
    """`newton_numba._line_search`: the alpha minimising f(v + alpha step)
    by safeguarded Newton steps on f'(alpha) from 1."""
    def derivatives(alpha):
        lam, act = impulses(p, prob, y + alpha * dy)
        d1 = alpha * quad + lin - (lam * dy).sum()
        d2 = quad + jnp.where(act, dy * dy / prob.compliance, 0.0).sum()
        return d1, d2

    def body(carry):
        k, alpha, lo, hi, _ = carry
        d1, d2 = derivatives(alpha)
        found = jnp.abs(d1) <= 1e-10 * jnp.abs(slope)
        hi = jnp.where(d1 > 0, alpha, hi)
        lo = jnp.where(d1 > 0, lo, alpha)
        nxt = alpha - d1 / d2
        nxt = jnp.where((lo < nxt) & (nxt < hi), nxt,
                        jnp.where(hi < jnp.inf, 0.5 * (lo + hi), 2.0 * alpha))
        return k + 1, jnp.where(found, alpha, nxt), lo, hi, found | (nxt == alpha)

    one = jnp.ones((), y.dtype)
    _, alpha, _, _, _ = jax.lax.while_loop(
        lambda c: (c[0] < _SEARCH_STEPS) & ~c[4], body,
        (0, one, 0.0 * one, jnp.inf * one, jnp.zeros((), bool)))
    return alpha


def _residual(prob: Problem, g, v, v_free):
    """max |M^-1 g| over max(|v_free|, |v|, 1e-3)."""
    scale = jnp.maximum(jnp.maximum(jnp.abs(v_free).max(), jnp.abs(v).max()), 1e-3)
    return jnp.abs(prob.m_solve(g)).max() / scale


def newton_world(p: Plan, v_free, rows, state, body, options, iterations: int, stiff: float,
                 soft: float, tolerance: float):
    """(v (N, 6), Newton steps taken, residual) of one world."""
    prob = problem(p, rows, state, body, options, stiff, soft)
    base = _base(p, prob)

    def advance(carry):
        it, v, g, lam, act, _ = carry
        chol = cho_factor(hessian(p, prob, act, base), lower=True)
        step = -cho_solve(chol, g.reshape(-1)).reshape(v.shape)
        y, dy = rates(p, prob, v), rates(p, prob, step)
        mx = prob.m_times(step)
        quad, lin = (step * mx).sum(), (mx * (v - v_free)).sum()
        alpha = _line_search(p, prob, y, dy, quad, lin, lin - (lam * dy).sum())
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
            chol = cho_factor(hessian(p, prob, act), lower=True)
            return cho_solve(chol, g_v.reshape(-1)).reshape(v.shape)

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
def _plan_of(table_bytes: bytes, n_rows: int, n_bodies: int) -> Plan:
    return plan(np.frombuffer(table_bytes, dtype=np.int64).reshape(n_rows, -1), n_bodies)


def solve(v_free, rows, rows_table, state, body, options, order, pair, later, nb_ptr, nb,
          iterations: int, stiff: float, soft: float, tolerance: float):
    """v (B, N, 6): each world solved by Newton's method (at most `iterations`
    steps), as `newton_numba.solve`; the tree pattern (order .. nb) is not
    needed by the dense factorization."""
    table = np.ascontiguousarray(_concrete_table(rows_table))
    v_free = jnp.asarray(v_free)
    if table.shape[0] == 0:
        return v_free + 0.0
    p = _plan_of(table.tobytes(), table.shape[0], v_free.shape[1])
    f = _solver(p, int(iterations), float(stiff), float(soft), float(tolerance))
    dtype = v_free.dtype
    return f(v_free, jnp.asarray(rows, dtype), jnp.asarray(state, dtype),
             jnp.asarray(body, dtype), jnp.asarray(options, dtype))
