"""Closest points and gaps between primitive shapes for the Numba rows
kernel, after `symphys.physics.shapes` (the reference; its docstring says
how the box-box points are chosen): segments, a ball against a box, box
corners and edges, and the box-box contact points. Rotations are 9-tuples
(row major), half sizes 3-tuples; normals point from b to a.
"""

from __future__ import annotations

import math

import numpy as np

from symphys.physics import shapes
from symphys.physics.kernels import vec_numba as vn
from symphys.physics.shapes import COINCIDENT, EDGE_BIAS, FAR, PARALLEL

leaf = vn.leaf
ZERO = (0.0, 0.0, 0.0)
EDGE_OWNS = np.array(shapes.EDGE_OWNS)
_edge_exists = leaf(shapes.capsule_edge_exists)
reference_corner_exists = leaf(shapes.reference_corner_exists)
segments_cross = leaf(shapes.segments_cross)


@leaf
def capsule_edge_exists(edge, s, t, hla, hl_edge):
    """`shapes.capsule_edge_exists` for box edge `edge`."""
    return _edge_exists(s, t, hla, hl_edge, EDGE_OWNS[edge, 0], EDGE_OWNS[edge, 1])


@leaf
def segment_pair(xa, ua, hla, xb, ub, hlb):
    """Closest points of two segments (centres x, unit axes u, half lengths
    hl): (s, t, case), the points x_a + (s - hl_a) u_a and x_b + (t - hl_b)
    u_b. s minimises over the lines (a's start when parallel), clamped to
    [0, 2 hl_a]; t follows (case 0); where t leaves [0, 2 hl_b] it is
    clamped (case 1: 0, case 2: 2 hl_b) and s taken again."""
    r = vn.sub(vn.sub(xa, vn.scale(ua, hla)), vn.sub(xb, vn.scale(ub, hlb)))
    b, c, f = vn.dot(ua, ub), vn.dot(ua, r), vn.dot(ub, r)
    denom = 1.0 - b * b
    s = vn.clip((b * f - c) / denom, 0.0, 2.0 * hla) if denom > PARALLEL else 0.0
    t = b * s + f
    if t < 0.0:
        return vn.clip(-c, 0.0, 2.0 * hla), 0.0, 1
    if t > 2.0 * hlb:
        return vn.clip(b * 2.0 * hlb - c, 0.0, 2.0 * hla), 2.0 * hlb, 2
    return s, t, 0


@leaf
def sphere_box_local(xa, r, xb, rot, h):
    """The sphere's centre in the box's frame and what the contact reads
    from it: (d = xa - xb, local = R^T d, local less its clamp into the box,
    that difference's norm, the face of least penetration (0, 1, 2), the
    signs of local, the normal in box coordinates, the gap)."""
    d = vn.sub(xa, xb)
    local = vn.matTvec(rot, d)
    clamped = (vn.clip(local[0], -h[0], h[0]), vn.clip(local[1], -h[1], h[1]),
               vn.clip(local[2], -h[2], h[2]))
    diff = vn.sub(local, clamped)
    n_out, dist = vn.normalize(diff)
    pen = (h[0] - abs(local[0]), h[1] - abs(local[1]), h[2] - abs(local[2]))
    face = 0 if pen[0] <= pen[1] and pen[0] <= pen[2] else (1 if pen[1] <= pen[2] else 2)
    sgn = (1.0 if local[0] >= 0 else -1.0, 1.0 if local[1] >= 0 else -1.0,
           1.0 if local[2] >= 0 else -1.0)
    if dist > 1e-9:
        return d, local, diff, dist, face, sgn, n_out, dist - r
    n_local = (sgn[0] if face == 0 else 0.0, sgn[1] if face == 1 else 0.0,
               sgn[2] if face == 2 else 0.0)
    return d, local, diff, dist, face, sgn, n_local, -pen[face] - r


@leaf
def box_corner(point):
    """Signs of corner `point` (0-7) of a box (`shapes.box_corner`)."""
    return (-1.0 if point // 4 == 0 else 1.0, -1.0 if (point // 2) % 2 == 0 else 1.0,
            -1.0 if point % 2 == 0 else 1.0)


@leaf
def box_edge(edge):
    """(axis, signs) of box edge 0-11 (`shapes.box_edge`)."""
    axis, rest = edge // 4, edge % 4
    s1 = -1.0 if rest // 2 == 0 else 1.0
    s2 = -1.0 if rest % 2 == 0 else 1.0
    if axis == 0:
        return 0, (0.0, s1, s2)
    if axis == 1:
        return 1, (s1, 0.0, s2)
    return 2, (s1, s2, 0.0)


