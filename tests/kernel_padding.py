"""Support for checking the fused step kernels on many random scenes with
one compiled kernel: a NumPy packer of a scene's kernel inputs, and padding
of a scene's arrays and tables to fixed sizes with inert entries.

`numeric_inputs(scene, params, action)` is `reference.numeric_inputs` in NumPy:
the same formulas (`model.build_model`, `joints.build_joint_arrays`,
`graph.pack_inputs`) evaluated directly instead of compiling a PyTensor
graph per scene (several seconds each; this takes well under a millisecond).

`pad(inputs, tables, sizes)` pads one world's inputs (the dict above) and
its layout tables (`build_layout(scene).arrays()`) to `Sizes`:

- bodies: inverse mass and inertia 0 (and every other parameter 0), at the
  origin with the identity rotation and no velocity, not articulated;
- joint and motor parameters: anchors 0, identity frames, no losses; gain,
  velocity and torque limits 0; joint constants (keep 1, no feedback, no
  limits), motor command ranges unbounded; actions 0;
- items (contacts, joints, drags, servos, torques): A = B = -1, ROW = -1 and
  IMPLICIT = -1 (no motor), other columns 0 (valid indices), which the JAX rows kernel skips
  (`rows_jax._scatter`, `_apply_torques`, the contact impact fractions);
- rows: after the scene's rows, body a = 0, b = -1 (static), bound FREE,
  ref -1; no item writes them, so their data stays all zero (mass 0, keep 0,
  no jacobian or direction): each update is new = 0, impulse 0.

The Numba rows kernel does not skip items with A < 0 (it would index body
-1 and write row -1), so `trim_items` gives it the padded arrays with the
scene's own item tables: padded bodies, parameters and rows, no padded items.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from symphys.physics.algebra import EPS, Vec3
from symphys.physics.contacts import POINTS
from symphys.physics.joints import DRAG_FIELDS, joint_frame
from symphys.physics.kernels.layout import (BODY, CONTACT_ROWS, GEOM, INF, ITEM_COLUMNS, JOINT,
                                            JOINT_ROWS, LIMITED, MOTOR, ROLLING_ROWS, STATE, WORLD,
                                            Bound, Item, RowColumn)
from symphys.physics.model import principal_inertia
from symphys.scene.elements import CONTACT_KINDS, GROUND, Shape
from symphys.scene.scene import Scene

from kernel_scenes import MAX_GEOM_PAIRS, MAX_GEOMS  # noqa: E402

NAMES = ("state", "body", "world", "joint", "motor", "geom", "action")
TABLES = ("contacts", "joints", "drags", "servos", "torques", "joint_consts", "motor_consts",
          "rows", "articulated", "options")
ITEM_TABLES = TABLES[:5]


# -- a NumPy packer ---------------------------------------------------------------
def _quat_to_mat(q):
    """`algebra.quat_to_mat` (row-major 9 components), same arithmetic."""
    w, x, y, z = (float(c) for c in q)
    n2 = w * w + x * x + y * y + z * z
    s = 2.0 / (n2 if n2 > EPS else 1.0)
    return np.array([1 - s * (y * y + z * z), s * (x * y - w * z), s * (x * z + w * y),
                     s * (x * y + w * z), 1 - s * (x * x + z * z), s * (y * z - w * x),
                     s * (x * z - w * y), s * (y * z + w * x), 1 - s * (x * x + y * y)])


def _inertia(shape: Shape, mass, radius, size, length):
    return [float(c) for c in principal_inertia(shape, mass, radius, Vec3(*size), length)]


def _matTvec(m, v):
    return np.array([m[0] * v[0] + m[3] * v[1] + m[6] * v[2],
                     m[1] * v[0] + m[4] * v[1] + m[7] * v[2],
                     m[2] * v[0] + m[5] * v[1] + m[8] * v[2]])


def _matmul(a, b):
    return np.array([a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j]
                     for i in range(3) for j in range(3)])


def _transpose(m):
    return np.array([m[0], m[3], m[6], m[1], m[4], m[7], m[2], m[5], m[8]])


def numeric_inputs(scene: Scene, params: dict | None = None, action=None) -> dict:
    """`reference.numeric_inputs` (one world, Bp = B = 1) computed in NumPy:
    {"state", "body", "world", "joint", "motor", "geom", "action"}; `params`
    (unbatched values) override the scene's defaults."""
    p = {k: np.asarray(v, dtype=np.float64) for k, v in scene.parameters().items()}
    for k, v in (params or {}).items():
        if k not in p:
            raise KeyError(k)
        p[k] = np.asarray(v, dtype=np.float64)
    n = len(scene.bodies)
    state = np.zeros((1, n, STATE.width))
    body = np.zeros((1, n, BODY.width))
    rotations = {}
    for i, b in enumerate(scene.bodies):
        get = lambda field: p[f"{b.name}.{field}"]  # noqa: E731
        mass = float(get("mass"))
        radius = float(get("radius")) if b.shape in (Shape.SPHERE, Shape.CAPSULE) else None
        size = [float(c) for c in get("size")] if b.shape is Shape.BOX else [0.0] * 3
        length = float(get("length")) if b.shape is Shape.CAPSULE else None
        inertia = ([float(c) for c in get("inertia")] if b.inertia is not None
                   else _inertia(b.shape, mass, radius, size, length))
        row = body[0, i]
        row[BODY.at("inv_mass")] = 1.0 / mass
        row[BODY.inertia] = inertia
        row[BODY.inv_inertia] = [1.0 / c for c in inertia]
        row[BODY.at("radius")] = radius if radius is not None else 0.0
        row[BODY.half_size] = [0.5 * c for c in size] if b.shape is Shape.BOX else 0.0
        row[BODY.at("half_length")] = 0.5 * length if length is not None else 0.0
        row[BODY.at("friction")] = get("friction")
        row[BODY.at("restitution")] = get("restitution")
        if scene.has_rolling_friction:
            row[BODY.at("rolling_friction")] = get("rolling_friction")
        rot = _quat_to_mat(get("quaternion"))
        rotations[b.name] = (get("position"), rot)
        state[0, i] = np.concatenate([get("position"), rot, get("velocity"),
                                      get("angular_velocity")])
    world = np.zeros((1, WORLD.width))
    for name in WORLD.names:                 # each column holds the parameter of its name
        if name in p:
            world[0, WORLD.span(name)] = p[name]
    joint = np.zeros((1, len(scene.joints), JOINT.width))
    for i, j in enumerate(scene.joints):
        anchor = p[f"{j.name}.anchor"]
        frame = np.array(joint_frame(j.axis, j.axis2), dtype=np.float64)
        pa, ra = rotations[j.child]
        row = joint[0, i]
        row[JOINT.anchor_a] = _matTvec(ra, anchor - pa)
        row[JOINT.frame_a] = _matmul(_transpose(ra), frame)
        if j.parent == "world":
            row[JOINT.anchor_b], row[JOINT.frame_b] = anchor, frame
        else:
            pb, rb = rotations[j.parent]
            row[JOINT.anchor_b] = _matTvec(rb, anchor - pb)
            row[JOINT.frame_b] = _matmul(_transpose(rb), frame)
        if scene.has_joint_drag:
            for key in DRAG_FIELDS:
                row[JOINT.at(key)] = p.get(f"{j.name}.{key}", 0.0)
    motor = np.zeros((1, len(scene.motors), MOTOR.width))
    for i, m in enumerate(scene.motors):
        motor[0, i] = [p.get(f"{m.name}.{key}", 0.0) for key in MOTOR.names]
    geom = np.zeros((1, len(scene.geoms), GEOM.width))
    for i, g in enumerate(scene.geoms):
        get = lambda field: p[f"{g.name}.{field}"]  # noqa: E731
        row = geom[0, i]
        if g.shape in (Shape.SPHERE, Shape.CAPSULE):
            row[GEOM.at("radius")] = get("radius")
        if g.shape is Shape.BOX:
            row[GEOM.half_size] = 0.5 * get("size")
        if g.shape is Shape.CAPSULE:
            row[GEOM.at("half_length")] = 0.5 * get("length")
        for key in ("friction", "restitution") + (
                ("rolling_friction",) if scene.has_rolling_friction else ()):
            row[GEOM.at(key)] = get(key)
        place, turn = get("position"), _quat_to_mat(get("quaternion"))
        if g.body != "world":
            pb, rb = rotations[g.body]
            place, turn = _matTvec(rb, place - pb), _matmul(_transpose(rb), turn)
        row[GEOM.position], row[GEOM.rotation] = place, turn
    m = len(scene.motors)
    act = np.zeros((1, m)) if action is None else np.asarray(action, float).reshape(1, m)
    return {"state": state, "body": body, "world": world, "joint": joint, "motor": motor,
            "geom": geom, "action": act}


