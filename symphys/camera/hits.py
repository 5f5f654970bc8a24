"""Where the camera's rays meet the scene, as PyTensor graphs: one hit
function per shape kind (`SHAPE_HITS`, as the contact code keys collision
functions by shape), each giving the surfaces' depth, coverage and colour
per ray, and the appearance (colour, texture) they are shaded with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from symphys.camera.geometry import camera_frame, plane_axes, ray_directions
from symphys.physics.algebra import Mat3, Vec3, dot, matTvec, matvec, safe_norm
from symphys.scene.elements import Camera, Shape
from symphys.scene.scene import Scene
from symphys.scene.textures import texture_pixels

FAR = 1e6          # hit distance (m) of a miss: finite, so 0 * FAR stays 0 in gradients
NEAR = 1e-4        # hits nearer than this (m) are ignored: behind the pinhole
OPAQUE = -1e3      # log(1 - coverage) of a plane where hit: exp() is exactly 0


@dataclass(frozen=True)
class Rays:
    """The rays as constants: origin (3 floats), direction components each
    (1, P, 1), and the soft-edge width per metre of depth (m/m)."""

    origin: Vec3
    direction: Vec3
    edge_per_depth: float
    count: int


def rays_of(camera: Camera) -> Rays:
    d = ray_directions(camera)
    frame = camera_frame(camera)
    pitch = camera.sensor_size[0] / camera.resolution[0]
    comps = Vec3(*(pt.constant(d[:, i].reshape(1, -1, 1)) for i in range(3)))
    return Rays(Vec3(*(float(c) for c in frame.origin)), comps,
                camera.soft_edge * pitch / camera.focal_length, len(d))


@dataclass(frozen=True)
class Surfaces:
    """One kind of surface seen along every ray, each field (B|1, P, S):
    depth (m: the hit distance; a miss: FAR, or with soft edges the depth
    of closest approach), colour (r, g, b) and, with soft edges,
    log_clear = log(1 - coverage)."""

    depth: object
    colour: tuple
    log_clear: object | None = None
    count: int = 0      # S, set by `_surfaces`


def _safe_sqrt(x):
    """sqrt(max(x, 0)) with a finite gradient everywhere (0 where x <= 0)."""
    ok = x > 1e-30
    return pt.switch(ok, pt.sqrt(pt.switch(ok, x, 1.0)), 0.0)


def _unit(v: Vec3) -> Vec3:
    n = safe_norm(v)
    inv = 1.0 / pt.switch(n > 0, n, 1.0)
    return v.scale(inv)


def _shade(normal: Vec3, camera: Camera):
    """Lambert + ambient light factor of unit normals."""
    light = np.asarray(camera.light_direction, float)
    light = light / np.linalg.norm(light)
    lambert = pt.maximum(dot(normal, Vec3(*light)), 0.0)
    return camera.ambient + (1.0 - camera.ambient) * lambert


class Appearance:
    """Colours and textures of S surfaces as constants: colour (1, 1, S) per
    channel; textured ones in one atlas, gathered bilinearly."""

    def __init__(self, colours, textures):
        colours = np.asarray(colours, float).reshape(-1, 3)
        self.colour = [pt.constant(colours[:, c].reshape(1, 1, -1)) for c in range(3)]
        self.textured = any(t is not None for t in textures)
        if not self.textured:
            return
        images = [texture_pixels(t) if t is not None else np.ones((1, 1, 3)) for t in textures]
        sizes = np.array([im.shape[:2] for im in images])
        offsets = np.concatenate([[0], np.cumsum(sizes[:, 0] * sizes[:, 1])[:-1]])
        scale = np.array([t.scale if t is not None else (1.0, 1.0) for t in textures])
        self.atlas = pt.constant(np.concatenate([im.reshape(-1, 3) for im in images]))
        self.rows = pt.constant(sizes[:, 0].reshape(1, 1, -1).astype("int64"))
        self.cols = pt.constant(sizes[:, 1].reshape(1, 1, -1).astype("int64"))
        self.offset = pt.constant(offsets.reshape(1, 1, -1).astype("int64"))
        self.scale = [pt.constant(scale[:, i].reshape(1, 1, -1)) for i in range(2)]

    def albedo(self, u, v):
        """Colour (r, g, b) at texture coordinates u, v (B, P, S), which
        are divided by each texture's scale (untextured: colour only)."""
        if not self.textured:
            return self.colour
        texel = _bilinear(self, u / self.scale[0], v / self.scale[1])
        return [c * texel[..., k] for k, c in enumerate(self.colour)]


