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

from symphys.errors import ParameterError
from symphys.joints import build_joint_arrays
from symphys.model import STATE_SIZE, build_model, model_leaves
from symphys.params import check_names, default_parameters, parameter_shapes
from symphys.scene import Scene
from symphys.timeloop import articulation_leaves, time_loop


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


def split_batched(scene: Scene, params: dict) -> set[str]:
    """Names whose value carries a leading batch axis."""
    shapes = parameter_shapes(scene)
    return {k for k, v in params.items() if getattr(v, "ndim", np.ndim(v)) == len(shapes[k]) + 1}


def full_parameters(scene: Scene, params: dict | None) -> dict:
    """`params` completed with the scene's defaults (as constants)."""
    check_names(scene, (params or {}).keys(), "params")
    out = {k: pt.constant(v, name=k) for k, v in default_parameters(scene).items()}
    for k, v in (params or {}).items():
        out[k] = pt.as_tensor_variable(v)
    return out


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


def rollout_states(scene: Scene, steps, params: dict | None = None, action=None):
    """(list of 18 state-component sequences (steps+1, B, N), batched names).

    Components follow `State.flat()`: position xyz, rotation (9, row-major),
    velocity xyz, angular velocity xyz; entry 0 is the initial state.
    action: motor commands held for the whole rollout, (M,) or (B, M).
    """
    p = full_parameters(scene, params)
    batched = split_batched(scene, p)
    with quiet_graph_building():
        bodies, world, state0 = build_model(scene, p, batched)
        frames, motors = build_joint_arrays(scene, p, batched)
        if frames is not None:
            # A batched anchor or motor gain makes every world's state batched.
            template = sum(x[:, :1] * 0.0 for x in frames.leaves() + (
                motors.leaves() if motors is not None else []))
            state0 = state0.__class__.from_flat([c + template for c in state0.flat()])
        leaves = model_leaves(bodies, world) + articulation_leaves(
            frames, motors, motor_action(scene, action, state0.position.x)
            if motors is not None else None)
        seqs = time_loop(scene, state0.flat(), leaves, steps)
        full = [pt.concatenate([c0[None], s], axis=0) for c0, s in zip(state0.flat(), seqs)]
    assert len(full) == STATE_SIZE
    return full, batched


def trajectory_from_components(scene: Scene, comps, steps, batched: bool,
                               lib=pt) -> Trajectory:
    """Assemble per-body fields from the 18 (T+1, B, N) component sequences.

    lib is `pytensor.tensor` for symbolic trajectories or `numpy`."""
    def per_body(parts, i, shape):
        stacked = lib.stack([c[:, :, i] for c in parts], axis=-1)   # (T+1, B, k)
        stacked = stacked.reshape((stacked.shape[0], stacked.shape[1]) + shape)
        stacked = lib.moveaxis(stacked, 1, 0)                        # (B, T+1, ...)
        return stacked if batched else stacked[0]

    names = scene.body_names
    pos, rot, vel, ang = comps[0:3], comps[3:12], comps[12:15], comps[15:18]
    return Trajectory(
        time=lib.arange(comps[0].shape[0]) * scene.dt,
        position={n: per_body(pos, i, (3,)) for i, n in enumerate(names)},
        rotation={n: per_body(rot, i, (3, 3)) for i, n in enumerate(names)},
        velocity={n: per_body(vel, i, (3,)) for i, n in enumerate(names)},
        angular_velocity={n: per_body(ang, i, (3,)) for i, n in enumerate(names)},
        batched=batched)


def rollout(scene: Scene, steps, params: dict | None = None, action=None) -> Trajectory:
    """Symbolic trajectory of `steps` steps (an int or a symbolic scalar).

    params: {name: tensor or array} for any parameter; the rest take the
    scene's defaults. A value with a leading batch axis makes a batched
    rollout (all batched values share B).
    """
    comps, batched = rollout_states(scene, steps, params, action)
    return trajectory_from_components(scene, comps, steps, bool(batched))