# -- padding ---------------------------------------------------------------------
class Sizes(NamedTuple):
    """Fixed sizes every padded scene takes."""

    bodies: int
    joints: int          # joint parameters (and joint items)
    motors: int
    contacts: int        # contact items (points)
    drags: int
    servos: int
    torques: int
    rows: int
    geoms: int = 0


def generator_sizes(max_bodies: int) -> Sizes:
    """Upper bounds for every scene of `kernel_scenes.build_random_scene`
    with at most `max_bodies` bodies: at most one joint per body (so at most
    that many bearing-loss items), at most two motors per joint (universal
    joints), the most contact points those bodies can have (every body a box
    on the ground, or pairs of supported shapes) and their geoms' pairs, the
    most rows of each kind."""
    shapes = (Shape.SPHERE, Shape.BOX, Shape.CAPSULE)
    most_points = 0
    for counts in itertools.product(range(max_bodies + 1), repeat=len(shapes)):
        if sum(counts) != max_bodies:
            continue
        n = dict(zip(shapes, counts))
        points = sum(n[s] * POINTS[CONTACT_KINDS[(s, GROUND)]] for s in shapes)
        for i, s in enumerate(shapes):
            for t in shapes[i:]:
                kind = CONTACT_KINDS.get((s, t), CONTACT_KINDS.get((t, s)))
                if kind is not None:
                    pairs = n[s] * (n[s] - 1) // 2 if s == t else n[s] * n[t]
                    points += pairs * POINTS[kind]
        most_points = max(most_points, points)
    # and the pairs with geoms: each at most a box pair's points
    most_points += MAX_GEOM_PAIRS * max(POINTS.values())
    joints, motors = max_bodies, 2 * max_bodies
    joint_rows = max(JOINT_ROWS[t] + (2 if t in LIMITED else 0) for t in JOINT_ROWS)
    rows = (most_points * (CONTACT_ROWS + ROLLING_ROWS) + joints * joint_rows + 2 * joints
            + motors)
    return Sizes(bodies=max_bodies, joints=joints, motors=motors, contacts=most_points,
                 drags=joints, servos=motors, torques=motors, rows=rows, geoms=MAX_GEOMS)


