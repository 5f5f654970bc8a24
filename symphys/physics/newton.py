"""The converged solve (solver method "newton") as a symbolic graph: the
reference of `kernels.newton_numba`, dense per world.

The rows `solver.solve` takes become constraints e, each
J_e v + c_e lam_e = target_e with lam_e clamped to its bounds, exactly as
`newton_numba.constraints` builds them:

- equality rows (joint rows, bearing losses) keep the compliance at which
  the sweeps' update stops moving, c = gamma + (1 - keep) / (keep mass),
  plus `STIFF` A (A = J M^-1 J^T, the row's inverse effective mass);
- bounded rows (limits, servos, dry friction) add `bound_softness` A;
- a contact that can act (penetrating, or reaching the other side within
  the step) becomes the edges n +- mu t of its friction pyramid, each a
  row with lam >= 0 aiming at the normal's target; one that cannot act is
  masked out, as is a row that never acts (no mass, or keep 0).

The answer minimises the convex, piecewise-quadratic
f(v) = 1/2 |v - v_free|_M^2 + sum_e phi_e(J_e v), phi_e' = -lam_e, by a
fixed number of Newton steps from v_free, each with H = M + J^T
diag(unclamped / c) J solved densely and an exact line search along the
step (the breakpoints of f' sorted, f' summed over them, the root solved
in its segment). Its gradient is PyTensor's through the unrolled steps.

Shapes: V (B, N, 6); v flat (B, 6N) (body-major); J (B, E, 6N); per
constraint (B, E).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import disconnected_grad

from symphys.errors import BackendError
from symphys.adjoint import close_over, loop_with_adjoint
from symphys.physics.solver import BoundedRow, ContactRows, Mobility, RowGroup, _pair_sum

# Equality rows' compliance added to their own, relative to their inverse
# effective mass (`newton_numba.STIFF`).
STIFF = 1e-8


@dataclass(frozen=True)
class Constraints:
    """One batch's constraints, E of them, each field (B, E) unless said.

    jac: (B, E, 6N); mask: 1 where the constraint takes part, else 0;
    compliance: c (1 where masked out); lower, upper: bounds (0 where there
    is none); has_lower, has_upper: (E,) static bools (both False: an
    equality row, never clamped)."""

    jac: object
    target: object
    compliance: object
    lower: object
    upper: object
    mask: object
    has_lower: np.ndarray
    has_upper: np.ndarray


@dataclass(frozen=True)
class _Part:
    """Constraints from one row block before stacking: fields (B, K)."""

    jac: object
    target: object
    compliance: object
    lower: object
    upper: object
    mask: object
    has_lower: bool
    has_upper: bool
    size: int                    # K


def _one_hot(index, n_bodies: int) -> np.ndarray:
    out = np.zeros((len(index), n_bodies))
    out[np.arange(len(index)), np.asarray(index)] = 1.0
    return out


def _dense(jac, gather, two_sided: bool, zero_b):
    """J over all bodies' velocities, (B, K, 6N), from the per-body form
    (B, 2K or K, 6) on `gather`'s bodies (a's K then b's K)."""
    n = gather.n_bodies
    pick = _one_hot(gather.index, n)                                      # (2K or K, N)
    full = jac[:, :, None, :] * pick[None, :, :, None]                    # (B, ., N, 6)
    if two_sided:
        k = len(gather.index) // 2
        full = full[:, :k] + full[:, k:]
    full = full + zero_b[:, :, None, None]
    return full.reshape((full.shape[0], full.shape[1], 6 * n))


def _rows_of(gather, two_sided: bool) -> int:
    return len(gather.index) // 2 if two_sided else len(gather.index)


def _inverse_mass(jac, dirs, gather, two_sided: bool):
    """A = J M^-1 J^T per row, (B, K)."""
    return _pair_sum((jac * dirs).sum(axis=-1), gather, two_sided)


def _positive(x):
    return pt.gt(x, 0.0)


def _bounded(item: BoundedRow, soft: float, zero_b) -> _Part:
    row = item.row
    if item.lower is None and item.upper is not None:
        raise BackendError("a row bounded above only has no Newton constraint")
    a_rr = _inverse_mass(row.jac, row.dirs, row.gather, row.two_sided)
    free = item.lower is None
    own = row.gamma                       # keep is 1 on these rows
    mask = _positive(row.m_soft) & _positive(a_rr)
    c = own + (STIFF if free else soft) * a_rr
    return _Part(_dense(row.jac, row.gather, row.two_sided, zero_b), row.target, c,
                 0.0 if free else item.lower, 0.0 if item.upper is None else item.upper,
                 mask, not free, item.upper is not None, _rows_of(row.gather, row.two_sided))


