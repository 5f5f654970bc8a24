"""Contact geometry for the Numba rows kernel, one function per shape
pair (`symphys.physics.contacts._shape_geometry` is the reference): gap, normal
(from b to a) and lever arms of one contact point at the current pose.

Bodies are read from one world's packed state (N, 18) and body parameters
(N, BODY.width); b = -1 is the ground plane z = height.
"""

from __future__ import annotations

from symphys.physics.contacts import ContactKind
from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.geometry.shapes_numba import (box_box, box_corner, box_edge, box_point,
                                                           capsule_edge_exists, segment_pair,
                                                           segments_cross, sphere_box_local)
from symphys.physics.kernels.layout import BODY, CONTACT_CODES, STATE
from symphys.physics.shapes import FAR

jit, leaf = vn.jit, vn.leaf
SPHERE_GROUND = CONTACT_CODES[ContactKind.SPHERE_GROUND]
BOX_GROUND = CONTACT_CODES[ContactKind.BOX_GROUND]
CAPSULE_GROUND = CONTACT_CODES[ContactKind.CAPSULE_GROUND]
SPHERE_SPHERE = CONTACT_CODES[ContactKind.SPHERE_SPHERE]
SPHERE_BOX = CONTACT_CODES[ContactKind.SPHERE_BOX]
CAPSULE_SPHERE = CONTACT_CODES[ContactKind.CAPSULE_SPHERE]
CAPSULE_CAPSULE = CONTACT_CODES[ContactKind.CAPSULE_CAPSULE]
CAPSULE_BOX = CONTACT_CODES[ContactKind.CAPSULE_BOX]
BOX_BOX = CONTACT_CODES[ContactKind.BOX_BOX]
X, R = STATE.at("position"), STATE.at("rotation")
RADIUS, HALF_SIZE, HALF_LENGTH = BODY.at("radius"), BODY.at("half_size"), BODY.at("half_length")
UP = (0.0, 0.0, 1.0)
ZERO = (0.0, 0.0, 0.0)


@leaf
def position(s, i):
    return (s[i, X], s[i, X + 1], s[i, X + 2])


@leaf
def rotation(s, i):
    return (s[i, R], s[i, R + 1], s[i, R + 2], s[i, R + 3], s[i, R + 4], s[i, R + 5],
            s[i, R + 6], s[i, R + 7], s[i, R + 8])


@leaf
def _round_pair(nearest_a, xa, xb, r_a, r_b):
    """Two rounded shapes: a's closest core point to b's centre."""
    unit, dist = vn.normalize(vn.sub(nearest_a, xb))
    n = UP if dist <= vn.EPS else unit
    gap = dist - r_a - r_b
    return gap, n, vn.sub(vn.sub(nearest_a, vn.scale(n, r_a)), xa), vn.scale(n, r_b)


@leaf
def _sphere_box(xa, r, xb, rot, h):
    n_local, gap = sphere_box_local(xa, r, xb, rot, h)[6:]
    n = vn.matvec(rot, n_local)
    rb = vn.sub(vn.sub(xa, vn.scale(n, r + gap)), xb)
    return gap, n, vn.scale(n, -r), rb


@leaf
def segment_normal(ca, ua, hla, cb, ub, hlb, s, t, near_a, near_b):
    """(n, distance, crossing) of two segments' closest points
    (`shapes.segment_normal`)."""
    if segments_cross(vn.dot(ua, ub), s, t, hla, hlb):
        c = vn.normalize(vn.cross(ua, ub))[0]
        along = vn.dot(vn.sub(ca, cb), c)
        side = 1.0 if along >= 0.0 else -1.0
        return vn.scale(c, side), side * along, True
    unit, dist = vn.normalize(vn.sub(near_a, near_b))
    return (UP if dist <= vn.EPS else unit), dist, False


@leaf
def segments(ca, ua, hla, cb, ub, hlb, r_a, r_b):
    """Two rounded segments (centres c, unit axes u, half lengths hl, radii
    r): (gap, n, surface point of a, surface point of b, s, t)."""
    s, t, _ = segment_pair(ca, ua, hla, cb, ub, hlb)
    near_a = vn.add(ca, vn.scale(ua, s - hla))
    near_b = vn.add(cb, vn.scale(ub, t - hlb))
    n, dist, _ = segment_normal(ca, ua, hla, cb, ub, hlb, s, t, near_a, near_b)
    return (dist - r_a - r_b, n, vn.sub(near_a, vn.scale(n, r_a)),
            vn.add(near_b, vn.scale(n, r_b)), s, t)


