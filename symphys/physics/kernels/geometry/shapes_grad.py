"""Adjoints of the Numba shape routines (`shapes_numba`): segments, a
ball against a box, box points and the box-box contact points, for the
contact geometry's pullback (`contact_geometry_grad`); conventions as
in `geometry_grad`. Cotangents of a body's pose and sizes are added
into g_s (N, 18) and g_body (N, BODY.width).
"""

from __future__ import annotations

import math

from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry import shapes_numba as sn
from symphys.physics.kernels.geometry.geometry_grad import (add_outer, clip_vjp, cross_vjp,
                                                            normalize_vjp)
from symphys.physics.kernels.layout import BODY, STATE
from symphys.physics.kernels.rows import contacts_numba as cn
from symphys.physics.shapes import PARALLEL

leaf = vn.leaf
X, R = STATE.at("position"), STATE.at("rotation")
HALF_SIZE = BODY.at("half_size")
ZERO = (0.0, 0.0, 0.0)


@leaf
def segment_pair_vjp(xa, ua, hla, xb, ub, hlb, g_s, g_t):
    """(g_xa, g_ua, g_hla, g_xb, g_ub, g_hlb) of `shapes_numba.segment_pair`
    for the cotangents of s and t (the branch taken as in the forward)."""
    r = vn.sub(vn.sub(xa, vn.scale(ua, hla)), vn.sub(xb, vn.scale(ub, hlb)))
    b, c, f = vn.dot(ua, ub), vn.dot(ua, r), vn.dot(ub, r)
    la, lb = 2.0 * hla, 2.0 * hlb
    denom = 1.0 - b * b
    apart = denom > PARALLEL
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
def sphere_box_vjp(xa, r, xb, rot, h, g_gap, g_n, g_ra, g_rb):
    """(g_xa, g_xb, g_rot, g_h, g_r) of `contacts_numba._sphere_box`; g_rot
    as a 9-tuple."""
    d, local, diff, dist, face, sgn, n_local, gap = sn.sphere_box_local(xa, r, xb, rot, h)
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
def add_column(g_s, i, k, v):
    """Cotangent v of column k of body i's rotation."""
    for m in range(3):
        g_s[i, R + 3 * m + k] += v[m]



@leaf
def add_box_point(g_s, g_body, i, rot, h, signs, g_p):
    """Cotangent g_p of `contacts_numba.box_point` on body i (its centre,
    rotation and half sizes)."""
    for k in range(3):
        g_s[i, X + k] += g_p[k]
    add_outer(g_s, i, R, g_p, (signs[0] * h[0], signs[1] * h[1], signs[2] * h[2]))
    g_local = vn.matTvec(rot, g_p)
    for k in range(3):
        g_body[i, HALF_SIZE + k] += signs[k] * g_local[k]



@leaf
def add_box_vjp(g_s, g_body, i, g_x, g_rot, g_h):
    """A box's cotangents from `_sphere_box_vjp` onto body i."""
    for k in range(3):
        g_s[i, X + k] += g_x[k]
        g_body[i, HALF_SIZE + k] += g_h[k]
    for k in range(9):
        g_s[i, R + k] += g_rot[k]



@leaf
def _triple_vjp(a, b, c, g):
    """(g_a, g_b, g_c) of (a x b) . c."""
    return vn.scale(vn.cross(b, c), g), vn.scale(vn.cross(c, a), g), vn.scale(vn.cross(a, b), g)


