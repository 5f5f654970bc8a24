"""The kernels' parameter arrays and initial state from the named parameters,
in a graph whose size does not grow with the scene.

`packed_model(scene, p)` reads the parameter tensors `p` ({name: tensor},
every parameter of the scene; a value with one more axis than its base
shape carries the worlds first) and returns

    body  (Bp, N, BODY.width)    world (Bp, WORLD.width)
    joint (Bp, J, JOINT.width)   motor (Bp, M, MOTOR.width)
    state (Bp, N, 18)            the initial packed state

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

from symphys.joints import joint_frame
from symphys.model import zero_template
from symphys.params import drag_joints
from symphys.physics.kernels.layout import BODY, JOINT, MOTOR, WORLD as WORLD_COLUMNS, Packing
from symphys.scene import WORLD, Scene, Shape

EPS = 1e-12      # as `symphys.algebra.EPS`: quaternions of smaller norm give I


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


def _rotations(quat):
    """(..., 3, 3) rotation matrices of (..., 4) quaternions (w, x, y, z),
    normalised as `algebra.quat_to_mat`."""
    w, x, y, z = (quat[..., i] for i in range(4))
    n2 = w * w + x * x + y * y + z * z
    s = 2.0 / pt.switch(n2 > EPS, n2, 1.0)
    rows = [[1 - s * (y * y + z * z), s * (x * y - w * z), s * (x * z + w * y)],
            [s * (x * y + w * z), 1 - s * (x * x + z * z), s * (y * z - w * x)],
            [s * (x * z - w * y), s * (y * z + w * x), 1 - s * (x * x + y * y)]]
    return pt.stack([pt.stack(r, axis=-1) for r in rows], axis=-2)


def _inertia(scene: Scene, mass, radius, size, length):
    """(Bp, N, 3) principal moments, as `model.principal_inertia` per shape."""
    kinds = [b.shape for b in scene.bodies]
    sphere = np.array([k is Shape.SPHERE for k in kinds])
    box = np.array([k is Shape.BOX for k in kinds])
    capsule = np.array([k is Shape.CAPSULE for k in kinds])
    out = pt.zeros_like(size)
    if sphere.any():
        i = 0.4 * mass * radius ** 2
        out = pt.switch(sphere[:, None], pt.stack([i, i, i], axis=-1), out)
    if box.any():
        c = mass / 12.0
        sx, sy, sz = size[..., 0], size[..., 1], size[..., 2]
        i = pt.stack([c * (sy ** 2 + sz ** 2), c * (sx ** 2 + sz ** 2),
                      c * (sx ** 2 + sy ** 2)], axis=-1)
        out = pt.switch(box[:, None], i, out)
    if capsule.any():
        # Other shapes read 1s here, not their zeros: no 0/0 in a branch
        # the switch drops (its gradient would be NaN).
        r = pt.switch(capsule, radius, 1.0)
        h = pt.switch(capsule, length, 1.0)
        v_cyl = np.pi * r ** 2 * h
        v_sph = 4.0 / 3.0 * np.pi * r ** 3
        m_cyl = mass * v_cyl / (v_cyl + v_sph)
        m_hemi = 0.5 * mass * v_sph / (v_cyl + v_sph)
        d = 0.5 * h + 0.375 * r
        axial = 0.5 * m_cyl * r ** 2 + 2 * 0.4 * m_hemi * r ** 2
        lateral = (m_cyl * (h ** 2 / 12.0 + r ** 2 / 4.0)
                   + 2 * (83.0 / 320.0 * m_hemi * r ** 2 + m_hemi * d ** 2))
        out = pt.switch(capsule[:, None], pt.stack([lateral, lateral, axial], axis=-1), out)
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
    inertia = _inertia(scene, mass, radius, size, length)
    rolling = (each("rolling_friction") if scene.has_rolling_friction
               else pt.zeros_like(mass))
    body = _packed(BODY, {
        "inv_mass": (1.0 / mass)[..., None], "inv_inertia": 1.0 / inertia, "inertia": inertia,
        "radius": radius[..., None], "half_size": 0.5 * size,
        "half_length": (0.5 * length)[..., None], "friction": each("friction")[..., None],
        "restitution": each("restitution")[..., None], "rolling_friction": rolling[..., None]})
    position = each("position", (3,))
    rotation = _rotations(each("quaternion", (4,)))
    state = [position, rotation.reshape((rotation.shape[0], len(bodies), 9)),
             each("velocity", (3,)), each("angular_velocity", (3,))]
    return body, join_columns(state), position, rotation


def _world(scene: Scene, p: dict):
    """(Bp, WORLD.width): the `layout.WORLD` columns, zeros where absent."""
    def entry(name):
        return p[name] if name in p else np.zeros(())

    names = {"ground_height": "ground.height", "ground_friction": "ground.friction",
             "ground_restitution": "ground.restitution",
             "ground_rolling_friction": ("ground.rolling_friction"
                                         if scene.has_rolling_friction else None),
             "constraint_frequency": "solver.constraint_frequency",
             "constraint_damping": "solver.constraint_damping",
             "velocity_damping": "solver.velocity_damping"}
    scalars = gather([entry(n) if n else np.zeros(()) for n in names.values()])
    columns = {k: scalars[:, i, None] for i, k in enumerate(names)}
    columns["gravity"] = gather([p["world.gravity"]], (3,))[:, 0]
    return _packed(WORLD_COLUMNS, columns)


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
    bp = rotation.shape[0]
    rot = pt.concatenate([rotation, pt.repeat(pt.eye(3)[None, None], bp, axis=0)], axis=1)
    pos = pt.concatenate([position, pt.zeros((bp, 1, 3))], axis=1)

    def local(side):
        r, x = rot[:, side], pos[:, side]
        point = ((anchor - x)[..., :, None] * r).sum(axis=-2)        # R^T (anchor - x)
        frame = (r[..., :, :, None] * frames[:, :, None, :]).sum(axis=-3)   # R^T F
        return point, frame.reshape((frame.shape[0], len(scene.joints), 9))

    point_a, frame_a = local(child)
    point_b, frame_b = local(parent)
    drag = {j.name for j in drag_joints(scene)}

    def loss(key):
        return gather([p[f"{j.name}.{key}"] if j.name in drag else np.zeros(())
                       for j in scene.joints])[..., None]

    return _packed(JOINT, {"anchor_a": point_a, "anchor_b": point_b, "frame_a": frame_a,
                           "frame_b": frame_b, "viscous": loss("viscous_damping"),
                           "dry": loss("dry_friction")})


def packed_model(scene: Scene, p: dict):
    """(body, world, joint, motor, state) as the module docstring says."""
    body, state, position, rotation = _bodies(scene, p)
    world = _world(scene, p)
    joint = (_joints(scene, p, position, rotation) if scene.joints
             else pt.zeros((1, 0, JOINT.width)))
    motor = (_packed(MOTOR, {key: gather([p[f"{m.name}.{key}"] for m in scene.motors])[..., None]
                             for key in MOTOR.names})
             if scene.motors else pt.zeros((1, 0, MOTOR.width)))
    return body, world, joint, motor, state
