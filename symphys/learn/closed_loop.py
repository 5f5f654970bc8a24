"""Compiled closed-loop losses: a controller drives the scene's motors from
its sensors for `steps` steps, and a loss is read off the trajectory.

    fn = closed_loop_function(scene, steps, controller, loss)
    value, *grads = fn(task, *weights.values())     # grads in weights order

task: (W, n_targets) target inputs, one row per world (W worlds share the
controller and the loss is their mean, as the loss function computes it);
weights: {name: array} from `controller.init()`. With `population=P` the
function takes every weight with a leading (P, ...) axis: world p runs
controller p (one batched rollout per CMA-ES generation, or the noisy
samples of a gradient estimate); it returns the P losses and, unless
gradient=False, each member's gradient (P, ...) with respect to its own
weights.

The loss function receives the `Trajectory` (batched: fields (W, T+1, 3))
and the task tensor (W, n_targets), and returns a scalar, or with a
population a (P,) vector.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytensor
import pytensor.tensor as pt

from symphys.camera.image import RENDER_REWRITES
from symphys.compiler import rewrites
from symphys.compiler.backends import Backend, Compiled, as_backend, compile
from symphys.compiler.caches.compiled_functions import LossKey, cached
from symphys.compiler.caches.function_files import loss_text
from symphys.errors import ParameterError
from symphys.learn.nn import Schedule
from symphys.loop import blowup
from symphys.adjoint import LoopOptions
from symphys.loop.rollout import Trajectory, rollout
from symphys.scene.params import check_names
from symphys.scene.scene import Scene

_FIELDS = ("position", "rotation", "velocity", "angular_velocity")


def _weight_inputs(controller, population: int | None) -> dict:
    lead = () if population is None else (population,)
    return {name: pt.tensor(name=name, dtype="float64", shape=lead + tuple(shape))
            for name, shape in controller.parameter_shapes().items()}


def closed_loop_function(scene: Scene, steps: int, controller, loss: Callable, *,
                         backend: "str | Backend" = "numba", worlds: int = 1,
                         population: int | None = None, wrt_params: tuple[str, ...] = (),
                         world_params: tuple[str, ...] = (), aux: Callable | None = None,
                         options: LoopOptions = LoopOptions(),
                         gradient: bool = True) -> Compiled:
    """Compiled f(task, *weights[, *params][, *world values]) ->
    [loss, *d weights, *d params][, aux] (with `population`, the (P,) losses
    and the (P, ...) gradients of each member's loss; with gradient=False,
    the loss alone, which may then be any array, e.g. one value per world).

    worlds: rows of `task` simulated side by side (ignored with a
    population: one world per member). wrt_params: scene parameters (joint
    anchors, motor gains, sizes, contact stiffness) taken as extra inputs,
    shared by every world, and differentiated (with a population: the
    gradient of the members' summed losses). world_params: scene
    parameters given per world, (rows, *shape) each (initial states drawn
    per world, say), not differentiated. aux: a second function of
    (trajectory, task), returned last and not differentiated (what a
    score-function estimate needs from each rollout); a tuple or list of
    tensors comes back as that many outputs."""
    backend = as_backend(backend)
    check_names(scene, wrt_params, "wrt_params")
    check_names(scene, world_params, "world_params")
    shared = set(wrt_params) & set(world_params)
    if shared:
        raise ParameterError(f"{scene.source}: {sorted(shared)} given both as wrt_params "
                             f"and as world_params")
    aux_key = None if aux is None else LossKey(aux)
    # The parameters not given as inputs are constants of the graph.
    values = scene.values_key((*wrt_params, *world_params))
    key = ("closed_loop", scene.structure_key(), values, steps, controller, LossKey(loss),
           backend, worlds, population, tuple(wrt_params), options, gradient,
           tuple(world_params), aux_key)

    def build():
        rows = population or worlds
        weights = _weight_inputs(controller, population)
        task = pt.tensor(name="task", dtype="float64", shape=(rows, scene.n_targets))
        shapes = scene.parameters()
        params = {n: pt.tensor(name=n, dtype="float64", shape=np.shape(shapes[n]))
                  for n in wrt_params}
        per_world = {n: pt.tensor(name=n, dtype="float64", shape=(rows, *np.shape(shapes[n])))
                     for n in world_params}
        traj = rollout(scene, steps, params={**params, **per_world}, controller=controller,
                       controller_params=weights, task=task if scene.n_targets else None,
                       options=options)
        value = loss(traj, task)
        extra = [] if aux is None else aux(traj, task)
        extra = list(extra) if isinstance(extra, (list, tuple)) else [extra]
        inputs = [task, *weights.values(), *params.values(), *per_world.values()]
        if not gradient:
            return compile(inputs, [value, *extra] if extra else value, backend)
        if population is not None and value.ndim != 1:
            raise ParameterError(f"a population loss must return one value per member "
                                 f"(P,), got ndim={value.ndim}")
        # Members are independent worlds: the gradient of the summed losses
        # holds each member's own gradient in its row.
        total = value.sum() if population is not None else value
        grads = pytensor.grad(total, [*weights.values(), *params.values()])
        return compile(inputs, [value, *grads, *extra], backend)

    def described():
        task = pt.tensor(name="task", dtype="float64",
                         shape=(population or worlds, scene.n_targets))
        # The rollout is per world when it has a (rows, n_targets) task (`rollout`).
        text = loss_text(scene, loss, bool(scene.n_targets), options.stride, extra=(task,))
        aux_text = None if aux is None else loss_text(scene, aux, bool(scene.n_targets),
                                                      options.stride, extra=(task,))
        if text is None or (aux is not None and aux_text is None):
            return None
        return ("closed_loop", scene.structure_key(), values, steps, repr(controller), text,
                backend.value, worlds, population, tuple(wrt_params), repr(options), gradient,
                tuple(world_params), aux_text)

    with _rewrites_for(scene):
        return cached(key, build, backend, described)


def _rewrites_for(scene: Scene):
    """The block a scene's closed loop is built and compiled in: without
    symphys' component rewrites when a camera sensor puts a rendered image
    into the loop (on a renderer's broadcasts they only cost time:
    `symphys.camera.image.RENDER_REWRITES`); the step kernels stay fused."""
    return rewrites.rewrites_only(RENDER_REWRITES if scene.sees_images else None)


def closed_loop_trajectory(scene: Scene, steps: int, controller, weights: dict, task=None, *,
                           backend: "str | Backend" = "numba") -> Trajectory:
    """The numeric trajectory of one controlled run (for plots and reports).

    weights: {name: array} as from `controller.init()`; task: (n_targets,)
    or (W, n_targets) when the scene has target sensors. Returns the
    `Trajectory` of world 0, fields (steps + 1, ...)."""
    backend = as_backend(backend)
    rows = 1 if task is None or np.ndim(task) == 1 else len(task)
    values = scene.values_key()          # every parameter is a constant of this graph
    key = ("closed_loop_trajectory", scene.structure_key(), values, steps, controller, backend,
           rows)

    def build():
        inputs = _weight_inputs(controller, None)
        task_in = pt.tensor(name="task", dtype="float64", shape=(rows, scene.n_targets))
        traj = rollout(scene, steps, controller=controller, controller_params=inputs,
                       task=task_in if scene.n_targets else None)
        # World 0's series only: (steps + 1, ...) whether or not the rollout
        # is batched.
        pick = (lambda x: x[0]) if traj.batched else (lambda x: x)
        outs = [pick(getattr(traj, field)[n]) for field in _FIELDS for n in scene.body_names]
        return compile([task_in, *inputs.values()], outs, backend)

    def described():
        return ("closed_loop_trajectory", scene.structure_key(), values, steps,
                repr(controller), backend.value, rows)

    with _rewrites_for(scene):
        fn = cached(key, build, backend, described)
    task = np.zeros((rows, scene.n_targets)) if task is None else np.atleast_2d(task)
    outs = fn(task, *(weights[n] for n in controller.parameter_shapes()))
    names = scene.body_names
    fields = [dict(zip(names, outs[i * len(names):(i + 1) * len(names)]))
              for i in range(len(_FIELDS))]
    traj = Trajectory(np.arange(steps + 1) * scene.dt, *fields, batched=False)
    blowup.check_trajectory(scene.source, traj, scene.dt)
    return traj


def command_objective(scene: Scene, steps: int, loss: Callable, rows: int, *,
                      effort: float = 1.0, params: dict | None = None,
                      backend: "str | Backend" = "numba"):
    """A batch objective (`symphys.learn.estimators`) of open-loop motor commands:

        objective(us: (S, steps · M)) -> (costs (S,), gradients (S, steps · M))

    with S = `rows` worlds of one compiled call; world s runs the command
    table us[s] reshaped (steps, M) (`nn.Schedule`), and its cost is
    loss(trajectory, task)[s] + effort · Σ us[s]². `params`: scene
    parameters held at these values in every world; they are inputs of the
    compiled function, so objectives that differ only in them share it."""
    motors = len(scene.motors)
    params = dict(params or {})
    fn = closed_loop_function(scene, steps, Schedule(motors, steps, scene.dt, prefix="command"),
                              loss, backend=backend, population=rows,
                              wrt_params=tuple(params))
    task = np.zeros((rows, scene.n_targets))
    values = [np.asarray(v, dtype=np.float64) for v in params.values()]

    def objective(us):
        us = np.asarray(us, dtype=np.float64)
        if us.shape != (rows, steps * motors):
            raise ParameterError(f"{scene.source}: the command objective takes ({rows}, "
                                 f"{steps * motors}) commands, got {us.shape}")
        out = fn(task, us.reshape(rows, steps, motors), *values)
        return (np.asarray(out[0]) + effort * np.sum(us ** 2, axis=1),
                np.reshape(out[1], (rows, -1)) + 2.0 * effort * us)

    objective.dim = steps * motors
    objective.rows = rows
    return objective
