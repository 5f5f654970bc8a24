"""Contact detection: which points can touch (fixed at graph-build time) and
their geometry each step (gap, normal, lever arms), activated by masks.

Pairs are grouped into `ContactBlock`s: one contact kind, one point of it
(e.g. box corner 3), and no dynamic body twice. Rows of one block are then
independent, so solving a block at once is exactly Gauss-Seidel
(`symphys.physics.solver`). Normals point from body b to body a; a positive normal
impulse pushes a along n and b against it. Static b (the ground) has index -1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytensor.tensor as pt

from symphys.physics.algebra import Mat3, Vec3, columns, cross, dot, matvec, normalize
from symphys.physics.geoms import OWN, GeomArrays, Side, geom_side, own_side
from symphys.physics.model import BodyArrays, WorldArrays
from symphys.physics.shapes import (BOX_BOX_POINTS, FAR, ball_box, box_axes, box_box, box_corner,
                                    box_edge, box_point, capsule_edge_exists, edge_owns_corner,
                                    segment_normal, segment_params, segments_cross)
from symphys.scene.elements import GROUND, WORLD, ContactKind, contact_kind
from symphys.scene.scene import Scene

STATIC = -1


@dataclass(frozen=True)
class ContactBlock:
    """Contacts solved together: a kind, one of its points, the bodies of
    each side (b: STATIC for the ground and the world's geoms) and the
    geom each pair collides on that side (`geoms.OWN`: the body's own
    shape, or the ground). A block's sides are each all own shapes or all
    geoms. flip: the kind's routine takes b's side first (a moving box
    against a fixed capsule: `contact_kind`)."""

    kind: ContactKind
    point: int
    a: tuple[int, ...]
    b: tuple[int, ...]
    ga: tuple[int, ...]
    gb: tuple[int, ...]
    flip: bool = False


@dataclass(frozen=True)
class Gather:
    """How to pick a block's bodies out of (B, N) arrays: all of them in
    order, a contiguous slice, or an index list."""

    index: tuple[int, ...]
    n_bodies: int

    @property
    def is_all(self) -> bool:
        return self.index == tuple(range(self.n_bodies))

    @property
    def as_slice(self) -> slice | None:
        i = self.index
        if i and i == tuple(range(i[0], i[0] + len(i))):
            return slice(i[0], i[0] + len(i))
        return None

    def all_of(self, flags: tuple[bool, ...]) -> bool:
        """Whether a per-body static flag holds for every body picked."""
        return bool(flags) and all(flags[i] for i in self.index)

    def take(self, x):
        """x: (Bp, N) -> (Bp, K); scalars pass through."""
        if getattr(x, "ndim", 0) < 2:
            return x
        if self.is_all:
            return x
        s = self.as_slice
        if s is not None:
            return x[:, s]
        return x[:, np.asarray(self.index)]

    def add(self, x, delta):
        """x + scatter(delta): (B, N) += (B, K) at the block's bodies."""
        if self.is_all:
            return x + delta
        s = self.as_slice
        if s is not None:
            return pt.inc_subtensor(x[:, s], delta)
        return pt.inc_subtensor(x[:, np.asarray(self.index)], delta)


def _collider(scene: Scene, name: str) -> tuple[int, int, object]:
    """(body index or STATIC, geom index or OWN, shape or GROUND) of a
    contact pair's name."""
    if name == GROUND:
        return STATIC, OWN, GROUND
    bodies = scene.body_names
    if name in bodies:
        return bodies.index(name), OWN, scene.bodies[bodies.index(name)].shape
    g = scene.geom_names.index(name)
    geom = scene.geoms[g]
    return (STATIC if geom.body == WORLD else bodies.index(geom.body)), g, geom.shape


def contact_blocks(scene: Scene) -> list[ContactBlock]:
    """Group the scene's contact pairs into independent blocks, in a fixed
    order: by kind, then (without geoms, one group) whether each side is a
    geom."""
    groups: dict[tuple, list[tuple[int, int, int, int]]] = {}
    for pair in scene.contacts:
        a, ga, shape_a = _collider(scene, pair.a)
        b, gb, shape_b = _collider(scene, pair.b)
        key = (*contact_kind(shape_a, shape_b), ga != OWN, gb != OWN)
        groups.setdefault(key, []).append((a, b, ga, gb))
    order = {kind: i for i, kind in enumerate(ContactKind)}
    blocks = []
    for key in sorted(groups, key=lambda k: (order[k[0]], *k[1:])):
        kind, pairs = key[0], groups[key]
        for point in range(POINTS[kind]):
            remaining = list(pairs)
            while remaining:
                used, block, rest = set(), [], []
                for pair in remaining:
                    a, b = pair[:2]
                    if a in used or (b != STATIC and b in used):
                        rest.append(pair)
                        continue
                    used.update({a, b} - {STATIC})
                    block.append(pair)
                blocks.append(ContactBlock(kind, point, *(tuple(x) for x in zip(*block)),
                                           flip=key[1]))
                remaining = rest
    return blocks


@dataclass(frozen=True)
class ContactGeometry:
    """Geometry of a block's contacts, each field (B, K).

    gap < 0 means penetration; normal points from b to a; ra, rb are lever
    arms from each body's centre to the contact point (rb None when static).
    """

    gap: object
    normal: Vec3
    ra: Vec3
    rb: Vec3 | None
    friction: object
    restitution: object
    rolling_friction: object = None   # mu_roll (m), None: no rolling rows


def _combine(a: Side, b: Side | None, world: WorldArrays):
    """Combined friction sqrt(mu_a mu_b) and restitution max(e_a, e_b)."""
    if b is None:
        mu_b, e_b = world.ground_friction, world.ground_restitution
    else:
        mu_b, e_b = b.friction, b.restitution
    prod = a.friction * mu_b
    safe = pt.switch(prod > 0, prod, 1.0)
    return pt.switch(prod > 0, pt.sqrt(safe), 0.0), pt.maximum(a.restitution, e_b)


def _z_axis(rot: Mat3) -> Vec3:
    return Vec3(rot.xz, rot.yz, rot.zz)


def contact_geometry(block: ContactBlock, bodies: BodyArrays, world: WorldArrays,
                     position: Vec3, rotation: Mat3, n_bodies: int,
                     shared: dict | None = None, geoms: GeomArrays | None = None
                     ) -> ContactGeometry:
    """Gap, normal, lever arms and materials of one block's contacts at the
    current pose (with the combined rolling friction when the scene has it).
    shared: one dict for all blocks of a step, where the blocks of one set
    of pairs keep what their points share (a box pair's separating axes);
    geoms: the scene's geoms (None: it has none)."""
    a = _side(block.a, block.ga, bodies, geoms, position, rotation, n_bodies)
    b = (None if block.gb[0] == OWN and block.b[0] == STATIC
         else _side(block.b, block.gb, bodies, geoms, position, rotation, n_bodies))
    mu, e = _combine(a, b, world)
    first, second = (b, a) if block.flip else (a, b)
    pair = _Pair(block, world, first, second, mu, e, {} if shared is None else shared)
    geom = COLLIDERS[block.kind][0](pair)
    if block.flip:
        geom = replace(geom, normal=geom.normal.scale(-1.0), ra=geom.rb, rb=geom.ra)
    # Lever arms from the bodies' centres; none on a static side.
    if a.offset is not None:
        geom = replace(geom, ra=geom.ra + a.offset)
    if b is not None and block.b[0] == STATIC:
        geom = replace(geom, rb=None)
    elif b is not None and b.offset is not None:
        geom = replace(geom, rb=geom.rb + b.offset)
    if bodies.rolling_friction is None:
        return geom
    roll_b = world.ground_rolling_friction if b is None else b.rolling_friction
    return replace(geom, rolling_friction=pt.maximum(a.rolling_friction, roll_b))


def _side(body: tuple[int, ...], geom: tuple[int, ...], bodies: BodyArrays,
          geoms: GeomArrays | None, position: Vec3, rotation: Mat3, n_bodies: int) -> Side:
    if geom[0] == OWN:
        return own_side(Gather(body, n_bodies).take, bodies, position, rotation)
    take_body = None if body[0] == STATIC else Gather(body, n_bodies).take
    return geom_side(Gather(geom, len(geoms.body)).take, take_body, geoms, position, rotation)


@dataclass(frozen=True)
class _Pair:
    """One block's two sides at the current pose, for a collision function
    (b None against the ground), materials, and what the step's blocks
    share (`contact_geometry`). Lever arms it returns run from each side's
    shape centre."""

    block: ContactBlock
    world: WorldArrays
    a: Side
    b: Side | None
    mu: object
    e: object
    shared: dict

    @property
    def xa(self) -> Vec3:
        return self.a.x

    @property
    def xb(self) -> Vec3 | None:
        return None if self.b is None else self.b.x

    @property
    def up(self) -> Vec3:
        return Vec3(pt.constant(0.0), pt.constant(0.0), pt.constant(1.0))

    def ground_contact(self, ra: Vec3) -> ContactGeometry:
        """A point of a at lever arm ra against the ground plane."""
        gap = self.xa.z + ra.z - self.world.ground_height
        return ContactGeometry(gap, self.up, ra, None, self.mu, self.e)

    def round_contact(self, nearest_a: Vec3, r_a, r_b, nearest_b: Vec3 | None = None,
                      normal: tuple | None = None) -> ContactGeometry:
        """Two rounded shapes: their closest core points (b's: its centre
        unless given), radii; (normal, distance) of the core points when
        known better than from their difference."""
        nearest_b = self.xb if nearest_b is None else nearest_b
        n, dist = normalize(nearest_a - nearest_b, fallback=self.up) if normal is None else normal
        gap = dist - r_a - r_b
        # Each body's lever arm reaches its own surface point: the two meet
        # when the gap closes, so the friction torque does not jump when a
        # speculative contact (gap > 0) switches on.
        return ContactGeometry(gap, n, nearest_a - n.scale(r_a) - self.xa,
                               nearest_b - self.xb + n.scale(r_b), self.mu, self.e)

    def segment_contact(self, ca: Vec3, ua: Vec3, hla, cb: Vec3, ub: Vec3, hlb, r_a, r_b):
        """Two rounded segments (centres c, unit axes u, half lengths hl,
        radii r): (contact, s, t) at their closest points (`segment_params`)."""
        s, t, b = segment_params(ca, ua, hla, cb, ub, hlb)
        near_a, near_b = ca + ua.scale(s - hla), cb + ub.scale(t - hlb)
        normal = segment_normal(ca, ua, cb, ub, near_a, near_b,
                                segments_cross(b, s, t, hla, hlb), self.up)
        return self.round_contact(near_a, r_a, r_b, nearest_b=near_b, normal=normal), s, t


def _sphere_ground(p: _Pair) -> ContactGeometry:
    r = p.a.radius
    return p.ground_contact(Vec3(0.0 * r, 0.0 * r, -r))


def _box_ground(p: _Pair) -> ContactGeometry:
    signs = box_corner(p.block.point)
    h = p.a.half_size
    local = Vec3(signs[0] * h.x, signs[1] * h.y, signs[2] * h.z)
    return p.ground_contact(matvec(p.a.rotation, local))


def _capsule_ground(p: _Pair) -> ContactGeometry:
    sign = -1.0 if p.block.point == 0 else 1.0
    r, hl = p.a.radius, p.a.half_length
    end = _z_axis(p.a.rotation).scale(sign * hl)
    return p.ground_contact(Vec3(end.x, end.y, end.z - r))


def _sphere_sphere(p: _Pair) -> ContactGeometry:
    return p.round_contact(p.xa, p.a.radius, p.b.radius)


def _capsule_sphere(p: _Pair) -> ContactGeometry:
    hl = p.a.half_length
    axis = _z_axis(p.a.rotation)
    start = p.xa - axis.scale(hl)
    t = pt.clip(dot(p.xb - start, axis), 0.0, 2.0 * hl)
    return p.round_contact(start + axis.scale(t), p.a.radius,
                           p.b.radius)


def _capsule_capsule(p: _Pair) -> ContactGeometry:
    """The closest points of the two axis segments."""
    return p.segment_contact(p.xa, _z_axis(p.a.rotation), p.a.half_length, p.xb,
                             _z_axis(p.b.rotation), p.b.half_length, p.a.radius, p.b.radius)[0]


def _sphere_box(p: _Pair) -> ContactGeometry:
    """a = sphere, b = box."""
    r = p.a.radius
    gap, n = ball_box(p.xa, r, p.xb, p.b.rotation,
                      p.b.half_size)
    # Lever arms to the sphere's surface point and the box's (see round_contact).
    return ContactGeometry(gap, n, n.scale(-r), p.xa - n.scale(r + gap) - p.xb, p.mu, p.e)


def _capsule_box(p: _Pair) -> ContactGeometry:
    """a = capsule, b = box. Points 0 and 1: the capsule's end balls against
    the box; points 2-13: the box's 12 edges against the capsule's axis
    (closest points of the two segments), which catch a capsule lying
    across an edge or a face with both ends beyond it, and a box's corner
    against the capsule's side; an edge point that an end ball or another
    edge already gives is held at `FAR` (`shapes.capsule_edge_exists`)."""
    r, hla = p.a.radius, p.a.half_length
    ua = _z_axis(p.a.rotation)
    rot_b, h = p.b.rotation, p.b.half_size
    if p.block.point < 2:
        centre = p.xa + ua.scale((-1.0 if p.block.point == 0 else 1.0) * hla)
        gap, n = ball_box(centre, r, p.xb, rot_b, h)
        return ContactGeometry(gap, n, centre - n.scale(r) - p.xa,
                               centre - n.scale(r + gap) - p.xb, p.mu, p.e)
    edge = p.block.point - 2
    axis, signs = box_edge(edge)
    centre_b, ub = box_point(p.xb, rot_b, h, signs), columns(rot_b)[axis]
    contact, s, t = p.segment_contact(p.xa, ua, hla, centre_b, ub, h[axis], r, 0.0 * r)
    exists = capsule_edge_exists(s, t, hla, h[axis], np.array(edge_owns_corner(edge, 0)),
                                 np.array(edge_owns_corner(edge, 1)))
    held = lambda v: Vec3(*(pt.switch(exists, c, 0.0) for c in v))
    return ContactGeometry(pt.switch(exists, contact.gap, FAR), contact.normal, held(contact.ra),
                           held(contact.rb), p.mu, p.e)


def _box_box(p: _Pair) -> ContactGeometry:
    """Two boxes: candidate point `p.block.point` of `shapes.box_box`. The
    blocks of one set of pairs share their separating axes (`shared`)."""
    key = (p.block.kind, p.block.a, p.block.b, p.block.ga, p.block.gb)
    if key not in p.shared:
        p.shared[key] = box_axes(p.xa, p.a.rotation, p.a.half_size, p.xb, p.b.rotation,
                                 p.b.half_size)
    gap, n, ra, rb = box_box(p.block.point, p.xa, p.xb, p.shared[key])
    return ContactGeometry(gap, n, ra, rb, p.mu, p.e)


# Each contact kind's collision function and the points it generates per pair.
COLLIDERS = {
    ContactKind.SPHERE_GROUND: (_sphere_ground, 1),
    ContactKind.BOX_GROUND: (_box_ground, 8),
    ContactKind.CAPSULE_GROUND: (_capsule_ground, 2),
    ContactKind.SPHERE_SPHERE: (_sphere_sphere, 1),
    ContactKind.SPHERE_BOX: (_sphere_box, 1),
    ContactKind.CAPSULE_SPHERE: (_capsule_sphere, 1),
    ContactKind.CAPSULE_CAPSULE: (_capsule_capsule, 1),
    ContactKind.CAPSULE_BOX: (_capsule_box, 14),
    ContactKind.BOX_BOX: (_box_box, BOX_BOX_POINTS),
}
# Number of contact points each kind generates per pair.
POINTS = {kind: points for kind, (_, points) in COLLIDERS.items()}


def lever(r: Vec3, n: Vec3) -> Vec3:
    """Angular Jacobian r x n."""
    return cross(r, n)