@leaf
def _capsule_box(point, xa, ua, hla, r, xb, rot, h):
    if point < 2:
        centre = vn.add(xa, vn.scale(ua, (-1.0 if point == 0 else 1.0) * hla))
        gap, n, ra, rb = _sphere_box(centre, r, xb, rot, h)
        return gap, n, vn.add(vn.sub(centre, xa), ra), rb
    axis, signs = box_edge(point - 2)
    gap, n, pa, pb, s, t = segments(xa, ua, hla, box_point(xb, rot, h, signs),
                                    vn.column(rot, axis), h[axis], r, 0.0)
    if not capsule_edge_exists(point - 2, s, t, hla, h[axis]):
        return FAR, n, ZERO, ZERO
    return gap, n, vn.sub(pa, xa), vn.sub(pb, xb)


@leaf
def geometry(kind, point, a, b, s, body, height):
    """(gap, normal, ra, rb) of one contact point; rb is zero for the
    ground."""
    xa = position(s, a)
    pa = body[a]
    if kind == SPHERE_GROUND:
        r = pa[RADIUS]
        return xa[2] - r - height, UP, (0.0 * r, 0.0 * r, -r), ZERO
    if kind == BOX_GROUND:
        rot = rotation(s, a)
        sx, sy, sz = box_corner(point)
        ra = vn.matvec(rot, (sx * pa[HALF_SIZE], sy * pa[HALF_SIZE + 1], sz * pa[HALF_SIZE + 2]))
        return xa[2] + ra[2] - height, UP, ra, ZERO
    if kind == CAPSULE_GROUND:
        rot = rotation(s, a)
        sign = -1.0 if point == 0 else 1.0
        r, hl = pa[RADIUS], pa[HALF_LENGTH]
        end = vn.scale((rot[2], rot[5], rot[8]), sign * hl)
        ra = (end[0], end[1], end[2] - r)
        return xa[2] + ra[2] - height, UP, ra, ZERO
    xb = position(s, b)
    pb = body[b]
    if kind == SPHERE_SPHERE:
        return _round_pair(xa, xa, xb, pa[RADIUS], pb[RADIUS])
    if kind == CAPSULE_SPHERE:
        hl = pa[HALF_LENGTH]
        rot = rotation(s, a)
        axis = (rot[2], rot[5], rot[8])
        start = vn.sub(xa, vn.scale(axis, hl))
        t = vn.clip(vn.dot(vn.sub(xb, start), axis), 0.0, 2.0 * hl)
        return _round_pair(vn.add(start, vn.scale(axis, t)), xa, xb, pa[RADIUS], pb[RADIUS])
    if kind == CAPSULE_CAPSULE:
        rot_a, rot_b = rotation(s, a), rotation(s, b)
        gap, n, near_a, near_b = segments(xa, (rot_a[2], rot_a[5], rot_a[8]), pa[HALF_LENGTH],
                                          xb, (rot_b[2], rot_b[5], rot_b[8]), pb[HALF_LENGTH],
                                          pa[RADIUS], pb[RADIUS])[:4]
        return gap, n, vn.sub(near_a, xa), vn.sub(near_b, xb)
    h = (pb[HALF_SIZE], pb[HALF_SIZE + 1], pb[HALF_SIZE + 2])
    if kind == CAPSULE_BOX:
        rot_a = rotation(s, a)
        return _capsule_box(point, xa, (rot_a[2], rot_a[5], rot_a[8]), pa[HALF_LENGTH],
                            pa[RADIUS], xb, rotation(s, b), h)
    if kind == BOX_BOX:
        return box_box(point, xa, rotation(s, a),
                        (pa[HALF_SIZE], pa[HALF_SIZE + 1], pa[HALF_SIZE + 2]),
                        xb, rotation(s, b), h)
    # SPHERE_BOX: a the sphere, b the box.
    return _sphere_box(xa, pa[RADIUS], xb, rotation(s, b), h)


@leaf
def tangent_basis(n):
    """Two unit tangents orthogonal to the unit normal n (`algebra.tangent_basis`)."""
    helper = (1.0, 0.0, 0.0) if abs(n[0]) < 0.57 else (0.0, 1.0, 0.0)
    t1, _ = vn.normalize(vn.cross(vn.cross(n, helper), n))
    return t1, vn.cross(n, t1)


@leaf
def impact_fraction(gap, vn0, dt):
    """(reaches, tau) of `solver.impact_fraction`."""
    approach = -vn0 * dt
    reaches = gap > 0 and approach > gap
    if reaches:
        return True, gap / approach
    return False, 1.0 if gap > 0 else 0.0