def _group(group: RowGroup, soft: float, zero_b) -> list[_Part]:
    parts = []
    for r in range(group.n_group):
        jac, dirs, m = group.jac[:, :, r], group.dirs[:, :, r], group.m_eff[:, :, r]
        a_rr = _inverse_mass(jac, dirs, group.gather, group.two_sided)
        keep, lower = group.keep[r], group.lower[r]
        if keep <= 0.0:
            continue
        own = (1.0 - keep) / (keep * pt.switch(_positive(m), m, 1.0))
        free = lower is None
        c = own + (STIFF if free else soft) * a_rr
        parts.append(_Part(_dense(jac, group.gather, group.two_sided, zero_b),
                           group.target[:, :, r], c, 0.0 if free else lower, 0.0,
                           _positive(m) & _positive(a_rr), not free, False,
                           _rows_of(group.gather, group.two_sided)))
    return parts


def _edges(rows: ContactRows, acting, soft: float, zero_b) -> list[_Part]:
    """The pyramid edges n +- mu t of one contact block's acting contacts."""
    normal = rows.normal
    gather, two = normal.gather, normal.two_sided
    a_nn = _inverse_mass(normal.jac, normal.dirs, gather, two)
    ok = _positive(normal.m_soft) & _positive(a_nn)
    relative = normal.gamma / pt.switch(ok, a_nn, 1.0) + soft
    frictions = [(rows.tangent1, rows.friction), (rows.tangent2, rows.friction)]
    if rows.rolling is not None:
        frictions += [(r, rows.rolling_friction) for r in rows.rolling]
    parts = []
    for row, mu in frictions:
        mu = pt.as_tensor_variable(mu)
        mu_side = pt.concatenate([mu, mu], axis=1) if two and mu.ndim == 2 else mu
        mu_side = mu_side[:, :, None] if mu_side.ndim == 2 else mu_side
        for sign in (1.0, -1.0):
            jac = normal.jac + sign * mu_side * row.jac
            dirs = normal.dirs + sign * mu_side * row.dirs
            a_ee = _inverse_mass(jac, dirs, gather, two)
            c = relative * a_ee * (2.0 * len(frictions))
            parts.append(_Part(_dense(jac, gather, two, zero_b), normal.target, c, 0.0, 0.0,
                               ok & acting, True, False, _rows_of(gather, two)))
    return parts


def constraints(rows: list, acting: list, soft: float, zero_b) -> Constraints:
    """The `Constraints` of `rows` (`ContactRows`, `BoundedRow`s and
    `RowGroup`s, as `solver.solve` takes them); acting: per `ContactRows`
    in order, whether each contact can act, (B, K) bools; zero_b: (B, 1)
    zeros giving the batch."""
    parts, contacts = [], iter(acting)
    for item in rows:
        if isinstance(item, BoundedRow):
            parts.append(_bounded(item, soft, zero_b))
        elif isinstance(item, RowGroup):
            parts += _group(item, soft, zero_b)
        elif isinstance(item, ContactRows):
            parts += _edges(item, next(contacts), soft, zero_b)
        else:
            raise BackendError(f"the Newton solve takes no row block of type "
                               f"{type(item).__name__}")

    zeros = [pt.zeros_like(p.jac[:, :, 0]) for p in parts]              # (B, K) each

    def field(name):
        return pt.concatenate([pt.as_tensor_variable(getattr(p, name)) + z
                               for p, z in zip(parts, zeros)], axis=1)

    mask = pt.concatenate([pt.cast(p.mask, "float64") + z for p, z in zip(parts, zeros)],
                          axis=1)
    sizes = [p.size for p in parts]
    compliance = field("compliance")
    return Constraints(
        pt.concatenate([p.jac for p in parts], axis=1), field("target"),
        pt.switch(mask > 0, compliance, 1.0), field("lower"), field("upper"), mask,
        np.repeat([p.has_lower for p in parts], sizes),
        np.repeat([p.has_upper for p in parts], sizes))


