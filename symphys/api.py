"""The numeric entry points: `simulate` and `value_and_grad`.

Both compile once per scene structure (shapes, contact pairs, solver
options: not parameter values) and backend, and keep the compiled function
for the rest of the process; Numba's compiled code is also cached on disk by
PyTensor, so a second process compiles warm.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable

import numpy as np
import pytensor
import pytensor.tensor as pt

from symphys.camera.image import RENDER_REWRITES, as_camera, render_state
from symphys.compiler.backends import (Backend, Compiled, as_backend, compile, serves_any_batch,
                                       static_batch)
from symphys.compiler.caches.compiled_functions import LossKey, cached
from symphys.compiler.caches.function_files import loss_text
from symphys.errors import ParameterError, SimulationError, SimulationWarning
from symphys.loop import blowup
from symphys.loop.rollout import Trajectory, rollout_states, trajectory_from_states
from symphys.loop.timeloop import LoopOptions
from symphys.physics.model import build_model
from symphys.scene.params import check_names, has_none, parameter_shapes, resolve_values
from symphys.scene.scene import Scene


def _inputs(scene: Scene, batched: set[str], batch: int | None = None) -> dict:
    """Symbolic parameters; batched ones get a leading axis of length
    `batch` (None: any length)."""
    shapes = parameter_shapes(scene)
    return {name: pt.tensor(name=name, dtype="float64",
                            shape=((batch,) if name in batched else ()) + shape)
            for name, shape in shapes.items()}


def _batched_names(scene: Scene, values: dict) -> set[str]:
    shapes = parameter_shapes(scene)
    return {k for k, v in values.items() if v.ndim == len(shapes[k]) + 1}


def _action_input(scene: Scene, action_batched: bool, batch: int | None):
    """Symbolic motor commands (M,) or (B, M); None for a scene without motors."""
    if not scene.motors:
        return None
    shape = ((batch,) if action_batched else ()) + (len(scene.motors),)
    return pt.tensor(name="action", dtype="float64", shape=shape)


def resolve_action(scene: Scene, action, batch: int | None):
    """(action array or None, whether it is batched, batch size), checked."""
    if not scene.motors:
        if action is not None:
            raise ParameterError(f"{scene.source}: action given, but the scene has no motors")
        return None, False, batch
    n = len(scene.motors)
    if action is not None and has_none(action):
        raise ParameterError(f"{scene.source}: action holds None; give a number for each "
                             f"motor {list(scene.motor_names)}")
    try:
        value = np.zeros(n) if action is None else np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{scene.source}: action must be an array of numbers, got "
                             f"{action!r}") from None
    if not np.all(np.isfinite(value)):
        raise ParameterError(f"{scene.source}: action contains NaN or inf")
    if value.shape == (n,):
        return value, False, batch
    if value.ndim == 2 and value.shape[1] == n and batch in (None, value.shape[0]):
        return value, True, value.shape[0]
    raise ParameterError(
        f"{scene.source}: action must have shape ({n},) for motors "
        f"{list(scene.motor_names)}, or ({batch or 'B'}, {n}) for a batch of worlds; "
        f"got {value.shape}")


def simulate_function(scene: Scene, steps: int, batched: Iterable[str] = (),
                      backend="numba", batch: int | None = None,
                      action_batched: bool = False) -> Compiled:
    """Compiled f(n_steps, *parameters[, action]) -> [the packed states
    (steps + 1, B, N, 18)] (`rollout.rollout_states`); `action` (motor
    commands, (M,) or (B, M)) is an input only when the scene has motors.

    On numba and cvm the step count is an input, so one compiled function
    serves every `steps`; JAX needs it fixed at trace time."""
    backend = as_backend(backend)
    batched = frozenset(batched)
    fixed = steps if backend is Backend.JAX else None
    size = static_batch(backend, bool(batched) or action_batched, batch)
    key = ("simulate", scene.structure_key(), batched, backend, fixed, size, action_batched)

    def build():
        sym = _inputs(scene, set(batched), size)
        action = _action_input(scene, action_batched, size)
        n_steps = pt.scalar("n_steps", dtype="int64")
        states, _ = rollout_states(scene, n_steps if fixed is None else fixed, sym, action)
        extra = [] if action is None else [action]
        return compile([n_steps, *sym.values(), *extra], [states], backend)

    def described():
        return ("simulate", scene.structure_key(), sorted(batched), backend.value, fixed,
                size, action_batched)

    return cached(key, build, backend, described)


def simulate(scene: Scene, steps: int, params: dict | None = None,
             backend: "str | Backend" = "numba", action=None, *,
             strict: bool = False) -> Trajectory:
    """Run `steps` steps; returns a numeric `Trajectory` (batch axis first
    when any parameter value carries one).

    action: motor commands held for the whole run, (M,) or (B, M) in the
    order of `scene.motors` (default zeros).
    A run that blows up (a non-finite or runaway state, `symphys.loop.blowup`)
    gives one `SimulationWarning` naming the first step, body and field;
    `strict=True` raises `SimulationError` instead."""
    steps = _check_steps(steps)
    values, batch = resolve_values(scene, params)
    batched = _batched_names(scene, values)
    action, action_batched, batch = resolve_action(scene, action, batch)
    fn = simulate_function(scene, steps, batched, backend, batch=batch,
                           action_batched=action_batched)
    extra = [] if action is None else [action]
    states, = fn(np.int64(steps), *values.values(), *extra)
    blowup.check(scene.source, states, scene.body_names, scene.dt, strict)
    return trajectory_from_states(scene, states, batch is not None, lib=np)


def _check_steps(steps) -> int:
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ParameterError(f"steps must be a positive integer, got {steps!r}")
    return int(steps)


def value_and_grad_function(scene: Scene, steps: int, loss: Callable, wrt: list[str],
                            batched: Iterable[str] = (), backend="numba",
                            batch: int | None = None,
                            action_batched: bool = False,
                            options: LoopOptions = LoopOptions(),
                            per_world: bool = False) -> Compiled:
    """Compiled f(*parameters[, action]) -> [loss, *gradients in `wrt`
    order]; `wrt` may name "action" (the motor commands) too. `options`:
    the reverse pass (gradient decay, truncation, checkpoints: with
    checkpoint K the loss sees every K-th state).

    per_world: the loss returns one value per world (B,), which f returns;
    the gradients are of their sum, so a batched parameter's gradient (B, ...)
    holds each world's own."""
    backend = as_backend(backend)
    batched = frozenset(batched)
    size = static_batch(backend, bool(batched) or action_batched, batch)
    key = ("grad", scene.structure_key(), steps, LossKey(loss), tuple(wrt), batched,
           backend, size, action_batched, options, per_world)

    def build():
        sym = _inputs(scene, set(batched), size)
        action = _action_input(scene, action_batched, size)
        states, _ = rollout_states(scene, steps, sym, action, options=options)
        traj = trajectory_from_states(scene, states, bool(batched or action_batched),
                                      stride=options.stride)
        value = pt.as_tensor_variable(loss(traj))
        if value.ndim != int(per_world):
            raise ParameterError(
                f"loss must return {'one value per world (B,)' if per_world else 'a scalar'}"
                f", got ndim={value.ndim}")
        extra = [] if action is None else [action]
        targets = dict(sym, **({"action": action} if action is not None else {}))
        grads = pytensor.grad(value.sum() if per_world else value,
                              [targets[name] for name in wrt])
        return compile(list(sym.values()) + extra, [value, *grads], backend)

    def described():
        text = loss_text(scene, loss, bool(batched or action_batched), options.stride)
        return None if text is None else (
            "grad", scene.structure_key(), steps, text, tuple(wrt), sorted(batched),
            backend.value, size, action_batched, repr(options), per_world)

    return cached(key, build, backend, described)


