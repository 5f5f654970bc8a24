"""The differentiable camera: ray casting written as a PyTensor graph.

`render(scene, camera, positions, rotations)` turns body poses into an RGB
image (B, H, W, 3) in [0, 1]; `render_state` does the same from a model
`State` (inside a rollout or a controller's loop); `symphys.render` is the
numeric entry point (the image of a scene's initial state).

One ray per pixel (or an n x n sub-pixel grid, averaged) leaves the pinhole
through the pixel's centre on the sensor, at focal length along the optical
axis. Each ray is hit analytically against every surface, grouped by kind
so that each kind is one broadcast expression over (B, rays, shapes):
spheres (quadratic), boxes (slab method in the body frame), capsules
(cylinder side plus two end spheres, body frame), the ground plane and the
camera's static planes. Surfaces are shaded Lambertian under one
directional light plus ambient light, with per-body colours or textures
(bilinear sampling written with gathers, so gradients reach the texture
coordinates; textures repeat). No shadows, no reflections, no value-
dependent Python branching: misses are masks and `switch`es.

Two ways to resolve what a ray sees:

- hard (`camera.soft_edge == 0`): the nearest hit wins (argmin over the hit
  distances, +inf, here `FAR`, for a miss). Colours are smooth in the poses
  inside an outline, so gradients flow through hit points, normals and
  texture coordinates; but an outline moves no pixel continuously, so an
  image loss has no gradient term from a body's outline moving across the
  pixels (finite differences see that term; `pytensor.grad` does not).
- soft (`soft_edge > 0`, in pixels): each body covers each ray by
  alpha = sigmoid(-angle / w), where angle (rad) is how far the ray passes
  outside the body's outline as seen from the pinhole (negative inside)
  and w is `soft_edge` pixels as an angle (pixel pitch / focal length).
  Spheres and capsules: the ray's distance to the centre (segment) less
  the radius, over the depth of that closest approach (exact for a
  sphere's outline to first order). Boxes: the least such angle to an
  outline edge (an edge between a face turned to the camera and one
  turned away): where a missing ray passes the box, or how far inside the
  outline a hit lies. Surfaces are then
  composited front to back in order of depth (hit distance, or closest
  approach for a miss), over the background: the outline's ramp moves with
  the body, so the loss has a gradient across it. The depth order itself is
  a hard comparison: where two soft ramps overlap and swap order the image
  jumps. The ground and planes cover fully where hit (their only edge is
  the horizon).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytensor.tensor as pt

from symphys.camera.hits import (FAR, SHAPE_HITS, Appearance, Group, Rays, Surfaces, columns, pick,
                                 plane_hits, rays_of, static_planes)
from symphys.errors import SceneError
from symphys.physics.algebra import Mat3, Vec3, matmul, matTvec, matvec, quat_to_mat, transpose
from symphys.scene.elements import WORLD, Camera, Geom, Shape
from symphys.scene.scene import Scene

# Render-only functions compile without symphys' own rewrites: those split
# the physics' 3-vector and 3 x 3 algebra into components, and on the
# renderer's large broadcast graphs they only cost time. Measured on a
# 32 x 16 image of the A6 scene (numba): PyTensor's rewrites took 3.5 s for
# the image and 6.3 s for a loss and its gradient without them; with them
# the image alone had not finished after 150 s (a busy machine), and a
# 288 x 96 gradient was still being rewritten after 60 min.
RENDER_REWRITES = False

# Colours of bodies without one, by body index.
PALETTE = ((0.85, 0.33, 0.20), (0.20, 0.45, 0.80), (0.30, 0.70, 0.30),
           (0.90, 0.75, 0.20), (0.60, 0.35, 0.70), (0.20, 0.70, 0.70))


def _with_geoms(scene: Scene, pos: Vec3, rot: Mat3, params: dict) -> tuple[Vec3, Mat3]:
    """Centres and rotations (B, N + G) of the bodies, then the geoms: a
    geom keeps the place and turn in its body's frame that it has at the
    initial pose (read from `params` where given); world geoms stay put."""
    if not scene.geoms:
        return pos, rot

    def pose(name, position, quaternion):
        p = pt.as_tensor_variable(params.get(f"{name}.position", np.asarray(position, float)))
        q = pt.as_tensor_variable(params.get(f"{name}.quaternion", np.asarray(quaternion, float)))
        return Vec3(*(p[..., i] for i in range(3))), quat_to_mat(*(q[..., i] for i in range(4)))

    like = pt.zeros_like(pos.x[:, 0])                                   # (B,)
    centres, turns = [], []
    for g in scene.geoms:
        centre, turn = pose(g.name, g.position, g.quaternion)
        if g.body != WORLD:
            k = scene.body_index(g.body)
            b = scene.bodies[k]
            centre0, turn0 = pose(b.name, b.position, b.quaternion)
            offset, relative = matTvec(turn0, centre - centre0), matmul(transpose(turn0), turn)
            body_turn = rot.map(lambda c: c[:, k])
            centre = pos.map(lambda c: c[:, k]) + matvec(body_turn, offset)
            turn = matmul(body_turn, relative)
        centres.append(centre.map(lambda c: c + like))
        turns.append(turn.map(lambda c: c + like))

    def joined(comps, extra):
        return type(comps)(*(pt.concatenate([c, pt.stack([e[i] for e in extra], axis=1)], axis=1)
                             for i, c in enumerate(comps)))

    return joined(pos, centres), joined(rot, turns)


def _groups(scene: Scene, pos: Vec3, rot: Mat3, params: dict) -> list[tuple[Group, list[int]]]:
    """Bodies and geoms by shape; pos and rot hold bodies', then geoms' poses."""
    def value(body, key, default):
        name = f"{body.name}.{key}"
        return params[name] if name in params else default

    out = []
    items = scene.bodies + scene.geoms
    for shape in Shape:
        index = [i for i, b in enumerate(items) if b.shape is shape]
        if not index:
            continue
        bodies = [items[i] for i in index]
        centre = pos.map(lambda c: pick(c, index))
        rotation = rot.map(lambda c: pick(c, index))
        radius = half = half_length = None
        if shape in (Shape.SPHERE, Shape.CAPSULE):
            radius = columns([value(b, "radius", b.radius) for b in bodies])
        if shape is Shape.CAPSULE:
            half_length = 0.5 * columns([value(b, "length", b.length) for b in bodies])
        if shape is Shape.BOX:
            sizes = [pt.as_tensor_variable(value(b, "size", b.size)) for b in bodies]
            half = Vec3(*(0.5 * columns([s[..., i] for s in sizes]) for i in range(3)))
        out.append((Group(shape, centre, rotation, radius, half, half_length), index))
    return out


def body_colour(scene: Scene, index: int) -> tuple:
    """The colour of body `index`, or of geom `index - N` (N bodies): its
    own, else its body's, else the palette's."""
    items = scene.bodies + scene.geoms
    item = items[index]
    if item.color is not None:
        return item.color
    if isinstance(item, Geom) and item.body != WORLD:
        return body_colour(scene, scene.body_index(item.body))
    return PALETTE[index % len(PALETTE)]


def _texture(scene: Scene, index: int):
    return scene.bodies[index].texture if index < len(scene.bodies) else None


def _surfaces(scene: Scene, camera: Camera, pos: Vec3, rot: Mat3, params: dict, rays: Rays,
              soft: bool) -> list[Surfaces]:
    out = []
    for group, index in _groups(scene, pos, rot, params):
        app = Appearance([body_colour(scene, i) for i in index],
                         [_texture(scene, i) for i in index])
        found = SHAPE_HITS[group.shape](group, rays, app, camera, soft)
        out.append(replace(found, count=len(index)))
    points, normals, app = static_planes(scene, camera, params)
    if points:
        found = plane_hits(points, normals, rays, app, camera, soft)
        out.append(replace(found, count=len(points)))
    return out


def _split(surfaces: list[Surfaces], like) -> list[tuple]:
    """(depth, [r, g, b], log_clear or None), each (B, P), of every
    single surface (like: zeros (B, P)).

    The shape count is static and small: an unrolled loop of elementwise
    ops over (B, P) fuses into one kernel, where a concatenation and an
    arg-min over a short last axis cost more than all hit tests together
    (measured on JAX, 288 x 96: 3.3 ms per image of 3.7)."""
    out = []
    for s in surfaces:
        for i in range(s.count):
            def one(x, i=i):
                return None if x is None else (x[..., i] + like)
            out.append((one(s.depth), [one(c) for c in s.colour], one(s.log_clear)))
    return out


def _composite(surfaces: list[Surfaces], like, camera: Camera):
    """Pixel colours (B, P, 3): the nearest hit (hard), or front to back
    by depth with each surface's coverage (soft).

    How the channels travel is chosen by what JAX (XLA) runs fastest
    (288 x 96, B = 16, a box, a capsule, ground and a wall): the nearest
    hit as three (B, P) channels stacked at the end, 1.8 ms per image
    against 4.5 ms with a channel axis throughout; soft edges with the
    channel axis, 8.3 ms against 51 ms stacked at the end."""
    parts = _split(surfaces, like)
    background = np.asarray(camera.background, float)
    if surfaces[0].log_clear is None:
        nearest = FAR + like
        colour = [bg + like for bg in background]
        for depth, rgb, _ in parts:
            closer = depth < nearest
            nearest = pt.switch(closer, depth, nearest)
            colour = [pt.switch(closer, c, best) for c, best in zip(rgb, colour)]
        return pt.stack(colour, axis=-1)
    # Front to back in depth order: a surface shows by its coverage times
    # what the surfaces in front of it let through.
    clear = sum(log_clear for _, _, log_clear in parts)
    colour = background * pt.exp(clear)[..., None]
    for s, (depth, rgb, log_clear) in enumerate(parts):
        through = sum(pt.switch(other < depth, lc, 0.0)
                      for k, (other, _, lc) in enumerate(parts) if k != s)
        weight = -pt.expm1(log_clear) * pt.exp(through)
        colour = colour + weight[..., None] * pt.stack(rgb, axis=-1)
    return colour


def _render(scene: Scene, camera: Camera, pos: Vec3, rot: Mat3, params: dict | None):
    """Images (B, H, W, 3) of bodies at centres `pos` and rotations `rot`
    (components (B, N))."""
    rays = rays_of(camera)
    soft = camera.soft_edge > 0
    params = dict(params or {})
    pos, rot = _with_geoms(scene, pos, rot, params)
    surfaces = _surfaces(scene, camera, pos, rot, params, rays, soft)
    like = pt.zeros_like(pos.x[:, 0])[:, None] + np.zeros((1, rays.count))        # (B, P)
    rgb = _composite(surfaces, like, camera)                                          # (B, P, 3)
    cols, rows = camera.resolution
    n = camera.rays_per_pixel
    image = rgb.reshape((rgb.shape[0], rows, cols, n, 3))
    return image[:, :, :, 0] if n == 1 else image.mean(axis=3)


def as_camera(scene: Scene, camera: "Camera | str | None") -> Camera:
    """A `Camera`, or the scene's camera of that name (None: its first)."""
    if isinstance(camera, Camera):
        return camera
    if camera is None:
        if not scene.cameras:
            raise SceneError("the scene has no cameras; add a \"cameras\" list",
                             source=scene.source, field="cameras")
        return scene.cameras[0]
    return scene.camera(camera)


