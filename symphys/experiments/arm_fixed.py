"""Experiment A3: a 4-servo arm learns to hold its gripper on a fixed
point.

Scene `graphs/arm.json` read through one sensor, the gripper's distance to
the target (the paper's 1-D input); controller: dense 1 -> 128 -> 128 -> 4
tanh network (17,284 parameters) whose outputs are the servo targets (rad).
Loss: mean gripper-target distance over steps 100-800 (dt 0.01), target
(0.5, 0.5, 0.5). Adam on the exact gradient against CMA-ES (diagonal
covariance, as a full one on 17,284 parameters does not fit; each
generation is one batched rollout) on the same loss, in the same run.

The servos turn at most 45 deg/s, so the gripper needs about 1.6 s to
reach the target from rest, and the loss cannot reach 0. The experiment
measures that floor: the best constant servo targets (4 numbers, found by
Nelder-Mead on the same loss) bound what any controller reading only the
distance can do from rest.

The distance feedback has a cliff: past some weights the loop runs away
(the arm overshoots, the distance grows, the servo targets grow with it).
One Adam step across it raised the loss from 0.12 m to 1.3 m; Adam runs
under a `StepGuard`, which undoes such steps and halves the rate.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from symphys.experiments.common import (ExperimentResult, first_reaching, progress, pyplot, table,
                                        verdict)
from symphys.learn import nn
from symphys.learn.closed_loop import closed_loop_function
from symphys.learn.optim import Adam, StepGuard
from symphys.physics.algebra import safe_vector_norm
from symphys.scale import Recipe, as_executor
from symphys.scene.elements import Sensor, SensorKind
from symphys.scene.reader import load_scene

NAME = "arm-fixed"
TARGET = np.array([0.5, 0.5, 0.5])
FIRST_STEP = 100
STEPS, STEPS_QUICK = 800, 300
EVALUATIONS, EVALUATIONS_QUICK = 200, 30
CMAES_BUDGET, CMAES_BUDGET_QUICK = 2000, 100
LEARNING_RATE = 1e-3
CMAES_SIGMA = 0.1
FLOOR_EVALUATIONS, FLOOR_EVALUATIONS_QUICK = 250, 20
REST_GUESS = (0.785, 0.43, 0.0, 1.21)   # rad: yaw 45 deg, then an elbow bend that reaches
GOALS = (0.04, 0.01)      # m, and the paper's evaluations to reach them
PAPER = {"evaluations_to_4cm": 100, "evaluations_to_1cm": 150,
         "cmaes": {"evaluations": 60000, "start_m": 0.995, "end_m": 0.933}}


def arm_scene():
    """The arm read through the gripper-target distance only."""
    scene = load_scene("arm")
    sensor = Sensor(name="distance", kind=SensorKind.TARGET_DISTANCE, source="gripper")
    return dataclasses.replace(scene, sensors=(sensor,))


def controller(n_in: int = 1, n_out: int = 4) -> nn.MLP:
    return nn.MLP(n_in, n_out, hidden=(128, 128), activation=nn.Activation.TANH)


def loss(traj, task):
    """Mean distance over steps FIRST_STEP.. per world, then over worlds."""
    gap = traj.position["gripper"][:, FIRST_STEP:, :] - task[:, None, :]
    return safe_vector_norm(gap).mean()


def population_loss(traj, task):
    """(P,) losses: one per world."""
    gap = traj.position["gripper"][:, FIRST_STEP:, :] - task[:, None, :]
    return safe_vector_norm(gap).mean(axis=1)


def _gradient_run(fn, ctrl, evaluations, seed, show):
    """Adam under a StepGuard: (guard, loss curve, seconds)."""
    weights = ctrl.init(seed)
    task = TARGET[None]
    guard = StepGuard(Adam(learning_rate=LEARNING_RATE, clip_norm=1.0))
    curve = []
    start = time.perf_counter()
    bar = progress(range(evaluations), "gradient", show)
    for _ in bar:
        value, *grads = fn(task, *weights.values())
        curve.append(float(value))
        bar.set_postfix(loss=f"{float(value):.4f}", rejected=guard.rejections)
        weights = guard.step(weights, value, dict(zip(weights, grads)))
    bar.close()
    return guard, curve, time.perf_counter() - start


def constant_targets_floor(fn, ctrl, evaluations: int, seed: int = 0):
    """(loss, targets): the best constant servo targets, found by Nelder-Mead
    from REST_GUESS on the controller with its output weights zeroed (its
    output is then the output bias: the 4 targets)."""
    from scipy.optimize import minimize

    base = ctrl.init(seed)
    last = f"{ctrl.prefix}.w{len(ctrl.hidden)}"
    bias = f"{ctrl.prefix}.b{len(ctrl.hidden)}"

    def value(q):
        weights = dict(base, **{last: np.zeros_like(base[last]), bias: np.asarray(q)})
        return float(fn(TARGET[None], *weights.values())[0])

    best = minimize(value, REST_GUESS, method="Nelder-Mead",
                    options={"maxfev": evaluations, "xatol": 1e-4, "fatol": 1e-7})
    return float(best.fun), [float(x) for x in best.x]


def arm_losses(scene, ctrl, steps: int, backend: str, rows: int):
    """The CMA-ES objective, built once per worker: candidates (P, W) (the
    controller's weights, flat) -> losses (P,), one batched simulation of
    `rows` arms a call (`.rows`: the closed loop compiles for one size)."""
    names = list(ctrl.parameter_shapes())
    shapes = [ctrl.parameter_shapes()[n] for n in names]
    sizes = [int(np.prod(s)) for s in shapes]
    fn = closed_loop_function(scene, steps, ctrl, population_loss, backend=backend,
                              population=rows, gradient=False)
    task = np.repeat(TARGET[None], rows, axis=0)

    def losses(xs):
        parts = np.split(np.asarray(xs), np.cumsum(sizes)[:-1], axis=1)
        weights = [p.reshape((len(xs),) + s) for p, s in zip(parts, shapes)]
        return np.asarray(fn(task, *weights), dtype=float)

    losses.rows = rows
    return losses


def _cmaes_run(scene, ctrl, steps, budget, backend, seed, show, executor):
    import cma

    names = list(ctrl.parameter_shapes())
    x0 = np.concatenate([ctrl.init(seed)[n].ravel() for n in names])
    es = cma.CMAEvolutionStrategy(x0, CMAES_SIGMA, {
        "CMA_diagonal": True, "seed": seed + 1, "maxfevals": budget, "verbose": -9})
    recipe = Recipe(arm_losses, (scene, ctrl, steps, backend, executor.share_rows(es.popsize)))
    start = time.perf_counter()
    first = executor.evaluate(recipe, np.repeat(x0[None], es.popsize, axis=0))
    compile_s = time.perf_counter() - start
    best, curve, evals = float(first[0]), [], []
    start = time.perf_counter()
    bar = progress(None, "cma-es", show, total=budget)
    while not es.stop():
        xs = es.ask()
        values = executor.evaluate(recipe, np.asarray(xs))
        es.tell(xs, list(values))
        best = min(best, float(values.min()))
        curve.append(best)
        evals.append(es.countevals)
        bar.update(len(xs))
        bar.set_postfix(best=f"{best:.4f}")
    bar.close()
    return {"start_loss": float(first[0]), "best_loss": best, "curve": curve,
            "evaluations": evals, "seconds": time.perf_counter() - start,
            "compile_seconds": compile_s, "population": es.popsize,
            "where": executor.where.value, "workers": executor.workers}


def run(quick: bool = False, seed: int = 0, backend: str = "numba",
        show_progress: bool = True, steps: int | None = None, evaluations: int | None = None,
        cmaes_budget: int | None = None, executor=None) -> ExperimentResult:
    """steps, evaluations, cmaes_budget override the (quick) defaults;
    executor: where CMA-ES evaluates its populations (None: here; a Ray
    address or a `symphys.scale` executor)."""
    executor = as_executor(executor)
    scene = arm_scene()
    ctrl = controller()
    steps = steps or (STEPS_QUICK if quick else STEPS)
    evaluations = evaluations or (EVALUATIONS_QUICK if quick else EVALUATIONS)
    budget = cmaes_budget or (CMAES_BUDGET_QUICK if quick else CMAES_BUDGET)
    start = time.perf_counter()
    fn = closed_loop_function(scene, steps, ctrl, loss, backend=backend)
    fn(TARGET[None], *ctrl.init(seed).values())
    g_compile = time.perf_counter() - start
    guard, curve, g_seconds = _gradient_run(fn, ctrl, evaluations, seed, show_progress)
    cmaes = _cmaes_run(scene, ctrl, steps, budget, backend, seed, show_progress, executor)
    floor, floor_targets = constant_targets_floor(
        fn, ctrl, FLOOR_EVALUATIONS_QUICK if quick else FLOOR_EVALUATIONS, seed)
    gradient = {"evaluations": len(curve), "first_loss": curve[0], "final_loss": curve[-1],
                "best_loss": min(curve), "seconds": g_seconds, "compile_seconds": g_compile,
                "rejected_steps": guard.rejections,
                "evaluations_to_4cm": first_reaching(curve, lambda v: v < GOALS[0]),
                "evaluations_to_1cm": first_reaching(curve, lambda v: v < GOALS[1])}
    metrics = {
        "parameters": ctrl.n_parameters,
        "gradient_best_m": gradient["best_loss"],
        "cmaes_best_m": cmaes["best_loss"],
        "constant_targets_floor_m": floor,
        "target_4cm_within_100": (gradient["evaluations_to_4cm"] or np.inf) <= 100,
        "target_1cm_within_150": (gradient["evaluations_to_1cm"] or np.inf) <= 150,
        "loss_fell": curve[-1] < curve[0],
    }
    return ExperimentResult(
        name=NAME, quick=quick, seed=seed, metrics=metrics, paper=PAPER,
        extra={"gradient": gradient,
               "cmaes": {k: v for k, v in cmaes.items() if k not in ("curve", "evaluations")},
               "backend": backend, "steps": steps, "target": TARGET,
               "learning_rate": LEARNING_RATE, "constant_targets": floor_targets},
        series={"gradient_loss": curve, "cmaes_best_loss": cmaes["curve"],
                "cmaes_evaluations": cmaes["evaluations"]})


def report(result: ExperimentResult) -> str:
    g, c, p = result.extra["gradient"], result.extra["cmaes"], result.paper
    fmt = lambda n: "-" if n is None else str(n)
    rows = [
        ["gradient (ours)", g["evaluations"], f"{g['first_loss']:.3f}", f"{g['best_loss']:.4f}",
         fmt(g["evaluations_to_4cm"]), fmt(g["evaluations_to_1cm"]), f"{g['seconds']:.1f}",
         f"{g['compile_seconds']:.0f}"],
        ["gradient (paper)", "-", "-", "-", p["evaluations_to_4cm"], p["evaluations_to_1cm"],
         "-", "-"],
        ["CMA-ES (ours)", result.series["cmaes_evaluations"][-1] if
         result.series["cmaes_evaluations"] else 0, f"{c['start_loss']:.3f}",
         f"{c['best_loss']:.4f}", "-", "-", f"{c['seconds']:.1f}",
         f"{c['compile_seconds']:.0f}"],
        ["CMA-ES (paper)", p["cmaes"]["evaluations"], p["cmaes"]["start_m"],
         p["cmaes"]["end_m"], "-", "-", "-", "-"],
    ]
    head = ["method", "evaluations", "first loss m", "best loss m", "evals to 4 cm",
            "evals to 1 cm", "wall s", "compile s"]
    m = result.metrics
    targets = ", ".join(f"{x:.3f}" for x in result.extra["constant_targets"])
    return (table(head, rows)
            + f"\ncontroller: {m['parameters']} parameters; steps {result.extra['steps']}; "
            + f"Adam steps undone by the guard: {g['rejected_steps']}"
            + f"\nfloor: best constant servo targets ({targets} rad) give "
            + f"{m['constant_targets_floor_m']:.4f} m"
            + "\ntargets: < 4 cm within 100 evaluations: "
            + verdict(m["target_4cm_within_100"])
            + "; < 1 cm within 150: " + verdict(m["target_1cm_within_150"]))


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s = result.series
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogy(range(1, len(s["gradient_loss"]) + 1), s["gradient_loss"],
                label="gradient (Adam; spikes: steps the guard undid)")
    ax.semilogy(s["cmaes_evaluations"], s["cmaes_best_loss"], label="CMA-ES (best so far)")
    for goal, ls in zip(GOALS, (":", "--")):
        ax.axhline(goal, color="grey", ls=ls, label=f"{goal * 100:.0f} cm")
    ax.axhline(result.metrics["constant_targets_floor_m"], color="k", lw=1,
               label="best constant targets")
    ax.axvline(100, color="C3", ls=":", lw=1, label="paper: 4 cm at 100")
    ax.axvline(150, color="C3", ls="--", lw=1, label="paper: 1 cm at 150")
    ax.set_xscale("log")
    ax.set_xlabel("evaluations (simulations)")
    ax.set_ylabel("mean gripper-target distance (m)")
    ax.set_title("arm reaching a fixed point (A3)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
