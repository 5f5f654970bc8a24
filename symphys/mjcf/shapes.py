"""Which geoms of a compiled MuJoCo model touch which, and the symphys shape
each body gets from them.

MuJoCo decides contacts between geoms at run time from bitmasks and
filters; symphys fixes its contact pairs when the scene is built. So the
pairs are taken here once, by MuJoCo's own rules (`candidate_pairs`):

- two geoms of bodies welded together (same `body_weldid`) never touch;
- with `filterparent` on (the default), a body never touches its parent,
  unless one of the two is the world;
- body pairs listed in `<contact><exclude>` never touch;
- otherwise they touch when (contype1 & conaffinity2) | (contype2 &
  conaffinity1) is nonzero; `<contact><pair>` adds pairs regardless.

A symphys body has one shape, centred at its centre of mass with its axes
along principal axes of inertia (`body_frame`). A geom off the centre, or
whose axes are not principal, cannot be that shape.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import mujoco
import numpy as np

from symphys.scene.elements import Shape


class GeomType(enum.IntEnum):
    """MuJoCo's geom types (mjtGeom)."""

    PLANE = int(mujoco.mjtGeom.mjGEOM_PLANE)
    HFIELD = int(mujoco.mjtGeom.mjGEOM_HFIELD)
    SPHERE = int(mujoco.mjtGeom.mjGEOM_SPHERE)
    CAPSULE = int(mujoco.mjtGeom.mjGEOM_CAPSULE)
    ELLIPSOID = int(mujoco.mjtGeom.mjGEOM_ELLIPSOID)
    CYLINDER = int(mujoco.mjtGeom.mjGEOM_CYLINDER)
    BOX = int(mujoco.mjtGeom.mjGEOM_BOX)
    MESH = int(mujoco.mjtGeom.mjGEOM_MESH)
    SDF = int(mujoco.mjtGeom.mjGEOM_SDF)


# Relative tolerance of "at the centre of mass" and "along principal axes".
TOLERANCE = 1e-9


def geom_label(m, g: int) -> str:
    """"geom 'name' (body 'b')" as messages name a geom."""
    name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)
    body = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.geom_bodyid[g])) or (
        f"body {int(m.geom_bodyid[g])}")
    kind = GeomType(int(m.geom_type[g])).name.lower()
    return f"{kind} geom {repr(name) if name else f'#{g}'} of body {body!r}"


def candidate_pairs(m) -> list[tuple[int, int]]:
    """Geom pairs (g1 < g2) that MuJoCo may bring into contact, by its
    filters (module docstring), in order."""
    weld = m.body_weldid
    parent_weld = weld[m.body_parentid[weld]]
    filter_parent = not m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    excluded = {int(s) for s in m.exclude_signature}
    pairs = set()
    body = m.geom_bodyid
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            b1, b2 = int(body[g1]), int(body[g2])
            w1, w2 = int(weld[b1]), int(weld[b2])
            if w1 == w2:
                continue
            if filter_parent and w1 and w2 and (w1 == parent_weld[w2] or w2 == parent_weld[w1]):
                continue
            if (min(b1, b2) << 16) + max(b1, b2) in excluded:
                continue
            if (m.geom_contype[g1] & m.geom_conaffinity[g2]) or (
                    m.geom_contype[g2] & m.geom_conaffinity[g1]):
                pairs.add((g1, g2))
    for g1, g2 in zip(m.pair_geom1, m.pair_geom2):
        pairs.add((min(int(g1), int(g2)), max(int(g1), int(g2))))
    return sorted(pairs)


def is_ground_plane(m, d, g: int) -> bool:
    """Whether geom g is a plane of the world facing +z (symphys' ground)."""
    if int(m.geom_type[g]) != GeomType.PLANE or int(m.geom_bodyid[g]) != 0:
        return False
    normal = d.geom_xmat[g].reshape(3, 3)[:, 2]
    return bool(np.abs(normal - (0.0, 0.0, 1.0)).max() < TOLERANCE)


# A plane of the world other than the ground becomes a box this thick (m),
# with its top face on the plane, reaching this far along the plane (m):
# MuJoCo's planes collide without end, whatever their drawn size.
PLANE_DEPTH, PLANE_REACH = 1.0, 100.0


def plane_box(m, d, g: int) -> tuple[dict, list[float]]:
    """(box shape fields, box centre) standing in for world plane g: its
    top face on the plane (raised by the geom's margin), facing the plane's
    normal."""
    normal = d.geom_xmat[g].reshape(3, 3)[:, 2]
    top = d.geom_xpos[g] + float(m.geom_margin[g]) * normal
    centre = top - 0.5 * PLANE_DEPTH * normal
    fields = {"shape": Shape.BOX.value, "size": [2 * PLANE_REACH, 2 * PLANE_REACH, PLANE_DEPTH]}
    return fields, [float(x) for x in centre]