@leaf
def _face_point_vjp(point, fr, g_gap, g_inc, g_ref, g_nout):
    """Cotangents of the face frame `fr` (`shapes_numba.face_frame`) from
    those of an existing `shapes_numba.face_point`: (g_nout, g_pref, g_u1,
    g_u2, g_e1, g_e2, g_minc, g_pinc, g_v1, g_v2, g_f1, g_f2)."""
    n_out, p_ref, u1, u2, e1, e2, m_inc, p_inc, v1, v2, f1, f2 = fr
    g_pref, g_u1, g_u2, g_minc, g_pinc, g_v1, g_v2 = ZERO, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO
    g_e1 = g_e2 = g_f1 = g_f2 = 0.0
    if point < 4 or point >= 8:
        # gap = z = (q - p_ref) . n_out, q_ref = q - z n_out
        exists, z, q, _ = sn.face_point(point, fr)
        g_z = g_gap - vn.dot(g_ref, n_out)
        g_q = vn.add(vn.add(g_inc, g_ref), vn.scale(n_out, g_z))
        g_nout = vn.add(vn.sub(g_nout, vn.scale(g_ref, z)), vn.scale(vn.sub(q, p_ref), g_z))
        g_pref = vn.scale(n_out, -g_z)
        if point < 4:              # q = p_inc + s1 f1 v1 + s2 f2 v2
            s1, s2 = sn.box_corner(point)[1:]
            g_pinc = g_q
            g_v1, g_v2 = vn.scale(g_q, s1 * f1), vn.scale(g_q, s2 * f2)
            g_f1, g_f2 = s1 * vn.dot(v1, g_q), s2 * vn.dot(v2, g_q)
        else:                      # q = ci + s w, s = [delta, y, n_out] / [w, y, n_out]
            inc, ref = (point - 8) // 4, (point - 8) % 4
            ci, w, _, si = sn.face_edge(inc, p_inc, v1, v2, f1, f2)
            cj, y, _, sj = sn.face_edge(ref, p_ref, u1, u2, e1, e2)
            den = vn.dot(vn.cross(w, y), n_out)
            delta = vn.sub(cj, ci)
            num = vn.dot(vn.cross(delta, y), n_out)
            s = num / den
            g_ci = g_q
            g_s = vn.dot(g_q, w)
            g_w = vn.scale(g_q, s)
            g_delta, g_y, g_n1 = _triple_vjp(delta, y, n_out, g_s / den)
            g_w2, g_y2, g_n2 = _triple_vjp(w, y, n_out, -g_s * num / (den * den))
            g_w, g_y = vn.add(g_w, g_w2), vn.add(g_y, g_y2)
            g_nout = vn.add(vn.add(g_nout, g_n1), g_n2)
            g_ci = vn.sub(g_ci, g_delta)
            g_cj = g_delta
            # ci = p_inc + (si f_perp) v_perp, w = v_par; cj likewise on the reference face
            g_pinc = g_ci
            g_pref = vn.add(g_pref, g_cj)
            if inc < 2:
                g_v2 = vn.add(g_v2, vn.scale(g_ci, si * f2))
                g_f2 += si * vn.dot(v2, g_ci)
                g_v1 = vn.add(g_v1, g_w)
            else:
                g_v1 = vn.add(g_v1, vn.scale(g_ci, si * f1))
                g_f1 += si * vn.dot(v1, g_ci)
                g_v2 = vn.add(g_v2, g_w)
            if ref < 2:
                g_u2 = vn.add(g_u2, vn.scale(g_cj, sj * e2))
                g_e2 += sj * vn.dot(u2, g_cj)
                g_u1 = vn.add(g_u1, g_y)
            else:
                g_u1 = vn.add(g_u1, vn.scale(g_cj, sj * e1))
                g_e1 += sj * vn.dot(u1, g_cj)
                g_u2 = vn.add(g_u2, g_y)
    else:
        # r = p_ref + s1 e1 u1 + s2 e2 u2, lam = (p_inc - r) . m_inc / (n_out . m_inc),
        # q_inc = r + lam n_out, q_ref = r, gap = lam
        s1, s2 = sn.box_corner(point - 4)[1:]
        r = vn.add(vn.add(p_ref, vn.scale(u1, s1 * e1)), vn.scale(u2, s2 * e2))
        den = vn.dot(n_out, m_inc)
        num = vn.dot(vn.sub(p_inc, r), m_inc)
        lam = num / den
        g_lam = g_gap + vn.dot(g_inc, n_out)
        g_r = vn.add(g_ref, g_inc)
        g_nout = vn.add(g_nout, vn.scale(g_inc, lam))
        g_num, g_den = g_lam / den, -g_lam * num / (den * den)
        g_pinc = vn.scale(m_inc, g_num)
        g_r = vn.sub(g_r, vn.scale(m_inc, g_num))
        g_minc = vn.add(vn.scale(vn.sub(p_inc, r), g_num), vn.scale(n_out, g_den))
        g_nout = vn.add(g_nout, vn.scale(m_inc, g_den))
        g_pref = g_r
        g_u1, g_u2 = vn.scale(g_r, s1 * e1), vn.scale(g_r, s2 * e2)
        g_e1, g_e2 = s1 * vn.dot(u1, g_r), s2 * vn.dot(u2, g_r)
    return g_nout, g_pref, g_u1, g_u2, g_e1, g_e2, g_minc, g_pinc, g_v1, g_v2, g_f1, g_f2


@leaf
def _face_frame_vjp(a, b, s, body, on_b, k, sk, m, sm, g_fr, g_s, g_body):
    """Adds the cotangents g_fr of `shapes_numba.face_frame` into the bodies."""
    g_nout, g_pref, g_u1, g_u2, g_e1, g_e2, g_minc, g_pinc, g_v1, g_v2, g_f1, g_f2 = g_fr
    ref, inc = (b, a) if on_b else (a, b)
    rot_r, rot_i = cn.rotation(s, ref), cn.rotation(s, inc)
    # p_ref = x_r + h_r[k] n_out, n_out = sk col_k(rot_r)
    n_out = vn.scale(vn.column(rot_r, k), sk)
    m_inc = vn.scale(vn.column(rot_i, m), sm)
    for c in range(3):
        g_s[ref, X + c] += g_pref[c]
        g_s[inc, X + c] += g_pinc[c]
    g_body[ref, HALF_SIZE + k] += vn.dot(n_out, g_pref)
    g_body[inc, HALF_SIZE + m] += vn.dot(m_inc, g_pinc)
    g_nout = vn.add(g_nout, vn.scale(g_pref, body[ref, HALF_SIZE + k]))
    g_minc = vn.add(g_minc, vn.scale(g_pinc, body[inc, HALF_SIZE + m]))
    add_column(g_s, ref, k, vn.scale(g_nout, sk))
    add_column(g_s, inc, m, vn.scale(g_minc, sm))
    k1, k2 = sn.others(k)
    m1, m2 = sn.others(m)
    add_column(g_s, ref, k1, g_u1)
    add_column(g_s, ref, k2, g_u2)
    add_column(g_s, inc, m1, g_v1)
    add_column(g_s, inc, m2, g_v2)
    g_body[ref, HALF_SIZE + k1] += g_e1
    g_body[ref, HALF_SIZE + k2] += g_e2
    g_body[inc, HALF_SIZE + m1] += g_f1
    g_body[inc, HALF_SIZE + m2] += g_f2


