"""JAX helpers of the fused step's row stage: vector algebra on (..., 3)
arrays, contact geometry of every contact kind at once, joint poses and the
Jacobian / M^-1 J^T / effective mass of a row.

Every function is vectorised over leading item axes and gradient-safe: a
branch that is computed but not selected (another contact kind, a static
partner) sees sanitised arguments, so it never yields NaN (nor a NaN
gradient). Mirrors `symphys.physics.algebra`, `symphys.physics.contacts` and the pose part
of `symphys.physics.joints` (the reference).
"""

from __future__ import annotations

import jax.numpy as jnp

from symphys.physics.contacts import PARALLEL, ContactKind
from symphys.physics.kernels.layout import BODY, CONTACT_CODES, JOINT, WORLD

EPS = 1e-12


# -- vector algebra on (..., 3) ------------------------------------------------
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


# -- rows -------------------------------------------------------------------------
def row_parts(lin, ang_a, ang_b, two_sided, inv_m_a, inv_i_a, inv_m_b, inv_i_b):
    """(jac_a, jac_b, dir_a, dir_b, m_eff) of rows
    J v = lin . (v_a - v_b) + ang_a . w_a - ang_b . w_b; lin, ang (..., 3),
    two_sided (...) bool, inv_m (...), inv_i (..., 3, 3) world inverse
    inertia. b's halves carry the minus sign and are 0 when one-sided."""
    jac_a = jnp.concatenate([lin, ang_a], axis=-1)
    jac_b = jnp.where(two_sided[..., None], -jnp.concatenate([lin, ang_b], axis=-1), 0.0)
    dir_a = jnp.concatenate([inv_m_a[..., None] * lin, matvec(inv_i_a, ang_a)], axis=-1)
    dir_b = jnp.concatenate([inv_m_b[..., None] * jac_b[..., :3],
                             matvec(inv_i_b, jac_b[..., 3:])], axis=-1)
    inv_eff = (jac_a * dir_a).sum(axis=-1) + (jac_b * dir_b).sum(axis=-1)
    return jac_a, jac_b, dir_a, dir_b, safe_div(1.0, inv_eff)


# -- contact geometry --------------------------------------------------------------
_K = {kind: CONTACT_CODES[kind] for kind in ContactKind}


def contact_geometry(kind, point, a, b, x, rot, body, world):
    """Per contact item (K,): gap (K,), normal, ra, rb (K, 3) (rb 0 for a
    static partner), friction, restitution, rolling friction (K,), every
    kind computed and the item's selected. b < 0: the ground."""
    static = b < 0
    bi = jnp.where(static, 0, b)
    xa, xb, ra_rot, rb_rot = x[a], x[bi], rot[a], rot[bi]
    col = lambda name: body[:, BODY.at(name)]
    r_a, r_b = col("radius")[a], col("radius")[bi]
    hl_a = col("half_length")[a]
    h_a, h_b = body[a, BODY.half_size], body[bi, BODY.half_size]
    ground = world[WORLD.at("ground_height")]
    up = unit(2, xa)
    zeros = jnp.zeros_like(xa)

    # sphere-ground
    ra_sg = jnp.stack([0.0 * r_a, 0.0 * r_a, -r_a], axis=-1)
    gap_sg = xa[:, 2] - r_a - ground
    # box-ground: corner `point` of itertools.product((-1, 1), repeat=3)
    signs = jnp.stack([jnp.where((point >> (2 - k)) & 1, 1.0, -1.0) for k in range(3)],
                      axis=-1)
    ra_bg = matvec(ra_rot, signs * h_a)
    gap_bg = xa[:, 2] + ra_bg[:, 2] - ground
    # capsule-ground: end `point` (0: -z end)
    axis_a = ra_rot[..., :, 2]
    end = scale(axis_a, jnp.where(point == 0, -1.0, 1.0) * hl_a)
    ra_cg = jnp.stack([end[:, 0], end[:, 1], end[:, 2] - r_a], axis=-1)
    gap_cg = xa[:, 2] + ra_cg[:, 2] - ground

    def round_pair(nearest, rad_a, rad_b, nearest_b=xb):
        n, dist = normalize(nearest - nearest_b, fallback=up)
        return (dist - rad_a - rad_b, n, nearest - scale(n, rad_a) - xa,
                nearest_b - xb + scale(n, rad_b))

    ss = round_pair(xa, r_a, r_b)
    start = xa - scale(axis_a, hl_a)
    t = clip(dot(xb - start, axis_a), 0.0, 2.0 * hl_a)
    cs = round_pair(start + scale(axis_a, t), r_a, r_b)
    # capsule-capsule: the axis segments' closest points (`contacts_numba.segment_pair`)
    axis_b, hl_b = rb_rot[..., :, 2], col("half_length")[bi]
    rel = start - (xb - scale(axis_b, hl_b))
    b_, c_, f_ = dot(axis_a, axis_b), dot(axis_a, rel), dot(axis_b, rel)
    denom = 1.0 - b_ * b_
    apart = denom > PARALLEL
    s_cc = jnp.where(apart, clip((b_ * f_ - c_) / jnp.where(apart, denom, 1.0), 0.0, 2.0 * hl_a),
                     0.0)
    t_cc = b_ * s_cc + f_
    below, above = t_cc < 0.0, t_cc > 2.0 * hl_b
    s_cc = jnp.where(below, clip(-c_, 0.0, 2.0 * hl_a),
                     jnp.where(above, clip(b_ * 2.0 * hl_b - c_, 0.0, 2.0 * hl_a), s_cc))
    t_cc = jnp.where(below, 0.0, jnp.where(above, 2.0 * hl_b, t_cc))
    cc = round_pair(xa + scale(axis_a, s_cc - hl_a), r_a, r_b,
                    nearest_b=xb + scale(axis_b, t_cc - hl_b))
    # sphere (a) - box (b), in the box frame
    local = matTvec(rb_rot, xa - xb)
    clamped = clip(local, -h_b, h_b)
    n_out, dist = normalize(local - clamped)
    outside = dist > 1e-9
    pen = h_b - jnp.abs(local)
    on_x = (pen[:, 0] <= pen[:, 1]) & (pen[:, 0] <= pen[:, 2])
    on_y = ~on_x & (pen[:, 1] <= pen[:, 2])
    on_z = ~on_x & ~on_y
    sgn = jnp.where(local >= 0, 1.0, -1.0)
    n_in = jnp.stack([jnp.where(on, sgn[:, k], 0.0) for k, on in enumerate((on_x, on_y, on_z))],
                     axis=-1)
    depth_in = jnp.where(on_x, pen[:, 0], jnp.where(on_y, pen[:, 1], pen[:, 2]))
    n_sb = matvec(rb_rot, jnp.where(outside[:, None], n_out, n_in))
    gap_sb = jnp.where(outside, dist, -depth_in) - r_a
    sb = (gap_sb, n_sb, scale(n_sb, -r_a), xa - scale(n_sb, r_a + gap_sb) - xb)

    cands = {_K[ContactKind.SPHERE_GROUND]: (gap_sg, up, ra_sg, zeros),
             _K[ContactKind.BOX_GROUND]: (gap_bg, up, ra_bg, zeros),
             _K[ContactKind.CAPSULE_GROUND]: (gap_cg, up, ra_cg, zeros),
             _K[ContactKind.SPHERE_SPHERE]: ss,
             _K[ContactKind.SPHERE_BOX]: sb,
             _K[ContactKind.CAPSULE_SPHERE]: cs,
             _K[ContactKind.CAPSULE_CAPSULE]: cc}
    out = list(cands[0])
    for code, parts in cands.items():
        if code == 0:
            continue
        sel = kind == code
        out = [jnp.where(sel if o.ndim == 1 else sel[:, None], p, o)
               for o, p in zip(out, parts)]
    gap, n, ra, rb = out

    # materials: friction sqrt(mu_a mu_b), restitution max, rolling max
    def other(name, ground_name):
        return jnp.where(static, world[WORLD.at(ground_name)], col(name)[bi])

    prod = col("friction")[a] * other("friction", "ground_friction")
    ok = prod > 0
    mu = jnp.where(ok, jnp.sqrt(jnp.where(ok, prod, 1.0)), 0.0)
    e = maximum(col("restitution")[a], other("restitution", "ground_restitution"))
    roll = maximum(col("rolling_friction")[a],
                       other("rolling_friction", "ground_rolling_friction"))
    return gap, n, ra, rb, mu, e, roll


