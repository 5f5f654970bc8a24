"""The kernels' parameter arrays and initial state from the named parameters,
in a graph whose size does not grow with the scene.

`packed_model(scene, p)` reads the parameter tensors `p` ({name: tensor},
every parameter of the scene; a value with one more axis than its base
shape carries the worlds first) and returns

    body  (Bp, N, BODY.width)    world (Bp, WORLD.width)
    joint (Bp, J, JOINT.width)   motor (Bp, M, MOTOR.width)
    geom  (Bp, G, GEOM.width)    state (Bp, N, 18), the initial packed state

(Bp: B where a value feeding the array is batched, else 1). Each field is
gathered for all bodies (joints, motors) at once, so the nodes are a few per
field whatever the count: the reference's `model.build_model` and
`joints.build_joint_arrays` build one node per body and component, which
made the graph around a robot's loop thousands of nodes. The values are the
reference's (the same formulas, in array form); `tests/test_packing.py`
checks them and their gradients against it.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from symphys.physics.algebra import Vec3, quat_to_mat_array
from symphys.physics.joints import DRAG_FIELDS, joint_frame
from symphys.physics.kernels.layout import BODY, GEOM, JOINT, MOTOR
from symphys.physics.kernels.layout import WORLD as WORLD_COLUMNS
from symphys.physics.kernels.layout import Packing
from symphys.physics.model import principal_inertia, zero_template
from symphys.scene.elements import WORLD, Shape
from symphys.scene.scene import Scene


def _batched(value, base_ndim: int) -> bool:
    return value.ndim == base_ndim + 1


def gather(values: list, shape: tuple = ()):
    """(Bp, K, *shape) from K tensors of base shape `shape`, each given per
    world (leading axis B) or for all worlds; float64.

    A few nodes whatever K: the values shared by all worlds are joined in
    one node, those given per world in another, and one constant
    permutation puts them back in order."""
    values = [pt.as_tensor_variable(v) for v in values]
    values = [v if v.dtype == "float64" else v.astype("float64") for v in values]
    size = int(np.prod(shape, dtype=int))
    shared = [k for k, v in enumerate(values) if not _batched(v, len(shape))]
    per_world = [k for k, v in enumerate(values) if _batched(v, len(shape))]
    parts = []
    if shared:
        flat = [values[k] for k in shared]
        joined = pt.stack(flat) if not shape else pt.concatenate(
            [v.reshape((size,)) if len(shape) > 1 else v for v in flat])
        parts.append(joined.reshape((1, len(shared)) + shape))
    if per_world:
        flat = [values[k] for k in per_world]
        joined = (pt.stack(flat, axis=-1) if not shape else pt.concatenate(
            [v.reshape((v.shape[0], size)) if len(shape) > 1 else v for v in flat], axis=-1))
        parts.append(joined.reshape((joined.shape[0], len(per_world)) + shape))
    if len(parts) == 1:
        return parts[0]
    parts[0] = pt.broadcast_to(parts[0], (parts[1].shape[0],) + tuple(parts[0].shape)[1:])
    order = np.argsort(np.array(shared + per_world))
    return pt.concatenate(parts, axis=1)[:, order]


def _packed(packing: Packing, columns: dict):
    """(..., packing.width): `columns` {name: (..., size)} broadcast against
    each other and joined in the packing's order."""
    parts = [columns[name] for name in packing.names]
    for name, part in zip(packing.names, parts):
        if part.type.shape[-1] != packing.sizes[name]:
            raise AssertionError(f"column {name}: {part.type} for {packing.sizes[name]}")
    return join_columns(parts)


def join_columns(parts: list):
    """Concatenate on the last axis, broadcasting the other axes."""
    template = zero_template([x[..., :1] for x in parts])
    return pt.concatenate([x + template for x in parts], axis=-1)


