"""Closest points and gaps between primitive shapes for the JAX kernels,
per contact item (leading axis K), after `symphys.physics.shapes` (the
reference; its docstring says how the box-box points are chosen). Every
branch is computed for every item and the item's selected, so each is
kept finite on any input (a padded item, another kind's bodies).
"""

from __future__ import annotations

import jax.numpy as jnp

from symphys.physics.kernels.vec_jax import (clip, cross, dot, matTvec, matvec, normalize, safe_div,
                                             scale, unit)
from symphys.physics.shapes import EDGE_BIAS, FAR, PARALLEL


def column(m, k):
    """Column k (a scalar or a per-item (K,) int array) of m (K, 3, 3)."""
    if isinstance(k, int):
        return m[..., :, k]
    return jnp.take_along_axis(m, jnp.broadcast_to(k[:, None, None], m.shape[:-1] + (1,)),
                               axis=-1)[..., 0]


def pick(v, k):
    """v[..., k] for a per-item k."""
    return jnp.take_along_axis(v, k[:, None], axis=-1)[:, 0]


def segment_pair(xa, ua, hla, xb, ub, hlb):
    """(s, t) of `contacts_numba.segment_pair`."""
    rel = (xa - scale(ua, hla)) - (xb - scale(ub, hlb))
    b, c, f = dot(ua, ub), dot(ua, rel), dot(ub, rel)
    denom = 1.0 - b * b
    apart = denom > PARALLEL
    s = jnp.where(apart, clip((b * f - c) / jnp.where(apart, denom, 1.0), 0.0, 2.0 * hla), 0.0)
    t = b * s + f
    below, above = t < 0.0, t > 2.0 * hlb
    s = jnp.where(below, clip(-c, 0.0, 2.0 * hla),
                  jnp.where(above, clip(b * 2.0 * hlb - c, 0.0, 2.0 * hla), s))
    return s, jnp.where(below, 0.0, jnp.where(above, 2.0 * hlb, t))


def segments(ca, ua, hla, cb, ub, hlb, r_a, r_b):
    """(gap, n, surface point of a, of b) of `contacts_numba.segments`."""
    s, t = segment_pair(ca, ua, hla, cb, ub, hlb)
    near_a, near_b = ca + scale(ua, s - hla), cb + scale(ub, t - hlb)
    n, dist = normalize(near_a - near_b, fallback=unit(2, ca))
    return dist - r_a - r_b, n, near_a - scale(n, r_a), near_b + scale(n, r_b)


def ball_box(centre, r, xb, rot, h):
    """(gap, normal from the box) of a ball against a box (`contacts._ball_box`)."""
    local = matTvec(rot, centre - xb)
    n_out, dist = normalize(local - clip(local, -h, h))
    outside = dist > 1e-9
    pen = h - jnp.abs(local)
    on_x = (pen[:, 0] <= pen[:, 1]) & (pen[:, 0] <= pen[:, 2])
    on_y = ~on_x & (pen[:, 1] <= pen[:, 2])
    on_z = ~on_x & ~on_y
    sgn = jnp.where(local >= 0, 1.0, -1.0)
    n_in = jnp.stack([jnp.where(on, sgn[:, k], 0.0) for k, on in enumerate((on_x, on_y, on_z))],
                     axis=-1)
    depth_in = jnp.where(on_x, pen[:, 0], jnp.where(on_y, pen[:, 1], pen[:, 2]))
    return (jnp.where(outside, dist, -depth_in) - r,
            matvec(rot, jnp.where(outside[:, None], n_out, n_in)))


def corner_signs(point):
    """Signs of box corner `point` (K,) (`contacts.box_corner`), (K, 3)."""
    return jnp.stack([jnp.where((point >> (2 - k)) & 1, 1.0, -1.0) for k in range(3)], axis=-1)


def box_point(x, rot, h, signs):
    return x + matvec(rot, signs * h)


