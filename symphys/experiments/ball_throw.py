"""Experiment A1: throw a ball so it comes to rest 10 m away.

Six parameters (initial linear and angular velocity), 500 steps of 0.01 s.
Loss = |final position - (10, 0, 0.5)| + |final 6-D velocity|. Gradient
descent (Adam, beta1 = beta2 = 0.5, the paper's learning-rate schedule)
against CMA-ES (sigma0 = 1, target 0.02) in the same run; CMA-ES evaluates
each population as one batched simulation and runs from several seeds (the
median run is reported).

The paper's ground is soft (1 Hz): a ball sinks into it and stops rolling.
symphys' contacts are rigid, so the scene models that rolling resistance
with `rolling_friction` (0.1 m) on the ground. Without it a ball rolls for
ever and "at rest 10 m away" needs exactly cancelling backspin; the run also
repeats gradient descent with rolling friction 0 (same compiled function,
another parameter value) to show what that does.
"""

from __future__ import annotations

import textwrap
import time
from typing import NamedTuple

import numpy as np

from symphys.api import parameter_values, simulate, value_and_grad_function, value_function
from symphys.compiler.backends import static_batch
from symphys.experiments.common import ExperimentResult, progress, pyplot, table
from symphys.learn.optim import Adam, PiecewiseSchedule
from symphys.physics.algebra import safe_vector_norm
from symphys.scale import Recipe, as_executor
from symphys.scene.reader import load_scene

NAME = "ball-throw"
STEPS = 500
TARGET = np.array([10.0, 0.0, 0.5])
WRT = ["ball.velocity", "ball.angular_velocity"]
SCHEDULE = PiecewiseSchedule({1: 2.0, 5: 1.0, 50: 0.1, 75: 0.05, 100: 0.01})
GOAL = 0.02
CMAES_SEEDS, CMAES_SEEDS_QUICK = 11, 3
NO_ROLLING = {"ground.rolling_friction": 0.0, "ball.rolling_friction": 0.0}
# Degrave et al. (2016), the ball throw. The paper counts 2,422 CMA-ES
# iterations; its 27x fewer simulations (2,422 / 88) counts each as one.
PAPER = {"gradient": {"iterations": 88, "seconds": 16.3},
         "cmaes": {"iterations": 2422, "seconds": 59.9}}


def loss(tr):
    """Works on one world ((T, 3) fields) and on a batch ((B, T, 3) fields)."""
    pos = tr.position["ball"][..., -1, :]
    vel = tr.velocity["ball"][..., -1, :]
    ang = tr.angular_velocity["ball"][..., -1, :]
    import pytensor.tensor as pt
    return (safe_vector_norm(pos - TARGET)
            + safe_vector_norm(pt.concatenate([vel, ang], axis=-1)))


def _gradient_descent(scene, backend, max_iterations, show, fixed=None, label="gradient"):
    """Adam from zero velocities; `fixed` holds other parameter values."""
    fixed = dict(fixed or {})
    params = {"ball.velocity": np.zeros(3), "ball.angular_velocity": np.zeros(3)}
    start = time.perf_counter()
    args, batched = parameter_values(scene, {**params, **fixed})
    fn = value_and_grad_function(scene, STEPS, loss, WRT, batched, backend)
    fn(*args)   # backends compile lazily on the first call
    compile_s = time.perf_counter() - start
    opt = Adam(learning_rate=SCHEDULE, beta1=0.5, beta2=0.5)
    history = []
    start = time.perf_counter()
    bar = progress(range(1, max_iterations + 1), label, show)
    for it in bar:
        args, _ = parameter_values(scene, {**params, **fixed})
        value, *grads = fn(*args)
        history.append(float(value))
        bar.set_postfix(loss=f"{float(value):.4f}")
        if value < GOAL:
            break
        params = opt.step(params, dict(zip(WRT, grads)))
    seconds = time.perf_counter() - start
    bar.close()
    return params, history, seconds, compile_s


class CmaRun(NamedTuple):
    """One CMA-ES run: best point, best-so-far loss per iteration, evaluations
    at each iteration, wall and compile seconds, iterations, evaluations."""

    x: np.ndarray
    best_curve: list
    evals: list
    seconds: float
    compile_seconds: float
    iterations: int
    evaluations: int