def scene_sizes(inputs: dict, tables) -> Sizes:
    """A scene's own sizes."""
    t = dict(zip(TABLES, tables))
    return Sizes(bodies=inputs["state"].shape[1], joints=inputs["joint"].shape[1],
                 motors=inputs["motor"].shape[1], contacts=len(t["contacts"]),
                 drags=len(t["drags"]), servos=len(t["servos"]), torques=len(t["torques"]),
                 rows=len(t["rows"]), geoms=inputs["geom"].shape[1])


def _pad_axis(a: np.ndarray, axis: int, size: int, fill) -> np.ndarray:
    """a padded along `axis` to `size` with `fill` (a scalar or a row that
    broadcasts against the new entries)."""
    extra = size - a.shape[axis]
    if extra < 0:
        raise ValueError(f"size {a.shape[axis]} exceeds the padded size {size}")
    shape = list(a.shape)
    shape[axis] = extra
    block = np.empty(shape, dtype=a.dtype)
    block[...] = fill
    return np.ascontiguousarray(np.concatenate([a, block], axis=axis))


_IDENTITY = np.eye(3).ravel()
_PAD_STATE = np.concatenate([np.zeros(3), _IDENTITY, np.zeros(6)])
_PAD_JOINT = np.zeros(JOINT.width)
_PAD_JOINT[JOINT.frame_a] = _IDENTITY
_PAD_JOINT[JOINT.frame_b] = _IDENTITY
_PAD_ITEM = np.zeros(ITEM_COLUMNS, dtype=np.int64)
_PAD_ITEM[[Item.A, Item.B, Item.ROW, Item.GA, Item.GB, Item.IMPLICIT]] = -1
_PAD_GEOM = np.zeros(GEOM.width)
_PAD_GEOM[GEOM.rotation] = _IDENTITY
_PAD_ROW = np.array([0, -1, int(Bound.FREE), -1], dtype=np.int64)
assert [RowColumn.A, RowColumn.B, RowColumn.BOUND, RowColumn.REF] == [0, 1, 2, 3]


