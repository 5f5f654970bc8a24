"""Experiment A5: a quadruped learns an open-loop gait.

Scene `graphs/quadruped_revisited.json` (A5 geometry: 8 hip and knee servos at 4 N m).
The only sensor is the gait clock, sin and cos of 2 pi 1.5 Hz t; the
controller is the paper's: two ReLU layers of 128, 8 outputs (servo
targets, rad) and a linear skip from the clock (17,952 parameters).
Objective: the spine's mean forward speed over the run (its x displacement
over the duration, 8 s), maximised by Adam (1e-3, the paper's rate) on the
gradient through contacts and servos (exact, or with the paper's per-step
decay), under a `StepGuard` that undoes a step losing much of the best
speed (one such step turned the gait backwards for good at full size).

The run saves the speed curve and a strip of side views of the best gait.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from symphys.experiments.common import (ExperimentResult, first_reaching, load_checkpoint, progress,
                                        pyplot, save_checkpoint, table, verdict)
from symphys.learn import nn
from symphys.learn.closed_loop import closed_loop_function, closed_loop_trajectory
from symphys.learn.optim import Adam, StepGuard
from symphys.adjoint import LoopOptions
from symphys.scene.reader import load_scene

NAME = "quadruped-gait"
SECONDS, SECONDS_QUICK = 8.0, 1.0
EVALUATIONS, EVALUATIONS_QUICK = 500, 12
LEARNING_RATE = 1e-3
GRADIENT_DECAY = 1.0  # exact gradients
GOAL = 1.17           # m/s, the paper's speed after 500 evaluations
PAPER = {"speed_m_s": 1.17, "evaluations": 500, "cpu_hours": 1.0}


def controller() -> nn.MLP:
    """Clock (2) -> 128 -> 128 -> 8 ReLU network with a linear skip."""
    return nn.MLP(2, 8, hidden=(128, 128), activation=nn.Activation.RELU, skip=True,
                  output_init=0.5)


@functools.cache
def make_loss(duration: float):
    """The loss for runs of `duration` s: one function per duration, so a
    second run in the process (a resumed one) finds its compiled gradient
    in the function cache, which keys losses by identity."""
    def loss(traj, task):
        """Minus the spine's mean forward speed (m/s), averaged over worlds."""
        x = traj.position["spine"][..., 0]       # (T + 1,) or (W, T + 1)
        return -((x[..., -1] - x[..., 0]) / duration).mean()
    return loss


def _train(scene, ctrl, steps, evaluations, backend, seed, show, checkpoint, decay):
    """Adam under a `StepGuard` (a step that loses much of the best speed
    is undone and the rate halved): (speeds, gradient norms before
    clipping, best weights, seconds, compile seconds, rejected steps)."""
    duration = steps * scene.dt
    start = time.perf_counter()
    fn = closed_loop_function(scene, steps, ctrl, make_loss(duration), backend=backend,
                              options=LoopOptions(gradient_decay=decay))
    task = np.zeros((1, 0))
    config = {"experiment": NAME, "steps": steps, "seed": seed, "backend": backend,
              "learning_rate": LEARNING_RATE, "parameters": ctrl.n_parameters,
              "gradient_decay": decay, "optimiser": "adam+step_guard"}
    state = load_checkpoint(checkpoint, config) if checkpoint else None
    if state is None:
        weights = ctrl.init(seed)
        state = {"weights": weights, "speeds": [], "gradient_norms": [], "wall_seconds": 0.0,
                 "guard": StepGuard(Adam(learning_rate=LEARNING_RATE, clip_norm=1.0))}
    fn(task, *state["weights"].values())
    compile_s = time.perf_counter() - start
    weights, guard, speeds = state["weights"], state["guard"], state["speeds"]
    bar = progress(range(len(speeds), evaluations), "gradient", show, total=evaluations,
                   initial=len(speeds))
    for _ in bar:
        start = time.perf_counter()
        value, *grads = fn(task, *weights.values())
        speeds.append(-float(value))
        bar.set_postfix(speed=f"{speeds[-1]:.3f} m/s", rejected=guard.rejections)
        weights = guard.step(weights, value, dict(zip(weights, grads)))
        state["gradient_norms"].append(guard.optimiser.last_norm)
        state["weights"] = weights
        state["wall_seconds"] += time.perf_counter() - start
        if checkpoint:
            save_checkpoint(checkpoint, config, state)
    bar.close()
    return (speeds, state["gradient_norms"], guard.best_params, state["wall_seconds"],
            compile_s, guard.rejections)