def render(scene: Scene, camera: "Camera | str | None", positions, rotations,
           params: dict | None = None):
    """Symbolic image (B, H, W, 3) in [0, 1] of bodies at `positions`
    (B, N, 3) and `rotations` (B, N, 3, 3) (body to world), in scene order.

    params: {name: tensor} of any scene parameters; the renderer reads body
    and geom sizes (`<name>.radius`, `.size`, `.length`), `ground.height`,
    and the initial poses of geoms and their bodies (`<name>.position`,
    `.quaternion`: where each geom sits on its body), each a base shape or
    batched (B, ...), and takes the scene's values for the rest. Geoms are
    drawn with their bodies, world geoms where they stand."""
    positions = pt.as_tensor_variable(positions)
    rotations = pt.as_tensor_variable(rotations)
    pos = Vec3(*(positions[..., i] for i in range(3)))
    rot = Mat3(*(rotations[..., i, j] for i in range(3) for j in range(3)))
    return _render(scene, as_camera(scene, camera), pos, rot, params)


def render_state(scene: Scene, camera: "Camera | str | None", state,
                 params: dict | None = None):
    """Symbolic image (B, H, W, 3) of a model `State` (components (B, N),
    `symphys.physics.model.State`), e.g. inside a rollout; params as in `render`."""
    return _render(scene, as_camera(scene, camera), state.position, state.rotation, params)


__all__ = ["as_camera", "render", "render_state"]
