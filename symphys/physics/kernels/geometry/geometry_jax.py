"""JAX helpers of the fused step's row stage: contact geometry of every
contact kind at once, joint poses and the Jacobian / M^-1 J^T / effective
mass of a row (vector algebra in `vec_jax`, shape routines in `shapes_jax`).

Every function is vectorised over leading item axes and gradient-safe: a
branch that is computed but not selected (another contact kind, a static
partner) sees sanitised arguments, so it never yields NaN (nor a NaN
gradient). Mirrors `symphys.physics.algebra`, `symphys.physics.contacts` and the pose part
of `symphys.physics.joints` (the reference).
"""

from __future__ import annotations

import jax.numpy as jnp

from symphys.physics.contacts import ContactKind
from symphys.physics.kernels.geometry.shapes_jax import (ball_box, box_box, capsule_box,
                                                         corner_signs, segments)
from symphys.physics.kernels.layout import BODY, CONTACT_CODES, GEOM, JOINT, WORLD
from symphys.physics.kernels.vec_jax import (clip, cross, dot, matmul, matvec, maximum, normalize,
                                             safe_atan2, safe_div, scale, unit)


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


def _side(i, g, x, rot, body, geom):
    """A contact side per item (K,): body i's own shape (g < 0) or geom g on
    body i (i < 0: the world's) (`symphys.physics.geoms`): its centre (K, 3),
    rotation (K, 3, 3), row in BODY's columns (K, BODY.width), and its
    offset from the body's centre (K, 3) (0 on own shapes and static sides)."""
    moving = i >= 0
    ii = jnp.where(moving, i, 0)
    x_own, rot_own, row = x[ii], rot[ii], body[ii]
    if geom.shape[0] == 0:
        return x_own, rot_own, row, jnp.zeros_like(x_own)
    is_geom = g >= 0
    gg = jnp.where(is_geom, g, 0)
    base_x = jnp.where(moving[:, None], x_own, 0.0)
    base_rot = jnp.where(moving[:, None, None], rot_own, jnp.eye(3))
    place = base_x + matvec(base_rot, geom[gg, GEOM.position])
    turn = matmul(base_rot, geom[gg, GEOM.rotation].reshape(-1, 3, 3))
    offset = jnp.where((is_geom & moving)[:, None], place - x_own, 0.0)
    return (jnp.where(is_geom[:, None], place, x_own),
            jnp.where(is_geom[:, None, None], turn, rot_own),
            jnp.where(is_geom[:, None], geom[gg, :BODY.width], row), offset)


def _materials(row_a, row_b, on_ground, world):
    """Friction sqrt(mu_a mu_b), restitution max, rolling friction max (K,)
    of two sides' rows (b the ground where on_ground)."""
    def other(name, ground_name):
        return jnp.where(on_ground, world[WORLD.at(ground_name)], row_b[:, BODY.at(name)])

    prod = row_a[:, BODY.at("friction")] * other("friction", "ground.friction")
    ok = prod > 0
    mu = jnp.where(ok, jnp.sqrt(jnp.where(ok, prod, 1.0)), 0.0)
    e = maximum(row_a[:, BODY.at("restitution")], other("restitution", "ground.restitution"))
    roll = maximum(row_a[:, BODY.at("rolling_friction")],
                   other("rolling_friction", "ground.rolling_friction"))
    return mu, e, roll


