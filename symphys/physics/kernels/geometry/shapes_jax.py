"""Closest points and gaps between primitive shapes for the JAX kernels,
per contact item (leading axis K), after `symphys.physics.shapes` (the
reference; its docstring says how the box-box points are chosen). Every
branch is computed for every item and the item's selected, so each is
kept finite on any input (a padded item, another kind's bodies).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from symphys.physics import shapes
from symphys.physics.kernels.vec_jax import (clip, cross, dot, matTvec, matvec, normalize, safe_div,
                                             scale, unit)
from symphys.physics.shapes import COINCIDENT, EDGE_BIAS, FAR, PARALLEL


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
    """(s, t) of `shapes_numba.segment_pair`."""
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
    """(gap, n, surface point of a, of b) of `contacts_numba.segments`; the
    normal of crossing segments from u_a x u_b (`shapes.segment_normal`)."""
    s, t = segment_pair(ca, ua, hla, cb, ub, hlb)
    near_a, near_b = ca + scale(ua, s - hla), cb + scale(ub, t - hlb)
    n_gen, dist_gen = normalize(near_a - near_b, fallback=unit(2, ca))
    c = normalize(cross(ua, ub))[0]
    along = dot(ca - cb, c)
    crossing = shapes.segments_cross(dot(ua, ub), s, t, hla, hlb)
    side = jnp.where(along >= 0.0, 1.0, -1.0)
    n = jnp.where(crossing[:, None], scale(c, side), n_gen)
    dist = jnp.where(crossing, side * along, dist_gen)
    return dist - r_a - r_b, n, near_a - scale(n, r_a), near_b + scale(n, r_b)


def ball_box(centre, r, xb, rot, h):
    """(gap, normal from the box) of a ball against a box (`shapes.ball_box`)."""
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
    """Signs of box corner `point` (K,) (`shapes.box_corner`), (K, 3)."""
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
    cb, ub, hl_edge = box_point(xb, rot, h, signs), column(rot, axis), pick(h, axis)
    s, t = segment_pair(xa, ua, hla, cb, ub, hl_edge)
    gap, n, pa, pb = segments(xa, ua, hla, cb, ub, hl_edge, r, 0.0 * r)
    owns = jnp.asarray(shapes.EDGE_OWNS)[edge]
    exists = shapes.capsule_edge_exists(s, t, hla, hl_edge, owns[:, 0], owns[:, 1])
    edges = (jnp.where(exists, gap, FAR), n, jnp.where(exists[:, None], pa - xa, 0.0),
             jnp.where(exists[:, None], pb - xb, 0.0))
    at_end = point < 2
    return tuple(jnp.where(at_end if e.ndim == 1 else at_end[:, None], e, g)
                 for e, g in zip(ends, edges))


def sign(x):
    return jnp.where(x >= 0.0, 1.0, -1.0)


def _select(take, new, old):
    return tuple(jnp.where(take if x.ndim == 1 else take[:, None], x, y)
                 for x, y in zip(new, old))


# Candidate axes in the reference's order: faces a0 a1 a2 b0 b1 b2 (the
# reference box's body 0 or 1 and column k), edges A_i x B_j for i, j.
_FACE_BODY = np.array([0, 0, 0, 1, 1, 1])
_FACE_SIGN = np.array([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0])
_OTHERS = np.array([[1, 2], [0, 2], [0, 1]])
_EDGE_I = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
_EDGE_J = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])


def _first_best(values):
    """Index (K,) of the first largest of values (K, C)."""
    return jnp.argmax(values, axis=-1)


def _at(x, index):
    """x (K, C, ...) at index (K,) along C."""
    idx = index.reshape(index.shape + (1,) * (x.ndim - 1))
    return jnp.take_along_axis(x, idx, axis=1)[:, 0]


def face_frames(d, xa, rot_a, ha, xb, rot_b, hb):
    """(sep, on_b, n_out, p_ref, u1, u2, e1, e2, m_inc, p_inc, v1, v2, f1,
    f2) of the best face axis per item (`shapes._face_frames`), every
    candidate at once."""
    x = jnp.stack([xa, xb], axis=1)                                   # (K, 2, 3)
    cols = jnp.swapaxes(jnp.stack([rot_a, rot_b], axis=1), -1, -2)    # (K, 2, col, 3)
    h = jnp.stack([ha, hb], axis=1)                                   # (K, 2, 3)
    col = cols.reshape(-1, 6, 3)
    inc_cols, inc_h = cols[:, 1 - _FACE_BODY], h[:, 1 - _FACE_BODY]     # (K, 6, 3, 3), (K, 6, 3)
    along = dot(d[:, None, :], col)
    extent = sum(inc_h[..., m] * jnp.abs(dot(inc_cols[..., m, :], col)) for m in range(3))
    sep = jnp.abs(along) - h.reshape(-1, 6) - extent
    n_out = col * (_FACE_SIGN * sign(along))[..., None]
    cm = jnp.stack([dot(inc_cols[..., m, :], n_out) for m in range(3)], axis=-1)  # (K, 6, 3)
    best = _first_best(sep)
    ref, k = jnp.asarray(_FACE_BODY)[best], best % 3
    n = _at(n_out, best)
    cm_best = _at(cm, best)
    m = _first_best(jnp.abs(cm_best))
    sm = -sign(jnp.take_along_axis(cm_best, m[:, None], axis=-1)[:, 0])
    cols_r, h_r, x_r = _at(cols, ref), _at(h, ref), _at(x, ref)
    cols_i, h_i, x_i = _at(cols, 1 - ref), _at(h, 1 - ref), _at(x, 1 - ref)
    others = jnp.asarray(_OTHERS)
    k1, k2 = others[k, 0], others[k, 1]
    m1, m2 = others[m, 0], others[m, 1]
    m_inc = scale(_at(cols_i, m), sm)
    return (_at(sep, best), ref.astype(sep.dtype), n, x_r + scale(n, pick(h_r, k)),
            _at(cols_r, k1), _at(cols_r, k2), pick(h_r, k1), pick(h_r, k2), m_inc,
            x_i + scale(m_inc, pick(h_i, m)), _at(cols_i, m1), _at(cols_i, m2),
            pick(h_i, m1), pick(h_i, m2))


def edge_axis(d, xa, rot_a, ha, xb, rot_b, hb):
    """(sep, n, a's edge centre, axis, half length, b's ...) of the best
    edge-edge axis per item (`shapes._edge_axis`), every candidate at once."""
    cols_a, cols_b = jnp.swapaxes(rot_a, -1, -2), jnp.swapaxes(rot_b, -1, -2)   # (K, col, 3)
    ai, bj = cols_a[:, _EDGE_I], cols_b[:, _EDGE_J]                                # (K, 9, 3)
    c = cross(ai, bj)
    sq = dot(c, c)
    ok = sq > PARALLEL
    n = c * (1.0 / jnp.sqrt(jnp.where(ok, sq, 1.0)))[..., None]
    n = n * sign(dot(d[:, None, :], n))[..., None]
    keep = jnp.arange(3)
    sa = jnp.where(keep == _EDGE_I[:, None], 0.0,
                   -sign(jnp.stack([dot(cols_a[:, k][:, None, :], n) for k in range(3)], -1)))
    sb = jnp.where(keep == _EDGE_J[:, None], 0.0,
                   sign(jnp.stack([dot(cols_b[:, k][:, None, :], n) for k in range(3)], -1)))
    ca = box_point(xa[:, None, :], rot_a[:, None], ha[:, None, :], sa)
    cb = box_point(xb[:, None, :], rot_b[:, None], hb[:, None, :], sb)
    sep = jnp.where(ok, dot(ca - cb, n), -FAR)
    best = _first_best(sep)
    i, j = jnp.asarray(_EDGE_I)[best], jnp.asarray(_EDGE_J)[best]
    return (_at(sep, best), _at(n, best), _at(ca, best), _at(ai, best), pick(ha, i),
            _at(cb, best), _at(bj, best), pick(hb, j))


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
    ex0 = (jnp.abs(dot(rel, u1)) <= e1 + 4.0 * COINCIDENT) \
        & (jnp.abs(dot(rel, u2)) <= e2 + 4.0 * COINCIDENT)
    z0 = dot(rel, n_out)
    # reference corners
    r = p_ref + scale(u1, s1 * e1) + scale(u2, s2 * e2)
    lam = safe_div(dot(p_inc - r, m_inc), dot(n_out, m_inc))
    q1 = r + scale(n_out, lam)
    rel = q1 - p_inc
    ex1 = shapes.reference_corner_exists(jnp.abs(dot(rel, v1)), jnp.abs(dot(rel, v2)), f1, f2)
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
    ex2 = ok & (jnp.abs(s) < gi - COINCIDENT) & (jnp.abs(t) < gj - COINCIDENT)
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