@leaf
def box_point(x, rot, h, signs):
    """x + rot (signs * h)."""
    return vn.add(x, vn.matvec(rot, (signs[0] * h[0], signs[1] * h[1], signs[2] * h[2])))


@leaf
def sign(x):
    return 1.0 if x >= 0.0 else -1.0


@leaf
def others(k):
    """The two axes other than k, ascending."""
    return (1 if k == 0 else 0), (1 if k == 2 else 2)


@leaf
def _extent(n, rot, h):
    return (h[0] * abs(rot[0] * n[0] + rot[3] * n[1] + rot[6] * n[2])
            + h[1] * abs(rot[1] * n[0] + rot[4] * n[1] + rot[7] * n[2])
            + h[2] * abs(rot[2] * n[0] + rot[5] * n[1] + rot[8] * n[2]))


@leaf
def face_axis(xa, rot_a, ha, xb, rot_b, hb):
    """The best face axis (`shapes._face_frames`): (sep, on_b, k, sk, m,
    sm): the reference face's outward normal is sk * column k of the
    reference box (b when on_b), the incident face's sm * column m of the
    other."""
    d = vn.sub(xa, xb)
    best = (0.0, False, 0, 1.0, 0, 1.0)
    for c in range(6):
        on_b = c >= 3
        k = c % 3
        rot_r, h_r, rot_i, h_i = (rot_b, hb, rot_a, ha) if on_b else (rot_a, ha, rot_b, hb)
        col = vn.column(rot_r, k)
        along = vn.dot(d, col)
        sep = abs(along) - h_r[k] - _extent(col, rot_i, h_i)
        sk = sign(along) if on_b else -sign(along)
        n_out = vn.scale(col, sk)
        m, big, sm = 0, -1.0, 1.0
        for mm in range(3):
            cm = vn.dot(vn.column(rot_i, mm), n_out)
            if mm == 0 or abs(cm) > big:
                m, big, sm = mm, abs(cm), -sign(cm)
        if c == 0 or sep > best[0]:
            best = (sep, on_b, k, sk, m, sm)
    return best


@leaf
def face_frame(xa, rot_a, ha, xb, rot_b, hb, on_b, k, sk, m, sm):
    """(n_out, p_ref, u1, u2, e1, e2, m_inc, p_inc, v1, v2, f1, f2) of a
    face axis (`shapes._face_frames`)."""
    x_r, rot_r, h_r, x_i, rot_i, h_i = (xb, rot_b, hb, xa, rot_a, ha) if on_b else (
        xa, rot_a, ha, xb, rot_b, hb)
    n_out = vn.scale(vn.column(rot_r, k), sk)
    k1, k2 = others(k)
    m_inc = vn.scale(vn.column(rot_i, m), sm)
    m1, m2 = others(m)
    return (n_out, vn.add(x_r, vn.scale(n_out, h_r[k])), vn.column(rot_r, k1),
            vn.column(rot_r, k2), h_r[k1], h_r[k2], m_inc, vn.add(x_i, vn.scale(m_inc, h_i[m])),
            vn.column(rot_i, m1), vn.column(rot_i, m2), h_i[m1], h_i[m2])


@leaf
def edge_axis(xa, rot_a, ha, xb, rot_b, hb):
    """The best edge-edge axis (`shapes._edge_axis`): (i, j, sep, c, sq,
    sigma, signs_a, signs_b) with n = sigma c / sqrt(sq), c = A_i x B_j,
    a's edge centred at box_point(xa, rot_a, ha, signs_a), b's likewise."""
    d = vn.sub(xa, xb)
    best = (-1, -1, -FAR, ZERO, 1.0, 1.0, ZERO, ZERO)
    for i in range(3):
        for j in range(3):
            c = vn.cross(vn.column(rot_a, i), vn.column(rot_b, j))
            sq = vn.dot(c, c)
            ok = sq > PARALLEL
            n = vn.scale(c, 1.0 / math.sqrt(sq if ok else 1.0))
            sigma = sign(vn.dot(d, n))
            n = vn.scale(n, sigma)
            sa = (0.0 if i == 0 else -sign(vn.dot(vn.column(rot_a, 0), n)),
                  0.0 if i == 1 else -sign(vn.dot(vn.column(rot_a, 1), n)),
                  0.0 if i == 2 else -sign(vn.dot(vn.column(rot_a, 2), n)))
            sb = (0.0 if j == 0 else sign(vn.dot(vn.column(rot_b, 0), n)),
                  0.0 if j == 1 else sign(vn.dot(vn.column(rot_b, 1), n)),
                  0.0 if j == 2 else sign(vn.dot(vn.column(rot_b, 2), n)))
            sep = vn.dot(vn.sub(box_point(xa, rot_a, ha, sa), box_point(xb, rot_b, hb, sb)), n)
            sep = sep if ok else -FAR
            if best[0] < 0 or sep > best[2]:
                best = (i, j, sep, c, sq if ok else 1.0, sigma, sa, sb)
    return best