def _inertia(scene: Scene, p: dict, mass, radius, size, length):
    """(Bp, N, 3) principal moments: a body's `inertia` parameter where it
    has one, else `model.principal_inertia` for its shape (each shape on all
    bodies at once, kept where the body has it)."""
    out = pt.zeros_like(size)
    sizes = Vec3(size[..., 0], size[..., 1], size[..., 2])
    for kind in dict.fromkeys(b.shape for b in scene.bodies):
        mine = np.array([b.shape is kind for b in scene.bodies])
        # Other shapes read 1s here, not their zeros: no 0/0 in a branch
        # the switch drops (its gradient would be NaN).
        moments = principal_inertia(kind, mass, pt.switch(mine, radius, 1.0), sizes,
                                    pt.switch(mine, length, 1.0))
        out = pt.switch(mine[:, None], pt.stack(list(moments), axis=-1), out)
    explicit = np.array([b.inertia is not None for b in scene.bodies])
    if explicit.any():
        given = gather([p[f"{b.name}.inertia"] if b.inertia is not None else np.ones(3)
                        for b in scene.bodies], (3,))
        out = pt.switch(explicit[:, None], given, out)
    return out


def _bodies(scene: Scene, p: dict):
    """(body (Bp, N, BODY.width), state (Bp, N, 18), position, rotation)."""
    bodies = scene.bodies

    def each(field, shape=(), present=lambda b: True):
        zero = np.zeros(shape)
        return gather([p[f"{b.name}.{field}"] if present(b) else zero for b in bodies], shape)

    mass = each("mass")
    round_ = lambda b: b.shape in (Shape.SPHERE, Shape.CAPSULE)   # noqa: E731
    radius = each("radius", present=round_)
    size = each("size", (3,), present=lambda b: b.shape is Shape.BOX)
    length = each("length", present=lambda b: b.shape is Shape.CAPSULE)
    inertia = _inertia(scene, p, mass, radius, size, length)
    rolling = (each("rolling_friction") if scene.has_rolling_friction
               else pt.zeros_like(mass))
    body = _packed(BODY, {
        "inv_mass": (1.0 / mass)[..., None], "inv_inertia": 1.0 / inertia, "inertia": inertia,
        "radius": radius[..., None], "half_size": 0.5 * size,
        "half_length": (0.5 * length)[..., None], "friction": each("friction")[..., None],
        "restitution": each("restitution")[..., None], "rolling_friction": rolling[..., None]})
    position = each("position", (3,))
    rotation = quat_to_mat_array(each("quaternion", (4,)), lib=pt)
    state = [position, rotation.reshape((rotation.shape[0], len(bodies), 9)),
             each("velocity", (3,)), each("angular_velocity", (3,))]
    return body, join_columns(state), position, rotation


def _world(scene: Scene, p: dict):
    """(Bp, WORLD.width): each `layout.WORLD` column from the parameter of
    its name, zeros where the scene has none (rolling friction where no
    body rolls)."""
    def column(name):
        size = WORLD_COLUMNS.sizes[name]
        shape = (size,) if size > 1 else ()
        used = name in p and (name != "ground.rolling_friction" or scene.has_rolling_friction)
        value = gather([p[name] if used else np.zeros(shape)], shape)[:, 0]
        return value if shape else value[..., None]

    return _packed(WORLD_COLUMNS, {name: column(name) for name in WORLD_COLUMNS.names})


