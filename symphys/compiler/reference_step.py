"""One step run both ways on NumPy arrays: the kernels' packed inputs of a
scene (`numeric_inputs`) and the reference step on them
(`reference_step_function`), which the kernel tests compare against.
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt

from symphys.compiler import rewrites
from symphys.compiler.backends import interpreted, interpreted_mode
from symphys.loop.rollout import full_parameters
from symphys.physics.contacts import contact_blocks
from symphys.physics.joints import (articulated_bodies, build_joint_arrays, drag_blocks,
                                    joint_blocks, motor_blocks)
from symphys.physics.geoms import build_geoms
from symphys.physics.kernels.graph import (pack_inputs, pack_state, unpack_geoms, unpack_model,
                                           unpack_state)
from symphys.physics.kernels.layout import BODY, GEOM, JOINT, MOTOR, WORLD
from symphys.physics.model import build_model
from symphys.physics.step import StepModel, step


def numeric_inputs(scene, params: dict | None = None, action=None) -> dict:
    """The kernels' inputs for one world of `scene` as NumPy arrays:
    {"state", "body", "world", "joint", "motor", "geom", "action"} (Bp = B = 1),
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
    out = dict(zip(("state", "body", "world", "joint", "motor", "geom"), packed))
    m = len(scene.motors)
    out["action"] = np.zeros((1, m)) if action is None else np.asarray(action, float).reshape(1, m)
    return out


# (id(scene), parameter signature) -> (scene, packing function), the latest few
_packers: dict = {}
_PACKERS_KEPT = 16


def _packer(scene, signature):
    """f(*parameter values) -> packed (state, body, world, joint, motor, geom),
    run by PyTensor's Python VM."""
    inputs = [pt.tensor(name=k, shape=shape, dtype=np.dtype(dtype).name)
              for k, shape, dtype in signature]
    p = full_parameters(scene, {x.name: x for x in inputs})
    bodies, world, state = build_model(scene, p, set())
    frames, motors = build_joint_arrays(scene, p)
    packed = pack_inputs(bodies, world, frames, motors, len(scene.joints), len(scene.motors),
                         build_geoms(scene, p, set()))
    return pytensor.function(inputs, [pack_state(state), *packed], mode=interpreted_mode(),
                             on_unused_input="ignore")


def reference_step_function(scene, gradient: bool = False):
    """f(state, body, world, joint, motor, geom, action) -> next state: the
    reference step (`symphys.physics.step.step`) on packed NumPy arrays of one
    world's parameters (Bp = 1), run node by node by PyTensor's Python VM
    (`backends.interpreted`: nothing to compile). With `gradient`, also
    vjp(*inputs, g) -> the cotangents of the seven inputs for an output
    cotangent g (B, N, 18), from PyTensor's gradient of the reference."""
    # No creation stack on each node (traceback__limit=0, for this build
    # only): a reference step and its gradient have tens of thousands of
    # nodes, and recording every stack took a tenth of the build.
    with rewrites.switched(False), interpreted(), \
            pytensor.config.change_flags(traceback__limit=0):
        n, j, m = len(scene.bodies), len(scene.joints), len(scene.motors)
        S = pt.tensor("state", shape=(1, n, 18))
        body = pt.tensor("body", shape=(1, n, BODY.width))
        world = pt.tensor("world", shape=(1, WORLD.width))
        joint = pt.tensor("joint", shape=(1, j, JOINT.width))
        motor = pt.tensor("motor", shape=(1, m, MOTOR.width))
        geom = pt.tensor("geom", shape=(1, len(scene.geoms), GEOM.width))
        action = pt.tensor("action", shape=(1, m))
        # One world: its parameters as scalars, as unbatched reference graphs hold them.
        bodies, worlds, frames, motors = unpack_model(scene, body, world[0], joint, motor)
        model = StepModel(scene, bodies, worlds, tuple(contact_blocks(scene)),
                          joint_blocks=tuple(joint_blocks(scene)),
                          motor_blocks=tuple(motor_blocks(scene)), frames=frames,
                          motors=motors, action=action if scene.motors else None,
                          articulated=articulated_bodies(scene),
                          drag_blocks=tuple(drag_blocks(scene)),
                          geoms=unpack_geoms(scene, geom))
        out = pack_state(step(model, unpack_state(S)))
        inputs = [S, body, world, joint, motor, geom, action]
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
