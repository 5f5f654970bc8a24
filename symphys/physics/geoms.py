"""Geoms (`symphys.scene.elements.Geom`) as batch-first tensors: their sizes,
materials and fixed place in their body's frame, and each side of a contact
block as the shapes it collides (`Side`).

A body's own shape sits at its centre along its axes; a geom sits at p, turned
by R_l, in its body's frame, so at body pose (x, R) its centre is x + R p and
its rotation R R_l. p and R_l come from the geom's and the body's initial world
poses (parameters `<geom>.position`, `<geom>.quaternion`, `<body>.position`,
`<body>.quaternion`): p = R0^T (x_g - x0), R_l = R0^T R_g. A world geom's p and
R_l are its world pose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from symphys.physics.algebra import Mat3, Vec3, matmul, matTvec, matvec, quat_to_mat, transpose
from symphys.physics.model import BodyArrays, _column, _stack_bodies
from symphys.scene.elements import WORLD, Shape
from symphys.scene.scene import Scene
from symphys.tree import static

# A side's geom index for a body's own shape (and the ground's).
OWN = -1


@dataclass(frozen=True)
class GeomArrays:
    """Per-geom quantities, each (Bp, G); unused sizes hold 0. `body`
    (static, G ints) is each geom's body index, -1 for the world."""

    position: Vec3            # p: centre in the body frame (world frame for the world's)
    rotation: Mat3            # R_l: body frame <- geom frame
    radius: object
    half_size: Vec3
    half_length: object
    friction: object
    restitution: object
    rolling_friction: object | None
    body: tuple[int, ...] = static(())


def build_geoms(scene: Scene, p: dict, batched: set[str]) -> GeomArrays | None:
    """`GeomArrays` of the scene's geoms from parameter tensors `p` (names
    in `batched` carry a leading batch axis); None without geoms."""
    if not scene.geoms:
        return None
    index = {b.name: k for k, b in enumerate(scene.bodies)}
    cols: dict[str, list] = {}

    def put(key, value, is_batched):
        cols.setdefault(key, []).append(_column(value, is_batched))

    zero = pt.constant(np.zeros(1))
    for g in scene.geoms:
        def get(field, owner=g.name):
            name = f"{owner}.{field}"
            return p[name], name in batched

        pos, pb = get("position")
        quat, qb = get("quaternion")
        place, turn = Vec3(*(pos[..., i] for i in range(3))), quat_to_mat(
            *(quat[..., i] for i in range(4)))
        moved = pb or qb
        if g.body != WORLD:
            x0, xb = get("position", g.body)
            q0, rb = get("quaternion", g.body)
            r0 = quat_to_mat(*(q0[..., i] for i in range(4)))
            place = matTvec(r0, place - Vec3(*(x0[..., i] for i in range(3))))
            turn = matmul(transpose(r0), turn)
            moved = moved or xb or rb
        for key, comp in zip(("px", "py", "pz"), place):
            put(key, comp, moved)
        for k, comp in enumerate(turn):
            put(f"r{k}", comp, moved)
        round_ = g.shape in (Shape.SPHERE, Shape.CAPSULE)
        radius, b_r = get("radius") if round_ else (zero, False)
        put("radius", radius, b_r)
        size, b_s = get("size") if g.shape is Shape.BOX else (None, False)
        for k, key in enumerate(("hx", "hy", "hz")):
            put(key, 0.5 * size[..., k] if size is not None else zero, b_s)
        length, b_l = get("length") if g.shape is Shape.CAPSULE else (None, False)
        put("half_length", 0.5 * length if length is not None else zero, b_l)
        for field in ("friction", "restitution") + (
                ("rolling_friction",) if scene.has_rolling_friction else ()):
            put(field, *get(field))
    arr = {k: _stack_bodies(v) for k, v in cols.items()}
    return GeomArrays(
        position=Vec3(arr["px"], arr["py"], arr["pz"]),
        rotation=Mat3(*(arr[f"r{k}"] for k in range(9))),
        radius=arr["radius"], half_size=Vec3(arr["hx"], arr["hy"], arr["hz"]),
        half_length=arr["half_length"], friction=arr["friction"],
        restitution=arr["restitution"], rolling_friction=arr.get("rolling_friction"),
        body=tuple(-1 if g.body == WORLD else index[g.body] for g in scene.geoms))


@dataclass(frozen=True)
class Side:
    """One side of a contact block at the current pose, each field (B, K):
    the shapes' centres and rotations, sizes, materials, and `offset` =
    centre minus its body's centre (None: the bodies' own shapes, or a
    static side)."""

    x: Vec3
    rotation: Mat3
    radius: object
    half_size: Vec3
    half_length: object
    friction: object
    restitution: object
    rolling_friction: object | None
    offset: Vec3 | None


def own_side(take, bodies: BodyArrays, position: Vec3, rotation: Mat3) -> Side:
    """The bodies' own shapes, picked by `take` ((Bp, N) -> (Bp, K))."""
    return Side(position.map(take), rotation.map(take), take(bodies.radius),
                bodies.half_size.map(take), take(bodies.half_length), take(bodies.friction),
                take(bodies.restitution),
                None if bodies.rolling_friction is None else take(bodies.rolling_friction),
                None)


def geom_side(take_geom, take_body, geoms: GeomArrays, position: Vec3,
              rotation: Mat3) -> Side:
    """Geoms picked by `take_geom` ((Bp, G) -> (Bp, K)) on the bodies picked
    by `take_body` (None: geoms of the world)."""
    place, turn = geoms.position.map(take_geom), geoms.rotation.map(take_geom)
    offset = None
    if take_body is not None:
        body_rotation = rotation.map(take_body)
        offset = matvec(body_rotation, place)
        place, turn = position.map(take_body) + offset, matmul(body_rotation, turn)
    return Side(place, turn, take_geom(geoms.radius), geoms.half_size.map(take_geom),
                take_geom(geoms.half_length), take_geom(geoms.friction),
                take_geom(geoms.restitution),
                None if geoms.rolling_friction is None else take_geom(geoms.rolling_friction),
                offset)
