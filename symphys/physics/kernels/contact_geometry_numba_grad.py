"""Adjoints of the Numba contact geometry (`contacts_numba.geometry` and
its pair routines, `contacts_numba.tangent_basis`), for the contact rows'
pullback (`contacts_numba_grad`); conventions as in `geometry_numba_grad`.
"""

from __future__ import annotations

from symphys.physics.kernels import contacts_numba as cn
from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry_numba_grad import (add_outer, clip_vjp, cross_vjp,
                                                         normalize_vjp)
from symphys.physics.kernels.layout import BODY, STATE

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
def _segment_pair_vjp(xa, ua, hla, xb, ub, hlb, g_s, g_t):
    """(g_xa, g_ua, g_hla, g_xb, g_ub, g_hlb) of `contacts_numba.segment_pair`
    for the cotangents of s and t (the branch taken as in the forward)."""
    r = vn.sub(vn.sub(xa, vn.scale(ua, hla)), vn.sub(xb, vn.scale(ub, hlb)))
    b, c, f = vn.dot(ua, ub), vn.dot(ua, r), vn.dot(ub, r)
    la, lb = 2.0 * hla, 2.0 * hlb
    denom = 1.0 - b * b
    apart = denom > cn.PARALLEL
    s0 = (b * f - c) / denom if apart else 0.0
    s1 = vn.clip(s0, 0.0, la) if apart else 0.0
    t1 = b * s1 + f
    g_b = g_c = g_f = g_la = g_lb = g_s1 = 0.0
    if t1 < 0.0:                      # t = 0, s = clip(-c, 0, la)
        g_x, _, g_hi = clip_vjp(-c, 0.0, la, g_s)
        g_c -= g_x
        g_la += g_hi
    elif t1 > lb:                     # t = lb, s = clip(b lb - c, 0, la)
        g_lb += g_t
        g_x, _, g_hi = clip_vjp(b * lb - c, 0.0, la, g_s)
        g_b += g_x * lb
        g_lb += g_x * b
        g_c -= g_x
        g_la += g_hi
    else:                             # s = s1, t = b s1 + f
        g_s1 = g_s + g_t * b
        g_b += g_t * s1
        g_f += g_t
    if apart and g_s1 != 0.0:         # s1 = clip((b f - c) / denom, 0, la)
        g_x, _, g_hi = clip_vjp(s0, 0.0, la, g_s1)
        g_la += g_hi
        g_num = g_x / denom
        g_b += g_num * f + 2.0 * b * g_x * s0 / denom
        g_f += g_num * b
        g_c -= g_num
    g_r = vn.add(vn.scale(ua, g_c), vn.scale(ub, g_f))
    g_ua = vn.add(vn.add(vn.scale(ub, g_b), vn.scale(r, g_c)), vn.scale(g_r, -hla))
    g_ub = vn.add(vn.add(vn.scale(ua, g_b), vn.scale(r, g_f)), vn.scale(g_r, hlb))
    g_hla = 2.0 * g_la - vn.dot(ua, g_r)
    g_hlb = 2.0 * g_lb + vn.dot(ub, g_r)
    return g_r, g_ua, g_hla, vn.scale(g_r, -1.0), g_ub, g_hlb


