"""Contact detection: which points can touch (fixed at graph-build time) and
their geometry each step (gap, normal, lever arms), activated by masks.

Pairs are grouped into `ContactBlock`s: one contact kind, one point of it
(e.g. box corner 3), and no dynamic body twice. Rows of one block are then
independent, so solving a block at once is exactly Gauss-Seidel
(`symphys.solver`). Normals point from body b to body a; a positive normal
impulse pushes a along n and b against it. Static b (the ground) has index -1.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, replace

import numpy as np
import pytensor.tensor as pt

from symphys.algebra import Mat3, Vec3, cross, dot, matvec, normalize
from symphys.model import BodyArrays, WorldArrays
from symphys.scene import Scene, Shape
from symphys.scene_io import GROUND

STATIC = -1


class ContactKind(enum.Enum):
    SPHERE_GROUND = "sphere-ground"
    BOX_GROUND = "box-ground"
    CAPSULE_GROUND = "capsule-ground"
    SPHERE_SPHERE = "sphere-sphere"
    SPHERE_BOX = "sphere-box"
    CAPSULE_SPHERE = "capsule-sphere"


# Number of contact points each kind generates per pair.
POINTS = {ContactKind.SPHERE_GROUND: 1, ContactKind.BOX_GROUND: 8,
          ContactKind.CAPSULE_GROUND: 2, ContactKind.SPHERE_SPHERE: 1,
          ContactKind.SPHERE_BOX: 1, ContactKind.CAPSULE_SPHERE: 1}

_KIND_OF = {(Shape.SPHERE, GROUND): ContactKind.SPHERE_GROUND,
            (Shape.BOX, GROUND): ContactKind.BOX_GROUND,
            (Shape.CAPSULE, GROUND): ContactKind.CAPSULE_GROUND,
            (Shape.SPHERE, Shape.SPHERE): ContactKind.SPHERE_SPHERE,
            (Shape.SPHERE, Shape.BOX): ContactKind.SPHERE_BOX,
            (Shape.CAPSULE, Shape.SPHERE): ContactKind.CAPSULE_SPHERE}


@dataclass(frozen=True)
class ContactBlock:
    """Contacts solved together: a kind, one of its points, body indices."""

    kind: ContactKind
    point: int
    a: tuple[int, ...]
    b: tuple[int, ...]   # STATIC for the ground


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


def contact_blocks(scene: Scene) -> list[ContactBlock]:
    """Group the scene's contact pairs into independent blocks, in a fixed order."""
    index = {b.name: i for i, b in enumerate(scene.bodies)}
    shape = {b.name: b.shape for b in scene.bodies}
    by_kind: dict[ContactKind, list[tuple[int, int]]] = {k: [] for k in ContactKind}
    for pair in scene.contacts:
        kb = GROUND if pair.b == GROUND else shape[pair.b]
        kind = _KIND_OF[(shape[pair.a], kb)]
        by_kind[kind].append((index[pair.a], STATIC if pair.b == GROUND else index[pair.b]))
    blocks = []
    for kind, pairs in by_kind.items():
        for point in range(POINTS[kind]):
            remaining = list(pairs)
            while remaining:
                used, block, rest = set(), [], []
                for a, b in remaining:
                    if a in used or (b != STATIC and b in used):
                        rest.append((a, b))
                        continue
                    used.update({a, b} - {STATIC})
                    block.append((a, b))
                blocks.append(ContactBlock(kind, point, tuple(a for a, _ in block),
                                           tuple(b for _, b in block)))
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


def _combine(block: ContactBlock, bodies: BodyArrays, world: WorldArrays, ga, gb):
    """Combined friction sqrt(mu_a mu_b) and restitution max(e_a, e_b)."""
    mu_a, e_a = ga.take(bodies.friction), ga.take(bodies.restitution)
    if gb is None:
        mu_b, e_b = world.ground_friction, world.ground_restitution
    else:
        mu_b, e_b = gb.take(bodies.friction), gb.take(bodies.restitution)
    prod = mu_a * mu_b
    safe = pt.switch(prod > 0, prod, 1.0)
    return pt.switch(prod > 0, pt.sqrt(safe), 0.0), pt.maximum(e_a, e_b)


def _z_axis(rot: Mat3) -> Vec3:
    return Vec3(rot.xz, rot.yz, rot.zz)


def contact_geometry(block: ContactBlock, bodies: BodyArrays, world: WorldArrays,
                     position: Vec3, rotation: Mat3, n_bodies: int) -> ContactGeometry:
    """Gap, normal, lever arms and materials of one block's contacts at the
    current pose (with the combined rolling friction when the scene has it)."""
    geom = _shape_geometry(block, bodies, world, position, rotation, n_bodies)
    if bodies.rolling_friction is None:
        return geom
    roll_a = Gather(block.a, n_bodies).take(bodies.rolling_friction)
    roll_b = (world.ground_rolling_friction if block.b[0] == STATIC
              else Gather(block.b, n_bodies).take(bodies.rolling_friction))
    return replace(geom, rolling_friction=pt.maximum(roll_a, roll_b))


