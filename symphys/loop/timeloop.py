"""The time loop: `step` repeated, with the controller in the loop.

`time_loop(scene, state0, leaves, n_steps)` returns the 18 state-component
sequences s_1..s_T, each (T, B, N), from `adjoint.loop_with_adjoint`
(a forward scan whose reverse pass is an adjoint scan of the step's VJP).
The leaves are the flattened `StepInputs` (model arrays, joint frames,
motor arrays, the action unless a controller computes it), then the
controller's parameters and task inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytensor.tensor as pt

from symphys.camera.image import render_state
from symphys.adjoint import LoopOptions, loop_with_adjoint
from symphys.physics.contacts import contact_blocks
from symphys.physics.geoms import GeomArrays
from symphys.physics.joints import (JointFrames, MotorArrays, articulated_bodies, drag_blocks,
                                    joint_blocks, motor_blocks)
from symphys.physics.kernels.graph import unpack_model, unpack_state
from symphys.physics.model import STATE_SIZE, BodyArrays, State, WorldArrays
from symphys.physics.sensors import observe
from symphys.physics.step import StepModel, step
from symphys.scene.scene import Scene
from symphys.tree import Node, flatten, unflatten


@dataclass(frozen=True)
class StepInputs:
    """What the reference step reads besides the state: the model arrays,
    joint frames and motor arrays (None without joints or motors) and the
    action (B, M) (None when a controller computes it)."""

    bodies: BodyArrays
    world: WorldArrays
    frames: JointFrames | None = None
    motors: MotorArrays | None = None
    action: object = None
    geoms: GeomArrays | None = None

    def flatten(self) -> tuple[list, Node]:
        """(leaves as tensors, structure) for `time_loop`."""
        leaves, structure = flatten(self)
        return [pt.as_tensor_variable(x) for x in leaves], structure


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


def _step_fn(scene: Scene, structure: Node, policy: Policy | None = None):
    """The reference step on the loop's state and leaves: the `StepInputs`
    of `structure`, then the policy's."""
    blocks = tuple(contact_blocks(scene))
    articulation = dict(joint_blocks=tuple(joint_blocks(scene)),
                        motor_blocks=tuple(motor_blocks(scene)),
                        drag_blocks=tuple(drag_blocks(scene)),
                        articulated=articulated_bodies(scene))

    def run(state_flat, leaves):
        inputs = unflatten(structure, leaves[:structure.size])
        bodies, world, frames, motors = inputs.bodies, inputs.world, inputs.frames, inputs.motors
        action, rest = inputs.action, list(leaves[structure.size:])
        state = State.from_flat(state_flat[:STATE_SIZE])
        extra = []
        if policy is not None:
            params = dict(zip(policy.names, rest[:len(policy.names)]))
            task = rest[len(policy.names)] if policy.has_task else None
            time, carry = state_flat[STATE_SIZE], list(state_flat[STATE_SIZE + 1:])
            obs = observe(scene, state, time, task, bodies, world, frames, render=render_state)
            action, carry = policy.controller.apply(params, obs, carry, time)
            if scene.motors:
                action = action + pt.zeros_like(time)
            extra = [time + scene.dt, *carry]
        model = StepModel(scene, bodies, world, blocks, frames=frames, motors=motors,
                          action=action, geoms=inputs.geoms, **articulation)
        return step(model, state).flat() + extra

    return run


def _fused_step_fn(scene: Scene, layout, policy: Policy | None = None):
    """The step as the three stage kernels on the packed state (B, N, 18);
    leaves: packed body, world, joint, motor and geom arrays, then the action
    (B, M) or the policy's leaves."""
    # Imported here: the stage kernels bring Numba in (2 s), which graphs
    # without fused stages do not need.
    from symphys.physics.kernels.stages import fused_step

    def run(state, leaves):
        packed = state[0]
        body, world, joint, motor, geom, *rest = leaves
        extra = []
        if policy is None:
            action = rest[0]
        else:
            params = dict(zip(policy.names, rest[:len(policy.names)]))
            task = rest[len(policy.names)] if policy.has_task else None
            time, carry = state[1], list(state[2:])
            bodies, worlds, frames, _ = unpack_model(scene, body, world, joint, motor)
            obs = observe(scene, unpack_state(packed), time, task, bodies, worlds, frames,
                          render=render_state)
            action, carry = policy.controller.apply(params, obs, carry, time)
            action = action + pt.zeros_like(time)
            extra = [time + scene.dt, *carry]
        return [fused_step(packed, body, world, joint, motor, geom, action, layout)] + extra

    return run


def time_loop(scene: Scene, state0, leaves, n_steps, policy: Policy | None = None,
              options: LoopOptions = LoopOptions(), layout=None, structure: Node | None = None):
    """Sequences s_1..s_T of the loop's state: the 18 physics components,
    each (T, B, N), or with a kernel `layout` the packed state
    (T, B, N, 18); then with a policy the time (T, B, 1) and its carry.
    structure: without a layout, that of the `StepInputs` the leaves start
    with (`StepInputs.flatten`)."""
    run = (_step_fn(scene, structure, policy) if layout is None
           else _fused_step_fn(scene, layout, policy))
    return loop_with_adjoint(run, state0, leaves, n_steps, options, name="symphys_time_loop")
