"""Adjoints of the Numba contact geometry (`contacts_numba.geometry` and
its pair routines, `contacts_numba.tangent_basis`), for the contact rows'
pullback (`contacts_grad`); conventions as in `geometry_grad`.
"""

from __future__ import annotations

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry import shapes_numba as sn
from symphys.physics.kernels.geometry.geometry_grad import (add_outer, clip_vjp, cross_vjp,
                                                            normalize_vjp)
from symphys.physics.kernels.geometry.shapes_grad import (add_box_point, add_box_vjp, add_column,
                                                          box_box_vjp, segment_pair_vjp,
                                                          sphere_box_vjp)
from symphys.physics.kernels.layout import BODY, STATE
from symphys.physics.kernels.rows import contacts_numba as cn

leaf = vn.leaf
X, R = STATE.at("position"), STATE.at("rotation")
RADIUS, HALF_SIZE, HALF_LENGTH = BODY.at("radius"), BODY.at("half_size"), BODY.at("half_length")


@leaf
def _round_pair_vjp(nearest_a, xb, r_a, r_b, g_gap, g_n, g_ra, g_rb):
    """(g_nearest, g_xa, g_xb, g_r_a, g_r_b) of `contacts_numba._round_pair`."""
    diff = vn.sub(nearest_a, xb)
    unit, dist = vn.normalize(diff)
    n = cn.UP if dist <= vn.EPS else unit
    g_nn = vn.add(vn.sub(g_n, vn.scale(g_ra, r_a)), vn.scale(g_rb, r_b))
    g_r_a = -g_gap - vn.dot(n, g_ra)
    g_r_b = -g_gap + vn.dot(n, g_rb)
    g_unit = g_nn if dist > vn.EPS else (0.0, 0.0, 0.0)
    g_diff = normalize_vjp(diff, g_unit, g_gap)
    g_nearest = vn.add(g_ra, g_diff)
    return g_nearest, vn.scale(g_ra, -1.0), vn.scale(g_diff, -1.0), g_r_a, g_r_b


@leaf
def segments_vjp(ca, ua, hla, cb, ub, hlb, r_a, r_b, g_gap, g_n, g_pa, g_pb):
    """(g_ca, g_ua, g_hla, g_cb, g_ub, g_hlb, g_r_a, g_r_b) of
    `contacts_numba.segments` for the cotangents of its gap, normal and
    surface points."""
    s, t, _ = sn.segment_pair(ca, ua, hla, cb, ub, hlb)
    near_a = vn.add(ca, vn.scale(ua, s - hla))
    near_b = vn.add(cb, vn.scale(ub, t - hlb))
    n, dist, crossing = cn.segment_normal(ca, ua, hla, cb, ub, hlb, s, t, near_a, near_b)
    g_nn = vn.add(vn.sub(g_n, vn.scale(g_pa, r_a)), vn.scale(g_pb, r_b))
    g_r_a = -g_gap - vn.dot(n, g_pa)
    g_r_b = -g_gap + vn.dot(n, g_pb)
    g_ca, g_cb, g_ua, g_ub = g_pa, g_pb, cn.ZERO, cn.ZERO
    if crossing:
        # n = +-c / |c| with c = ua x ub, distance n . (ca - cb)
        c = vn.cross(ua, ub)
        sign = 1.0 if vn.dot(vn.sub(ca, cb), vn.normalize(c)[0]) >= 0.0 else -1.0
        g_unit = vn.scale(vn.add(g_nn, vn.scale(vn.sub(ca, cb), g_gap)), sign)
        g_ua, g_ub = cross_vjp(ua, ub, normalize_vjp(c, g_unit, 0.0))
        g_ca, g_cb = vn.add(g_ca, vn.scale(n, g_gap)), vn.sub(g_cb, vn.scale(n, g_gap))
        g_near_a, g_near_b = g_pa, g_pb
    else:
        diff = vn.sub(near_a, near_b)
        g_diff = normalize_vjp(diff, g_nn if dist > vn.EPS else cn.ZERO, g_gap)
        g_near_a, g_near_b = vn.add(g_pa, g_diff), vn.sub(g_pb, g_diff)
        g_ca, g_cb = g_near_a, g_near_b
    g_s, g_t = vn.dot(ua, g_near_a), vn.dot(ub, g_near_b)
    g_ca2, g_ua2, g_hla, g_cb2, g_ub2, g_hlb = segment_pair_vjp(ca, ua, hla, cb, ub, hlb, g_s, g_t)
    return (vn.add(g_ca, g_ca2), vn.add(vn.add(g_ua, g_ua2), vn.scale(g_near_a, s - hla)),
            g_hla - g_s, vn.add(g_cb, g_cb2), vn.add(vn.add(g_ub, g_ub2),
                                                      vn.scale(g_near_b, t - hlb)),
            g_hlb - g_t, g_r_a, g_r_b)