def value_function(scene: Scene, steps: int, loss: Callable, batched: Iterable[str] = (),
                   backend="numba", batch: int | None = None,
                   options: LoopOptions = LoopOptions()) -> Compiled:
    """Compiled f(*parameters) -> loss(trajectory), no gradient.

    With batched parameters the loss sees a batched trajectory and may
    return one value per world; with `options.checkpoint` K, every K-th
    state."""
    backend = as_backend(backend)
    batched = frozenset(batched)
    size = static_batch(backend, bool(batched), batch)
    key = ("value", scene.structure_key(), steps, LossKey(loss), batched, backend, size,
           options)

    def build():
        sym = _inputs(scene, set(batched), size)
        states, _ = rollout_states(scene, steps, sym, options=options)
        traj = trajectory_from_states(scene, states, bool(batched), stride=options.stride)
        return compile(list(sym.values()), pt.as_tensor_variable(loss(traj)), backend)

    def described():
        text = loss_text(scene, loss, bool(batched), options.stride)
        return None if text is None else (
            "value", scene.structure_key(), steps, text, sorted(batched), backend.value,
            size, repr(options))

    return cached(key, build, backend, described)


def parameter_values(scene: Scene, params: dict | None):
    """(ordered argument list for compiled functions, batched names)."""
    values, _ = resolve_values(scene, params)
    return list(values.values()), _batched_names(scene, values)


