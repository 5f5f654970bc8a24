"""Packing the reference model into the kernels' arrays (symbolic), and
numeric helpers to run one step both ways.

`pack_inputs(bodies, world, frames, motors)` turns the reference's
per-component tensors (`model.BodyArrays`, `model.WorldArrays`,
`joints.JointFrames`, `joints.MotorArrays`) into the packed parameter
arrays of `layout`: body (Bp, N, BODY.width), world (Bp, WORLD.width),
joint (Bp, J, JOINT.width), motor (Bp, M, MOTOR.width). Everything upstream
(the named parameters, inertias from masses and sizes, joint frames from
anchors) stays the reference's graph, so gradients reach every name.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt

from symphys.model import State, zero_template
from symphys.physics.kernels.layout import BODY, JOINT, MOTOR, WORLD, Packing


def _columns(model, packing: Packing) -> list:
    """The columns of `packing` read from the model dataclass's fields of
    the same names, one tensor per column; zeros for a field that is None."""
    cols = []
    for name in packing.names:
        value = getattr(model, name)
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
                n_motors: int = 0):
    """(body, world, joint, motor) packed parameter arrays: `BodyArrays`,
    `WorldArrays`, `JointFrames` and `MotorArrays` fields under the names
    of `BODY`, `WORLD`, `JOINT` and `MOTOR`."""
    body = _stack(_columns(bodies, BODY), 2)
    world_arr = _stack(_columns(world, WORLD), 1)
    joint = (_stack(_columns(frames, JOINT), 2) if frames is not None
             else pt.zeros((1, n_joints, JOINT.width)))
    motor = (_stack(_columns(motors, MOTOR), 2) if motors is not None
             else pt.zeros((1, n_motors, MOTOR.width)))
    return body, world_arr, joint, motor


def pack_state(state: State):
    """(B, N, 18) from the 18 (B, N) components of `state`."""
    return pt.stack(pt.broadcast_arrays(*state.flat()), axis=-1)


def unpack_state(packed) -> State:
    """The reference `State` (18 (B, N) components) of a packed (B, N, 18)."""
    return State.from_flat([packed[..., k] for k in range(18)])


# -- numeric helpers (tests, benchmarks) ---------------------------------------
def numeric_inputs(scene, params: dict | None = None, action=None) -> dict:
    """The kernels' inputs for one world of `scene` as NumPy arrays:
    {"state", "body", "world", "joint", "motor", "action"} (Bp = B = 1),
    from its defaults updated with `params` (unbatched values). The packing
    graph is built once per scene and set of parameter names and shapes."""
    values = {k: np.asarray(v) for k, v in (params or {}).items()}
    names = sorted(values)
    signature = tuple((k, values[k].shape, values[k].dtype.str) for k in names)
    packer = _packers.get((id(scene), signature))
    if packer is None or packer[0] is not scene:
        packer = (scene, _packer(scene, signature))
        if len(_packers) >= _PACKERS_KEPT:
            del _packers[next(iter(_packers))]
        _packers[(id(scene), signature)] = packer
    packed = [np.asarray(v, dtype=np.float64) for v in packer[1](*(values[k] for k in names))]
    out = dict(zip(("state", "body", "world", "joint", "motor"), packed))
    m = len(scene.motors)
    out["action"] = np.zeros((1, m)) if action is None else np.asarray(action, float).reshape(1, m)
    return out


# (id(scene), parameter signature) -> (scene, packing function), the latest few
_packers: dict = {}
_PACKERS_KEPT = 16


def _packer(scene, signature):
    """f(*parameter values) -> packed (state, body, world, joint, motor),
    run by PyTensor's Python VM."""
    from symphys.backends import interpreted_mode
    from symphys.joints import build_joint_arrays
    from symphys.model import build_model
    from symphys.rollout import full_parameters

    inputs = [pt.tensor(name=k, shape=shape, dtype=np.dtype(dtype).name)
              for k, shape, dtype in signature]
    p = full_parameters(scene, {x.name: x for x in inputs})
    bodies, world, state = build_model(scene, p, set())
    frames, motors = build_joint_arrays(scene, p)
    packed = pack_inputs(bodies, world, frames, motors, len(scene.joints), len(scene.motors))
    return pytensor.function(inputs, [pack_state(state), *packed], mode=interpreted_mode(),
                             on_unused_input="ignore")