def capsule_box(point, xa, ua, hla, r, xb, rot, h):
    """`contacts_numba._capsule_box` per item."""
    sign = jnp.where(point == 0, -1.0, 1.0)
    centre = xa + scale(ua, sign * hla)
    gap_e, n_e = ball_box(centre, r, xb, rot, h)
    ends = (gap_e, n_e, centre - scale(n_e, r) - xa, centre - scale(n_e, r + gap_e) - xb)
    edge = jnp.clip(point - 2, 0, 11)
    axis, rest = edge // 4, edge % 4
    s1, s2 = jnp.where(rest // 2 == 0, -1.0, 1.0), jnp.where(rest % 2 == 0, -1.0, 1.0)
    zero = 0.0 * s1
    signs = jnp.where((axis == 0)[:, None], jnp.stack([zero, s1, s2], axis=-1),
                      jnp.where((axis == 1)[:, None], jnp.stack([s1, zero, s2], axis=-1),
                                jnp.stack([s1, s2, zero], axis=-1)))
    gap, n, pa, pb = segments(xa, ua, hla, box_point(xb, rot, h, signs), column(rot, axis),
                              pick(h, axis), r, 0.0 * r)
    edges = (gap, n, pa - xa, pb - xb)
    at_end = point < 2
    return tuple(jnp.where(at_end if e.ndim == 1 else at_end[:, None], e, g)
                 for e, g in zip(ends, edges))


def sign(x):
    return jnp.where(x >= 0.0, 1.0, -1.0)


def _select(take, new, old):
    return tuple(jnp.where(take if x.ndim == 1 else take[:, None], x, y)
                 for x, y in zip(new, old))


def _extent(n, rot, h):
    return sum(h[:, k] * jnp.abs(dot(column(rot, k), n)) for k in range(3))


def _others(k):
    return (1 if k == 0 else 0), (1 if k == 2 else 2)


def face_frames(d, xa, rot_a, ha, xb, rot_b, hb):
    """(sep, on_b, n_out, p_ref, u1, u2, e1, e2, m_inc, p_inc, v1, v2, f1,
    f2) of the best face axis per item (`shapes._face_frames`)."""
    best = None
    for c in range(6):
        on_b, k = c >= 3, c % 3
        (x_r, rot_r, h_r), (x_i, rot_i, h_i) = ((xb, rot_b, hb), (xa, rot_a, ha)) if on_b else (
            (xa, rot_a, ha), (xb, rot_b, hb))
        col = column(rot_r, k)
        along = dot(d, col)
        sep = jnp.abs(along) - h_r[:, k] - _extent(col, rot_i, h_i)
        n_out = scale(col, sign(along) if on_b else -sign(along))
        inc = None
        for m in range(3):
            cm = dot(column(rot_i, m), n_out)
            m1, m2 = _others(m)
            m_inc = scale(column(rot_i, m), -sign(cm))
            cand = (jnp.abs(cm), m_inc, x_i + scale(m_inc, h_i[:, m]), column(rot_i, m1),
                    column(rot_i, m2), h_i[:, m1], h_i[:, m2])
            inc = cand if inc is None else _select(cand[0] > inc[0], cand, inc)
        k1, k2 = _others(k)
        frame = (sep, jnp.full_like(sep, 1.0 if on_b else 0.0), n_out,
                 x_r + scale(n_out, h_r[:, k]), column(rot_r, k1), column(rot_r, k2),
                 h_r[:, k1], h_r[:, k2]) + inc[1:]
        best = frame if best is None else _select(sep > best[0], frame, best)
    return best


def edge_axis(d, xa, rot_a, ha, xb, rot_b, hb):
    """(sep, n, a's edge centre, axis, half length, b's ...) of the best
    edge-edge axis per item (`shapes._edge_axis`)."""
    best = None
    for i in range(3):
        for j in range(3):
            ai, bj = column(rot_a, i), column(rot_b, j)
            c = cross(ai, bj)
            sq = dot(c, c)
            ok = sq > PARALLEL
            n = scale(c, 1.0 / jnp.sqrt(jnp.where(ok, sq, 1.0)))
            n = scale(n, sign(dot(d, n)))
            sa = jnp.stack([0.0 * sq if k == i else -sign(dot(column(rot_a, k), n))
                            for k in range(3)], axis=-1)
            sb = jnp.stack([0.0 * sq if k == j else sign(dot(column(rot_b, k), n))
                            for k in range(3)], axis=-1)
            ca, cb = box_point(xa, rot_a, ha, sa), box_point(xb, rot_b, hb, sb)
            sep = jnp.where(ok, dot(ca - cb, n), -FAR)
            cand = (sep, n, ca, ai, ha[:, i], cb, bj, hb[:, j])
            best = cand if best is None else _select(sep > best[0], cand, best)
    return best


def _face_edge(index, centre, u1, u2, e1, e2):
    """(centre, axis, half length) of face edge `index` (K,) (`shapes._face_edge`)."""
    s = jnp.where(index % 2 == 0, -1.0, 1.0)
    along_u1 = (index < 2)[:, None]
    return (centre + jnp.where(along_u1, scale(u2, s * e2), scale(u1, s * e1)),
            jnp.where(along_u1, u1, u2), jnp.where(index < 2, e1, e2))


def face_point(point, frame):
    """(exists, gap, point on the incident box, on the reference box) of
    candidate `point` (K,) of a face contact (`shapes._face_point`)."""
    _, _, n_out, p_ref, u1, u2, e1, e2, m_inc, p_inc, v1, v2, f1, f2 = frame
    corner = point % 4
    s1, s2 = jnp.where(corner // 2 == 0, -1.0, 1.0), jnp.where(corner % 2 == 0, -1.0, 1.0)
    # incident corners
    q0 = p_inc + scale(v1, s1 * f1) + scale(v2, s2 * f2)
    rel = q0 - p_ref
    ex0 = (jnp.abs(dot(rel, u1)) <= e1) & (jnp.abs(dot(rel, u2)) <= e2)
    z0 = dot(rel, n_out)
    # reference corners
    r = p_ref + scale(u1, s1 * e1) + scale(u2, s2 * e2)
    lam = safe_div(dot(p_inc - r, m_inc), dot(n_out, m_inc))
    q1 = r + scale(n_out, lam)
    rel = q1 - p_inc
    ex1 = (jnp.abs(dot(rel, v1)) <= f1) & (jnp.abs(dot(rel, v2)) <= f2)
    # edge crossings
    e = jnp.clip(point - 8, 0, 15)
    ci, w, gi = _face_edge(e // 4, p_inc, v1, v2, f1, f2)
    cj, y, gj = _face_edge(e % 4, p_ref, u1, u2, e1, e2)
    den = dot(cross(w, y), n_out)
    ok = den * den > PARALLEL
    safe = jnp.where(ok, den, 1.0)
    delta = cj - ci
    s = dot(cross(delta, y), n_out) / safe
    t = dot(cross(delta, w), n_out) / safe
    ex2 = ok & (jnp.abs(s) <= gi) & (jnp.abs(t) <= gj)
    q2 = ci + scale(w, s)
    z2 = dot(q2 - p_ref, n_out)
    first, second = point < 4, point < 8
    pick3 = lambda a, b, c: jnp.where(first if a.ndim == 1 else first[:, None], a, jnp.where(
        second if b.ndim == 1 else second[:, None], b, c))
    return (pick3(ex0, ex1, ex2), pick3(z0, lam, z2),
            pick3(q0, q1, q2), pick3(q0 - scale(n_out, z0), r, q2 - scale(n_out, z2)))


def box_box(point, xa, rot_a, ha, xb, rot_b, hb):
    """(gap, n, ra, rb) of candidate `point` (K,) of two boxes (`shapes.box_box`)."""
    d = xa - xb
    frame = face_frames(d, xa, rot_a, ha, xb, rot_b, hb)
    sep, n, ca, ua, hla, cb, ub, hlb = edge_axis(d, xa, rot_a, ha, xb, rot_b, hb)
    on_edge = sep > frame[0] + EDGE_BIAS
    exists, gap, q_inc, q_ref = face_point(point, frame)
    on_b = (frame[1] > 0.5)[:, None]
    zeros = jnp.zeros_like(xa)
    face = (jnp.where(exists, gap, FAR), jnp.where(on_b, frame[2], -frame[2]),
            jnp.where(exists[:, None], jnp.where(on_b, q_inc, q_ref) - xa, zeros),
            jnp.where(exists[:, None], jnp.where(on_b, q_ref, q_inc) - xb, zeros))
    s, t = segment_pair(ca, ua, hla, cb, ub, hlb)
    first = point == 0
    edge = (jnp.where(first, sep, FAR), n,
            jnp.where(first[:, None], ca + scale(ua, s - hla) - xa, zeros),
            jnp.where(first[:, None], cb + scale(ub, t - hlb) - xb, zeros))
    return _select(on_edge, edge, face)
