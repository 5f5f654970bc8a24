"""Constraint rows and the projected Gauss-Seidel impulse solver.

A `RowBlock` holds K independent rows (no dynamic body twice), each with a
Jacobian over its two bodies' velocities, the precomputed M^-1 J^T
directions, a softened effective mass, a target velocity, and bounds given
by its `RowKind`. The solver sweeps the blocks in order for a fixed number of
iterations, keeping accumulated impulses and clamping them (sequential
impulses). Joint, limit and motor rows come from `joints`; contact rows
from here; the sweep is the same for all.

Shapes: velocities in matrix form V (B, N, 6) = [v, w] per body; row
scalars (B, K); Jacobians and M^-1 J^T (B, 2K, 6) (K for a static partner).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import pytensor.tensor as pt

from symphys.adjoint import close_over, loop_with_adjoint
from symphys.physics.algebra import Mat3, Vec3, cross, safe_div, tangent_basis
from symphys.physics.contacts import STATIC, ContactBlock, ContactGeometry, Gather
from symphys.physics.geoms import OWN
from symphys.physics.model import BodyArrays
from symphys.scene.elements import FrictionModel, SolverOptions


class RowKind(enum.Enum):
    NORMAL = "normal"        # lambda >= 0
    FRICTION = "friction"    # |lambda| <= mu * lambda_normal
    ROLLING = "rolling"      # |lambda| <= mu_roll * lambda_normal (torque impulse)
    JOINT = "joint"          # equality: lambda free
    LIMIT = "limit"          # joint limit: lambda >= 0
    MOTOR = "motor"          # |lambda| <= max_torque * dt


@dataclass(frozen=True)
class Mobility:
    """The bodies' inverse mass for one step, in the form rows read it.

    inv_mass: (Bp, N). inv_inertia: world inverse inertia R diag(1/I) R^T,
    (B, N, 3, 3); or, when every body is isotropic (spheres), the scalar
    1/I per body, (Bp, N), as then the rotation drops out."""

    inv_mass: object
    inv_inertia: object
    isotropic: bool


def mobility(bodies: BodyArrays, rotation: Mat3) -> Mobility:
    if bodies.isotropic and all(bodies.isotropic):
        return Mobility(bodies.inv_mass, bodies.inv_inertia.x, True)
    r = rotation
    rot = pt.stack([pt.stack([r.xx, r.xy, r.xz], axis=-1),
                    pt.stack([r.yx, r.yy, r.yz], axis=-1),
                    pt.stack([r.zx, r.zy, r.zz], axis=-1)], axis=-2)     # (B, N, 3, 3)
    inv = pt.stack(list(bodies.inv_inertia), axis=-1)                  # (Bp, N, 3)
    # (R diag(inv) R^T)_ij = sum_k R_ik inv_k R_jk
    world = ((rot * inv[:, :, None, :])[:, :, :, None, :] * rot[:, :, None, :, :]).sum(axis=-1)
    return Mobility(bodies.inv_mass, world, False)


@dataclass(frozen=True)
class RowBlock:
    """K rows in matrix form, as the solver loop reads them.

    Velocities are one tensor V (B, N, 6): [v, w] per body. `gather` picks
    the rows' bodies, a's K then (two-sided) b's K; `jac` is J over those
    bodies' velocities and `dirs` is M^-1 J^T, both (B, 2K or K, 6), b's
    part carrying the minus sign. One gather and one scatter per row."""

    kind: RowKind
    gather: Gather
    two_sided: bool
    jac: object
    dirs: object
    m_eff: object                # 1 / (J M^-1 J^T), (B, K)
    m_soft: object               # 1 / (1/m_eff + gamma)
    gamma: object                # softness (impulse units), 0 when stiff
    target: object               # desired J v after the solve

    def velocity(self, V):
        """J v for V (B, N, 6): (B, K)."""
        return _pair_sum((self.jac * self.gather.take(V)).sum(axis=-1), self.gather,
                         self.two_sided)

    def apply(self, V, impulse):
        """V with the velocity change of `impulse` (B, K) added."""
        if self.two_sided:
            impulse = pt.concatenate([impulse, impulse], axis=1)
        return self.gather.add(V, self.dirs * impulse[:, :, None])


def _stack(components, k: int):
    """(Bp, K, n) stack of (Bp, K) / (1, K) / scalar components."""
    comps = [pt.as_tensor_variable(c) for c in components]
    full = [c for c in comps if c.ndim == 2]
    ref = next((c for c in full if not c.type.broadcastable[0]), full[0] if full else None)
    # A static shape where known: a symbolic one costs broadcast_to a shape
    # inference (constant folding) per call, a tenth of building a step.
    shape = (1, k) if ref is None else (
        ref.type.shape if None not in ref.type.shape else ref.shape)
    comps = [c if ref is not None and c.type.broadcastable == ref.type.broadcastable
             else pt.broadcast_to(c, shape) for c in comps]
    return pt.stack(comps, axis=-1)


_ZERO3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class RowSpec:
    """One row J v = lin . (v_a - v_b) + ang_a . w_a - ang_b . w_b on a
    block's K body pairs (lin None: angular only; ang_b None: static
    partner); components (B, K) or scalars. target: desired J v, (B, K);
    lower: a constant lower bound of its impulse (None: free); keep: the
    part of each update kept (1: stiff; below 1: a soft row, see
    `joints.soft_joint`)."""

    lin: Vec3 | None
    ang_a: Vec3
    ang_b: Vec3 | None
    target: object = 0.0
    lower: float | None = None
    keep: float = 1.0


def _same_broadcast(parts: list) -> list:
    if len({p.type.broadcastable for p in parts}) > 1:
        return list(pt.broadcast_arrays(*parts))
    return parts


def _jacobians(specs: list[RowSpec], ga: Gather, gb: Gather | None, mob: Mobility):
    """(gather, J, M^-1 J^T, 1 / (J M^-1 J^T)) of R rows on the same pairs:
    J and M^-1 J^T (B, 2K or K, R, 6) (b's half carrying the minus sign),
    the inverse effective mass (B, K, R)."""
    k = len(ga.index)

    def side(ang_of):
        rows = [_stack((*(_ZERO3 if s.lin is None else tuple(s.lin)), *ang_of(s)), k)
                for s in specs]
        return pt.stack(_same_broadcast(rows), axis=2)                    # (Bp, K, R, 6)

    jac = side(lambda s: s.ang_a)
    gather = ga
    if gb is not None:
        jac, jac_b = _same_broadcast([jac, side(lambda s: s.ang_b)])
        jac = pt.concatenate([jac, -jac_b], axis=1)
        gather = Gather(ga.index + gb.index, ga.n_bodies)
    inv_m = gather.take(mob.inv_mass)[:, :, None, None]
    ang = jac[..., 3:]
    if mob.isotropic:
        dw = gather.take(mob.inv_inertia)[:, :, None, None] * ang
    else:
        inv_i = gather.take(mob.inv_inertia)[:, :, None]                  # (B, 2K, 1, 3, 3)
        dw = (inv_i * ang[..., None, :]).sum(axis=-1)
    dv = inv_m * jac[..., :3]
    # (1, ...) parameters against (B, ...) rotations
    dirs = pt.concatenate(_same_broadcast([dv, dw]), axis=-1)
    inv_eff = _pair_sum((jac * dirs).sum(axis=-1), gather, gb is not None)
    return gather, jac, dirs, inv_eff


def _pair_sum(x, gather: Gather, two_sided: bool):
    """For two-sided rows, a's K entries plus b's K entries along axis 1."""
    if not two_sided:
        return x
    k = len(gather.index) // 2
    return x[:, :k] + x[:, k:]


def row_block(kind: RowKind, spec: RowSpec, ga: Gather, gb: Gather | None,
              mob: Mobility) -> RowBlock:
    """One stiff row per pair, aiming at `spec.target` (`spec.lower` is not
    used: the row kind's bounds apply). `contact_rows` softens its normal
    rows."""
    gather, jac, dirs, inv_eff = _jacobians([spec], ga, gb, mob)
    m_eff = safe_div(1.0, inv_eff[:, :, 0])
    return RowBlock(kind, gather, gb is not None, jac[:, :, 0], dirs[:, :, 0], m_eff, m_eff,
                    0.0, spec.target)


@dataclass(frozen=True)
class RowGroup:
    """R stiff rows on the same K body pairs (a joint block's point, angular
    and limit rows), solved one after another within the block: the pairs'
    velocities are gathered once, updated row by row, scattered once. Same
    result as R separate blocks in a row, from one J and one M^-1 J^T
    (B, 2K or K, R, 6) built together. Impulses (B, K, R)."""

    gather: Gather
    two_sided: bool
    jac: object
    dirs: object
    m_eff: object                # (B, K, R)
    target: object               # (B, K, R)
    lower: tuple                 # per row: a constant lower bound or None
    keep: tuple                  # per row: the part of an update kept (soft rows < 1)

    n_rows = 1                   # one (B, K, R) impulse carry

    @property
    def n_group(self) -> int:
        return len(self.lower)


def row_group(specs: list[RowSpec], ga: Gather, gb: Gather | None,
              mob: Mobility) -> RowGroup:
    gather, jac, dirs, inv_eff = _jacobians(specs, ga, gb, mob)
    target = pt.stack(_same_broadcast([pt.as_tensor_variable(s.target) + pt.zeros_like(inv_eff[:, :, 0])
                                       for s in specs]), axis=-1)
    return RowGroup(gather, gb is not None, jac, dirs, safe_div(1.0, inv_eff), target,
                    tuple(s.lower for s in specs), tuple(s.keep for s in specs))


def _is_zero(x) -> bool:
    return isinstance(x, (int, float)) and x == 0


def angular_row(kind: RowKind, axis: Vec3, ga, gb, mob: Mobility, target) -> RowBlock:
    """A stiff row on the relative angular velocity axis . (w_a - w_b)."""
    return row_block(kind, RowSpec(None, axis, axis, target), ga, gb, mob)


def _point_row(kind, direction: Vec3, ra: Vec3, rb: Vec3 | None, ga, gb, mob,
               target) -> RowBlock:
    """A row on the relative velocity of two points along `direction` (lever
    arms ra, rb from the bodies' centres)."""
    ang_b = None if gb is None else cross(rb, direction)
    return row_block(kind, RowSpec(direction, cross(ra, direction), ang_b, target), ga, gb,
                     mob)


@dataclass(frozen=True)
class ContactRows:
    """The normal row and two friction rows of one contact block."""

    normal: RowBlock
    tangent1: RowBlock
    tangent2: RowBlock
    friction: object            # mu, (B, K)
    rolling: tuple[RowBlock, RowBlock] | None = None
    rolling_friction: object = None   # mu_roll (m), (B, K)

    @property
    def n_rows(self) -> int:
        return 3 if self.rolling is None else 5


def softness(options: SolverOptions, frequency, damping, m_eff, dt: float):
    """(gamma, beta) of a soft constraint with natural frequency f and damping
    ratio zeta: k = m (2 pi f)^2, c = 2 m zeta (2 pi f); gamma = 1/(dt (c + dt k)),
    beta = dt k / (c + dt k). Stiff (frequency None): gamma 0, beta = the
    `position_feedback` factor."""
    if frequency is None:
        return 0.0, options.position_feedback
    omega = 2.0 * math.pi * frequency
    k = m_eff * omega ** 2
    c = 2.0 * m_eff * damping * omega
    gamma = safe_div(1.0, dt * (c + dt * k))
    beta = dt * omega / (2.0 * damping + dt * omega)
    return gamma, beta


@dataclass(frozen=True)
class Approach:
    """A block's contacts before the solve, each field (B, K): geometry, the
    normal rows (stiff, no target yet), normal velocity vn0 after external
    forces, whether the contact closes within the step, and its impact
    fraction tau."""

    block: ContactBlock
    ga: Gather
    gb: Gather | None            # None: static partner
    geom: ContactGeometry
    normal: RowBlock
    vn0: object
    reaches: object
    tau: object


def approach(block: ContactBlock, geom: ContactGeometry, mob: Mobility, V, dt: float,
             n_bodies: int) -> Approach:
    """V: (B, N, 6) velocities after external forces."""
    ga = Gather(block.a, n_bodies)
    gb = None if block.b[0] == STATIC else Gather(block.b, n_bodies)
    normal = _point_row(RowKind.NORMAL, geom.normal, geom.ra, geom.rb, ga, gb, mob, 0.0)
    vn0 = normal.velocity(V)
    reaches, tau = impact_fraction(geom.gap, vn0, dt)
    return Approach(block, ga, gb, geom, normal, vn0, reaches, tau)


def contact_rows(pre: Approach, body_tau, mob: Mobility, options: SolverOptions, frequency,
                 damping, dt: float) -> ContactRows:
    """Rows of one contact block, with targets from the approach velocity
    (restitution) and the gap (speculative contact: a contact that closes
    within the step stops or bounces its bodies there; a penetrating one is
    pushed out by position-error feedback).

    body_tau: (B, N) impact fraction of each body (`step` moves a body
    freely for that share of the step, then with its solved velocity)."""
    block, geom, vn0, reaches = pre.block, pre.geom, pre.vn0, pre.reaches
    ga, gb = pre.ga, pre.gb
    n = geom.normal
    penetrating = geom.gap < 0
    gamma, beta = softness(options, frequency, damping, pre.normal.m_eff, dt)
    gamma = pt.switch(penetrating, gamma, 0.0) if frequency is not None else 0.0
    # Penetrating: position-error feedback. Closing within the step: the
    # bodies move freely for their fraction tau_b <= tau of the step, which
    # closes gap * tau_b / tau; the rest of the gap is closed over the
    # remaining (1 - tau_b) dt: target vn0 (tau - tau_b) / (1 - tau_b), which
    # is 0 for the body's first contact and -gap/dt when tau_b = 0. Not
    # closing: the bodies may approach by at most the gap (row inactive).
    tau_b = ga.take(body_tau)
    if gb is not None:
        tau_b = pt.minimum(tau_b, gb.take(body_tau))
    rest = pt.switch(reaches, 1.0 - tau_b, 1.0)
    closing = vn0 * (pre.tau - tau_b) / pt.switch(rest > 0, rest, 1.0)
    separation = pt.switch(penetrating, -beta * geom.gap / dt,
                           pt.switch(reaches, closing, -geom.gap / dt))
    # Restitution fades in linearly between the threshold approach speed u0
    # and 2 u0, so the bounce (and everything after it) is continuous in the
    # approach speed rather than switching off at one speed.
    u0 = options.restitution_threshold
    ramp = pt.clip((-vn0 - u0) / u0, 0.0, 1.0) if u0 > 0 else (vn0 < 0)
    hits = (geom.gap + dt * vn0 < 0) & (vn0 < -u0)   # reaching or touching
    bounce = -geom.restitution * ramp * vn0
    target = pt.switch(hits, pt.maximum(bounce, separation), separation)
    m_soft = pre.normal.m_eff if _is_zero(gamma) else safe_div(1.0, 1.0 / pre.normal.m_eff
                                                                 + gamma)
    normal = replace(pre.normal, m_soft=m_soft, gamma=gamma, target=target)
    if block.b[0] == STATIC and block.gb[0] == OWN:
        # Ground contacts: the normal is the constant z axis; tangents are x, y.
        zero = pt.constant(0.0)
        one = pt.constant(1.0)
        t1, t2 = Vec3(one, zero, zero), Vec3(zero, one, zero)
    else:
        t1, t2 = tangent_basis(n)
    rows = [_point_row(RowKind.FRICTION, t, geom.ra, geom.rb, ga, gb, mob, 0.0)
            for t in (t1, t2)]
    rolling = None
    if geom.rolling_friction is not None:
        # Rolling resistance about each tangent: acts on w_a - w_b.
        rolling = tuple(angular_row(RowKind.ROLLING, t, ga, gb, mob, 0.0)
                        for t in (t1, t2))
    return ContactRows(normal, rows[0], rows[1], geom.friction, rolling,
                       geom.rolling_friction)


def impact_fraction(gap, vn0, dt: float):
    """(reaches, tau): whether a contact with gap > 0 closes within the step,
    and the fraction tau in [0, 1] of the step that passes before it does.

    gap > 0 closing at speed -vn0 touches after tau = gap / (-vn0 dt) of the
    step; touching or penetrating contacts act from the start (tau = 0); a
    contact that the step does not reach gives tau = 1. tau is continuous
    where a contact switches on (tau -> 1), which is what makes the landing
    time, and so the final state, depend smoothly on the initial velocity.
    gap, vn0: (B, K)."""
    approach = -vn0 * dt
    reaches = (gap > 0) & (approach > gap)
    tau = gap / pt.switch(reaches, approach, 1.0)
    return reaches, pt.switch(reaches, tau, pt.switch(gap > 0, 1.0, 0.0))


@dataclass(frozen=True)
class BoundedRow:
    """A row whose accumulated impulse stays in [lower, upper] (None: no
    bound on that side): joint rows (both None), limits (lower 0), motors
    (+-max_torque dt). Fields (B, K) or scalars."""

    row: RowBlock
    lower: object = None
    upper: object = None

    n_rows = 1


def _solve_bounded(item: BoundedRow, V, lam):
    row = item.row
    jv = row.velocity(V)
    new = lam + row.m_soft * (row.target - jv - row.gamma * lam)
    if item.lower is not None:
        new = pt.switch(new > item.lower, new, item.lower)
    if item.upper is not None:
        new = pt.switch(new < item.upper, new, item.upper)
    return row.apply(V, new - lam), new


def _solve_group(group: RowGroup, V, lam):
    """Its R rows in turn on the gathered velocities; lam (B, K, R)."""
    local = group.gather.take(V)                                          # (B, 2K, 6)
    start, news = local, []
    for r in range(group.n_group):
        jv = _pair_sum((group.jac[:, :, r] * local).sum(axis=-1), group.gather,
                       group.two_sided)
        old = lam[:, :, r]
        new = old + group.m_eff[:, :, r] * (group.target[:, :, r] - jv)
        if group.keep[r] != 1.0:
            new = group.keep[r] * new
        if group.lower[r] is not None:
            new = pt.switch(new > group.lower[r], new, group.lower[r])
        delta = new - old
        if group.two_sided:
            delta = pt.concatenate([delta, delta], axis=1)
        local = local + group.dirs[:, :, r] * delta[:, :, None]
        news.append(new)
    return group.gather.add(V, local - start), pt.stack(news, axis=-1)


def _sweep(blocks: list, V, acc: list, friction_model: FrictionModel):
    """One Gauss-Seidel pass over every block (`ContactRows` or
    `BoundedRow`, in order); returns (V, new acc)."""
    acc = list(acc)
    for i, rows in enumerate(blocks):
        if isinstance(rows, BoundedRow):
            V, new = _solve_bounded(rows, V, acc[i][0])
            acc[i] = (new,)
            continue
        if isinstance(rows, RowGroup):
            V, new = _solve_group(rows, V, acc[i][0])
            acc[i] = (new,)
            continue
        lam_n, lam_1, lam_2, *lam_roll = acc[i]
        row = rows.normal
        jv = row.velocity(V)
        trial_n = lam_n + row.m_soft * (row.target - jv - row.gamma * lam_n)
        # switch, not maximum: at a tie the gradient is 0 (inactive contact).
        new_n = pt.switch(trial_n > 0, trial_n, 0.0)
        V = row.apply(V, new_n - lam_n)
        bound = rows.friction * new_n
        if friction_model is FrictionModel.PYRAMID:
            new_t = []
            for row, lam in ((rows.tangent1, lam_1), (rows.tangent2, lam_2)):
                trial = lam - row.m_eff * row.velocity(V)
                # With no normal impulse the friction impulse is 0 whatever the
                # trial value: clip's gradient at clip(0, -0, 0) would be 1.
                new = pt.switch(bound > 0, pt.clip(trial, -bound, bound), 0.0)
                V = row.apply(V, new - lam)
                new_t.append(new)
            new_1, new_2 = new_t
        else:
            t1 = lam_1 - rows.tangent1.m_eff * rows.tangent1.velocity(V)
            t2 = lam_2 - rows.tangent2.m_eff * rows.tangent2.velocity(V)
            mag_sq = t1 * t1 + t2 * t2
            over = mag_sq > bound * bound
            scale = pt.switch(over, bound / pt.sqrt(pt.switch(over, mag_sq, 1.0)), 1.0)
            active = bound > 0
            new_1 = pt.switch(active, t1 * scale, 0.0)
            new_2 = pt.switch(active, t2 * scale, 0.0)
            V = rows.tangent1.apply(V, new_1 - lam_1)
            V = rows.tangent2.apply(V, new_2 - lam_2)
        acc[i] = (new_n, new_1, new_2)
        if rows.rolling is not None:
            roll_bound = rows.rolling_friction * new_n
            new_r = []
            for row, lam in zip(rows.rolling, lam_roll):
                trial = lam - row.m_eff * row.velocity(V)
                new = pt.switch(roll_bound > 0, pt.clip(trial, -roll_bound, roll_bound), 0.0)
                V = row.apply(V, new - lam)
                new_r.append(new)
            acc[i] = acc[i] + tuple(new_r)
    return V, acc


def velocity_matrix(v: Vec3, w: Vec3):
    """V (B, N, 6) = [v, w] from (B, N) components."""
    return pt.stack([*v, *w], axis=-1)


def velocity_components(V) -> tuple[Vec3, Vec3]:
    """(v, w) as (B, N) components of V (B, N, 6)."""
    return Vec3(*(V[..., i] for i in range(3))), Vec3(*(V[..., i] for i in range(3, 6)))


def solve(blocks: list, V, iterations: int, friction_model: FrictionModel):
    """Projected Gauss-Seidel over `blocks` (`ContactRows` and `BoundedRow`s,
    solved in the given order) for `iterations` sweeps.

    Accumulated impulses are clamped (normal >= 0, friction inside the
    pyramid or cone of mu * normal) and only the change is applied. The
    sweeps run as a `scan` (with its own adjoint,
    `adjoint.loop_with_adjoint`) over velocities in matrix form (B, N, 6),
    so the graph (and its compile time) does not grow with the iteration
    count; a single sweep is inlined. V: (B, N, 6) velocities before the
    solve; returns them after."""
    zero = [pt.zeros_like(rows.target) if isinstance(rows, RowGroup) else
            pt.zeros_like((rows.row if isinstance(rows, BoundedRow) else rows.normal)
                          .velocity(V)) for rows in blocks]
    init = [V] + [z for z, rows in zip(zero, blocks) for _ in range(rows.n_rows)]

    def sweep(carry):
        cacc, pos = [], 1
        for rows in blocks:
            cacc.append(tuple(carry[pos: pos + rows.n_rows]))
            pos += rows.n_rows
        nV, nacc = _sweep(blocks, carry[0], cacc, friction_model)
        return [nV] + [x for group in nacc for x in group]

    if iterations == 1:         # one sweep needs no loop (nor a loop's per-step overhead)
        return sweep(init)[0]
    run, leaves = close_over(sweep, init)
    # The reverse pass recomputes each sweep, or stores its residuals when
    # the time loop stores its own (`adjoint.LoopOptions.reverse`).
    out = loop_with_adjoint(run, init, leaves, iterations, name="symphys_pgs")
    return out[0][-1]
