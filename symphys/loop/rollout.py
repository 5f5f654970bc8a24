"""Symbolic rollouts: the step repeated with `pytensor.scan`.

`rollout(scene, steps, params)` returns a symbolic `Trajectory`; any loss can
be written on it and differentiated with `pytensor.grad` (back-propagation
through time). Trajectory fields are keyed by body name with shapes
(steps+1, 3) for one world or (B, steps+1, 3) when parameters are batched
(rotation: (..., 3, 3)); `time` is (steps+1,).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

from symphys.compiler import rewrites
from symphys.errors import ParameterError, counted
from symphys.loop.timeloop import LoopOptions, Policy, StepInputs, time_loop
from symphys.physics.geoms import build_geoms
from symphys.physics.joints import build_joint_arrays
from symphys.physics.kernels.graph import pack_state
from symphys.physics.kernels.layout import UnsupportedByKernels, build_layout
from symphys.physics.kernels.packing import packed_model
from symphys.physics.model import STATE_SIZE, build_model, zero_template
from symphys.scene.params import check_mapping, check_names, check_value, parameter_shapes
from symphys.scene.scene import Scene
from symphys.tree import flatten


def quiet_graph_building():
    """Scoped: skip recording a Python stack trace on every graph node.

    Those traces cost a quarter of graph-building time on step graphs; the
    flag is restored on exit (no global configuration change)."""
    return pytensor.config.change_flags(traceback__limit=0)


@dataclass(frozen=True)
class Trajectory:
    """Time series per body. Numeric (NumPy) or symbolic (PyTensor)."""

    time: object
    position: dict
    rotation: dict
    velocity: dict
    angular_velocity: dict
    batched: bool = False
    # every body's packed state (`rollout_states`), (T+1, N, 18) or (B, T+1, N, 18):
    # for losses over all bodies at once
    states: object = None


def split_batched(scene: Scene, params: dict) -> set[str]:
    """Names whose value carries a leading batch axis."""
    shapes = parameter_shapes(scene)
    return {k for k, v in params.items() if getattr(v, "ndim", np.ndim(v)) == len(shapes[k]) + 1}


def full_parameters(scene: Scene, params: dict | None) -> dict:
    """`params` completed with the scene's defaults (as constants)."""
    params = check_mapping(scene, params)
    check_names(scene, params.keys(), "params")
    out = {k: pt.constant(v, name=k) for k, v in scene.parameters().items()}
    for k, v in params.items():
        # symbolic values are the caller's; numbers are checked like scene fields
        out[k] = pt.as_tensor_variable(v if _symbolic(v) else check_value(scene, k, v))
    return out


def _symbolic(value) -> bool:
    """Whether a parameter value holds a graph variable (also inside a list)."""
    if isinstance(value, (list, tuple)):
        return any(map(_symbolic, value))
    return isinstance(value, Variable)


def motor_action(scene: Scene, action, like):
    """The motor commands as (B, M): `action` may be None (all zero), (M,)
    or (B, M). like: a (B, N) tensor giving the batch size."""
    n = len(scene.motors)
    base = pt.zeros_like(like[:, :1]) + np.zeros(n)
    if action is None:
        return base
    action = pt.as_tensor_variable(action)
    if action.ndim not in (1, 2):
        raise ParameterError(f"{scene.source}: action must have shape ({n},) or (B, {n}), "
                             f"got {action.ndim} dimensions")
    return base + action