@leaf
def _capsule_box_vjp(point, a, b, s, body, g_gap, g_n, g_ra, g_rb, g_s, g_body):
    """Pullback of `contacts_numba._capsule_box`."""
    pa, pb = body[a], body[b]
    xa, xb = cn.position(s, a), cn.position(s, b)
    rot_a, rot = cn.rotation(s, a), cn.rotation(s, b)
    ua, hla, r = (rot_a[2], rot_a[5], rot_a[8]), pa[HALF_LENGTH], pa[RADIUS]
    h = (pb[HALF_SIZE], pb[HALF_SIZE + 1], pb[HALF_SIZE + 2])
    if point < 2:
        sign = -1.0 if point == 0 else 1.0
        centre = vn.add(xa, vn.scale(ua, sign * hla))
        g_c, g_xb, g_rot, g_h, g_r = sphere_box_vjp(centre, r, xb, rot, h, g_gap, g_n, g_ra,
                                                     g_rb)
        add_box_vjp(g_s, g_body, b, g_xb, g_rot, g_h)
        g_centre = vn.add(g_c, g_ra)
        g_xa, g_ua, g_hla = g_c, vn.scale(g_centre, sign * hla), sign * vn.dot(ua, g_centre)
    else:
        axis, signs = sn.box_edge(point - 2)
        cb = sn.box_point(xb, rot, h, signs)
        s_a, t_b = sn.segment_pair(xa, ua, hla, cb, vn.column(rot, axis), h[axis])[:2]
        if not sn.capsule_edge_exists(point - 2, s_a, t_b, hla, h[axis]):
            g_gap, g_ra, g_rb = 0.0, cn.ZERO, cn.ZERO   # held at FAR; its normal still reads
        g_ca, g_ua, g_hla, g_cb, g_ub, g_hlb, g_r, _ = segments_vjp(
            xa, ua, hla, cb, vn.column(rot, axis), h[axis], r, 0.0, g_gap, g_n, g_ra, g_rb)
        g_xa = vn.sub(g_ca, g_ra)
        for k in range(3):
            g_s[b, X + k] -= g_rb[k]
        add_box_point(g_s, g_body, b, rot, h, signs, g_cb)
        add_column(g_s, b, axis, g_ub)
        g_body[b, HALF_SIZE + axis] += g_hlb
    for k in range(3):
        g_s[a, X + k] += g_xa[k]
    add_column(g_s, a, 2, g_ua)
    g_body[a, HALF_LENGTH] += g_hla
    g_body[a, RADIUS] += g_r


