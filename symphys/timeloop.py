"""The time loop as one graph node with its own reverse pass.

`time_loop(scene, state0, leaves, n_steps)` returns the 18 state-component
sequences s_1..s_T, each (T, B, N), computed by a forward `scan` of
`step`. It is wrapped in an `OpFromGraph` whose pullback is an adjoint
scan running backwards in time: with a_t the cotangent of s_t,

    a_t = g_t + VJP_state(step, s_t)(a_{t+1}),   dleaves += VJP_leaves(...)

where g_t is the loss's direct cotangent on s_t. PyTensor's generic scan
gradient gives the same numbers but builds a far larger graph (minutes of
rewriting for one ball); this keeps the reverse loop to the step's VJP.
Both Ops are inlined at compile time, so the backend sees two plain scans.
"""

from __future__ import annotations

import pytensor
import pytensor.tensor as pt
from pytensor.compile.builders import OpFromGraph
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.op import io_connection_pattern

from symphys.contacts import contact_blocks
from symphys.joints import (JOINT_LEAVES, MOTOR_LEAVES, JointFrames, MotorArrays,
                            joint_blocks, jointed_groups, motor_blocks)
from symphys.model import STATE_SIZE, LeafLayout, State, model_from_leaves, n_model_leaves
from symphys.scene import Scene
from symphys.step import StepModel, step


def articulation_leaves(frames: JointFrames | None, motors: MotorArrays | None,
                        action) -> list:
    """Joint frames, motor arrays and the action (B, M), in the order
    `_step_fn` reads them after the model leaves."""
    leaves = []
    if frames is not None:
        leaves += frames.leaves()
    if motors is not None:
        leaves += motors.leaves() + [action]
    return [pt.as_tensor_variable(x) for x in leaves]


def _step_fn(scene: Scene):
    blocks = tuple(contact_blocks(scene))
    layout = LeafLayout.of(scene)
    n_model = n_model_leaves(layout)
    articulation = dict(joint_blocks=tuple(joint_blocks(scene)),
                        motor_blocks=tuple(motor_blocks(scene)),
                        jointed=tuple(jointed_groups(scene)))

    def run(state_flat, leaves):
        bodies, world = model_from_leaves(leaves[:n_model], layout)
        rest = list(leaves[n_model:])
        frames = motors = action = None
        if scene.joints:
            frames = JointFrames.from_leaves(rest[:JOINT_LEAVES])
            rest = rest[JOINT_LEAVES:]
        if scene.motors:
            motors = MotorArrays(*rest[:MOTOR_LEAVES])
            action = rest[MOTOR_LEAVES]
        model = StepModel(scene, bodies, world, blocks, frames=frames, motors=motors,
                          action=action, **articulation)
        return step(model, State.from_flat(state_flat)).flat()

    return run


def _forward(scene: Scene, state0, leaves, n_steps):
    run = _step_fn(scene)
    n_leaves = len(leaves)

    def body(*args):
        state, lv = args[:STATE_SIZE], args[STATE_SIZE:STATE_SIZE + n_leaves]
        return run(list(state), list(lv))

    return pytensor.scan(body, outputs_info=list(state0), non_sequences=list(leaves),
                         n_steps=n_steps, return_updates=False, name="symphys_forward")


def _adjoint(scene: Scene, state0, leaves, n_steps, outputs, cotangents):
    """Gradients of sum_t <g_t, s_t> with respect to state0 and leaves."""
    run = _step_fn(scene)
    n_leaves = len(leaves)
    cots = [pt.zeros_like(o) if isinstance(c.type, DisconnectedType) else c
            for o, c in zip(outputs, cotangents)]
    # State before each step: s_0 .. s_{T-1}.
    before = [pt.concatenate([s0[None], out[:-1]], axis=0) for s0, out in zip(state0, outputs)]

    def body(*args):
        i = 0
        s_t = list(args[i:i + STATE_SIZE]); i += STATE_SIZE
        g_t = list(args[i:i + STATE_SIZE]); i += STATE_SIZE
        adj = list(args[i:i + STATE_SIZE]); i += STATE_SIZE
        acc = list(args[i:i + n_leaves]); i += n_leaves
        lv = list(args[i:i + n_leaves])
        a_next = [a + g for a, g in zip(adj, g_t)]        # cotangent of s_{t+1}
        out = run(s_t, lv)
        total = sum((o * a).sum() for o, a in zip(out, a_next))
        grads = pytensor.grad(total, s_t + lv, disconnected_inputs="ignore",
                              consider_constant=a_next)
        return grads[:STATE_SIZE] + [c + g for c, g in zip(acc, grads[STATE_SIZE:])]

    init = [pt.zeros_like(s) for s in state0] + [pt.zeros_like(lf) for lf in leaves]
    res = pytensor.scan(body, sequences=[b[::-1] for b in before] + [c[::-1] for c in cots],
                        outputs_info=init, non_sequences=list(leaves), n_steps=n_steps,
                        return_updates=False, name="symphys_adjoint")
    return [r[-1] for r in res]


def time_loop(scene: Scene, state0, leaves, n_steps):
    """Sequences s_1..s_T of the 18 state components, each (T, B, N)."""
    state0 = [pt.as_tensor_variable(s) for s in state0]
    leaves = [pt.as_tensor_variable(lf) for lf in leaves]
    n_steps = pt.as_tensor_variable(n_steps).astype("int64")
    n_leaves = len(leaves)

    inner_state = [s.type() for s in state0]
    inner_leaves = [lf.type() for lf in leaves]
    inner_n = n_steps.type()
    inner_out = _forward(scene, inner_state, inner_leaves, inner_n)
    # Leaves the step never reads (e.g. a sphere's box size) must report a
    # disconnected gradient, not zeros, to agree with the Op's connection pattern.
    # An input whose outputs all have disconnected cotangents (e.g. the
    # rotation of a sphere when the loss ignores rotations) must report a
    # disconnected gradient too.
    inner_in = inner_state + inner_leaves
    pattern = io_connection_pattern(inner_in, list(inner_out))

    def pullback(inputs, outputs, cotangents):
        s0 = inputs[:STATE_SIZE]
        lv = inputs[STATE_SIZE:STATE_SIZE + n_leaves]
        live = [not isinstance(c.type, DisconnectedType) for c in cotangents]
        grads = _adjoint(scene, s0, lv, inputs[-1], outputs, cotangents)
        grads = [g if any(p and l for p, l in zip(row, live)) else disconnected_type()
                 for g, row in zip(grads, pattern)]
        return grads + [disconnected_type()]

    op = OpFromGraph(inner_state + inner_leaves + [inner_n], list(inner_out),
                     pullback=pullback, inline=True, name="symphys_time_loop")
    return op(*state0, *leaves, n_steps)