def _policy_inputs(scene: Scene, controller, controller_params, task, like):
    """(Policy, its leaves, extra initial state) for a closed-loop rollout."""
    if not scene.motors:
        raise ParameterError(f"{scene.source}: a controller needs motors to drive; "
                             "the scene has none")
    n_in = getattr(controller, "n_in", None)
    if n_in is not None and n_in != scene.n_observations:
        raise ParameterError(
            f"{scene.source}: the controller reads {counted(n_in, 'input')} but the scene's "
            f"sensors give {scene.n_observations} ({[x.name for x in scene.sensors]})")
    n_out = getattr(controller, "n_out", len(scene.motors))
    if n_out != len(scene.motors):
        raise ParameterError(f"{scene.source}: the controller gives {counted(n_out, 'action')} "
                             f"but the scene has {counted(len(scene.motors), 'motor')} "
                             f"{list(scene.motor_names)}")
    shapes = controller.parameter_shapes()
    given = dict(controller_params or {})
    missing = [k for k in shapes if k not in given]
    if missing:
        raise ParameterError(f"controller parameters missing: {missing}")
    unknown = [k for k in given if k not in shapes]
    if unknown:
        raise ParameterError(f"unknown controller parameters {unknown}; "
                             f"expected {sorted(shapes)}")
    names = tuple(shapes)
    leaves = [pt.as_tensor_variable(given[k]) for k in names]
    has_task = scene.n_targets > 0
    if has_task:
        if task is None:
            raise ParameterError(f"{scene.source}: the scene has target sensors: pass "
                                 f"task=(B, {scene.n_targets}) inputs")
        task = pt.as_tensor_variable(task)
        leaves.append(pt.zeros_like(like[:, :1]) + (task if task.ndim == 2 else task[None]))
    time0 = pt.zeros_like(like[:, :1])
    carry0 = [pt.zeros_like(like[:, :1]) + np.zeros(h) for h in controller.carry_sizes()]
    return Policy(controller, names, has_task), leaves, [time0, *carry0]


def _batched_controller_columns(controller, controller_params) -> list:
    """(B, 1) columns of the controller parameters given per world."""
    shapes = controller.parameter_shapes()
    out = []
    for name, value in (controller_params or {}).items():
        value = pt.as_tensor_variable(value)
        if name in shapes and value.ndim == len(shapes[name]) + 1:
            out.append(value.reshape((value.shape[0], -1))[:, :1])
    return out


def kernel_layout(scene: Scene):
    """The scene's tables for the fused step kernels, or None when graphs
    are built as the reference (`rewrites.fused` says no: the C VM and JAX
    by default, `rewrites.switched(False)`) or the scene uses what the
    kernels do not model yet (penalty contacts, the friction cone)."""
    if not rewrites.fused():
        return None
    try:
        return build_layout(scene)
    except UnsupportedByKernels:
        return None