def _bilinear(app: Appearance, u, v):
    """Bilinear sample of each surface's texture at (u, v) (repeating),
    written with gathers: the weights carry the gradient to (u, v)."""
    u, v = u - pt.floor(u), v - pt.floor(v)
    x, y = u * app.cols - 0.5, v * app.rows - 0.5
    x0, y0 = pt.floor(x), pt.floor(y)
    fx, fy = x - x0, y - y0

    def wrap(i, n):
        i = pt.switch(i < 0, i + n, i)
        return pt.switch(i >= n, i - n, i)

    i0 = wrap(x0.astype("int64"), app.cols)
    j0 = wrap(y0.astype("int64"), app.rows)
    i1, j1 = wrap(i0 + 1, app.cols), wrap(j0 + 1, app.rows)

    def texel(j, i):
        index = app.offset + j * app.cols + i
        flat = app.atlas[index.flatten()]                    # (B * P * S, 3)
        return flat.reshape((*index.shape, 3))

    c00, c01, c10, c11 = texel(j0, i0), texel(j0, i1), texel(j1, i0), texel(j1, i1)
    fx, fy = fx[..., None], fy[..., None]
    return (1 - fy) * ((1 - fx) * c00 + fx * c01) + fy * ((1 - fx) * c10 + fx * c11)


def columns(values) -> object:
    """Per-shape values -> (Bp, 1, S): scalars or (B,) tensors."""
    cols = []
    for value in values:
        value = pt.as_tensor_variable(value)
        cols.append(value.reshape((1,)) if value.ndim == 0 else value)
    cols = pt.broadcast_arrays(*cols)
    return pt.stack(cols, axis=-1)[:, None, :]


def pick(comp, index: list[int]):
    """(B, N) pose component -> (B, 1, S) for the bodies in `index`."""
    if index == list(range(index[0], index[-1] + 1)):
        part = comp[:, index[0]:index[-1] + 1]
    else:
        part = comp[:, index]
    return part[:, None, :]


@dataclass(frozen=True)
class Group:
    """The bodies of one shape kind: their centres (B, 1, S), rotations,
    and geometry (Bp, 1, S)."""

    shape: Shape
    centre: Vec3
    rotation: Mat3
    radius: object = None
    half: Vec3 | None = None
    half_length: object = None


def _body_frame(rays: Rays, g: Group) -> tuple[Vec3, Vec3]:
    """Ray origin (B, 1, S) and directions (B, P, S) in each body's frame."""
    rel = Vec3(*(o - c for o, c in zip(rays.origin, g.centre)))
    return matTvec(g.rotation, rel), matTvec(g.rotation, rays.direction)


def _sphere_hit(o: Vec3, d: Vec3, r):
    """(hit distance, hit mask) of unit rays o + t d on spheres of radius r
    centred at the origin of o's frame (o is the origin minus the centre)."""
    b = dot(o, d)
    disc = b * b - (dot(o, o) - r * r)
    t = -b - _safe_sqrt(disc)
    hit = (disc > 0) & (t > NEAR)
    return t, hit


def _coverage(angle, visible, rays: Rays):
    """log(1 - alpha), alpha = sigmoid(-angle / w): angle is how far (rad)
    a ray passes outside an outline (negative inside), w the soft edge in
    radians; nothing behind the pinhole (not `visible`) covers."""
    logit = pt.switch(visible, -angle / rays.edge_per_depth, -1e3)   # -1e3: alpha = 0
    return -pt.softplus(logit)


