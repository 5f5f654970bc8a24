"""Closest points and gaps between primitive shapes, on component tensors
(`Vec3`, `Mat3` of (B, K) tensors): the reference the Numba kernels
(`kernels/contacts_numba`, `kernels/boxes_numba`) and JAX
(`kernels/geometry_jax`, `kernels/boxes_jax`) follow line by line.

Normals point from b to a; gap < 0 is penetration.

Box-box contacts take the separating-axis test over the 15 axes of two
boxes (3 face normals each, 9 edge-edge cross products). On a face axis,
the face of one box (the reference) faces a face of the other (the
incident one); the contact points are the corners of the incident face
over the reference face, the corners of the reference face under the
incident face, and the crossings of their edges seen along the normal
(the corners of the two faces' overlap), `BOX_BOX_POINTS` candidates, each
held at `FAR` when it does not exist. On an edge-edge axis the one point is
the two edges' closest points.
"""

from __future__ import annotations

import itertools

import pytensor.tensor as pt

from symphys.physics.algebra import Mat3, Vec3, columns, cross, dot, matTvec, matvec, normalize

# Segments closer to parallel than this (1 - (u_a . u_b)^2, or |A_i x B_j|^2
# for box edges) have no unique closest points.
PARALLEL = 1e-10
# An edge-edge axis is taken only when it separates the boxes by this much
# more than the best face axis (m), so near-parallel boxes keep their face
# contacts; a candidate contact point that does not exist has a gap this
# large (m), so its rows never act.
EDGE_BIAS = 1e-5
FAR = 1e6
# A candidate point of one pair within this (m) of a point another candidate
# of the pair gives is dropped: two coinciding rows leave the solver a tie
# that rounding settles, and the gradient with it. Corners over a face count
# with a margin of a few of these, so that a dropped point's twin exists.
COINCIDENT = 1e-9
# Box-box candidate points: 4 incident corners, 4 reference corners, 16 edge crossings.
BOX_BOX_POINTS = 24


def sign(x):
    return pt.switch(x >= 0.0, 1.0, -1.0)


def segment_params(xa: Vec3, ua: Vec3, hla, xb: Vec3, ub: Vec3, hlb):
    """(s, t, u_a . u_b) of two segments' closest points (centres x, unit
    axes u, half lengths hl): xa + (s - hla) ua and xb + (t - hlb) ub. s
    minimises over the lines (0 when parallel), clamped to [0, 2 hla]; t
    follows, and where it leaves [0, 2 hlb] it is clamped and s taken again."""
    r = (xa - ua.scale(hla)) - (xb - ub.scale(hlb))
    b, c, f = dot(ua, ub), dot(ua, r), dot(ub, r)
    denom = 1.0 - b * b
    apart = denom > PARALLEL
    s = pt.switch(apart, pt.clip((b * f - c) / pt.switch(apart, denom, 1.0), 0.0, 2.0 * hla),
                  0.0)
    t = b * s + f
    below, above = t < 0.0, t > 2.0 * hlb
    s = pt.switch(below, pt.clip(-c, 0.0, 2.0 * hla),
                  pt.switch(above, pt.clip(b * 2.0 * hlb - c, 0.0, 2.0 * hla), s))
    t = pt.switch(below, 0.0, pt.switch(above, 2.0 * hlb, t))
    return s, t, b


def segment_pair(xa: Vec3, ua: Vec3, hla, xb: Vec3, ub: Vec3, hlb) -> tuple[Vec3, Vec3]:
    """The closest points of two segments (`segment_params`)."""
    s, t, _ = segment_params(xa, ua, hla, xb, ub, hlb)
    return xa + ua.scale(s - hla), xb + ub.scale(t - hlb)


def segments_cross(b, s, t, hla, hlb):
    """Whether two segments' closest points (`segment_params`: s, t, b =
    u_a . u_b) both lie inside them on lines that are not parallel: then
    the points' difference runs along u_a x u_b, and `segment_normal` takes
    the contact normal from that product. Written for PyTensor, NumPy, JAX
    and Numba alike."""
    return (1.0 - b * b > PARALLEL) & (s > 0.0) & (s < 2.0 * hla) & (t > 0.0) & (t < 2.0 * hlb)