@leaf
def geometry_vjp(kind, point, a, b, s, body, g_gap, g_n, g_ra, g_rb, g_s, g_body):
    """Pullback of `contacts_numba.geometry`: adds into g_s (N, 18) and
    g_body (N, BODY.width); returns the ground height's cotangent."""
    pa = body[a]
    if kind == cn.SPHERE_GROUND:
        g_s[a, X + 2] += g_gap
        g_body[a, RADIUS] += -g_gap - g_ra[2]
        return -g_gap
    if kind == cn.BOX_GROUND or kind == cn.CAPSULE_GROUND:
        g_s[a, X + 2] += g_gap
        g_rt = (g_ra[0], g_ra[1], g_ra[2] + g_gap)
        rot = cn.rotation(s, a)
        if kind == cn.BOX_GROUND:
            sx, sy, sz = sn.box_corner(point)
            local = (sx * pa[HALF_SIZE], sy * pa[HALF_SIZE + 1], sz * pa[HALF_SIZE + 2])
            add_outer(g_s, a, R, g_rt, local)
            g_local = vn.matTvec(rot, g_rt)
            g_body[a, HALF_SIZE] += sx * g_local[0]
            g_body[a, HALF_SIZE + 1] += sy * g_local[1]
            g_body[a, HALF_SIZE + 2] += sz * g_local[2]
        else:
            sign = -1.0 if point == 0 else 1.0
            hl = pa[HALF_LENGTH]
            g_body[a, RADIUS] -= g_rt[2]
            for k in range(3):
                g_s[a, R + 3 * k + 2] += g_rt[k] * sign * hl
            g_body[a, HALF_LENGTH] += sign * (rot[2] * g_rt[0] + rot[5] * g_rt[1]
                                              + rot[8] * g_rt[2])
        return -g_gap
    if kind == cn.CAPSULE_BOX:
        _capsule_box_vjp(point, a, b, s, body, g_gap, g_n, g_ra, g_rb, g_s, g_body)
        return 0.0
    if kind == cn.BOX_BOX:
        box_box_vjp(point, a, b, s, body, g_gap, g_n, g_ra, g_rb, g_s, g_body)
        return 0.0
    xa = cn.position(s, a)
    xb = cn.position(s, b)
    pb = body[b]
    if kind == cn.SPHERE_SPHERE:
        g_near, g_xa, g_xb, g_r_a, g_r_b = _round_pair_vjp(xa, xb, pa[RADIUS], pb[RADIUS], g_gap,
                                                           g_n, g_ra, g_rb)
        g_xa = vn.add(g_xa, g_near)
    elif kind == cn.CAPSULE_SPHERE:
        hl = pa[HALF_LENGTH]
        rot = cn.rotation(s, a)
        axis = (rot[2], rot[5], rot[8])
        start = vn.sub(xa, vn.scale(axis, hl))
        rel = vn.sub(xb, start)
        t = vn.clip(vn.dot(rel, axis), 0.0, 2.0 * hl)
        near = vn.add(start, vn.scale(axis, t))
        g_near, g_xa, g_xb, g_r_a, g_r_b = _round_pair_vjp(near, xb, pa[RADIUS], pb[RADIUS],
                                                           g_gap, g_n, g_ra, g_rb)
        g_start = g_near
        g_axis = vn.scale(g_near, t)
        g_dotv, _, g_hi = clip_vjp(vn.dot(rel, axis), 0.0, 2.0 * hl, vn.dot(axis, g_near))
        g_hl = 2.0 * g_hi
        g_xb = vn.add(g_xb, vn.scale(axis, g_dotv))
        g_start = vn.sub(g_start, vn.scale(axis, g_dotv))
        g_axis = vn.add(g_axis, vn.scale(rel, g_dotv))
        g_xa = vn.add(g_xa, g_start)
        g_axis = vn.sub(g_axis, vn.scale(g_start, hl))
        g_hl -= vn.dot(axis, g_start)
        g_body[a, HALF_LENGTH] += g_hl
        for k in range(3):
            g_s[a, R + 3 * k + 2] += g_axis[k]
    elif kind == cn.CAPSULE_CAPSULE:
        rot_a, rot_b = cn.rotation(s, a), cn.rotation(s, b)
        g_ca, g_ua, g_hla, g_cb, g_ub, g_hlb, g_r_a, g_r_b = segments_vjp(
            xa, (rot_a[2], rot_a[5], rot_a[8]), pa[HALF_LENGTH],
            xb, (rot_b[2], rot_b[5], rot_b[8]), pb[HALF_LENGTH], pa[RADIUS], pb[RADIUS],
            g_gap, g_n, g_ra, g_rb)
        g_xa, g_xb = vn.sub(g_ca, g_ra), vn.sub(g_cb, g_rb)
        g_body[a, HALF_LENGTH] += g_hla
        g_body[b, HALF_LENGTH] += g_hlb
        add_column(g_s, a, 2, g_ua)
        add_column(g_s, b, 2, g_ub)
    else:   # SPHERE_BOX
        h = (pb[HALF_SIZE], pb[HALF_SIZE + 1], pb[HALF_SIZE + 2])
        g_xa, g_xb, g_rot, g_h, g_r_a = sphere_box_vjp(xa, pa[RADIUS], xb, cn.rotation(s, b),
                                                        h, g_gap, g_n, g_ra, g_rb)
        g_r_b = 0.0
        for k in range(9):
            g_s[b, R + k] += g_rot[k]
        for k in range(3):
            g_body[b, HALF_SIZE + k] += g_h[k]
    for k in range(3):
        g_s[a, X + k] += g_xa[k]
        g_s[b, X + k] += g_xb[k]
    g_body[a, RADIUS] += g_r_a
    g_body[b, RADIUS] += g_r_b
    return 0.0


@leaf
def tangent_basis_vjp(n, g_t1, g_t2):
    """g_n of `contacts_numba.tangent_basis`."""
    helper = (1.0, 0.0, 0.0) if abs(n[0]) < 0.57 else (0.0, 1.0, 0.0)
    c1 = vn.cross(n, helper)
    c2 = vn.cross(c1, n)
    t1, _ = vn.normalize(c2)
    # t2 = n x t1
    g_n, g_t1b = cross_vjp(n, t1, g_t2)
    g_c2 = normalize_vjp(c2, vn.add(g_t1, g_t1b), 0.0)
    g_c1, g_n2 = cross_vjp(c1, n, g_c2)
    g_n3, _ = cross_vjp(n, helper, g_c1)
    return vn.add(vn.add(g_n, g_n2), g_n3)