def _angle(gap, depth):
    """A distance (m) across a ray at `depth` (m), as an angle (rad)."""
    return gap / pt.maximum(depth, NEAR)


def _spheres(g: Group, rays: Rays, app: Appearance, camera: Camera, soft: bool) -> Surfaces:
    rel = Vec3(*(o - c for o, c in zip(rays.origin, g.centre)))       # (B, 1, S)
    t_hit, hit = _sphere_hit(rel, rays.direction, g.radius)
    # Where a ray misses, its point of closest approach to the centre: the
    # outline there has the normal across the ray, continuous with hits.
    t_near = -dot(rel, rays.direction)
    t = pt.switch(hit, t_hit, t_near)
    normal = _unit(rel + rays.direction.scale(t))
    u = v = None
    if app.textured:
        # Longitude and latitude of the body-frame normal.
        nb = matTvec(g.rotation, normal)
        flat = nb.x * nb.x + nb.y * nb.y < 1e-20
        u = pt.arctan2(pt.switch(flat, 0.0, nb.y), pt.switch(flat, 1.0, nb.x)) / (2 * math.pi)
        v = 0.5 - pt.arcsin(pt.clip(nb.z, -1 + 1e-9, 1 - 1e-9)) / math.pi
    colour = _lit(app, u, v, normal, camera)
    if not soft:
        return Surfaces(pt.switch(hit, t_hit, FAR), colour)
    # Distance from the ray to the centre, minus the radius.
    gap = _safe_sqrt(dot(rel, rel) - t_near * t_near) - g.radius
    return Surfaces(t, colour, _coverage(_angle(gap, t_near), t_near > NEAR, rays))


def _lit(app: Appearance, u, v, normal: Vec3, camera: Camera) -> tuple:
    """Colours (r, g, b), each (B, P, S), of lit surfaces."""
    shade = _shade(normal, camera)
    return tuple(c * shade for c in app.albedo(u, v))


def _slabs(o: Vec3, d: Vec3, half: Vec3):
    """Slab method: (entry, exit) distances of rays through boxes."""
    entry, leave = [], []
    for oa, da, ha in zip(o, d, half):
        # A ray parallel to a slab gets a tiny direction instead: its
        # distances are then huge, of the right signs.
        da = pt.switch(pt.abs(da) < 1e-12, 1e-12, da)
        t1, t2 = (-ha - oa) / da, (ha - oa) / da
        entry.append(pt.minimum(t1, t2))
        leave.append(pt.maximum(t1, t2))
    return (pt.maximum(pt.maximum(entry[0], entry[1]), entry[2]),
            pt.minimum(pt.minimum(leave[0], leave[1]), leave[2]))


def _segment_closest(o: Vec3, d: Vec3, axis: int, half_length):
    """(depth along each unit ray o + t d, coordinate s along `axis`) of
    the closest approach between the ray's line and the segment
    s e_axis, |s| <= half_length. Clamping s, then re-solving t, is exact
    (the distance is convex in s)."""
    oa, da = o[axis], d[axis]
    od = dot(o, d)
    across = 1.0 - da * da
    parallel = across < 1e-12
    t0 = pt.switch(parallel, 0.0, (da * oa - od) / pt.switch(parallel, 1.0, across))
    s = pt.clip(oa + t0 * da, -half_length, half_length)
    return s * da - od, s