def segment_normal(xa: Vec3, ua: Vec3, xb: Vec3, ub: Vec3, near_a: Vec3, near_b: Vec3, crossing,
                   fallback: Vec3):
    """(unit normal from b to a, distance) of two segments' closest points.
    Where they cross (`segments_cross`), the normal is u_a x u_b signed by
    (xa - xb) . (u_a x u_b), which is the distance: the same values as the
    points' difference, normalised, but exact to rounding where the axes
    nearly meet (a difference of 1e-8 m has only 8 good digits of
    direction)."""
    n_gen, dist_gen = normalize(near_a - near_b, fallback=fallback)
    c, _ = normalize(cross(ua, ub), fallback=fallback)
    along = dot(xa - xb, c)
    side = sign(along)
    n = Vec3(*(pt.switch(crossing, u, v) for u, v in zip(c.scale(side), n_gen)))
    return n, pt.switch(crossing, side * along, dist_gen)


def ball_box(centre: Vec3, r, xb: Vec3, rot: Mat3, h: Vec3):
    """(gap, normal from the box) of a ball of radius r at `centre` against
    a box (centre xb, rotation rot, half sizes h), in the box frame; a
    centre inside leaves through the face of least penetration."""
    local = matTvec(rot, centre - xb)
    clamped = Vec3(pt.clip(local.x, -h.x, h.x), pt.clip(local.y, -h.y, h.y),
                   pt.clip(local.z, -h.z, h.z))
    n_out, dist = normalize(local - clamped)
    outside = dist > 1e-9
    pen = Vec3(h.x - pt.abs(local.x), h.y - pt.abs(local.y), h.z - pt.abs(local.z))
    on_x = (pen.x <= pen.y) & (pen.x <= pen.z)
    on_y = ~on_x & (pen.y <= pen.z)
    on_z = ~on_x & ~on_y
    sgn = local.map(sign)
    n_in = Vec3(pt.switch(on_x, sgn.x, 0.0), pt.switch(on_y, sgn.y, 0.0),
                pt.switch(on_z, sgn.z, 0.0))
    depth_in = pt.switch(on_x, pen.x, pt.switch(on_y, pen.y, pen.z))
    n_local = Vec3(*(pt.switch(outside, o, i) for o, i in zip(n_out, n_in)))
    return pt.switch(outside, dist, -depth_in) - r, matvec(rot, n_local)


def box_corner(point: int) -> tuple[float, float, float]:
    """Signs of the half sizes at corner `point` (0-7), itertools.product order."""
    return (-1.0 if point // 4 == 0 else 1.0, -1.0 if (point // 2) % 2 == 0 else 1.0,
            -1.0 if point % 2 == 0 else 1.0)


def box_edge(edge: int) -> tuple[int, tuple[float, float, float]]:
    """Box edge 0-11: the axis it runs along and the signs that place its
    centre (0 along that axis): edges 4i..4i+3 run along axis i."""
    axis, rest = divmod(edge, 4)
    others = [k for k in range(3) if k != axis]
    signs = [0.0, 0.0, 0.0]
    signs[others[0]] = -1.0 if rest // 2 == 0 else 1.0
    signs[others[1]] = -1.0 if rest % 2 == 0 else 1.0
    return axis, (signs[0], signs[1], signs[2])


def edge_owns_corner(edge: int, end: int) -> bool:
    """Whether box edge `edge` (0-11) gives the contact at its corner `end`
    (0: start, 1: end) when a capsule's axis is nearest that corner: each
    corner belongs to one of its three edges (the first axis along which the
    corner is an edge's start, else axis 0)."""
    axis, signs = box_edge(edge)
    corner = list(signs)
    corner[axis] = 1.0 if end else -1.0
    return next((k for k in range(3) if corner[k] < 0.0), 0) == axis


# Whether box edge e owns its start (column 0) and its end (column 1) corner.
EDGE_OWNS = tuple((edge_owns_corner(e, 0), edge_owns_corner(e, 1)) for e in range(12))


def capsule_edge_exists(s, t, hla, hl_edge, owns_start, owns_end):
    """Whether a capsule-box edge contact at axis parameter s (0..2 hla) and
    edge parameter t (0..2 hl_edge) is the pair's own: off the axis' ends
    (the end balls give those) and, at a corner, on the edge that owns it
    (`edge_owns_corner`). Written for PyTensor, NumPy, JAX and Numba alike."""
    return (s > COINCIDENT) & (s < 2.0 * hla - COINCIDENT) \
        & ((t > COINCIDENT) | owns_start) & ((t < 2.0 * hl_edge - COINCIDENT) | owns_end)


def box_point(x: Vec3, rot: Mat3, h: Vec3, signs) -> Vec3:
    """x + rot (signs * h)."""
    return x + matvec(rot, Vec3(signs[0] * h.x, signs[1] * h.y, signs[2] * h.z))