def _joints(scene: Scene, p: dict, position, rotation):
    """(Bp, J, JOINT.width): anchors and joint frames in the child's and the
    parent's body frames (world frame for a world parent), bearing losses."""
    n = len(scene.bodies)
    index = {b.name: k for k, b in enumerate(scene.bodies)}
    child = np.array([index[j.child] for j in scene.joints])
    parent = np.array([n if j.parent == WORLD else index[j.parent] for j in scene.joints])
    frames = np.array([np.array(joint_frame(j.axis, j.axis2)).reshape(3, 3)
                       for j in scene.joints])                        # (J, 3, 3)
    anchor = gather([p[f"{j.name}.anchor"] for j in scene.joints], (3,))
    # The world as one more body: at the origin, unrotated.
    rot = pt.concatenate([rotation, pt.repeat(pt.eye(3)[None, None], rotation.shape[0], axis=0)],
                         axis=1)
    pos = pt.concatenate([position, pt.zeros((position.shape[0], 1, 3))], axis=1)

    def local(side):
        r, x = rot[:, side], pos[:, side]
        point = ((anchor - x)[..., :, None] * r).sum(axis=-2)        # R^T (anchor - x)
        frame = (r[..., :, :, None] * frames[:, :, None, :]).sum(axis=-3)   # R^T F
        return point, frame.reshape((frame.shape[0], len(scene.joints), 9))

    point_a, frame_a = local(child)
    point_b, frame_b = local(parent)
    drag = {j.name for j in scene.drag_joints}

    def parameter(key):
        return gather([p.get(f"{j.name}.{key}", np.zeros(())) if j.name in drag
                       else np.zeros(()) for j in scene.joints])[..., None]

    return _packed(JOINT, {"anchor_a": point_a, "anchor_b": point_b, "frame_a": frame_a,
                           "frame_b": frame_b, **{key: parameter(key) for key in DRAG_FIELDS}})


def _geoms(scene: Scene, p: dict, position, rotation):
    """(Bp, G, GEOM.width): sizes and materials, and each geom's centre and
    rotation in its body's frame (`symphys.physics.geoms`), from its and its
    body's initial world poses."""
    geoms = scene.geoms
    n = len(scene.bodies)
    index = {b.name: k for k, b in enumerate(scene.bodies)}

    def each(field, shape=(), present=lambda g: True):
        zero = np.zeros(shape)
        return gather([p[f"{g.name}.{field}"] if present(g) else zero for g in geoms], shape)

    # The world as one more body: at the origin, unrotated.
    body = np.array([n if g.body == WORLD else index[g.body] for g in geoms])
    rot = pt.concatenate([rotation, pt.repeat(pt.eye(3)[None, None], rotation.shape[0], axis=0)],
                         axis=1)[:, body]
    pos = pt.concatenate([position, pt.zeros((position.shape[0], 1, 3))], axis=1)[:, body]
    place = ((each("position", (3,)) - pos)[..., :, None] * rot).sum(axis=-2)   # R0^T (x - x0)
    turn = quat_to_mat_array(each("quaternion", (4,)), lib=pt)                   # (Bp, G, 3, 3)
    local = (rot[..., :, :, None] * turn[..., :, None, :]).sum(axis=-3)          # R0^T R_g
    round_ = lambda g: g.shape in (Shape.SPHERE, Shape.CAPSULE)   # noqa: E731
    columns = {name: np.zeros((1, len(geoms), GEOM.sizes[name])) for name in GEOM.names}
    columns.update({
        "radius": each("radius", present=round_)[..., None],
        "half_size": 0.5 * each("size", (3,), present=lambda g: g.shape is Shape.BOX),
        "half_length": 0.5 * each("length", present=lambda g: g.shape is Shape.CAPSULE)[
            ..., None],
        "friction": each("friction")[..., None], "restitution": each("restitution")[..., None],
        "position": place, "rotation": local.reshape((local.shape[0], len(geoms), 9))})
    if scene.has_rolling_friction:
        columns["rolling_friction"] = each("rolling_friction")[..., None]
    return _packed(GEOM, {k: pt.as_tensor_variable(v) for k, v in columns.items()})


def packed_model(scene: Scene, p: dict):
    """(body, world, joint, motor, geom, state) as the module docstring says."""
    body, state, position, rotation = _bodies(scene, p)
    world = _world(scene, p)
    joint = (_joints(scene, p, position, rotation) if scene.joints
             else pt.zeros((1, 0, JOINT.width)))
    motor = (_packed(MOTOR, {key: gather([p.get(f"{m.name}.{key}", np.zeros(()))
                                          for m in scene.motors])[..., None]
                             for key in MOTOR.names})
             if scene.motors else pt.zeros((1, 0, MOTOR.width)))
    geom = (_geoms(scene, p, position, rotation) if scene.geoms
            else pt.zeros((1, 0, GEOM.width)))
    return body, world, joint, motor, geom, state