# -- joint poses -------------------------------------------------------------------
def joint_pose(jp, a, b, x, rot):
    """A joint's pose per item (`joints._pose`): jp (K, JOINT.width) its
    parameters; returns a dict of (K, 3) vectors ra, rb (0 for a world
    parent), error, axis_a, ref_a, axis_b, ref_b, side_b and (K, 3, 3)
    world frames wa, wb."""
    static = b < 0
    bi = jnp.where(static, 0, b)
    rot_a = rot[a]
    ra = matvec(rot_a, jp[:, JOINT.anchor_a])
    world_a = x[a] + ra
    wa = matmul(rot_a, jp[:, JOINT.frame_a].reshape(-1, 3, 3))
    frame_b = jp[:, JOINT.frame_b].reshape(-1, 3, 3)
    anchor_b = jp[:, JOINT.anchor_b]
    rot_b, centre_b = rot[bi], x[bi]
    s3 = static[:, None]
    anchor_b = jnp.where(s3, anchor_b, centre_b + matvec(rot_b, anchor_b))
    wb = jnp.where(s3[..., None], frame_b, matmul(rot_b, frame_b))
    rb = jnp.where(s3, 0.0, world_a - centre_b)
    return dict(ra=ra, rb=rb, error=world_a - anchor_b, axis_a=wa[..., 0], ref_a=wa[..., 1],
                axis_b=wb[..., 0], ref_b=wb[..., 1], side_b=wb[..., 2], wa=wa, wb=wb)


def hinge_angle(pose):
    """q of a hinge (or a universal joint's axis 0)."""
    return safe_atan2(dot(pose["ref_a"], pose["side_b"]), dot(pose["ref_a"], pose["ref_b"]))


def universal_angle(pose):
    """q of a universal joint's axis 1 (the child's turn about its axis2)."""
    across = cross(pose["ref_a"], pose["axis_b"])
    return safe_atan2(dot(pose["axis_a"], across), dot(pose["axis_a"], pose["axis_b"]))


def rotation_error(pose):
    """Skew part of Wa Wb^T (`joints._rotation_error`), (K, 3)."""
    e = matmul(pose["wa"], jnp.swapaxes(pose["wb"], -1, -2))
    return 0.5 * jnp.stack([e[:, 2, 1] - e[:, 1, 2], e[:, 0, 2] - e[:, 2, 0],
                            e[:, 1, 0] - e[:, 0, 1]], axis=-1)
