"""Experiment A4: the arm learns to reach any point it is given.

Scene `graphs/arm.json` read through one sensor, the target (3 task
inputs); controller: target -> 1024 -> 1024 -> 4 tanh network (1,057,796
parameters) whose outputs are the servo targets (rad). Every update draws a
batch of 128 targets uniformly in a half-ball of radius 1 m (z >= 0),
shifted up 0.1 m, simulates them side by side and takes one Adam step
(1e-3) on the exact gradient of the batch loss: the mean gripper-target
distance over steps 100-800, as in A3. The final check draws 1,000 fresh
targets and reports the fraction of final distances under 5 cm.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from symphys.experiments.common import (ExperimentResult, first_reaching, progress, pyplot, table,
                                        verdict)
from symphys.learn import nn
from symphys.learn.closed_loop import closed_loop_function
from symphys.learn.optim import Adam
from symphys.physics.algebra import safe_vector_norm
from symphys.scene.elements import Sensor, SensorKind
from symphys.scene.reader import load_scene

NAME = "arm-random"
FIRST_STEP = 100
STEPS, STEPS_QUICK = 800, 150
UPDATES, UPDATES_QUICK = 3000, 20
BATCH, BATCH_QUICK = 128, 8
EVAL_TARGETS, EVAL_TARGETS_QUICK = 1000, 32
HIDDEN, HIDDEN_QUICK = (1024, 1024), (64, 64)
LEARNING_RATE = 1e-3
LEARNING_RATE_QUICK = 1e-2     # the quick run's smaller network, few updates
GOALS = (0.10, 0.05)
PAPER = {"updates_to_10cm": 576, "updates_to_5cm": 2563, "batch": 128,
         "parameters": 1_057_796}


def arm_scene():
    """The arm read through the target position only (3 task inputs)."""
    scene = load_scene("arm")
    return dataclasses.replace(scene, sensors=(Sensor(name="goal", kind=SensorKind.TARGET,
                                                      size=3),))


def controller(hidden=HIDDEN) -> nn.MLP:
    return nn.MLP(3, 4, hidden=hidden, activation=nn.Activation.TANH)


def draw_targets(rng, n: int) -> np.ndarray:
    """n points uniform in the upper half-ball of radius 1 m, raised 0.1 m."""
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    direction[:, 2] = np.abs(direction[:, 2])
    radius = rng.uniform(size=(n, 1)) ** (1.0 / 3.0)
    return direction * radius + [0.0, 0.0, 0.1]


def loss(traj, task):
    """Mean distance over steps FIRST_STEP.., over time and worlds."""
    gap = traj.position["gripper"][:, FIRST_STEP:, :] - task[:, None, :]
    return safe_vector_norm(gap).mean()


def final_distances(traj, task):
    """(W,) distance at the last step, one per world."""
    return safe_vector_norm(traj.position["gripper"][:, -1, :] - task)


def _evaluate(scene, ctrl, steps, weights, targets, backend):
    """Final distances for `targets` (n, 3), simulated in batches of up to
    128 worlds (the last one padded)."""
    size = min(len(targets), 128)
    fn = closed_loop_function(scene, steps, ctrl, final_distances, backend=backend,
                              worlds=size, gradient=False)
    out = []
    for start in range(0, len(targets), size):
        chunk = targets[start:start + size]
        pad = np.concatenate([chunk, np.repeat(chunk[-1:], size - len(chunk), axis=0)])
        out.append(np.asarray(fn(pad, *weights.values()))[:len(chunk)])
    return np.concatenate(out)


def run(quick: bool = False, seed: int = 0, backend: str = "numba",
        show_progress: bool = True, updates: int | None = None) -> ExperimentResult:
    scene = arm_scene()
    hidden = HIDDEN_QUICK if quick else HIDDEN
    ctrl = controller(hidden)
    steps = STEPS_QUICK if quick else STEPS
    batch = BATCH_QUICK if quick else BATCH
    updates = updates or (UPDATES_QUICK if quick else UPDATES)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    fn = closed_loop_function(scene, steps, ctrl, loss, backend=backend, worlds=batch)
    weights = ctrl.init(seed)
    fn(draw_targets(rng, batch), *weights.values())
    compile_s = time.perf_counter() - start
    targets = draw_targets(np.random.default_rng(seed + 1),
                           EVAL_TARGETS_QUICK if quick else EVAL_TARGETS)
    initial = _evaluate(scene, ctrl, steps, weights, targets, backend)
    learning_rate = LEARNING_RATE_QUICK if quick else LEARNING_RATE
    opt = Adam(learning_rate=learning_rate, clip_norm=1.0)
    curve = []
    start = time.perf_counter()
    bar = progress(range(updates), "updates", show_progress)
    for _ in bar:
        value, *grads = fn(draw_targets(rng, batch), *weights.values())
        curve.append(float(value))
        bar.set_postfix(loss=f"{float(value):.4f}")
        weights = opt.step(weights, dict(zip(weights, grads)))
    bar.close()
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    final = _evaluate(scene, ctrl, steps, weights, targets, backend)
    eval_s = time.perf_counter() - start
    hits = {g: first_reaching(curve, lambda v, g=g: v < g) for g in GOALS}
    metrics = {
        "parameters": ctrl.n_parameters,
        "first_loss_m": curve[0], "final_loss_m": curve[-1], "best_loss_m": min(curve),
        "updates_to_10cm": hits[0.10], "updates_to_5cm": hits[0.05],
        "fraction_final_under_5cm": float(np.mean(final < 0.05)),
        "median_final_distance_m": float(np.median(final)),
        "initial_median_final_distance_m": float(np.median(initial)),
        "target_10cm_by_576": (hits[0.10] or np.inf) <= PAPER["updates_to_10cm"],
        "target_5cm_by_2563": (hits[0.05] or np.inf) <= PAPER["updates_to_5cm"],
        "loss_fell": float(np.mean(curve[-3:])) < float(np.mean(curve[:3])),
    }
    return ExperimentResult(
        name=NAME, quick=quick, seed=seed, metrics=metrics, paper=PAPER,
        extra={"backend": backend, "steps": steps, "batch": batch, "updates": updates,
               "hidden": list(hidden), "learning_rate": learning_rate,
               "compile_seconds": compile_s, "train_seconds": train_s,
               "evaluation_seconds": eval_s, "evaluation_targets": len(targets)},
        series={"loss": curve, "final_distances": final, "initial_final_distances": initial})


def report(result: ExperimentResult) -> str:
    m, x, p = result.metrics, result.extra, result.paper
    fmt = lambda n: "-" if n is None else str(n)
    rows = [["gradient (ours)", m["parameters"], x["batch"], x["updates"],
             f"{m['first_loss_m']:.3f}", f"{m['final_loss_m']:.4f}", fmt(m["updates_to_10cm"]),
             fmt(m["updates_to_5cm"]), f"{m['fraction_final_under_5cm']:.2f}",
             f"{x['train_seconds']:.0f}", f"{x['compile_seconds']:.0f}"],
            ["gradient (paper)", p["parameters"], p["batch"], "-", "-", "-",
             p["updates_to_10cm"], p["updates_to_5cm"], "-", "-", "-"]]
    head = ["method", "parameters", "batch", "updates", "first loss m", "final loss m",
            "updates to 10 cm", "updates to 5 cm", "final < 5 cm", "train s", "compile s"]
    return (table(head, rows)
            + f"\nfinal distances on {x['evaluation_targets']} fresh targets: median "
            + f"{m['initial_median_final_distance_m']:.3f} m before training, "
            + f"{m['median_final_distance_m']:.3f} m after"
            + "\ntargets: < 10 cm by 576 updates: "
            + verdict(m["target_10cm_by_576"])
            + "; < 5 cm by 2,563: " + verdict(m["target_5cm_by_2563"]))


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s = result.series
    fig, (ax, hist) = plt.subplots(1, 2, figsize=(11, 4))
    ax.semilogy(range(1, len(s["loss"]) + 1), s["loss"], label="ours (batch loss)")
    for goal, ls in zip(GOALS, (":", "--")):
        ax.axhline(goal, color="grey", ls=ls, label=f"{goal * 100:.0f} cm")
    ax.axvline(576, color="C3", ls=":", lw=1, label="paper: 10 cm at 576")
    ax.axvline(2563, color="C3", ls="--", lw=1, label="paper: 5 cm at 2,563")
    ax.set_xlabel("update")
    ax.set_ylabel("mean gripper-target distance (m)")
    ax.legend(fontsize=8)
    bins = np.linspace(0, 100 * max(np.max(s["final_distances"]),
                                    np.max(s["initial_final_distances"])), 31)
    hist.hist(np.asarray(s["initial_final_distances"]) * 100, bins=bins, alpha=0.5,
              color="grey", label="before training")
    hist.hist(np.asarray(s["final_distances"]) * 100, bins=bins, alpha=0.7,
              label="after training")
    hist.legend(fontsize=8)
    hist.axvline(5, color="k", ls="--", lw=1)
    hist.set_xlabel("final distance on fresh targets (cm)")
    hist.set_ylabel("targets")
    fig.suptitle("arm reaching random points (A4)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
