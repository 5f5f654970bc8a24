"""Contact geometry for the Numba rows kernel, one function per shape
pair (`symphys.physics.contacts._shape_geometry` is the reference): gap, normal
(from b to a) and lever arms of one contact point at the current pose.

Bodies are read from one world's packed state (N, 18) and body parameters
(N, BODY.width); b = -1 is the ground plane z = height.
"""

from __future__ import annotations

from symphys.physics.contacts import PARALLEL, ContactKind
from symphys.physics.kernels import vec_numba as vn
from symphys.physics.kernels.layout import BODY, CONTACT_CODES, STATE

jit, leaf = vn.jit, vn.leaf
SPHERE_GROUND = CONTACT_CODES[ContactKind.SPHERE_GROUND]
BOX_GROUND = CONTACT_CODES[ContactKind.BOX_GROUND]
CAPSULE_GROUND = CONTACT_CODES[ContactKind.CAPSULE_GROUND]
SPHERE_SPHERE = CONTACT_CODES[ContactKind.SPHERE_SPHERE]
SPHERE_BOX = CONTACT_CODES[ContactKind.SPHERE_BOX]
CAPSULE_SPHERE = CONTACT_CODES[ContactKind.CAPSULE_SPHERE]
CAPSULE_CAPSULE = CONTACT_CODES[ContactKind.CAPSULE_CAPSULE]
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
def _sphere_box(xa, r, xb, rot, h):
    n_local, gap = sphere_box_local(xa, r, xb, rot, h)[6:]
    n = vn.matvec(rot, n_local)
    rb = vn.sub(vn.sub(xa, vn.scale(n, r + gap)), xb)
    return gap, n, vn.scale(n, -r), rb


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
        sx = -1.0 if point // 4 == 0 else 1.0
        sy = -1.0 if (point // 2) % 2 == 0 else 1.0
        sz = -1.0 if point % 2 == 0 else 1.0
        local = (sx * pa[HALF_SIZE], sy * pa[HALF_SIZE + 1], sz * pa[HALF_SIZE + 2])
        ra = vn.matvec(rot, local)
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
        ua, ub = (rot_a[2], rot_a[5], rot_a[8]), (rot_b[2], rot_b[5], rot_b[8])
        hla, hlb = pa[HALF_LENGTH], pb[HALF_LENGTH]
        sa, tb, _ = segment_pair(xa, ua, hla, xb, ub, hlb)
        near_b = vn.add(xb, vn.scale(ub, tb - hlb))
        gap, n, ra, rb = _round_pair(vn.add(xa, vn.scale(ua, sa - hla)), xa, near_b,
                                     pa[RADIUS], pb[RADIUS])
        return gap, n, ra, vn.add(rb, vn.sub(near_b, xb))
    # SPHERE_BOX: a the sphere, b the box.
    h = (pb[HALF_SIZE], pb[HALF_SIZE + 1], pb[HALF_SIZE + 2])
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


