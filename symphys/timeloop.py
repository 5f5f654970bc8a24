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

from dataclasses import dataclass

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
from symphys.sensors import observe
from symphys.step import StepModel, step


def articulation_leaves(frames: JointFrames | None, motors: MotorArrays | None,
                        action) -> list:
    """Joint frames, motor arrays and the action (B, M) (None when a
    controller computes it), in the order `_step_fn` reads them after the
    model leaves."""
    leaves = []
    if frames is not None:
        leaves += frames.leaves()
    if motors is not None:
        leaves += motors.leaves() + ([action] if action is not None else [])
    return [pt.as_tensor_variable(x) for x in leaves]


@dataclass(frozen=True)
class Policy:
    """A controller run inside the time loop (closed loop).

    Its parameters (in `names` order) and, when the scene has target
    sensors, the task inputs (B, n_targets) follow the articulation leaves;
    the time (B, 1) and the controller's carry follow the 18 physics state
    components in the loop's state."""

    controller: object
    names: tuple[str, ...]
    has_task: bool


@dataclass(frozen=True)
class LoopOptions:
    """Back-propagation options of the time loop.

    gradient_decay: the cotangent passed from step t+1 back to step t is
      multiplied by this factor (the paper's 0.95 trick: far-future losses
      weigh less; 1 gives the exact gradient).
    truncate: if > 0, the cotangent is cut every `truncate` steps
      (truncated back-propagation through time)."""

    gradient_decay: float = 1.0
    truncate: int = 0

    @property
    def exact(self) -> bool:
        return self.gradient_decay == 1.0 and self.truncate == 0


def _step_fn(scene: Scene, policy: Policy | None = None):
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
            rest = rest[MOTOR_LEAVES:]
            if policy is None:
                action = rest.pop(0)
        state = State.from_flat(state_flat[:STATE_SIZE])
        extra = []
        if policy is not None:
            params = dict(zip(policy.names, rest[:len(policy.names)]))
            task = rest[len(policy.names)] if policy.has_task else None
            time, carry = state_flat[STATE_SIZE], list(state_flat[STATE_SIZE + 1:])
            obs = observe(scene, state, time, task, bodies, world, frames)
            action, carry = policy.controller.apply(params, obs, carry, time)
            if scene.motors:
                action = action + pt.zeros_like(time)
            extra = [time + scene.dt, *carry]
        model = StepModel(scene, bodies, world, blocks, frames=frames, motors=motors,
                          action=action, **articulation)
        return step(model, state).flat() + extra

    return run


def _forward(scene: Scene, state0, leaves, n_steps, policy: Policy | None):
    run = _step_fn(scene, policy)
    n_state, n_leaves = len(state0), len(leaves)

    def body(*args):
        state, lv = args[:n_state], args[n_state:n_state + n_leaves]
        return run(list(state), list(lv))

    return pytensor.scan(body, outputs_info=list(state0), non_sequences=list(leaves),
                         n_steps=n_steps, return_updates=False, name="symphys_forward")


def _adjoint(scene: Scene, state0, leaves, n_steps, outputs, cotangents,
             policy: Policy | None, options: LoopOptions):
    """Gradients of sum_t <g_t, s_t> with respect to state0 and leaves."""
    run = _step_fn(scene, policy)
    n_state, n_leaves = len(state0), len(leaves)
    cots = [pt.zeros_like(o) if isinstance(c.type, DisconnectedType) else c
            for o, c in zip(outputs, cotangents)]
    # State before each step: s_0 .. s_{T-1}.
    before = [pt.concatenate([s0[None], out[:-1]], axis=0) for s0, out in zip(state0, outputs)]
    # Step numbers T-1 .. 0, only needed to truncate.
    index = [pt.arange(n_steps)[::-1]] if options.truncate > 0 else []

    def body(*args):
        i = len(index)
        t = args[0] if index else None
        s_t = list(args[i:i + n_state]); i += n_state
        g_t = list(args[i:i + n_state]); i += n_state
        adj = list(args[i:i + n_state]); i += n_state
        acc = list(args[i:i + n_leaves]); i += n_leaves
        lv = list(args[i:i + n_leaves])
        a_next = [a + g for a, g in zip(adj, g_t)]        # cotangent of s_{t+1}
        out = run(s_t, lv)
        total = sum((o * a).sum() for o, a in zip(out, a_next))
        grads = pytensor.grad(total, s_t + lv, disconnected_inputs="ignore",
                              consider_constant=a_next)
        back = grads[:n_state]
        if options.gradient_decay != 1.0:
            back = [options.gradient_decay * g for g in back]
        if options.truncate > 0:
            cut = pt.eq(t % options.truncate, 0) & (t > 0)
            back = [pt.switch(cut, 0.0, g) for g in back]
        return back + [c + g for c, g in zip(acc, grads[n_state:])]

    init = [pt.zeros_like(s) for s in state0] + [pt.zeros_like(lf) for lf in leaves]
    res = pytensor.scan(body, sequences=index + [b[::-1] for b in before]
                        + [c[::-1] for c in cots],
                        outputs_info=init, non_sequences=list(leaves), n_steps=n_steps,
                        return_updates=False, name="symphys_adjoint")
    return [r[-1] for r in res]


def time_loop(scene: Scene, state0, leaves, n_steps, policy: Policy | None = None,
              options: LoopOptions = LoopOptions()):
    """Sequences s_1..s_T of the state components (the 18 physics components,
    each (T, B, N), then with a policy the time (T, B, 1) and its carry)."""
    state0 = [pt.as_tensor_variable(s) for s in state0]
    leaves = [pt.as_tensor_variable(lf) for lf in leaves]
    n_steps = pt.as_tensor_variable(n_steps).astype("int64")
    n_state, n_leaves = len(state0), len(leaves)

    inner_state = [s.type() for s in state0]
    inner_leaves = [lf.type() for lf in leaves]
    inner_n = n_steps.type()
    inner_out = _forward(scene, inner_state, inner_leaves, inner_n, policy)
    # Leaves the step never reads (e.g. a sphere's box size) must report a
    # disconnected gradient, not zeros, to agree with the Op's connection pattern.
    # An input whose outputs all have disconnected cotangents (e.g. the
    # rotation of a sphere when the loss ignores rotations) must report a
    # disconnected gradient too.
    inner_in = inner_state + inner_leaves
    pattern = io_connection_pattern(inner_in, list(inner_out))

    def pullback(inputs, outputs, cotangents):
        s0 = inputs[:n_state]
        lv = inputs[n_state:n_state + n_leaves]
        live = [not isinstance(c.type, DisconnectedType) for c in cotangents]
        grads = _adjoint(scene, s0, lv, inputs[-1], outputs, cotangents, policy, options)
        grads = [g if any(p and l for p, l in zip(row, live)) else disconnected_type()
                 for g, row in zip(grads, pattern)]
        return grads + [disconnected_type()]

    op = OpFromGraph(inner_state + inner_leaves + [inner_n], list(inner_out),
                     pullback=pullback, inline=True, name="symphys_time_loop")
    out = op(*state0, *leaves, n_steps)
    return list(out) if isinstance(out, (list, tuple)) else [out]