def value_and_grad(scene: Scene, steps: int, loss: Callable, wrt: Iterable[str],
                   params: dict | None = None, backend: "str | Backend" = "numba",
                   action=None, *, strict: bool = False):
    """(loss value, {name: gradient}) of `loss(trajectory)` after `steps` steps.

    loss receives a symbolic `Trajectory` and returns a scalar; gradients
    are exact (back-propagation through every step) with respect to the
    named parameters in `wrt`, each shaped like its parameter value.

    A loss or gradient that is not finite gives one `SimulationWarning`
    (`strict=True`: `SimulationError`) naming it and, when the run blew
    up, the first step, body and field (found by running it forward once
    more). The trajectory itself is not checked otherwise: a runaway run
    with a finite loss passes (`simulate` checks every state).
    """
    steps = _check_steps(steps)
    wrt = list(wrt)
    check_names(scene, [n for n in wrt if not (n == "action" and scene.motors)], "wrt")
    values, batch = resolve_values(scene, params)
    batched = _batched_names(scene, values)
    action, action_batched, batch = resolve_action(scene, action, batch)
    fn = value_and_grad_function(scene, steps, loss, wrt, batched, backend, batch=batch,
                                 action_batched=action_batched)
    extra = [] if action is None else [action]
    out = fn(*values.values(), *extra)
    grads = {name: g for name, g in zip(wrt, out[1:])}
    _check_gradient(scene, steps, float(out[0]), grads, params, backend, action, strict)
    return float(out[0]), grads


def _check_gradient(scene, steps, value, grads, params, backend, action, strict) -> None:
    """Warn (or raise when `strict`) about a non-finite loss or gradient,
    naming the first blow-up of the forward run when there is one."""
    bad = ([] if np.isfinite(value) else ["the loss"]) + [
        f"the gradient of {name}" for name, g in grads.items() if not np.all(np.isfinite(g))]
    if not bad:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulationWarning)
        traj = simulate(scene, steps, params, backend, action)
    found = blowup.find_blowup(blowup.trajectory_states(traj), scene.body_names, scene.dt)
    message = (f"{scene.source}: not finite: {', '.join(bad)}; " + (
        found.describe() if found else
        "the trajectory stays finite and bounded, so look at the loss"))
    if strict:
        raise SimulationError(message)
    warnings.warn(message, SimulationWarning, stacklevel=3)