def contact_geometry(kind, point, a, b, ga, gb, flip, x, rot, body, geom, world):
    """Per contact item (K,): gap (K,), normal, ra, rb (K, 3) (rb 0 for a
    static partner), friction, restitution, rolling friction (K,), every
    kind computed and the item's selected. b < 0: the ground, or a geom of
    the world (gb >= 0); ga, gb: each side's geom (-1: the body's own
    shape); flip: the routine takes b's side first (`layout.Item.FLIP`)."""
    on_ground = (b < 0) & (gb < 0)
    side_a = _side(a, ga, x, rot, body, geom)
    side_b = _side(b, gb, x, rot, body, geom)
    mu, e, roll = _materials(side_a[2], side_b[2], on_ground, world)
    off_a, off_b = side_a[3], side_b[3]
    turn = flip > 0
    swap = lambda u, v: jnp.where(turn.reshape((-1,) + (1,) * (u.ndim - 1)), v, u)  # noqa: E731
    xa, ra_rot, row_a = (swap(u, v) for u, v in zip(side_a[:3], side_b[:3]))
    xb, rb_rot, row_b = (swap(v, u) for u, v in zip(side_a[:3], side_b[:3]))
    col_a = lambda name: row_a[:, BODY.at(name)]       # noqa: E731
    col_b = lambda name: row_b[:, BODY.at(name)]       # noqa: E731
    r_a, r_b = col_a("radius"), col_b("radius")
    hl_a = col_a("half_length")
    h_a, h_b = row_a[:, BODY.half_size], row_b[:, BODY.half_size]
    ground = world[WORLD.at("ground.height")]
    up = unit(2, xa)
    zeros = jnp.zeros_like(xa)

    # sphere-ground
    ra_sg = jnp.stack([0.0 * r_a, 0.0 * r_a, -r_a], axis=-1)
    gap_sg = xa[:, 2] - r_a - ground
    # box-ground: corner `point`
    ra_bg = matvec(ra_rot, corner_signs(point) * h_a)
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
    # capsule-capsule: the axis segments' closest points (`contacts_numba.segments`)
    axis_b = rb_rot[..., :, 2]
    gap_cc, n_cc, pa_cc, pb_cc = segments(xa, axis_a, hl_a, xb, axis_b, col_b("half_length"),
                                          r_a, r_b)
    cc = (gap_cc, n_cc, pa_cc - xa, pb_cc - xb)
    # sphere (a) - box (b)
    gap_sb, n_sb = ball_box(xa, r_a, xb, rb_rot, h_b)
    sb = (gap_sb, n_sb, scale(n_sb, -r_a), xa - scale(n_sb, r_a + gap_sb) - xb)

    cands = {_K[ContactKind.SPHERE_GROUND]: (gap_sg, up, ra_sg, zeros),
             _K[ContactKind.BOX_GROUND]: (gap_bg, up, ra_bg, zeros),
             _K[ContactKind.CAPSULE_GROUND]: (gap_cg, up, ra_cg, zeros),
             _K[ContactKind.SPHERE_SPHERE]: ss,
             _K[ContactKind.SPHERE_BOX]: sb,
             _K[ContactKind.CAPSULE_SPHERE]: cs,
             _K[ContactKind.CAPSULE_CAPSULE]: cc,
             _K[ContactKind.CAPSULE_BOX]: capsule_box(point, xa, axis_a, hl_a, r_a, xb, rb_rot,
                                                      h_b),
             _K[ContactKind.BOX_BOX]: box_box(point, xa, ra_rot, h_a, xb, rb_rot, h_b)}
    out = list(cands[0])
    for code, parts in cands.items():
        if code == 0:
            continue
        sel = kind == code
        out = [jnp.where(sel if o.ndim == 1 else sel[:, None], p, o)
               for o, p in zip(out, parts)]
    gap, n, ra, rb = out
    n = jnp.where(turn[:, None], -n, n)
    ra, rb = swap(ra, rb), swap(rb, ra)
    ra = ra + off_a
    rb = jnp.where((b >= 0)[:, None], rb + off_b, 0.0)
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


def ball_turn(pose):
    """(angle (K,), unit axis (K, 3)) of the child's joint frame's turn from
    the parent's (`joints.ball_turn`): x where there is no turn."""
    e = _turn(pose)
    axis, sine = normalize(_skew_part(e), fallback=unit(0, pose["ra"]))
    return safe_atan2(sine, 0.5 * (e[:, 0, 0] + e[:, 1, 1] + e[:, 2, 2] - 1.0)), axis


def _turn(pose):
    """Wa Wb^T (`joints._turn`), (K, 3, 3)."""
    return matmul(pose["wa"], jnp.swapaxes(pose["wb"], -1, -2))


def _skew_part(e):
    """(E - E^T) / 2 as vectors (`joints._skew_part`), (K, 3)."""
    return 0.5 * jnp.stack([e[:, 2, 1] - e[:, 1, 2], e[:, 0, 2] - e[:, 2, 0],
                            e[:, 1, 0] - e[:, 0, 1]], axis=-1)


def rotation_error(pose):
    """Skew part of Wa Wb^T (`joints._rotation_error`), (K, 3)."""
    return _skew_part(_turn(pose))