def _select(take, new, old):
    """Switch every member of two like tuples (of tensors and Vec3s)."""
    return tuple(Vec3(*(pt.switch(take, u, v) for u, v in zip(x, y))) if isinstance(x, Vec3)
                 else pt.switch(take, x, y) for x, y in zip(new, old))


def _extent(n: Vec3, cols, h: Vec3):
    return h.x * pt.abs(dot(cols[0], n)) + h.y * pt.abs(dot(cols[1], n)) \
        + h.z * pt.abs(dot(cols[2], n))


def _face_frames(d, cols_a, ha, xa, cols_b, hb, xb):
    """The best face axis (first largest separation): (sep, on_b, n_out,
    p_ref, u1, u2, e1, e2, m_inc, p_inc, v1, v2, f1, f2). n_out is the
    reference face's outward normal, p_ref its centre, u its in-plane axes
    with half extents e; m_inc, p_inc, v, f the same for the incident face."""
    best = None
    for c in range(6):
        on_b = c >= 3
        k = c % 3
        ref, inc = ((cols_b, hb, xb), (cols_a, ha, xa)) if on_b else (
            (cols_a, ha, xa), (cols_b, hb, xb))
        col = ref[0][k]
        along = dot(d, col)
        sep = pt.abs(along) - ref[1][k] - _extent(col, inc[0], inc[1])
        n_out = col.scale(sign(along) if on_b else -sign(along))
        k1, k2 = (i for i in range(3) if i != k)
        # incident axis: the first most (anti)parallel to n_out
        m_best = None
        for m in range(3):
            cm = dot(inc[0][m], n_out)
            m1, m2 = (i for i in range(3) if i != m)
            m_inc = inc[0][m].scale(-sign(cm))
            cand = (pt.abs(cm), m_inc, inc[2] + m_inc.scale(inc[1][m]), inc[0][m1],
                    inc[0][m2], inc[1][m1], inc[1][m2])
            m_best = cand if m_best is None else _select(cand[0] > m_best[0], cand, m_best)
        frame = (sep, pt.constant(1.0 if on_b else 0.0), n_out,
                 ref[2] + n_out.scale(ref[1][k]), ref[0][k1], ref[0][k2], ref[1][k1],
                 ref[1][k2]) + m_best[1:]
        best = frame if best is None else _select(sep > best[0], frame, best)
    return best


def _edge_axis(d, cols_a, ha, xa, cols_b, hb, xb):
    """The best edge-edge axis: (sep, n, a's edge centre, axis, half
    length, b's edge centre, axis, half length). n = A_i x B_j turned
    towards a; a's edge along A_i is the one nearest b, b's the one nearest
    a; sep = (c_a - c_b) . n."""
    best = None
    zero = Vec3(0.0, 0.0, 0.0)
    for i, j in itertools.product(range(3), repeat=2):
        c = cross(cols_a[i], cols_b[j])
        sq = dot(c, c)
        ok = sq > PARALLEL
        n = c.scale(1.0 / pt.sqrt(pt.switch(ok, sq, 1.0)))
        n = n.scale(sign(dot(d, n)))
        centre_a = xa - sum((cols_a[k].scale(sign(dot(cols_a[k], n)) * ha[k])
                             for k in range(3) if k != i), zero)
        centre_b = xb + sum((cols_b[k].scale(sign(dot(cols_b[k], n)) * hb[k])
                             for k in range(3) if k != j), zero)
        sep = pt.switch(ok, dot(centre_a - centre_b, n), -FAR)
        cand = (sep, n, centre_a, cols_a[i], ha[i], centre_b, cols_b[j], hb[j])
        best = cand if best is None else _select(sep > best[0], cand, best)
    return best


def _face_edge(index: int, centre: Vec3, u1: Vec3, u2: Vec3, e1, e2):
    """Edge 0-3 of a face: (centre, axis, half length); 0, 1 run along u1
    (at -e2 u2, +e2 u2), 2, 3 along u2 (at -e1 u1, +e1 u1)."""
    s = -1.0 if index % 2 == 0 else 1.0
    if index < 2:
        return centre + u2.scale(s * e2), u1, e1
    return centre + u1.scale(s * e1), u2, e2