@leaf
def box_box_vjp(point, a, b, s, body, g_gap, g_n, g_ra, g_rb, g_s, g_body):
    """Pullback of `shapes_numba.box_box` for bodies a and b."""
    pa, pb = body[a], body[b]
    xa, xb = cn.position(s, a), cn.position(s, b)
    rot_a, rot_b = cn.rotation(s, a), cn.rotation(s, b)
    ha = (pa[HALF_SIZE], pa[HALF_SIZE + 1], pa[HALF_SIZE + 2])
    hb = (pb[HALF_SIZE], pb[HALF_SIZE + 1], pb[HALF_SIZE + 2])
    sep_f, on_b, k, sk, m, sm = sn.face_axis(xa, rot_a, ha, xb, rot_b, hb)
    i, j, sep_e, c, sq, sigma, sa, sb = sn.edge_axis(xa, rot_a, ha, xb, rot_b, hb)
    if sep_e > sep_f + sn.EDGE_BIAS:
        g_nn = g_n
        if point == 0:
            # gap = (ca - cb) . n; ra, rb: the edges' closest points less the centres
            ca, cb = sn.box_point(xa, rot_a, ha, sa), sn.box_point(xb, rot_b, hb, sb)
            ua, ub = vn.column(rot_a, i), vn.column(rot_b, j)
            n = vn.scale(c, sigma / math.sqrt(sq))
            s_, t_, _ = sn.segment_pair(ca, ua, ha[i], cb, ub, hb[j])
            g_ss, g_tt = vn.dot(ua, g_ra), vn.dot(ub, g_rb)
            g_ca, g_ua, g_hla, g_cb, g_ub, g_hlb = segment_pair_vjp(ca, ua, ha[i], cb, ub,
                                                                    hb[j], g_ss, g_tt)
            g_ca = vn.add(vn.add(g_ca, g_ra), vn.scale(n, g_gap))
            g_cb = vn.sub(vn.add(g_cb, g_rb), vn.scale(n, g_gap))
            g_ua = vn.add(g_ua, vn.scale(g_ra, s_ - ha[i]))
            g_ub = vn.add(g_ub, vn.scale(g_rb, t_ - hb[j]))
            g_nn = vn.add(g_nn, vn.scale(vn.sub(ca, cb), g_gap))
            for q in range(3):
                g_s[a, X + q] -= g_ra[q]
                g_s[b, X + q] -= g_rb[q]
            add_box_point(g_s, g_body, a, rot_a, ha, sa, g_ca)
            add_box_point(g_s, g_body, b, rot_b, hb, sb, g_cb)
            g_body[a, HALF_SIZE + i] += g_hla - g_ss
            g_body[b, HALF_SIZE + j] += g_hlb - g_tt
        else:
            g_ua, g_ub = ZERO, ZERO
        # n = sigma c / sqrt(sq), c = A_i x B_j (sq = 1: parallel, never the best)
        g_c = vn.scale(g_nn, sigma)
        if vn.dot(c, c) > PARALLEL:
            unit = vn.scale(c, 1.0 / math.sqrt(sq))
            g_c = vn.scale(vn.sub(g_nn, vn.scale(unit, vn.dot(unit, g_nn))),
                           sigma / math.sqrt(sq))
        g_ai, g_bj = cross_vjp(vn.column(rot_a, i), vn.column(rot_b, j), g_c)
        add_column(g_s, a, i, vn.add(g_ua, g_ai))
        add_column(g_s, b, j, vn.add(g_ub, g_bj))
        return
    fr = sn.face_frame(xa, rot_a, ha, xb, rot_b, hb, on_b, k, sk, m, sm)
    exists = sn.face_point(point, fr)[0]
    g_nout = g_n if on_b else vn.scale(g_n, -1.0)
    g_fr = (g_nout, ZERO, ZERO, ZERO, 0.0, 0.0, ZERO, ZERO, ZERO, ZERO, 0.0, 0.0)
    if exists:
        for q in range(3):
            g_s[a, X + q] -= g_ra[q]
            g_s[b, X + q] -= g_rb[q]
        g_inc, g_ref = (g_ra, g_rb) if on_b else (g_rb, g_ra)
        g_fr = _face_point_vjp(point, fr, g_gap, g_inc, g_ref, g_nout)
    _face_frame_vjp(a, b, s, body, on_b, k, sk, m, sm, g_fr, g_s, g_body)