def _shape_geometry(block: ContactBlock, bodies: BodyArrays, world: WorldArrays,
                    position: Vec3, rotation: Mat3, n_bodies: int) -> ContactGeometry:
    ga = Gather(block.a, n_bodies)
    gb = None if block.b[0] == STATIC else Gather(block.b, n_bodies)
    xa = position.map(ga.take)
    mu, e = _combine(block, bodies, world, ga, gb)
    kind = block.kind
    up = Vec3(pt.constant(0.0), pt.constant(0.0), pt.constant(1.0))

    if kind is ContactKind.SPHERE_GROUND:
        r = ga.take(bodies.radius)
        ra = Vec3(0.0 * r, 0.0 * r, -r)
        gap = xa.z - r - world.ground_height
        return ContactGeometry(gap, up, ra, None, mu, e)

    if kind is ContactKind.BOX_GROUND:
        signs = list(itertools.product((-1.0, 1.0), repeat=3))[block.point]
        rot = rotation.map(ga.take)
        h = bodies.half_size.map(ga.take)
        local = Vec3(signs[0] * h.x, signs[1] * h.y, signs[2] * h.z)
        ra = matvec(rot, local)
        gap = xa.z + ra.z - world.ground_height
        return ContactGeometry(gap, up, ra, None, mu, e)

    if kind is ContactKind.CAPSULE_GROUND:
        sign = -1.0 if block.point == 0 else 1.0
        rot = rotation.map(ga.take)
        r, hl = ga.take(bodies.radius), ga.take(bodies.half_length)
        end = _z_axis(rot).scale(sign * hl)
        ra = Vec3(end.x, end.y, end.z - r)
        gap = xa.z + ra.z - world.ground_height
        return ContactGeometry(gap, up, ra, None, mu, e)

    xb = position.map(gb.take)

    def round_pair(nearest_a: Vec3, r_a, r_b) -> ContactGeometry:
        """Two rounded shapes: a's closest core point to b's centre, radii."""
        n, dist = normalize(nearest_a - xb, fallback=up)
        gap = dist - r_a - r_b
        # Each body's lever arm reaches its own surface point: the two meet
        # when the gap closes, so the friction torque does not jump when a
        # speculative contact (gap > 0) switches on.
        return ContactGeometry(gap, n, nearest_a - n.scale(r_a) - xa, n.scale(r_b), mu, e)

    if kind is ContactKind.SPHERE_SPHERE:
        return round_pair(xa, ga.take(bodies.radius), gb.take(bodies.radius))

    if kind is ContactKind.CAPSULE_SPHERE:
        hl = ga.take(bodies.half_length)
        axis = _z_axis(rotation.map(ga.take))
        start = xa - axis.scale(hl)
        t = pt.clip(dot(xb - start, axis), 0.0, 2.0 * hl)
        return round_pair(start + axis.scale(t), ga.take(bodies.radius),
                          gb.take(bodies.radius))

    if kind is ContactKind.SPHERE_BOX:
        # a = sphere, b = box. Work in the box frame.
        rot = rotation.map(gb.take)
        r = ga.take(bodies.radius)
        h = bodies.half_size.map(gb.take)
        d = xa - xb
        local = Vec3(rot.xx * d.x + rot.yx * d.y + rot.zx * d.z,
                     rot.xy * d.x + rot.yy * d.y + rot.zy * d.z,
                     rot.xz * d.x + rot.yz * d.y + rot.zz * d.z)
        clamped = Vec3(pt.clip(local.x, -h.x, h.x), pt.clip(local.y, -h.y, h.y),
                       pt.clip(local.z, -h.z, h.z))
        n_out, dist = normalize(local - clamped)
        outside = dist > 1e-9
        # Centre inside the box: push out through the face of least penetration.
        pen = Vec3(h.x - pt.abs(local.x), h.y - pt.abs(local.y), h.z - pt.abs(local.z))
        on_x = (pen.x <= pen.y) & (pen.x <= pen.z)
        on_y = ~on_x & (pen.y <= pen.z)
        on_z = ~on_x & ~on_y
        sgn = local.map(lambda c: pt.switch(c >= 0, 1.0, -1.0))
        n_in = Vec3(pt.switch(on_x, sgn.x, 0.0), pt.switch(on_y, sgn.y, 0.0),
                    pt.switch(on_z, sgn.z, 0.0))
        depth_in = pt.switch(on_x, pen.x, pt.switch(on_y, pen.y, pen.z))
        n_local = Vec3(*(pt.switch(outside, o, i) for o, i in zip(n_out, n_in)))
        gap = pt.switch(outside, dist, -depth_in) - r
        n = matvec(rot, n_local)
        # Lever arms to the sphere's surface point and the box's (see round_pair).
        return ContactGeometry(gap, n, n.scale(-r), xa - n.scale(r + gap) - xb, mu, e)

    raise AssertionError(kind)


def lever(r: Vec3, n: Vec3) -> Vec3:
    """Angular Jacobian r x n."""
    return cross(r, n)