def rollout_states(scene: Scene, steps, params: dict | None = None, action=None,
                   controller=None, controller_params: dict | None = None, task=None,
                   options: LoopOptions = LoopOptions()):
    """(states (steps+1, B, N, 18), batched names).

    The last axis is the packed state (`physics.kernels.layout.STATE`):
    position xyz, rotation (9, row-major), velocity xyz, angular velocity
    xyz; entry 0 is the initial state.
    action: motor commands held for the whole rollout, (M,) or (B, M); or
    controller (`symphys.learn.nn`) with its parameters {name: tensor}, reading the
    scene's sensors each step (task: (B, n_targets) target inputs).
    options: gradient decay / truncation of the reverse pass; with
    `options.checkpoint` = K the states are every K-th one only
    (steps / K + 1 entries).
    """
    if options.checkpoint and isinstance(steps, (int, np.integer)) \
            and steps % options.checkpoint:
        raise ParameterError(f"{scene.source}: steps ({steps}) must be a multiple of "
                             f"checkpoint ({options.checkpoint})")
    p = full_parameters(scene, params)
    batched = split_batched(scene, p)
    layout = kernel_layout(scene)
    with quiet_graph_building():
        if layout is None:
            bodies, world, state0 = build_model(scene, p, batched)
            frames, motors = build_joint_arrays(scene, p)
            per_world = flatten((frames, motors))[0]
            packed0 = None
        else:
            body, world_arr, joint, motor, geom, packed0 = packed_model(scene, p)
            # Every world's state has the full batch size (the step's carry has one shape).
            per_world = [body[:, 0], world_arr] + ([joint[:, :, 0]] if scene.joints else []) + (
                [motor[:, :, 0]] if scene.motors else []) + (
                [geom[:, :, 0]] if scene.geoms else [])
        if task is not None and pt.as_tensor_variable(task).ndim == 2:
            per_world.append(pt.as_tensor_variable(task))
        if controller is not None:
            per_world += _batched_controller_columns(controller, controller_params)
        if packed0 is not None:
            packed0 = packed0 + zero_template([x[:, :1] for x in per_world])[:, :, None]
            like = packed0[..., 0]
        else:
            if per_world:
                # A batched anchor, motor gain or task makes every world's state batched.
                template = zero_template([x[:, :1] for x in per_world])
                state0 = state0.__class__.from_flat([c + template for c in state0.flat()])
            like = state0.position.x
        policy, policy_leaves, extra_state = None, [], []
        if controller is not None:
            if action is not None:
                raise ParameterError("give either action or controller, not both")
            policy, policy_leaves, extra_state = _policy_inputs(
                scene, controller, controller_params, task, like)
        elif scene.motors:
            action = motor_action(scene, action, like)
        if layout is None:
            packed0 = pack_state(state0)
            leaves, structure = StepInputs(
                bodies, world, frames, motors,
                action if policy is None and scene.motors else None,
                build_geoms(scene, p, batched)).flatten()
            seqs = time_loop(scene, state0.flat() + extra_state, leaves + policy_leaves, steps,
                             policy, options, structure=structure)[:STATE_SIZE]
            seq = pt.stack(seqs, axis=-1)
        else:
            leaves = [body, world_arr, joint, motor, geom]
            if policy is None:
                leaves.append(action if scene.motors else pt.zeros((packed0.shape[0], 0)))
            seq = time_loop(scene, [packed0] + extra_state, leaves + policy_leaves, steps,
                            policy, options, layout=layout)[0]
        states = pt.concatenate([packed0[None], seq], axis=0)
    return states, batched


def trajectory_from_states(scene: Scene, states, batched: bool, lib=pt,
                           stride: int = 1) -> Trajectory:
    """Per-body fields of packed states (T+1, B, N, 18) (`stride` steps
    apart: a checkpointed rollout keeps every K-th state).

    lib is `pytensor.tensor` for symbolic trajectories or `numpy`."""
    def field(i, columns, shape):
        x = states[:, :, i, columns] if batched else states[:, 0, i, columns]
        if shape != (3,):
            lead = (x.shape[0], x.shape[1]) if batched else (x.shape[0],)
            x = x.reshape(lead + shape)
        return lib.moveaxis(x, 1, 0) if batched else x

    def fields(columns, shape):
        return {n: field(i, columns, shape) for i, n in enumerate(scene.body_names)}

    return Trajectory(
        time=lib.arange(states.shape[0]) * (scene.dt * stride),
        position=fields(slice(0, 3), (3,)), rotation=fields(slice(3, 12), (3, 3)),
        velocity=fields(slice(12, 15), (3,)), angular_velocity=fields(slice(15, 18), (3,)),
        batched=batched, states=lib.moveaxis(states, 1, 0) if batched else states[:, 0])


def rollout(scene: Scene, steps, params: dict | None = None, action=None, controller=None,
            controller_params: dict | None = None, task=None,
            options: LoopOptions = LoopOptions()) -> Trajectory:
    """Symbolic trajectory of `steps` steps (an int or a symbolic scalar).

    params: {name: tensor or array} for any parameter; the rest take the
    scene's defaults. A value with a leading batch axis makes a batched
    rollout (all batched values share B).
    """
    states, batched = rollout_states(scene, steps, params, action, controller,
                                     controller_params, task, options)
    per_world = any(x is not None and pt.as_tensor_variable(x).ndim == 2
                    for x in (action, task)) or (
        controller is not None and bool(_batched_controller_columns(controller,
                                                                    controller_params)))
    return trajectory_from_states(scene, states, bool(batched) or per_world,
                                  stride=options.stride)
