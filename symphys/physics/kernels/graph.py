"""Packing the reference model into the kernels' arrays, and back (symbolic).

`pack_inputs(bodies, world, frames, motors)` turns the reference's
per-component tensors (`model.BodyArrays`, `model.WorldArrays`,
`joints.JointFrames`, `joints.MotorArrays`) into the packed parameter
arrays of `layout`: body (Bp, N, BODY.width), world (Bp, WORLD.width),
joint (Bp, J, JOINT.width), motor (Bp, M, MOTOR.width). Everything upstream
(the named parameters, inertias from masses and sizes, joint frames from
anchors) stays the reference's graph, so gradients reach every name.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytensor.tensor as pt

from symphys.physics.algebra import Mat3, Vec3
from symphys.physics.joints import DRAG_FIELDS, JointFrames, MotorArrays
from symphys.physics.geoms import GeomArrays
from symphys.physics.kernels.layout import BODY, GEOM, JOINT, MOTOR, WORLD, Packing, reference_field
from symphys.physics.model import BodyArrays, State, WorldArrays, zero_template


def _columns(model, packing: Packing) -> list:
    """The columns of `packing` read from the model dataclass's fields of
    their names (`reference_field`), one tensor per column; zeros for a
    field that is None."""
    cols = []
    for name in packing.names:
        value = getattr(model, reference_field(name))
        size = packing.sizes[name]
        comps = [0.0] * size if value is None else (list(value) if size > 1 else [value])
        cols += [pt.as_tensor_variable(c).astype("float64") for c in comps]
    return cols


def _stack(cols: list, row_ndim: int):
    """Stack columns of shape (Bp,) + (count,) * (row_ndim - 1) (or
    broadcastable to it: scalars, (Bp, 1) world entries) on a new last
    axis, broadcast against one zero template (one shape graph for all
    columns, not one per pair)."""
    cols = [c if c.ndim == row_ndim else
            (c.reshape((1,) * row_ndim) if c.ndim == 0 else c.reshape(c.shape[:row_ndim]))
            for c in cols]
    template = zero_template(cols)
    return pt.stack([c + template for c in cols], axis=-1)


def pack_inputs(bodies, world, frames=None, motors=None, n_joints: int = 0,
                n_motors: int = 0, geoms: GeomArrays | None = None):
    """(body, world, joint, motor, geom) packed parameter arrays:
    `BodyArrays`, `WorldArrays`, `JointFrames`, `MotorArrays` and
    `GeomArrays` fields under the names of `BODY`, `WORLD`, `JOINT`, `MOTOR`
    and `GEOM`."""
    body = _stack(_columns(bodies, BODY), 2)
    world_arr = _stack(_columns(world, WORLD), 1)
    joint = (_stack(_columns(frames, JOINT), 2) if frames is not None
             else pt.zeros((1, n_joints, JOINT.width)))
    motor = (_stack(_columns(motors, MOTOR), 2) if motors is not None
             else pt.zeros((1, n_motors, MOTOR.width)))
    if geoms is None:
        geom = pt.zeros((1, 0, GEOM.width))
    else:
        cols = {name: getattr(geoms, name, None) for name in GEOM.names}
        cols.update(inv_mass=None, inv_inertia=None, inertia=None)
        geom = _stack(_columns(SimpleNamespace(**cols), GEOM), 2)
    return body, world_arr, joint, motor, geom


def pack_state(state: State):
    """(B, N, 18) from the 18 (B, N) components of `state`."""
    return pt.stack(pt.broadcast_arrays(*state.flat()), axis=-1)


def unpack_state(packed) -> State:
    """The reference `State` (18 (B, N) components) of a packed (B, N, 18)."""
    return State.from_flat([packed[..., k] for k in range(18)])


# -- numeric helpers (tests, benchmarks) ---------------------------------------
def unpack_model(scene, body, world, joint, motor):
    """The reference's model tensors (`BodyArrays`, `WorldArrays`,
    `JointFrames` or None, `MotorArrays` or None) read from packed arrays;
    world entries (Bp, 1), or scalars when `world` is a vector."""
    def part(arr, packing, name):
        s = getattr(packing, name)
        comps = [arr[..., k] for k in range(s.start, s.stop)]
        return comps[0] if len(comps) == 1 else (Vec3(*comps) if len(comps) == 3
                                                 else Mat3(*comps))

    def entry(name):
        return world[..., WORLD.at(name), None] if world.ndim == 2 else world[WORLD.at(name)]

    roll = scene.has_rolling_friction
    bodies = BodyArrays(
        **{name: part(body, BODY, name) for name in BODY.names if name != "rolling_friction"},
        rolling_friction=part(body, BODY, "rolling_friction") if roll else None,
        isotropic=tuple(b.isotropic for b in scene.bodies))
    soft = scene.solver.constraint_frequency is not None
    at = WORLD.at("world.gravity")
    worlds = WorldArrays(
        gravity=Vec3(*(world[..., at + k, None] if world.ndim == 2 else world[at + k]
                       for k in range(3))),
        ground_height=entry("ground.height"), ground_friction=entry("ground.friction"),
        ground_restitution=entry("ground.restitution"),
        constraint_frequency=entry("solver.constraint_frequency") if soft else None,
        constraint_damping=entry("solver.constraint_damping") if soft else None,
        ground_rolling_friction=entry("ground.rolling_friction") if roll else None,
        velocity_damping=entry("solver.velocity_damping") if scene.solver.velocity_damping > 0
        else None)
    frames = motors = None
    if scene.joints:
        drag = bool(scene.drag_row_joints)
        frames = JointFrames(*(part(joint, JOINT, k) for k in
                               ("anchor_a", "anchor_b", "frame_a", "frame_b")),
                             *(part(joint, JOINT, k) if drag else None
                               for k in DRAG_FIELDS))
    if scene.motors:
        motors = MotorArrays(*(part(motor, MOTOR, k) for k in MOTOR.names))
    return bodies, worlds, frames, motors


def unpack_geoms(scene, geom) -> GeomArrays | None:
    """The reference's `GeomArrays` read from a packed geom array (None
    when the scene has no geoms)."""
    if not scene.geoms:
        return None
    comps = {name: [geom[..., k] for k in range(getattr(GEOM, name).start,
                                                getattr(GEOM, name).stop)]
             for name in GEOM.names}
    one = lambda name: comps[name][0]      # noqa: E731
    return GeomArrays(
        position=Vec3(*comps["position"]), rotation=Mat3(*comps["rotation"]),
        radius=one("radius"), half_size=Vec3(*comps["half_size"]),
        half_length=one("half_length"), friction=one("friction"),
        restitution=one("restitution"),
        rolling_friction=one("rolling_friction") if scene.has_rolling_friction else None,
        body=tuple(scene.body_index(g.body) if g.body in scene.body_names else -1
                   for g in scene.geoms))