def mass_blocks(mob: Mobility, zero_b):
    """Each body's 6x6 block of M, (B, N, 6, 6): mass I_3 and the world
    inertia, both from the inverses `mob` holds (as `newton_numba.body_mass`)."""
    inv_m = mob.inv_mass + zero_b                                         # (B, N)
    mass = 1.0 / inv_m
    if mob.isotropic:
        inertia = (1.0 / (mob.inv_inertia + zero_b))[:, :, None, None] * np.eye(3)
    else:
        m = mob.inv_inertia                                               # (B, N, 3, 3)
        e = [[m[:, :, i, j] for j in range(3)] for i in range(3)]
        cof = [[e[(j + 1) % 3][(i + 1) % 3] * e[(j + 2) % 3][(i + 2) % 3]
                - e[(j + 1) % 3][(i + 2) % 3] * e[(j + 2) % 3][(i + 1) % 3]
                for j in range(3)] for i in range(3)]                     # adjugate
        det = e[0][0] * cof[0][0] + e[0][1] * cof[1][0] + e[0][2] * cof[2][0]
        inertia = pt.stack([pt.stack([cof[i][j] / det for j in range(3)], axis=-1)
                            for i in range(3)], axis=-2)
    zero3 = pt.zeros_like(inertia)
    lin = mass[:, :, None, None] * np.eye(3)
    return pt.concatenate([pt.concatenate([lin, zero3], axis=-1),
                           pt.concatenate([zero3, inertia], axis=-1)], axis=-2)


def _dense_mass(blocks):
    """M (B, 6N, 6N) from its diagonal blocks (B, N, 6, 6)."""
    n = blocks.type.shape[1]
    full = blocks[:, :, :, None, :] * np.eye(n)[None, :, None, :, None]   # (B, N, 6, N, 6)
    return full.reshape((blocks.shape[0], 6 * n, 6 * n))


def _m_times(blocks, x):
    """M x for x (B, 6N): (B, 6N)."""
    n = blocks.type.shape[1]
    xb = x.reshape((x.shape[0], n, 6))
    return (blocks * xb[:, :, None, :]).sum(axis=-1).reshape(x.shape)


def _times(jac, x):
    """J x for x (B, 6N): (B, E)."""
    return (jac * x[:, None, :]).sum(axis=-1)


def _impulses(con: Constraints, y):
    """(lam, unclamped) at rates y (B, E): lam masked, unclamped 0/1."""
    u = (con.target - y) / con.compliance
    below = (u < con.lower) & con.has_lower
    above = (u > con.upper) & con.has_upper
    lam = pt.switch(below, con.lower, pt.switch(above, con.upper, u)) * con.mask
    return lam, pt.switch(below | above, 0.0, con.mask)