def run(quick: bool = False, seed: int = 0, backend: str = "numba",
        show_progress: bool = True, seconds: float | None = None,
        evaluations: int | None = None, checkpoint: str | None = None,
        gradient_decay: float = GRADIENT_DECAY) -> ExperimentResult:
    """gradient_decay: the cotangent passed back from one step to the one
    before is multiplied by this (1: the exact gradient; the paper's engine
    offers 0.95 for long horizons). checkpoint: a file to save the run to
    after every evaluation and to resume from when it exists (same
    seconds, seed, backend and decay), so the full run (about two hours
    here) can be spread over several sittings."""
    scene = load_scene("quadruped_revisited")
    ctrl = controller()
    seconds = seconds or (SECONDS_QUICK if quick else SECONDS)
    evaluations = evaluations or (EVALUATIONS_QUICK if quick else EVALUATIONS)
    steps = int(round(seconds / scene.dt))
    speeds, norms, best_weights, wall, compile_s, rejected = _train(
        scene, ctrl, steps, evaluations, backend, seed, show_progress, checkpoint, gradient_decay)
    traj = closed_loop_trajectory(scene, steps, ctrl, best_weights, backend=backend)
    reached = first_reaching(speeds, lambda v: v >= GOAL)
    metrics = {
        "parameters": ctrl.n_parameters,
        "first_speed_m_s": speeds[0],
        "best_speed_m_s": max(speeds),
        "evaluations_to_goal": reached,
        "goal_met": reached is not None and reached <= PAPER["evaluations"],
        "speed_rose": max(speeds[1:], default=speeds[0]) > speeds[0],
        "max_gradient_norm": max(norms),
        "rejected_steps": rejected,
    }
    spine = traj.position["spine"]
    stride = _stride(steps)
    return ExperimentResult(
        name=NAME, quick=quick, seed=seed, metrics=metrics, paper=PAPER,
        extra={"backend": backend, "steps": steps, "seconds_simulated": steps * scene.dt,
               "evaluations": evaluations, "wall_seconds": wall, "compile_seconds": compile_s,
               "learning_rate": LEARNING_RATE, "gradient_decay": gradient_decay,
               "best_gait": {"spine_x_end": float(spine[-1, 0] - spine[0, 0]),
                             "spine_z_min": float(spine[:, 2].min()),
                             "spine_z_max": float(spine[:, 2].max())}},
        series={"speed_m_s": speeds, "gradient_norm": norms,
                "gait": {name: {"position": traj.position[name][::stride],
                                "rotation": traj.rotation[name][::stride]}
                         for name in scene.body_names},
                "gait_time": traj.time[::stride]})


def _stride(steps: int) -> int:
    """Keep about 40 frames of the gait."""
    return max(1, steps // 40)


def report(result: ExperimentResult) -> str:
    m, x, p = result.metrics, result.extra, result.paper
    fmt = lambda n: "-" if n is None else str(n)
    rows = [["gradient (ours)", len(result.series["speed_m_s"]), f"{m['first_speed_m_s']:.3f}",
             f"{m['best_speed_m_s']:.3f}", fmt(m["evaluations_to_goal"]),
             f"{x['seconds_simulated']:.1f}", f"{x['wall_seconds']:.0f}",
             f"{x['compile_seconds']:.0f}"],
            ["gradient (paper)", p["evaluations"], "-", p["speed_m_s"], p["evaluations"], "8.0",
             f"{p['cpu_hours'] * 3600:.0f}", "-"]]
    head = ["method", "evaluations", "first speed m/s", "best speed m/s",
            f"evals to {GOAL} m/s", "sim s", "wall s", "compile s"]
    return (table(head, rows) + f"\ncontroller: {m['parameters']} parameters (open loop)"
            + f"\ntarget: >= {GOAL} m/s within {p['evaluations']} evaluations: "
            + verdict(m["goal_met"])
            + f"\nlargest gradient norm (before clipping to 1): {m['max_gradient_norm']:.3g}; "
            + f"steps undone by the guard: {m['rejected_steps']}")


def _box_outline(position, rotation, size):
    """x-z outline (5, 2) of a box's side face through its centre."""
    hx, hz = size[0] / 2, size[2] / 2
    corners = np.array([[-hx, 0, -hz], [hx, 0, -hz], [hx, 0, hz], [-hx, 0, hz], [-hx, 0, -hz]])
    world = corners @ np.asarray(rotation).T + position
    return world[:, [0, 2]]


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    scene = load_scene("quadruped_revisited")
    s = result.series
    fig, (ax_speed, ax_strip) = plt.subplots(2, 1, figsize=(10, 7),
                                             gridspec_kw={"height_ratios": [1, 1.2]})
    ax_speed.plot(range(1, len(s["speed_m_s"]) + 1), s["speed_m_s"], label="ours (Adam)")
    ax_speed.axhline(GOAL, ls="--", color="k", lw=0.8, label=f"paper: {GOAL} m/s")
    ax_speed.set_xlabel("evaluation")
    ax_speed.set_ylabel("mean forward speed (m/s)")
    ax_speed.legend(loc="upper left")
    norms = np.asarray(s.get("gradient_norm", []), dtype=float)
    if np.isfinite(norms).any():
        ax_norm = ax_speed.twinx()
        ax_norm.semilogy(range(1, len(norms) + 1), norms, color="0.6", lw=0.8)
        ax_norm.set_ylabel("gradient norm before clipping (grey)")
    gait = s["gait"]
    frames = len(s["gait_time"])
    shown = np.linspace(0, frames - 1, min(8, frames)).astype(int)
    spacing = 1.0     # m between frames of the strip
    for slot, k in enumerate(shown):
        x_spine = float(np.asarray(gait["spine"]["position"][k])[0])
        shift = np.array([slot * spacing - x_spine, 0.0, 0.0])
        for body in scene.bodies:
            pos = np.asarray(gait[body.name]["position"][k]) + shift
            rot = np.asarray(gait[body.name]["rotation"][k])
            if body.shape.value == "sphere":
                ax_strip.add_patch(plt.Circle((pos[0], pos[2]), body.radius, fill=False,
                                              color="C0"))
            else:
                outline = _box_outline(pos, rot, body.size)
                ax_strip.plot(outline[:, 0], outline[:, 1], color="C0", lw=1)
        ax_strip.text(slot * spacing, 0.65, f"{s['gait_time'][k]:.2f} s\nx = {x_spine:.2f} m",
                      ha="center", fontsize=7)
    ax_strip.axhline(0.0, color="k", lw=0.8)
    ax_strip.set_aspect("equal")
    ax_strip.set_xlim(-0.6, (len(shown) - 1) * spacing + 0.6)
    ax_strip.set_ylim(-0.05, 0.8)
    ax_strip.set_xticks([])
    ax_strip.set_ylabel("z (m)")
    ax_strip.set_title("best gait, side view (each frame centred on the spine)")
    fig.suptitle("A5 quadruped gait (open loop)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
