"""Scene parameters as batch-first tensors: per-body arrays and the state.

`build_model` turns named parameter tensors into `BodyArrays` (each field
(Bp, N): Bp is B or 1, N bodies) and the initial `State` (each component
(B, N)). Everything here is computed once, outside the time loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pytensor.tensor as pt
from pytensor.tensor.extra_ops import broadcast_shape

from symphys.physics.algebra import Mat3, Vec3, quat_to_mat
from symphys.scene.elements import Shape
from symphys.scene.scene import Scene
from symphys.tree import static


class State(NamedTuple):
    """Simulation state; every component has shape (B, N)."""

    position: Vec3
    rotation: Mat3
    velocity: Vec3
    angular_velocity: Vec3

    def flat(self) -> list:
        return [*self.position, *self.rotation, *self.velocity, *self.angular_velocity]

    @staticmethod
    def from_flat(parts) -> "State":
        parts = list(parts)
        return State(Vec3(*parts[0:3]), Mat3(*parts[3:12]), Vec3(*parts[12:15]),
                     Vec3(*parts[15:18]))


STATE_SIZE = 18


@dataclass(frozen=True)
class BodyArrays:
    """Per-body quantities, each (Bp, N). Unused entries (e.g. a sphere's
    half_size) hold 0."""

    inv_mass: object
    inv_inertia: Vec3          # body-frame principal inverse inertia
    inertia: Vec3
    radius: object
    half_size: Vec3
    half_length: object
    friction: object
    restitution: object
    rolling_friction: object | None = None   # None: the scene has none
    # Static: whether each body's inertia is a multiple of the identity
    # (spheres); their world inertia needs no rotation (see solver._side).
    isotropic: tuple[bool, ...] = static(())


@dataclass(frozen=True)
class WorldArrays:
    """Scene-wide parameters as scalars (or (B, 1) when batched)."""

    gravity: Vec3
    ground_height: object
    ground_friction: object
    ground_restitution: object
    constraint_frequency: object | None
    constraint_damping: object | None
    ground_rolling_friction: object | None = None
    contact_stiffness: object | None = None      # penalty contact models only
    contact_damping: object | None = None
    velocity_damping: object | None = None       # scenes with a drag only


def _column(value, batched: bool):
    """A per-body scalar as (Bp,): (B,) when batched, (1,) otherwise."""
    value = pt.as_tensor_variable(value)
    return value if batched else value.reshape((1,))


def _stack_bodies(columns):
    """List of (Bp,) tensors -> (Bp, N), broadcasting 1 against B."""
    columns = pt.broadcast_arrays(*columns)
    return pt.stack(columns, axis=-1)


def _world_scalar(value, batched: bool):
    value = pt.as_tensor_variable(value)
    return value[:, None] if batched else value


def principal_inertia(shape: Shape, mass, radius, size: Vec3, length):
    """Principal moments (body frame) of a uniform solid. Capsule axis = z."""
    if shape is Shape.SPHERE:
        i = 0.4 * mass * radius ** 2
        return Vec3(i, i, i)
    if shape is Shape.BOX:
        c = mass / 12.0
        return Vec3(c * (size.y ** 2 + size.z ** 2), c * (size.x ** 2 + size.z ** 2),
                    c * (size.x ** 2 + size.y ** 2))
    v_cyl = math.pi * radius ** 2 * length
    v_sph = 4.0 / 3.0 * math.pi * radius ** 3
    m_cyl = mass * v_cyl / (v_cyl + v_sph)
    m_hemi = 0.5 * mass * v_sph / (v_cyl + v_sph)
    d = 0.5 * length + 0.375 * radius   # hemisphere centre of mass offset
    axial = 0.5 * m_cyl * radius ** 2 + 2 * 0.4 * m_hemi * radius ** 2
    lateral = (m_cyl * (length ** 2 / 12.0 + radius ** 2 / 4.0)
               + 2 * (83.0 / 320.0 * m_hemi * radius ** 2 + m_hemi * d ** 2))
    return Vec3(lateral, lateral, axial)


def zero_template(tensors):
    """Zeros of the broadcast shape of `tensors`: static wherever their
    shapes are (JAX traces it), and no long chain of `+ t * 0` for the
    rewrites to fold (NumPy cannot fold an Add of more than 32 inputs)."""
    tensors = [pt.as_tensor_variable(t) for t in tensors]
    shape = _static_broadcast_shape(tensors)
    return pt.zeros(shape if shape is not None else broadcast_shape(*tensors), dtype="float64")


def _static_broadcast_shape(tensors) -> tuple[int, ...] | None:
    """The broadcast shape of `tensors` where their static shapes decide
    it, else None (a symbolic shape graph then)."""
    ndim = max(t.ndim for t in tensors)
    shapes = [(1,) * (ndim - t.ndim) + tuple(t.type.shape) for t in tensors]
    out = []
    for sizes in zip(*shapes):
        known = [d for d in sizes if d is not None and d != 1]
        if known:
            out.append(known[0])
        elif None in sizes:
            return None
        else:
            out.append(1)
    return tuple(out)


def build_model(scene: Scene, p: dict, batched: set[str]):
    """(BodyArrays, WorldArrays, initial State) from parameter tensors `p`.

    p: {name: tensor} for every parameter of the scene; names in `batched`
    carry a leading batch axis.
    """
    cols: dict[str, list] = {k: [] for k in (
        "inv_mass", "ix", "iy", "iz", "radius", "hx", "hy", "hz", "half_length",
        "friction", "restitution", "rolling_friction", "px", "py", "pz", "vx", "vy", "vz",
        "wx", "wy", "wz", "qw", "qx", "qy", "qz")}
    zero = pt.constant(np.zeros(1))
    for b in scene.bodies:
        def get(field, _b=b):
            name = f"{_b.name}.{field}"
            return p[name], name in batched

        mass, mb = get("mass")
        radius = size = length = None
        if b.shape in (Shape.SPHERE, Shape.CAPSULE):
            radius, rb = get("radius")
        if b.shape is Shape.BOX:
            size, sb = get("size")
        if b.shape is Shape.CAPSULE:
            length, lb = get("length")
        size_v = (Vec3(size[..., 0], size[..., 1], size[..., 2]) if size is not None
                  else Vec3(0.0, 0.0, 0.0))
        if b.inertia is None:
            inertia = principal_inertia(b.shape, mass, radius, size_v, length)
            any_b = mb or (radius is not None and rb) or (size is not None and sb) or (
                length is not None and lb)
        else:
            moments, any_b = get("inertia")
            inertia = Vec3(moments[..., 0], moments[..., 1], moments[..., 2])
        cols["inv_mass"].append(_column(1.0 / mass, mb))
        for key, comp in zip(("ix", "iy", "iz"), inertia):
            cols[key].append(_column(comp, any_b))
        cols["radius"].append(_column(radius, rb) if radius is not None else zero)
        for key, comp in zip(("hx", "hy", "hz"), size_v):
            cols[key].append(_column(0.5 * comp, sb) if size is not None else zero)
        cols["half_length"].append(_column(0.5 * length, lb) if length is not None else zero)
        for field in ("friction", "restitution"):
            value, vb = get(field)
            cols[field].append(_column(value, vb))
        if scene.has_rolling_friction:
            value, vb = get("rolling_friction")
            cols["rolling_friction"].append(_column(value, vb))
        for field, keys in (("position", "pxyz"), ("velocity", "vxyz"),
                            ("angular_velocity", "wxyz")):
            value, vb = get(field)
            for i, axis in enumerate("xyz"):
                cols[keys[0] + axis].append(_column(value[..., i], vb))
        quat, qb = get("quaternion")
        for i, key in enumerate(("qw", "qx", "qy", "qz")):
            cols[key].append(_column(quat[..., i], qb))
    arr = {k: _stack_bodies(v) for k, v in cols.items() if v}
    inertia = Vec3(arr["ix"], arr["iy"], arr["iz"])
    bodies = BodyArrays(
        inv_mass=arr["inv_mass"], inertia=inertia,
        inv_inertia=inertia.map(lambda c: 1.0 / c),
        radius=arr["radius"], half_size=Vec3(arr["hx"], arr["hy"], arr["hz"]),
        half_length=arr["half_length"], friction=arr["friction"],
        restitution=arr["restitution"], rolling_friction=arr.get("rolling_friction"),
        isotropic=tuple(b.isotropic for b in scene.bodies))

    def world(name, default=0.0):
        if name not in p:
            return pt.constant(default, dtype="float64")
        return _world_scalar(p[name], name in batched)

    g = p["world.gravity"]
    gb = "world.gravity" in batched
    freq = "solver.constraint_frequency" in p
    worlds = WorldArrays(
        gravity=Vec3(*(_world_scalar(g[..., i], gb) for i in range(3))),
        ground_height=world("ground.height"),
        ground_friction=world("ground.friction"),
        ground_restitution=world("ground.restitution"),
        constraint_frequency=world("solver.constraint_frequency") if freq else None,
        constraint_damping=world("solver.constraint_damping") if freq else None,
        ground_rolling_friction=(world("ground.rolling_friction")
                                 if scene.has_rolling_friction else None),
        contact_stiffness=world("solver.contact_stiffness") if scene.solver.penalty else None,
        contact_damping=world("solver.contact_damping") if scene.solver.penalty else None,
        velocity_damping=(world("solver.velocity_damping") if scene.solver.velocity_damping > 0
                          else None))

    rotation = quat_to_mat(arr["qw"], arr["qx"], arr["qy"], arr["qz"])
    state = State(Vec3(arr["px"], arr["py"], arr["pz"]), rotation,
                  Vec3(arr["vx"], arr["vy"], arr["vz"]),
                  Vec3(arr["wx"], arr["wy"], arr["wz"]))
    # Every state component gets the full batch size B (the largest leading
    # dimension among all per-body arrays), so the time loop's carry has one
    # shape. Broadcasting against a zero template keeps shapes static (JAX
    # cannot trace a shape computed from values).
    everything = state.flat() + list(arr.values()) + [
        c for c in worlds.gravity if getattr(c, "ndim", 0) == 2]
    template = zero_template(everything)
    state = State.from_flat([c + template for c in state.flat()])
    return bodies, worlds, state