@leaf
def _sphere_box_vjp(xa, r, xb, rot, h, g_gap, g_n, g_ra, g_rb):
    """(g_xa, g_xb, g_rot, g_h, g_r) of `contacts_numba._sphere_box`; g_rot
    as a 9-tuple."""
    d, local, diff, dist, face, sgn, n_local, gap = cn.sphere_box_local(xa, r, xb, rot, h)
    n = vn.matvec(rot, n_local)
    # ra = -r n, rb = xa - (r + gap) n - xb
    g_nn = vn.sub(vn.scale(g_ra, -r), vn.scale(g_rb, r + gap))
    g_nn = vn.add(g_nn, g_n)
    g_r = -vn.dot(n, g_ra) - vn.dot(n, g_rb)
    g_gt = g_gap - vn.dot(n, g_rb)
    g_xa = g_rb
    g_xb = vn.scale(g_rb, -1.0)
    g_rot = (g_nn[0] * n_local[0], g_nn[0] * n_local[1], g_nn[0] * n_local[2],
             g_nn[1] * n_local[0], g_nn[1] * n_local[1], g_nn[1] * n_local[2],
             g_nn[2] * n_local[0], g_nn[2] * n_local[1], g_nn[2] * n_local[2])
    g_nl = vn.matTvec(rot, g_nn)
    g_local = (0.0, 0.0, 0.0)
    g_h = (0.0, 0.0, 0.0)
    g_r -= g_gt
    if dist > 1e-9:
        g_diff = normalize_vjp(diff, g_nl, g_gt)
        x0, lo0, hi0 = clip_vjp(local[0], -h[0], h[0], -g_diff[0])
        x1, lo1, hi1 = clip_vjp(local[1], -h[1], h[1], -g_diff[1])
        x2, lo2, hi2 = clip_vjp(local[2], -h[2], h[2], -g_diff[2])
        g_local = (g_diff[0] + x0, g_diff[1] + x1, g_diff[2] + x2)
        g_h = (hi0 - lo0, hi1 - lo1, hi2 - lo2)
    else:
        g_depth = -g_gt
        if face == 0:
            g_h = (g_depth, 0.0, 0.0)
            g_local = (-g_depth * sgn[0], 0.0, 0.0)
        elif face == 1:
            g_h = (0.0, g_depth, 0.0)
            g_local = (0.0, -g_depth * sgn[1], 0.0)
        else:
            g_h = (0.0, 0.0, g_depth)
            g_local = (0.0, 0.0, -g_depth * sgn[2])
    # local = rot^T d
    g_d = vn.matvec(rot, g_local)
    g_rot = (g_rot[0] + d[0] * g_local[0], g_rot[1] + d[0] * g_local[1],
             g_rot[2] + d[0] * g_local[2], g_rot[3] + d[1] * g_local[0],
             g_rot[4] + d[1] * g_local[1], g_rot[5] + d[1] * g_local[2],
             g_rot[6] + d[2] * g_local[0], g_rot[7] + d[2] * g_local[1],
             g_rot[8] + d[2] * g_local[2])
    return vn.add(g_xa, g_d), vn.sub(g_xb, g_d), g_rot, g_h, g_r


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
            sx = -1.0 if point // 4 == 0 else 1.0
            sy = -1.0 if (point // 2) % 2 == 0 else 1.0
            sz = -1.0 if point % 2 == 0 else 1.0
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
        ua, ub = (rot_a[2], rot_a[5], rot_a[8]), (rot_b[2], rot_b[5], rot_b[8])
        hla, hlb = pa[HALF_LENGTH], pb[HALF_LENGTH]
        sa, tb, _ = cn.segment_pair(xa, ua, hla, xb, ub, hlb)
        near_a = vn.add(xa, vn.scale(ua, sa - hla))
        near_b = vn.add(xb, vn.scale(ub, tb - hlb))
        # rb = (n r_b) + near_b - xb
        g_near_a, g_xa, g_near_b, g_r_a, g_r_b = _round_pair_vjp(near_a, near_b, pa[RADIUS],
                                                                 pb[RADIUS], g_gap, g_n, g_ra,
                                                                 g_rb)
        g_near_b = vn.add(g_near_b, g_rb)
        g_xa = vn.add(g_xa, g_near_a)
        g_xb = vn.sub(g_near_b, g_rb)
        g_sa, g_tb = vn.dot(ua, g_near_a), vn.dot(ub, g_near_b)
        g_xa2, g_ua, g_hla, g_xb2, g_ub, g_hlb = _segment_pair_vjp(xa, ua, hla, xb, ub, hlb,
                                                                   g_sa, g_tb)
        g_xa, g_xb = vn.add(g_xa, g_xa2), vn.add(g_xb, g_xb2)
        g_ua = vn.add(g_ua, vn.scale(g_near_a, sa - hla))
        g_ub = vn.add(g_ub, vn.scale(g_near_b, tb - hlb))
        g_body[a, HALF_LENGTH] += g_hla - g_sa
        g_body[b, HALF_LENGTH] += g_hlb - g_tb
        for k in range(3):
            g_s[a, R + 3 * k + 2] += g_ua[k]
            g_s[b, R + 3 * k + 2] += g_ub[k]
    else:   # SPHERE_BOX
        h = (pb[HALF_SIZE], pb[HALF_SIZE + 1], pb[HALF_SIZE + 2])
        g_xa, g_xb, g_rot, g_h, g_r_a = _sphere_box_vjp(xa, pa[RADIUS], xb, cn.rotation(s, b),
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