def throw_losses(scene, backend: str, rows: int):
    """The CMA-ES objective, built once per worker: candidates (P, 6)
    (initial linear and angular velocity) -> losses (P,), one batched
    simulation a call (of `rows` worlds where the backend compiles for one
    batch size: `.rows`)."""
    def values(xs):
        return parameter_values(scene, {"ball.velocity": xs[:, :3],
                                        "ball.angular_velocity": xs[:, 3:]})

    fn = value_function(scene, STEPS, loss, values(np.zeros((rows, 6)))[1], backend,
                        batch=rows)

    def losses(xs):
        return np.asarray(fn(*values(np.asarray(xs))[0]), dtype=float)

    if static_batch(backend, True, rows) is not None:
        losses.rows = rows
    return losses


def _cmaes(scene, backend, max_evaluations, seed, show, executor) -> CmaRun:
    import cma

    es = cma.CMAEvolutionStrategy(np.zeros(6), 1.0, {
        "ftarget": GOAL, "seed": seed + 1, "maxfevals": max_evaluations,
        "verbose": -9})
    recipe = Recipe(throw_losses, (scene, backend, executor.share_rows(es.popsize)))
    start = time.perf_counter()
    executor.evaluate(recipe, np.zeros((es.popsize, 6)))   # builds it (compiles once)
    compile_s = time.perf_counter() - start
    best_curve, evals = [], []
    best = np.inf
    start = time.perf_counter()
    bar = progress(None, "cma-es", show, total=max_evaluations)
    while not es.stop():
        xs = np.asarray(es.ask())
        values = np.asarray(executor.evaluate(recipe, xs), dtype=float)
        es.tell(list(xs), list(values))
        best = min(best, float(values.min()))
        best_curve.append(best)
        evals.append(es.countevals)
        bar.update(len(xs))
        bar.set_postfix(best=f"{best:.4f}")
    seconds = time.perf_counter() - start
    bar.close()
    x = np.asarray(es.result.xbest)
    return CmaRun(x, best_curve, evals, seconds, compile_s, es.countiter, es.countevals)