def _box_outline(o: Vec3, d: Vec3, half: Vec3):
    """(angle, visible): how far (rad, as seen from the pinhole) each ray
    passes from its box's outline, and whether any outline edge is in
    front of the pinhole. The outline is the edges between a face turned
    to the camera and one turned away (the camera is at o = 0 in the box
    frame, so which faces those are is known per box); each edge's
    distance to the ray is measured at the ray's closest approach and
    divided by that depth, so that two edges on one image line (a face
    seen edge-on, as the outline switches from one to the other) give one
    angle. For a ray that misses, the nearest outline edge is where it
    passes the box; for a hit, how far inside the outline it passes."""
    toward = [(oa > ha, oa < -ha) for oa, ha in zip(o, half)]   # faces +a, -a
    best = FAR
    for c in range(3):
        a, b = [k for k in range(3) if k != c]
        for sa in (0, 1):
            for sb in (0, 1):
                outline = pt.neq(toward[a][sa], toward[b][sb])
                shift = [0.0, 0.0, 0.0]
                shift[a] = half[a] * (1 - 2 * sa)
                shift[b] = half[b] * (1 - 2 * sb)
                oe = Vec3(*(oc - sc for oc, sc in zip(o, shift)))   # edge at the origin
                t, s = _segment_closest(oe, d, c, half[c])
                off = list(oe + d.scale(t))
                off[c] = off[c] - s
                dist2 = off[0] * off[0] + off[1] * off[1] + off[2] * off[2]
                ahead = t > NEAR
                angle2 = dist2 / pt.switch(ahead, t * t, 1.0)
                # A chain of minima, each term used once: XLA fuses it
                # without recomputing earlier terms.
                best = pt.minimum(best, pt.switch(outline & ahead, angle2, FAR))
    return _safe_sqrt(best), best < FAR


def _boxes(g: Group, rays: Rays, app: Appearance, camera: Camera, soft: bool) -> Surfaces:
    o, d = _body_frame(rays, g)
    t_in, t_out = _slabs(o, d, g.half)
    hit = (t_in < t_out) & (t_in > NEAR)
    if soft:
        angle, visible = _box_outline(o, d, g.half)
        # A miss's depth: its closest approach to the box's centre.
        t_near = -dot(o, d)
        t = pt.switch(hit, t_in, t_near)
        # A miss shows the box's point nearest where it passes the centre.
        point = o + d.scale(t)
        point = Vec3(*(pt.clip(c, -h, h) for c, h in zip(point, g.half)))
    else:
        point = o + d.scale(pt.switch(hit, t_in, NEAR))
    # The face: the axis along which the point is furthest out, relative
    # to the half-size.
    rel = [pt.abs(c) / h for c, h in zip(point, g.half)]
    on_x = (rel[0] >= rel[1]) & (rel[0] >= rel[2])
    on_y = ~on_x & (rel[1] >= rel[2])
    on_z = ~on_x & ~on_y
    nb = Vec3(*(pt.switch(m, pt.sign(c), 0.0) for m, c in zip((on_x, on_y, on_z), point)))
    u = v = None
    if app.textured:
        # Each face shows the whole texture, from its two other axes.
        s = Vec3(*(c / (2 * h) for c, h in zip(point, g.half)))
        u = pt.switch(on_x, s.y, s.x) + 0.5
        v = 0.5 - pt.switch(on_z, s.y, s.z)
    colour = _lit(app, u, v, matvec(g.rotation, nb), camera)
    if not soft:
        return Surfaces(pt.switch(hit, t_in, FAR), colour)
    return Surfaces(t, colour, _coverage(pt.switch(hit, -angle, angle), visible, rays))


def _capsule_hit(o: Vec3, d: Vec3, r, half_length):
    """(hit distance, mask) on capsules along body z: the cylinder's side
    where |z| <= half_length, else the nearer end sphere."""
    a = d.x * d.x + d.y * d.y
    b = o.x * d.x + o.y * d.y
    disc = b * b - a * (o.x * o.x + o.y * o.y - r * r)
    steep = a > 1e-12
    t_side = (-b - _safe_sqrt(disc)) / pt.switch(steep, a, 1.0)
    side = steep & (disc > 0) & (pt.abs(o.z + t_side * d.z) <= half_length) & (t_side > NEAR)
    best = pt.switch(side, t_side, FAR)
    for sign in (1.0, -1.0):
        t_cap, cap = _sphere_hit(Vec3(o.x, o.y, o.z - sign * half_length), d, r)
        best = pt.minimum(best, pt.switch(cap, t_cap, FAR))
    return best, best < FAR