def unpack_model(scene, body, world, joint, motor):
    """The reference's model tensors (`BodyArrays`, `WorldArrays`,
    `JointFrames` or None, `MotorArrays` or None) read from packed arrays;
    world entries (Bp, 1), or scalars when `world` is a vector."""
    from symphys.algebra import Mat3, Vec3
    from symphys.joints import JointFrames, MotorArrays
    from symphys.model import BodyArrays, WorldArrays

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
        isotropic=tuple(b.shape.value == "sphere" for b in scene.bodies))
    soft = scene.solver.constraint_frequency is not None
    at = WORLD.at("gravity")
    worlds = WorldArrays(
        gravity=Vec3(*(world[..., at + k, None] if world.ndim == 2 else world[at + k]
                       for k in range(3))),
        ground_height=entry("ground_height"), ground_friction=entry("ground_friction"),
        ground_restitution=entry("ground_restitution"),
        constraint_frequency=entry("constraint_frequency") if soft else None,
        constraint_damping=entry("constraint_damping") if soft else None,
        ground_rolling_friction=entry("ground_rolling_friction") if roll else None,
        velocity_damping=entry("velocity_damping") if scene.solver.velocity_damping > 0
        else None)
    frames = motors = None
    if scene.joints:
        drag = scene.has_joint_drag
        frames = JointFrames(*(part(joint, JOINT, k) for k in
                               ("anchor_a", "anchor_b", "frame_a", "frame_b")),
                             part(joint, JOINT, "viscous") if drag else None,
                             part(joint, JOINT, "dry") if drag else None)
    if scene.motors:
        motors = MotorArrays(*(part(motor, MOTOR, k) for k in MOTOR.names))
    return bodies, worlds, frames, motors


def reference_step_function(scene, gradient: bool = False):
    """f(state, body, world, joint, motor, action) -> next state: the
    reference step (`symphys.step.step`) on packed NumPy arrays of one
    world's parameters (Bp = 1), run node by node by PyTensor's Python VM
    (`backends.interpreted`: nothing to compile). With `gradient`, also
    vjp(*inputs, g) -> the cotangents of the six inputs for an output
    cotangent g (B, N, 18), from PyTensor's gradient of the reference."""
    from symphys import rewrites
    from symphys.backends import interpreted, interpreted_mode
    from symphys.contacts import contact_blocks
    from symphys.joints import (articulated_bodies, drag_blocks, joint_blocks, motor_blocks)
    from symphys.step import StepModel, step

    with rewrites.switched(False), interpreted():
        n, j, m = len(scene.bodies), len(scene.joints), len(scene.motors)
        S = pt.tensor("state", shape=(1, n, 18))
        body = pt.tensor("body", shape=(1, n, BODY.width))
        world = pt.tensor("world", shape=(1, WORLD.width))
        joint = pt.tensor("joint", shape=(1, j, JOINT.width))
        motor = pt.tensor("motor", shape=(1, m, MOTOR.width))
        action = pt.tensor("action", shape=(1, m))
        # One world: its parameters as scalars, as unbatched reference graphs hold them.
        bodies, worlds, frames, motors = unpack_model(scene, body, world[0], joint, motor)
        model = StepModel(scene, bodies, worlds, tuple(contact_blocks(scene)),
                          joint_blocks=tuple(joint_blocks(scene)),
                          motor_blocks=tuple(motor_blocks(scene)), frames=frames,
                          motors=motors, action=action if scene.motors else None,
                          articulated=articulated_bodies(scene),
                          drag_blocks=tuple(drag_blocks(scene)))
        out = pack_state(step(model, unpack_state(S)))
        inputs = [S, body, world, joint, motor, action]
        fn = pytensor.function(inputs, out, mode=interpreted_mode(), on_unused_input="ignore")
        if not gradient:
            return lambda *args: np.asarray(fn(*args))
        g = pt.tensor("g", shape=(1, n, 18))
        grads = pytensor.grad((out * g).sum(), inputs, disconnected_inputs="ignore",
                              return_disconnected="zero")
        vjp = pytensor.function(inputs + [g], grads, mode=interpreted_mode(),
                                on_unused_input="ignore")
    return (lambda *args: np.asarray(fn(*args)),
            lambda *args: [np.asarray(x) for x in vjp(*args)])