def run(quick: bool = False, seed: int = 0, backend: str = "numba",
        show_progress: bool = True, executor=None) -> ExperimentResult:
    """executor: where CMA-ES evaluates its populations (None: here; a Ray
    address or a `symphys.scale` executor)."""
    executor = as_executor(executor)
    scene = load_scene("ball")
    max_iter = 300
    max_evals = 3000 if quick else 30000
    params, history, g_seconds, g_compile = _gradient_descent(
        scene, backend, max_iter, show_progress)
    traj = simulate(scene, STEPS, params=params, backend=backend)
    g_final = traj.position["ball"][-1]
    n_params, n_history, n_seconds, _ = _gradient_descent(
        scene, backend, max_iter, show_progress, NO_ROLLING, "gradient, no rolling friction")
    n_traj = simulate(scene, STEPS, params={**n_params, **NO_ROLLING}, backend=backend)
    # CMA-ES is stochastic: run it from several seeds and report the run
    # with the median number of simulations (all counts go in the JSON).
    runs = [_cmaes(scene, backend, max_evals, seed + k, show_progress, executor)
            for k in range(CMAES_SEEDS_QUICK if quick else CMAES_SEEDS)]
    median = sorted(runs, key=lambda r: r.evaluations)[len(runs) // 2]
    x, c_curve, c_evals, c_seconds, _, c_iters, c_count = median
    c_compile = runs[0].compile_seconds
    c_traj = simulate(scene, STEPS, params={"ball.velocity": x[:3],
                                            "ball.angular_velocity": x[3:]},
                      backend=backend)
    gradient = {"iterations": len(history), "evaluations": len(history),
                "seconds": g_seconds, "compile_seconds": g_compile,
                "final_loss": history[-1],
                "final_position": g_final.tolist(),
                "velocity": params["ball.velocity"].tolist(),
                "angular_velocity": params["ball.angular_velocity"].tolist()}
    no_rolling = {"iterations": len(n_history), "evaluations": len(n_history),
                  "seconds": n_seconds, "final_loss": n_history[-1],
                  "final_position": n_traj.position["ball"][-1].tolist(),
                  "final_velocity": n_traj.velocity["ball"][-1].tolist()}
    cmaes = {"iterations": int(c_iters), "evaluations": int(c_count),
             "seconds": c_seconds, "compile_seconds": c_compile,
             "final_loss": float(c_curve[-1]),
             "final_position": c_traj.position["ball"][-1].tolist(),
             "seeds": [seed + k for k in range(len(runs))],
             "evaluations_per_seed": [int(r.evaluations) for r in runs],
             "final_loss_per_seed": [float(r.best_curve[-1]) for r in runs]}
    metrics = {
        "gradient_reached_goal": history[-1] < GOAL,
        "cmaes_reached_goal": c_curve[-1] < GOAL,
        "cmaes_all_seeds_reached_goal": all(r.best_curve[-1] < GOAL for r in runs),
        "evaluation_ratio": cmaes["evaluations"] / max(gradient["evaluations"], 1),
        "wall_time_ratio": c_seconds / max(g_seconds, 1e-9),
    }
    # The paper's claims: gradient descent reaches the target within 88
    # iterations, with fewer simulations than CMA-ES. Wall times are
    # reported beside the paper's, not a target (`report` says why).
    metrics["targets_met"] = bool(
        metrics["gradient_reached_goal"] and len(history) <= PAPER["gradient"]["iterations"]
        and metrics["evaluation_ratio"] > 1)
    return ExperimentResult(
        name=NAME, quick=quick, seed=seed, metrics=metrics, paper=PAPER,
        extra={"gradient": gradient, "cmaes": cmaes,
               "cmaes_executor": {"where": executor.where.value, "workers": executor.workers},
               "gradient_no_rolling_friction": no_rolling, "backend": backend,
               "rolling_friction": scene.ground.rolling_friction},
        series={"gradient_loss": history,
                "gradient_evaluations": list(range(1, len(history) + 1)),
                "no_rolling_loss": n_history,
                "cmaes_best_loss": c_curve, "cmaes_evaluations": c_evals,
                "gradient_path_x": traj.position["ball"][:, 0].tolist(),
                "gradient_path_z": traj.position["ball"][:, 2].tolist(),
                "cmaes_path_x": c_traj.position["ball"][:, 0].tolist(),
                "cmaes_path_z": c_traj.position["ball"][:, 2].tolist()})


def report(result: ExperimentResult) -> str:
    g, c = result.extra["gradient"], result.extra["cmaes"]
    n = result.extra["gradient_no_rolling_friction"]
    p = result.paper
    rows = [
        ["gradient (ours)", g["iterations"], g["evaluations"], f"{g['seconds']:.2f}",
         f"{g['compile_seconds']:.1f}", f"{g['final_loss']:.4f}",
         np.array2string(np.asarray(g["final_position"]), precision=3)],
        ["gradient (paper)", p["gradient"]["iterations"], p["gradient"]["iterations"],
         p["gradient"]["seconds"], "-", "< 0.02", "-"],
        ["CMA-ES (ours)", c["iterations"], c["evaluations"], f"{c['seconds']:.2f}",
         f"{c['compile_seconds']:.1f}", f"{c['final_loss']:.4f}",
         np.array2string(np.asarray(c["final_position"]), precision=3)],
        ["CMA-ES (paper)", p["cmaes"]["iterations"], "-", p["cmaes"]["seconds"], "-",
         "< 0.02", "-"],
        ["gradient, rolling friction 0 (ours)", n["iterations"], n["evaluations"],
         f"{n['seconds']:.2f}", "-", f"{n['final_loss']:.4f}",
         np.array2string(np.asarray(n["final_position"]), precision=3)],
    ]
    head = ["method", "iterations", "simulations", "wall s", "compile s",
            "final loss", "final position"]
    m = result.metrics
    goals = "\n".join(
        f"{label}: {'reached' if m[key] else 'did NOT reach'} the target loss {GOAL}"
        for label, key in (("gradient descent", "gradient_reached_goal"),
                           ("CMA-ES", "cmaes_reached_goal")))
    runs = ", ".join(str(e) for e in c["evaluations_per_seed"])
    return (table(head, rows) + "\n" + goals
            + f"\nCMA-ES simulations over seeds {c['seeds'][0]}..{c['seeds'][-1]}: {runs} "
            f"(the table shows the median run).\n\n" + claims(result))


def claims(result: ExperimentResult) -> str:
    """The paper's claims beside ours, and whether ours match them."""
    g, c, p, m = result.extra["gradient"], result.extra["cmaes"], result.paper, result.metrics
    cap = p["gradient"]["iterations"]
    paper_ratio = p["cmaes"]["iterations"] / cap
    within = m["gradient_reached_goal"] and g["iterations"] <= cap
    fewer = m["evaluation_ratio"] > 1
    rows = [
        [f"gradient descent reaches loss < {GOAL} within {cap} iterations",
         f"{cap} iterations", f"{g['iterations']} iterations",
         "yes" if within else "NO"],
        ["gradient descent needs fewer simulations than CMA-ES",
         f"{paper_ratio:.1f}x fewer ({cap} vs {p['cmaes']['iterations']:,})",
         f"{m['evaluation_ratio']:.1f}x fewer ({g['evaluations']} vs {c['evaluations']:,})",
         "yes" if fewer else "NO"],
        ["wall time, gradient descent vs CMA-ES (shown, not tested)",
         f"{p['gradient']['seconds']} s vs {p['cmaes']['seconds']} s",
         f"{g['seconds']:.2f} s vs {c['seconds']:.2f} s", "-"],
    ]
    weaker = p["cmaes"]["iterations"] / max(c["evaluations"], 1)
    faster = "CMA-ES" if c["seconds"] < g["seconds"] else "gradient descent"
    notes = [
        f"Our ratio of simulations is smaller than the paper's because our CMA-ES is "
        f"stronger: it needs {c['evaluations']:,} simulations where the paper's needed "
        f"{p['cmaes']['iterations']:,} ({weaker:.1f}x as many)."
    ] if m["evaluation_ratio"] < paper_ratio and weaker > 1 else []
    notes.append(
        f"Wall time: {faster} was faster here. Each CMA-ES population "
        f"({c['evaluations'] // max(c['iterations'], 1)} throws) runs as one batched "
        f"simulation, while each gradient step is a forward and backward pass; compile "
        f"times ({g['compile_seconds']:.0f} s and {c['compile_seconds']:.0f} s) are "
        f"not in the wall times, and a machine's first run is slower (its loops run "
        f"interpreted while they compile in the background).")
    verdict_line = ("Result: matches the paper (the target within its "
                    f"{cap} iterations, with fewer simulations than CMA-ES)."
                    if m["targets_met"] else
                    "Result: does NOT match the paper: "
                    + "; ".join(text for ok, text in (
                        (within, f"gradient descent missed loss < {GOAL} within {cap} "
                                 "iterations"),
                        (fewer, "gradient descent used no fewer simulations than CMA-ES"))
                        if not ok) + ".")
    return ("The paper's claims (Degrave et al. 2016) beside ours:\n"
            + table(["claim", "paper", "ours", "matches"], rows)
            + "".join("\n" + textwrap.fill(note, 88) for note in notes) + "\n" + verdict_line)


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s = result.series
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.semilogy(s["gradient_evaluations"], s["gradient_loss"], label="gradient (Adam)")
    ax1.semilogy(s["cmaes_evaluations"], s["cmaes_best_loss"], label="CMA-ES (best so far)")
    ax1.semilogy(range(1, len(s["no_rolling_loss"]) + 1), s["no_rolling_loss"], ":",
                 label="gradient, rolling friction 0")
    ax1.axhline(GOAL, color="grey", ls=":", label="target 0.02")
    ax1.set_xscale("log")
    ax1.set_xlabel("simulations evaluated")
    ax1.set_ylabel("loss")
    ax1.legend()
    ax1.set_title("ball throw: loss against simulations")
    ax2.plot(s["gradient_path_x"], s["gradient_path_z"], label="gradient solution")
    ax2.plot(s["cmaes_path_x"], s["cmaes_path_z"], "--", label="CMA-ES solution")
    ax2.plot([TARGET[0]], [TARGET[2]], "k*", ms=12, label="target")
    ax2.axhline(0.0, color="brown", lw=1)
    ax2.set_xlabel("x (m)")
    ax2.set_ylabel("z (m)")
    ax2.set_title("optimised ball path (centre)")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