def _capsules(g: Group, rays: Rays, app: Appearance, camera: Camera, soft: bool) -> Surfaces:
    o, d = _body_frame(rays, g)
    t_hit, hit = _capsule_hit(o, d, g.radius, g.half_length)
    if soft:
        t_near, s = _segment_closest(o, d, 2, g.half_length)
        t = pt.switch(hit, t_hit, t_near)
    else:
        t = pt.switch(hit, t_hit, NEAR)
    point = o + d.scale(t)
    axis_z = pt.clip(point.z, -g.half_length, g.half_length)
    nb = _unit(Vec3(point.x, point.y, point.z - axis_z))
    u = v = None
    if app.textured:
        flat = nb.x * nb.x + nb.y * nb.y < 1e-20
        u = pt.arctan2(pt.switch(flat, 0.0, nb.y), pt.switch(flat, 1.0, nb.x)) / (2 * math.pi)
        v = 0.5 - (axis_z + g.radius * nb.z) / (2 * (g.half_length + g.radius))
    colour = _lit(app, u, v, matvec(g.rotation, nb), camera)
    if not soft:
        return Surfaces(pt.switch(hit, t_hit, FAR), colour)
    off = o + d.scale(t_near)
    gap = safe_norm(Vec3(off.x, off.y, off.z - s)) - g.radius
    return Surfaces(t, colour, _coverage(_angle(gap, t_near), t_near > NEAR, rays))


def plane_hits(points: list, normals: np.ndarray, rays: Rays, app: Appearance, camera: Camera,
            soft: bool) -> Surfaces:
    """Infinite two-sided planes through `points` (each a 3-sequence of
    scalars or (Bp,) tensors: the ground's height is a parameter) with
    constant unit `normals` (S, 3)."""
    point = Vec3(*(columns([p[i] for p in points]) for i in range(3)))
    n = Vec3(*(pt.constant(normals[:, i].reshape(1, 1, -1)) for i in range(3)))
    facing = dot(rays.direction, n)                                # (1, P, S)
    level = pt.abs(facing) > 1e-12
    t = dot(point - Vec3(*rays.origin), n) / pt.switch(level, facing, 1.0)
    hit = level & (t > NEAR)
    t = pt.switch(hit, t, FAR)
    # Shade the side the ray sees.
    flip = pt.switch(facing > 0, -1.0, 1.0)
    u = v = None
    if app.textured:
        axes = [plane_axes(x) for x in normals]
        ua = Vec3(*(pt.constant(np.array([a[0][i] for a in axes]).reshape(1, 1, -1))
                    for i in range(3)))
        va = Vec3(*(pt.constant(np.array([a[1][i] for a in axes]).reshape(1, 1, -1))
                    for i in range(3)))
        rel = Vec3(*rays.origin) - point + rays.direction.scale(pt.switch(hit, t, 0.0))
        u, v = dot(rel, ua), dot(rel, va)
    colour = _lit(app, u, v, n.scale(flip), camera)
    return Surfaces(t, colour, pt.switch(hit, OPAQUE, 0.0) if soft else None)


def static_planes(scene: Scene, camera: Camera, params: dict):
    """(points, normals, appearance) of the ground and the camera's planes."""
    points, normals, colours, textures = [], [], [], []
    if scene.ground is not None:
        height = params.get("ground.height", scene.ground.height)
        points.append((0.0, 0.0, height))
        normals.append((0.0, 0.0, 1.0))
        colours.append(scene.ground.color)
        textures.append(scene.ground.texture)
    for plane in camera.planes:
        points.append(plane.point)
        normals.append(np.asarray(plane.normal, float) / np.linalg.norm(plane.normal))
        colours.append(plane.color)
        textures.append(plane.texture)
    return points, np.asarray(normals, float).reshape(-1, 3), Appearance(colours, textures)


SHAPE_HITS = {Shape.SPHERE: _spheres, Shape.BOX: _boxes, Shape.CAPSULE: _capsules}