def pad(inputs: dict, tables, sizes: Sizes):
    """(padded inputs dict, padded tables list): see the module docstring."""
    t = dict(zip(TABLES, tables))
    out = {
        "state": _pad_axis(inputs["state"], 1, sizes.bodies, _PAD_STATE),
        "body": _pad_axis(inputs["body"], 1, sizes.bodies, 0.0),
        "world": np.ascontiguousarray(inputs["world"]),
        "joint": _pad_axis(inputs["joint"], 1, sizes.joints, _PAD_JOINT),
        "motor": _pad_axis(inputs["motor"], 1, sizes.motors, 0.0),
        "geom": _pad_axis(inputs["geom"], 1, sizes.geoms, _PAD_GEOM),
        "action": _pad_axis(inputs["action"], 1, sizes.motors, 0.0),
    }
    padded = {
        "contacts": _pad_axis(t["contacts"], 0, sizes.contacts, _PAD_ITEM),
        "joints": _pad_axis(t["joints"], 0, sizes.joints, _PAD_ITEM),
        "drags": _pad_axis(t["drags"], 0, sizes.drags, _PAD_ITEM),
        "servos": _pad_axis(t["servos"], 0, sizes.servos, _PAD_ITEM),
        "torques": _pad_axis(t["torques"], 0, sizes.torques, _PAD_ITEM),
        "joint_consts": _pad_axis(t["joint_consts"], 0, sizes.joints,
                                  np.array([1.0, 0.0, -INF, INF])),
        "motor_consts": _pad_axis(t["motor_consts"], 0, sizes.motors, np.array([-INF, INF])),
        "rows": _pad_axis(t["rows"], 0, sizes.rows, _PAD_ROW),
        "articulated": _pad_axis(t["articulated"], 0, sizes.bodies, 0.0),
        "options": np.ascontiguousarray(t["options"]),
    }
    return out, [padded[k] for k in TABLES]


def trim_items(padded_tables, tables):
    """The padded tables with the scene's own item tables (for the Numba
    rows kernel, which does not skip padding items)."""
    out = list(padded_tables)
    for k, name in enumerate(TABLES):
        if name in ITEM_TABLES:
            out[k] = np.ascontiguousarray(tables[k])
    return out


def unpad(array: np.ndarray, axis: int, size: int) -> np.ndarray:
    """The first `size` entries along `axis` (the scene's own part)."""
    index = [slice(None)] * array.ndim
    index[axis] = slice(0, size)
    return array[tuple(index)]