def line_search(con: Constraints, u0, dy, quad, lin):
    """The alpha minimising f(v + alpha step), f'(alpha) = alpha quad + lin
    - sum_e dy_e lam_e(alpha), lam_e(alpha) = clamp(u0_e - alpha r_e),
    r = dy / c: f' is piecewise linear and increasing. Each constraint with
    a bound changes sides at most twice (leaving its first bound, reaching
    its last); the breakpoints after 0, sorted, with f' there from running
    sums, give the segment holding f''s root, in which it is solved exactly.
    u0, dy (B, E); quad, lin (B,). Only the final solve carries gradients."""
    dy = dy * con.mask
    r = dy / con.compliance
    moving = pt.neq(r, 0.0)
    r_safe = pt.switch(moving, r, 1.0)
    down = r > 0            # u falls: from the upper bound through free to the lower
    has_first = pt.switch(down, con.has_upper, con.has_lower) & moving
    has_last = pt.switch(down, con.has_lower, con.has_upper) & moving
    first = pt.switch(down, con.upper, con.lower)
    last = pt.switch(down, con.lower, con.upper)
    # The segment, found without gradients.
    g = [disconnected_grad(x) for x in (u0, dy, r_safe, first, last, quad, lin)]
    u0_, dy_, r_, first_, last_, quad_, lin_ = g
    a1 = pt.switch(has_first, (u0_ - first_) / r_, -np.inf)
    a2 = pt.switch(has_last, (u0_ - last_) / r_, np.inf)
    # Coefficients (slope, intercept) of -dy lam in f' before, between, after.
    before = (0.0, -dy_ * first_)
    middle = (dy_ * r_ * moving, -dy_ * u0_)
    after = (0.0, -dy_ * last_)
    started, ended = a1 <= 0, a2 <= 0
    base = [pt.switch(ended, a, pt.switch(started, m, b)) for b, m, a in zip(before, middle,
                                                                            after)]
    valid1, valid2 = a1 > 0, (a2 > 0) & pt.isfinite(a2)
    events = pt.concatenate([pt.switch(valid1, a1, np.inf), pt.switch(valid2, a2, np.inf)], -1)
    jumps = [pt.concatenate([pt.switch(valid1, m - b, 0.0), pt.switch(valid2, a - m, 0.0)], -1)
             for b, m, a in zip(before, middle, after)]
    order = pt.argsort(events, axis=-1)
    events = pt.take_along_axis(events, order, axis=-1)
    slope0 = quad_ + base[0].sum(axis=-1)
    icept0 = lin_ + base[1].sum(axis=-1)
    slope = slope0[:, None] + pt.cumsum(pt.take_along_axis(jumps[0], order, -1), -1)
    icept = icept0[:, None] + pt.cumsum(pt.take_along_axis(jumps[1], order, -1), -1)
    # f' at each breakpoint from the coefficients just before it.
    zero = pt.zeros_like(slope[:, :1])
    s_before = pt.concatenate([slope0[:, None], slope[:, :-1]], -1)
    i_before = pt.concatenate([icept0[:, None], icept[:, :-1]], -1)
    finite = pt.isfinite(events)
    at = s_before * pt.switch(finite, events, 0.0) + i_before
    count = (finite & (at < 0)).sum(axis=-1, dtype="int64")               # (B,)
    left = pt.take_along_axis(pt.concatenate([zero, events], -1), count[:, None], -1)[:, 0]
    right = pt.take_along_axis(pt.concatenate([events, zero + np.inf], -1), count[:, None],
                               -1)[:, 0]
    mid = pt.switch(pt.isfinite(right), 0.5 * (left + right), left + 1.0)
    # f''s root in that segment, with gradients.
    u = u0 - mid[:, None] * r
    below = (u < con.lower) & con.has_lower
    above = (u > con.upper) & con.has_upper
    free = pt.switch(below | above, 0.0, 1.0)
    k = quad + (free * dy * r).sum(axis=-1)
    c = lin - (dy * pt.switch(below, con.lower, pt.switch(above, con.upper, u0))).sum(axis=-1)
    return pt.switch(k > 0, -c / pt.switch(k > 0, k, 1.0), 0.0)


def newton_step(con: Constraints, blocks, base_hessian, v_free, v):
    """One Newton step with its exact line search: v (B, 6N) -> v."""
    y = _times(con.jac, v)
    lam, unclamped = _impulses(con, y)
    dv = v - v_free
    m_dv = _m_times(blocks, dv)
    g = m_dv - (con.jac * lam[:, :, None]).sum(axis=1)
    weight = unclamped * (con.has_lower | con.has_upper) / con.compliance  # (B, E)
    hessian = base_hessian + pt.matmul(con.jac.transpose(0, 2, 1) * weight[:, None, :],
                                       con.jac)
    step = -pt.linalg.solve(hessian, g, assume_a="pos", b_ndim=1)
    dy = _times(con.jac, step)
    quad = (step * _m_times(blocks, step)).sum(axis=-1)
    lin = (m_dv * step).sum(axis=-1)
    alpha = line_search(con, (con.target - y) / con.compliance, dy, quad, lin)
    return v + alpha[:, None] * step


def solve(rows: list, acting: list, V, mob: Mobility, iterations: int, soft: float):
    """V (B, N, 6) after `iterations` Newton steps from V on the constraints
    of `rows` (`constraints`); acting: per `ContactRows`, (B, K) bools."""
    n = V.type.shape[1]
    zero_b = pt.zeros_like(V[:, :1, 0])                                   # (B, 1)
    con = constraints(rows, acting, soft, zero_b)
    blocks = mass_blocks(mob, zero_b)
    equality = ~(con.has_lower | con.has_upper)
    weight = con.mask * equality / con.compliance
    base = _dense_mass(blocks) + pt.matmul(con.jac.transpose(0, 2, 1) * weight[:, None, :],
                                           con.jac)
    v_free = V.reshape((V.shape[0], 6 * n))

    def iterate(carry):
        out = newton_step(con, blocks, base, v_free, carry[0])
        return [pt.specify_shape(out, carry[0].type.shape)]

    if iterations == 1:
        v = iterate([v_free])[0]
    else:
        run, leaves = close_over(iterate, [v_free])
        v = loop_with_adjoint(run, [v_free], leaves, iterations, name="symphys_newton")[0][-1]
    return v.reshape(V.shape)