def batch_objective(scene: Scene, steps: int, loss: Callable, wrt: Iterable[str],
                    params: dict | None = None, backend: "str | Backend" = "numba",
                    options: LoopOptions = LoopOptions()):
    """A batch objective for `symphys.learn.estimators`: θ (d,) is the parameters
    in `wrt` flattened in order, and

        objective(thetas: (S, d)) -> (values (S,), gradients (S, d))

    runs S worlds, one per row, in one compiled call; `loss(trajectory)`
    returns one value per world (S,). The other parameters keep their
    `params` values (default: the scene's), the same in every world.
    `objective.dim` is d and `objective.theta(params)` packs θ."""
    steps = _check_steps(steps)
    wrt = check_names(scene, list(wrt), "wrt")
    values, batch = resolve_values(scene, params)
    if batch is not None:
        raise ParameterError("batch_objective: params must not carry a batch axis; "
                             "the objective's rows are its worlds")
    shapes = {name: parameter_shapes(scene)[name] for name in wrt}
    sizes = [int(np.prod(shape)) for shape in shapes.values()]
    ends = np.cumsum(sizes)[:-1]

    def objective(thetas):
        thetas = np.asarray(thetas, dtype=np.float64)
        if thetas.ndim != 2 or thetas.shape[1] != sum(sizes):
            raise ParameterError(f"batch_objective: thetas must have shape (S, {sum(sizes)}) "
                                 f"for {wrt}; got {thetas.shape}")
        rows = len(thetas)
        vals = dict(values)
        for name, part in zip(wrt, np.split(thetas, ends, axis=1)):
            vals[name] = part.reshape((rows,) + shapes[name])
        fn = value_and_grad_function(scene, steps, loss, wrt, wrt, backend, batch=rows,
                                     options=options, per_world=True)
        out = fn(*vals.values())
        grads = np.concatenate([np.reshape(g, (rows, -1)) for g in out[1:]], axis=1)
        return np.reshape(out[0], (rows,)), grads

    def theta(given: dict | None = None) -> np.ndarray:
        chosen = values if given is None else resolve_values(scene, given)[0]
        return np.concatenate([np.ravel(chosen[name]) for name in wrt])

    objective.dim = sum(sizes)
    objective.theta = theta
    return objective


def render_function(scene: Scene, camera, batched: Iterable[str] = (), backend="numba",
                    batch: int | None = None) -> Compiled:
    """Compiled f(*parameters) -> images (B, H, W, 3) of the scene's initial
    state seen by `camera` (a `Camera` or a camera name)."""
    camera = as_camera(scene, camera)
    backend = as_backend(backend)
    batched = frozenset(batched)
    size = static_batch(backend, bool(batched), batch)
    key = ("render", scene.structure_key(), scene.appearance_key(camera), batched, backend,
           size)

    def build():
        sym = _inputs(scene, set(batched), size)
        _, _, state = build_model(scene, sym, set(batched))
        return compile(list(sym.values()), render_state(scene, camera, state, sym), backend,
                       rewrites_on=RENDER_REWRITES)

    return cached(key, build, backend)


def render(scene: Scene, camera=None, params: dict | None = None,
           backend: "str | Backend" = "numba") -> np.ndarray:
    """The image (H, W, 3) in [0, 1] of the scene's initial state seen by
    `camera` (a name, a `symphys.scene.elements.Camera`, or None: the scene's first);
    (B, H, W, 3) when a parameter value carries a batch axis. See
    `symphys.camera.image` for the renderer and its symbolic forms."""
    values, batch = resolve_values(scene, params)
    batched = _batched_names(scene, values)
    if batch is None and serves_any_batch(backend):
        # One world as a batch of one: with the batch axis static (1) the
        # render graph took Numba 208 s to compile, against 34 s when it is
        # dynamic (288 x 96, a box, a capsule, ground and a wall), and runs
        # no faster.
        first = f"{scene.bodies[0].name}.position"
        values[first] = values[first][None]
        batched = {first}
    fn = render_function(scene, camera, batched, backend, batch=batch)
    image = fn(*values.values())
    return image if batch is not None else image[0]