@leaf
def face_edge(index, centre, u1, u2, e1, e2):
    """Edge 0-3 of a face (`shapes._face_edge`): (centre, axis, half
    length, the sign placing it)."""
    s = -1.0 if index % 2 == 0 else 1.0
    if index < 2:
        return vn.add(centre, vn.scale(u2, s * e2)), u1, e1, s
    return vn.add(centre, vn.scale(u1, s * e1)), u2, e2, s


@leaf
def face_point(point, fr):
    """(exists, gap, point on the incident box, on the reference box) of
    candidate `point` of a face contact (`shapes._face_point`)."""
    n_out, p_ref, u1, u2, e1, e2, m_inc, p_inc, v1, v2, f1, f2 = fr
    if point < 4:
        s1, s2 = box_corner(point)[1:]
        q = vn.add(vn.add(p_inc, vn.scale(v1, s1 * f1)), vn.scale(v2, s2 * f2))
        rel = vn.sub(q, p_ref)
        exists = abs(vn.dot(rel, u1)) <= e1 + 4.0 * COINCIDENT \
            and abs(vn.dot(rel, u2)) <= e2 + 4.0 * COINCIDENT
        z = vn.dot(rel, n_out)
        return exists, z, q, vn.sub(q, vn.scale(n_out, z))
    if point < 8:
        s1, s2 = box_corner(point - 4)[1:]
        r = vn.add(vn.add(p_ref, vn.scale(u1, s1 * e1)), vn.scale(u2, s2 * e2))
        lam = vn.dot(vn.sub(p_inc, r), m_inc) / vn.dot(n_out, m_inc)
        q = vn.add(r, vn.scale(n_out, lam))
        rel = vn.sub(q, p_inc)
        exists = reference_corner_exists(abs(vn.dot(rel, v1)), abs(vn.dot(rel, v2)), f1, f2)
        return exists, lam, q, r
    ci, w, gi, _ = face_edge((point - 8) // 4, p_inc, v1, v2, f1, f2)
    cj, y, gj, _ = face_edge((point - 8) % 4, p_ref, u1, u2, e1, e2)
    den = vn.dot(vn.cross(w, y), n_out)
    ok = den * den > PARALLEL
    safe = den if ok else 1.0
    delta = vn.sub(cj, ci)
    s = vn.dot(vn.cross(delta, y), n_out) / safe
    t = vn.dot(vn.cross(delta, w), n_out) / safe
    exists = ok and abs(s) < gi - COINCIDENT and abs(t) < gj - COINCIDENT
    q = vn.add(ci, vn.scale(w, s))
    z = vn.dot(vn.sub(q, p_ref), n_out)
    return exists, z, q, vn.sub(q, vn.scale(n_out, z))


@leaf
def box_box(point, xa, rot_a, ha, xb, rot_b, hb):
    """(gap, normal, ra, rb) of candidate `point` (0-23) of two boxes
    (`shapes.box_box`)."""
    sep_f, on_b, k, sk, m, sm = face_axis(xa, rot_a, ha, xb, rot_b, hb)
    i, j, sep_e, c, sq, sigma, sa, sb = edge_axis(xa, rot_a, ha, xb, rot_b, hb)
    if sep_e > sep_f + EDGE_BIAS:
        n = vn.scale(c, sigma / math.sqrt(sq))
        if point != 0:
            return FAR, n, ZERO, ZERO
        ca, cb = box_point(xa, rot_a, ha, sa), box_point(xb, rot_b, hb, sb)
        ua, ub = vn.column(rot_a, i), vn.column(rot_b, j)
        s, t, _ = segment_pair(ca, ua, ha[i], cb, ub, hb[j])
        return (sep_e, n, vn.sub(vn.add(ca, vn.scale(ua, s - ha[i])), xa),
                vn.sub(vn.add(cb, vn.scale(ub, t - hb[j])), xb))
    fr = face_frame(xa, rot_a, ha, xb, rot_b, hb, on_b, k, sk, m, sm)
    exists, gap, q_inc, q_ref = face_point(point, fr)
    n = fr[0] if on_b else vn.scale(fr[0], -1.0)
    if not exists:
        return FAR, n, ZERO, ZERO
    if on_b:
        return gap, n, vn.sub(q_inc, xa), vn.sub(q_ref, xb)
    return gap, n, vn.sub(q_ref, xa), vn.sub(q_inc, xb)