def reference_corner_exists(a1, a2, f1, f2):
    """Whether a reference corner at |coordinates| a1, a2 in the incident
    face's frame (half extents f1, f2) is a contact: inside that face, and
    not on one of its corners (the incident corner gives that point).
    Written for PyTensor, NumPy, JAX and Numba alike."""
    return (a1 <= f1 + 2.0 * COINCIDENT) & (a2 <= f2 + 2.0 * COINCIDENT) \
        & ((a1 <= f1 - COINCIDENT) | (a2 <= f2 - COINCIDENT))


def _face_point(point: int, frame):
    """Candidate `point` of a face contact: (exists, gap, point on the
    incident box, point on the reference box)."""
    _, _, n_out, p_ref, u1, u2, e1, e2, m_inc, p_inc, v1, v2, f1, f2 = frame
    if point < 4:                  # incident corner over the reference face
        s1, s2 = box_corner(point)[1:]
        q = p_inc + v1.scale(s1 * f1) + v2.scale(s2 * f2)
        rel = q - p_ref
        exists = (pt.abs(dot(rel, u1)) <= e1 + 4.0 * COINCIDENT) \
            & (pt.abs(dot(rel, u2)) <= e2 + 4.0 * COINCIDENT)
        z = dot(rel, n_out)
        return exists, z, q, q - n_out.scale(z)
    if point < 8:                  # reference corner under the incident face
        s1, s2 = box_corner(point - 4)[1:]
        r = p_ref + u1.scale(s1 * e1) + u2.scale(s2 * e2)
        lam = dot(p_inc - r, m_inc) / dot(n_out, m_inc)
        q = r + n_out.scale(lam)
        rel = q - p_inc
        return reference_corner_exists(pt.abs(dot(rel, v1)), pt.abs(dot(rel, v2)), f1, f2), \
            lam, q, r
    inc, ref = divmod(point - 8, 4)  # incident edge crossing a reference edge
    ci, w, gi = _face_edge(inc, p_inc, v1, v2, f1, f2)
    cj, y, gj = _face_edge(ref, p_ref, u1, u2, e1, e2)
    den = dot(cross(w, y), n_out)
    ok = den * den > PARALLEL
    safe = pt.switch(ok, den, 1.0)
    delta = cj - ci
    s = dot(cross(delta, y), n_out) / safe
    t = dot(cross(delta, w), n_out) / safe
    exists = ok & (pt.abs(s) < gi - COINCIDENT) & (pt.abs(t) < gj - COINCIDENT)
    q = ci + w.scale(s)
    z = dot(q - p_ref, n_out)
    return exists, z, q, q - n_out.scale(z)


def box_axes(xa: Vec3, rot_a: Mat3, ha: Vec3, xb: Vec3, rot_b: Mat3, hb: Vec3):
    """What every candidate point of two boxes shares: (the best face
    frame, the best edge-edge axis, whether the edge axis is taken)."""
    d = xa - xb
    cols_a, cols_b = columns(rot_a), columns(rot_b)
    frame = _face_frames(d, cols_a, ha, xa, cols_b, hb, xb)
    edge = _edge_axis(d, cols_a, ha, xa, cols_b, hb, xb)
    return frame, edge, edge[0] > frame[0] + EDGE_BIAS


def box_box(point: int, xa: Vec3, xb: Vec3, axes):
    """(gap, normal, ra, rb) of candidate `point` (0-23) of two boxes
    centred at xa, xb with `box_axes` `axes`; a candidate that does not
    exist has gap `FAR` and lever arms 0."""
    frame, edge, on_edge = axes
    zero = Vec3(0.0 * xa.x, 0.0 * xa.x, 0.0 * xa.x)
    exists, gap, on_inc, on_ref = _face_point(point, frame)
    on_b = frame[1] > 0.5
    n_face = frame[2].scale(pt.switch(on_b, 1.0, -1.0))
    pa = Vec3(*(pt.switch(on_b, i, r) for i, r in zip(on_inc, on_ref)))
    pb = Vec3(*(pt.switch(on_b, r, i) for i, r in zip(on_inc, on_ref)))
    face = (pt.switch(exists, gap, FAR), n_face,
            Vec3(*(pt.switch(exists, c, 0.0) for c in pa - xa)),
            Vec3(*(pt.switch(exists, c, 0.0) for c in pb - xb)))
    sep, n, centre_a, ua, hla, centre_b, ub, hlb = edge
    if point == 0:
        near_a, near_b = segment_pair(centre_a, ua, hla, centre_b, ub, hlb)
        on_edges = (sep, n, near_a - xa, near_b - xb)
    else:
        on_edges = (pt.constant(FAR), n, zero, zero)
    return _select(on_edge, on_edges, face)