@dataclass(frozen=True)
class BodyShape:
    """A body's shape and frame: `fields` for the scene file (shape and its
    sizes), the world rotation R of its body frame (3, 3), and the principal
    moments along R's columns (3,)."""

    fields: dict
    rotation: np.ndarray
    moments: np.ndarray


def shape_fields(m, g: int, cylinders_as_capsules: bool) -> dict | str:
    """The scene-file shape fields of geom g, or why it has none.

    The shape is the geom grown by its `margin`: MuJoCo's contacts act
    within the sum of two geoms' margins and hold them that far apart at
    rest (gymnasium's ant stands 2 cm higher with its margins than
    without), which is where symphys' contacts between the grown shapes
    hold them (the ground is raised by the plane's margin likewise)."""
    kind = GeomType(int(m.geom_type[g]))
    size = [float(s) for s in m.geom_size[g]]
    grow = float(m.geom_margin[g])
    if kind is GeomType.SPHERE:
        return {"shape": Shape.SPHERE.value, "radius": size[0] + grow}
    if kind is GeomType.BOX:
        return {"shape": Shape.BOX.value, "size": [2 * (s + grow) for s in size[:3]]}
    if kind is GeomType.CAPSULE or (kind is GeomType.CYLINDER and cylinders_as_capsules):
        # A cylinder as the capsule of the same radius and segment: its flat
        # ends become hemispheres (cylinders_as_capsules=True asks for this).
        return {"shape": Shape.CAPSULE.value, "radius": size[0] + grow, "length": 2 * size[1]}
    if kind is GeomType.CYLINDER:
        return ("symphys has no cylinder; load with cylinders_as_capsules=True to "
                "collide it as the capsule of the same radius and axis segment")
    return f"symphys has no {kind.name.lower()} shape (sphere, box and capsule only)"


def body_frame(m, d, b: int, g: int | None, fields: dict | None) -> BodyShape | str:
    """Body b's frame and moments, with geom g as its shape (None: no
    shape geom: the principal frame, drawn as the box of the same
    inertia); or why g cannot be its shape."""
    com = d.xipos[b]
    principal = d.ximat[b].reshape(3, 3)
    moments = np.array(m.body_inertia[b], dtype=np.float64)
    if g is None:
        return BodyShape(_inertia_box(float(m.body_mass[b]), moments), principal, moments)
    scale = max(float(np.max(m.geom_size[g])), 1.0)
    offset = float(np.linalg.norm(d.geom_xpos[g] - com))
    if offset > TOLERANCE * scale:
        return (f"its centre is {offset:.6g} m from the body's centre of mass; a symphys "
                f"body's one shape sits at its centre of mass")
    if fields["shape"] == Shape.SPHERE.value:
        return BodyShape(fields, principal, moments)
    world = principal @ np.diag(moments) @ principal.T
    rotation = d.geom_xmat[g].reshape(3, 3).copy()
    local = rotation.T @ world @ rotation
    if fields["shape"] == Shape.CAPSULE.value:
        # Any turn about the capsule's axis keeps the shape: take the one
        # that diagonalises the inertia across the axis.
        angle = 0.5 * np.arctan2(2 * local[0, 1], local[0, 0] - local[1, 1])
        c, s = np.cos(angle), np.sin(angle)
        rotation = rotation @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        local = rotation.T @ world @ rotation
    off_diagonal = np.abs(local - np.diag(np.diag(local))).max()
    if off_diagonal > TOLERANCE * np.trace(local):
        return ("its axes are not principal axes of the body's inertia (the body has "
                "other mass off its axes); a symphys body's shape is aligned with them")
    return BodyShape(fields, rotation, np.diag(local).copy())


def _inertia_box(mass: float, moments: np.ndarray) -> dict:
    """The box of `mass` with these principal moments: how a body with no
    shape geom is drawn (no contact reaches it)."""
    total = moments.sum()
    squares = [6.0 * (total - 2 * i) / mass for i in moments]     # a^2 = 6 (Iy + Iz - Ix) / m
    size = [float(np.sqrt(max(s, 0.0))) for s in squares]
    floor = max(max(size), 1e-3) * 1e-2
    return {"shape": Shape.BOX.value, "size": [max(s, floor) for s in size]}


def matrix_to_quaternion(rotation: np.ndarray) -> list[float]:
    """(w, x, y, z) of a rotation matrix, w >= 0."""
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rotation, dtype=np.float64).ravel())
    quat = quat if quat[0] >= 0 else -quat
    return [float(q) for q in quat / np.linalg.norm(quat)]
