"""Experiment A2 and the paper's Table 1: what a closed-loop gradient
of a quadruped costs.

Scene `graphs/quadruped.json` ("Predator": 13 bodies, 16 position servos,
81 sensor values). Two controllers read the 81 values, with the paper's
weight counts: the linear one (81 -> 16, 1,296 weights) and a deep one
(81 -> 1024 -> 1024 -> 16, tanh, 1,147,904 weights); neither has biases.
For each backend and batch size the run compiles the forward loss (mean
forward speed over 10 s) and its gradient with respect to the controller
weights, then times each (median of repeated calls after the first) and
reports milliseconds per robot-step beside Table 1. On numba the loops are
compiled before timing (`Loops.COMPILED`). The worlds of a batch start
side by side (offset in y), so they differ.

Targets: gradient <= 3x forward at the largest batch measured; the deep
controller costs <= 1.3x the linear one. The paper's numbers (i7-5930K
CPU and GTX 1080, Theano) are printed beside ours.
"""

from __future__ import annotations

import gc
import time

import numpy as np
import pytensor
import pytensor.tensor as pt

from symphys.compiler.backends import as_backend, compile, static_batch
from symphys.compiler.caches.compiled_functions import cached
from symphys.compiler.loops import Loops, loops
from symphys.experiments.common import (ExperimentResult, load_checkpoint, progress, pyplot,
                                        save_checkpoint, table, verdict)
from symphys.learn import nn
from symphys.loop.rollout import quiet_graph_building, rollout
from symphys.scene.reader import load_scene

NAME = "quadruped-speed"
SECONDS, SECONDS_QUICK = 10.0, 1.0
BATCHES, BATCHES_QUICK = (1, 8, 32, 128), (1,)
BACKENDS, BACKENDS_QUICK = ("numba", "jax"), ("numba",)
REPEATS, REPEATS_QUICK = 3, 1
# Table 1: ms per time step of one robot, (mode, batch, controller) ->
# (CPU, GPU). The single-robot row does not name its controller.
TABLE1 = {("gradient", 128, "linear"): (2.05, 1.00), ("gradient", 128, "deep"): (2.43, 1.01),
          ("forward", 128, "linear"): (0.372, 0.139), ("forward", 128, "deep"): (0.394, 0.143),
          ("gradient", 1, "linear"): (8.17, 69.6), ("forward", 1, "linear"): (1.06, 9.69)}
PAPER = {"backward_over_forward": 10.0,
         "table1_ms_per_robot_step": {f"{m} batch {b} {c}": {"cpu": cpu, "gpu": gpu}
                                      for (m, b, c), (cpu, gpu) in TABLE1.items()}}
TARGETS = {"gradient_over_forward": 3.0, "deep_over_linear": 1.3}


def controllers(n_obs: int = 81, n_act: int = 16) -> dict:
    return {"linear": nn.Linear(n_obs, n_act, bias=False),
            "deep": nn.MLP(n_obs, n_act, hidden=(1024, 1024), activation=nn.Activation.TANH,
                           bias=False)}


def _world_offsets(batch: int) -> np.ndarray:
    """(B, 3) offsets in y, 2 m apart (world 0 at the origin)."""
    out = np.zeros((batch, 3))
    out[:, 1] = 2.0 * np.arange(batch)
    return out


def _offset_params(scene, offset):
    """Every body's initial position and every joint's anchor moved by
    offset (B, 3): the robot translated rigidly, per world."""
    params = {f"{b.name}.position": np.asarray(b.position) + offset for b in scene.bodies}
    params.update({f"{j.name}.anchor": np.asarray(j.anchor) + offset for j in scene.joints})
    return params


def speed_function(scene, steps: int, ctrl, backend, gradient: bool, batch: int,
                   keep: bool = True):
    """Compiled f(offset (B, 3), *weights) -> loss [, *d weights]; loss is
    minus the spine's mean forward speed, averaged over worlds. Numba and
    CVM functions serve any batch size B; JAX needs it fixed (`batch`):
    the differentiated sweep loop allocates (sweeps + 1, B, K) buffers,
    which JAX cannot trace with a symbolic B. keep=False: build it without
    keeping it in the process's function cache (the full table's 16
    functions held at once ran this 24 GB machine out of memory at batch
    128)."""
    backend = as_backend(backend)
    size = static_batch(backend, True, batch)
    key = ("quadruped_speed", scene.structure_key(), scene.values_key(), steps, ctrl, backend,
           gradient, size)

    def build():
        weights = {n: pt.tensor(name=n, dtype="float64", shape=s)
                   for n, s in ctrl.parameter_shapes().items()}
        offset = pt.tensor("offset", dtype="float64", shape=(size, 3))
        traj = rollout(scene, steps, params=_offset_params(scene, offset), controller=ctrl,
                       controller_params=weights)
        x = traj.position["spine"][..., 0]
        loss = -((x[..., -1] - x[..., 0]) / (steps * scene.dt)).mean()
        outs = [loss] + (pytensor.grad(loss, list(weights.values())) if gradient else [])
        return compile([offset, *weights.values()], outs, backend)

    if keep:
        return cached(key, build, backend)
    with quiet_graph_building():
        return build()


def _time(fn, args, repeats: int) -> tuple[float, float, list]:
    """(first call s, median of `repeats` later calls s, last outputs)."""
    start = time.perf_counter()
    out = fn(*args)
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - start)
    return first, float(np.median(times)), out


def run(quick: bool = False, seed: int = 0, backend: str | None = None,
        show_progress: bool = True, seconds: float | None = None,
        batches: tuple[int, ...] | None = None,
        checkpoint: str | None = None, loops_kind: Loops = Loops.COMPILED) -> ExperimentResult:
    """checkpoint: a file the measured rows are saved to after each case
    and read back from when it exists (same seconds, seed and repeats), so
    the full table, many compiles long, can be measured over several
    sittings; cases already in it are not measured again. loops_kind: how
    numba runs the loops being timed (compiled: the steady state)."""
    scene = load_scene("quadruped")
    seconds = seconds or (SECONDS_QUICK if quick else SECONDS)
    steps = int(round(seconds / scene.dt))
    batches = batches or (BATCHES_QUICK if quick else BATCHES)
    backends = (backend,) if backend else (BACKENDS_QUICK if quick else BACKENDS)
    repeats = REPEATS_QUICK if quick else REPEATS
    ctrls = controllers(scene.n_observations, len(scene.motors))
    loops_kind = Loops(loops_kind)
    config = {"experiment": NAME, "steps": steps, "seed": seed, "repeats": repeats,
              "loops": loops_kind.value}
    saved = (load_checkpoint(checkpoint, config) if checkpoint else None) or {"rows": []}
    cases = [(b, n, batch) for b in backends for n in ctrls for batch in batches]
    done = {(r["backend"], r["controller"], r["batch"]): r for r in saved["rows"]}
    bar = progress([case for case in cases if case not in done], "cases", show_progress)
    for be, name, batch in bar:
        ctrl = ctrls[name]
        weights = list(ctrl.init(seed).values())
        args = [_world_offsets(batch), *weights]
        row = {"backend": be, "controller": name, "parameters": ctrl.n_parameters,
               "batch": batch}
        for mode, gradient in (("forward", False), ("gradient", True)):
            start = time.perf_counter()
            with loops(loops_kind):
                fn = speed_function(scene, steps, ctrl, be, gradient, batch, keep=quick)
            build = time.perf_counter() - start
            first, median, value = _time(fn, args, repeats)
            if not quick:      # free the unkept function before the next compile
                del fn
                gc.collect()
            row[f"{mode}_compile_s"] = build + first - median
            row[f"{mode}_s"] = median
            row[f"{mode}_ms_per_robot_step"] = median / steps / batch * 1e3
            row[f"{mode}_speed_m_s"] = -float(np.asarray(value[0]))   # outputs: [loss, ...]
        row["gradient_over_forward"] = row["gradient_s"] / row["forward_s"]
        done[(be, name, batch)] = row
        if checkpoint:
            saved["rows"].append(row)
            save_checkpoint(checkpoint, config, saved)
    rows = [done[case] for case in cases]
    for row in rows:
        twin = next(r for r in rows if r["backend"] == row["backend"]
                    and r["batch"] == row["batch"] and r["controller"] == "linear")
        row["over_linear_gradient"] = row["gradient_s"] / twin["gradient_s"]
    largest = max(r["batch"] for r in rows)
    ratios = [r["gradient_over_forward"] for r in rows if r["batch"] == largest]
    deep = [r["over_linear_gradient"] for r in rows if r["controller"] == "deep"]
    metrics = {
        "target_batch": largest,
        "max_gradient_over_forward": max(ratios),
        "max_deep_over_linear": max(deep),
        "gradient_over_forward_met": max(ratios) <= TARGETS["gradient_over_forward"],
        "deep_over_linear_met": max(deep) <= TARGETS["deep_over_linear"],
    }
    return ExperimentResult(name=NAME, quick=quick, seed=seed, metrics=metrics, paper=PAPER,
                            extra={"steps": steps, "loops": loops_kind.value,
                                   "seconds_simulated": steps * scene.dt,
                                   "targets": TARGETS, "cases": rows},
                            series={})


def _paper(mode: str, batch: int, controller: str) -> str:
    cpu_gpu = TABLE1.get((mode, batch, controller))
    return "" if cpu_gpu is None else f"{cpu_gpu[0]} / {cpu_gpu[1]}"


def report(result: ExperimentResult) -> str:
    head = ["backend", "controller", "weights", "batch", "forward ms", "paper CPU / GPU",
            "gradient ms", "paper CPU / GPU", "grad/fwd", "deep/linear", "compile s (fwd, grad)"]
    rows = [[r["backend"], r["controller"], r["parameters"], r["batch"],
             f"{r['forward_ms_per_robot_step']:.3f}",
             _paper("forward", r["batch"], r["controller"]),
             f"{r['gradient_ms_per_robot_step']:.3f}",
             _paper("gradient", r["batch"], r["controller"]),
             f"{r['gradient_over_forward']:.2f}", f"{r['over_linear_gradient']:.2f}",
             f"{r['forward_compile_s']:.0f}, {r['gradient_compile_s']:.0f}"]
            for r in result.extra["cases"]]
    p, m = result.paper, result.metrics
    return (table(head, rows)
            + "\nms per robot-step (one robot's time step: a batch's step time / batch); "
            + f"simulated: {result.extra['seconds_simulated']:.1f} s per run"
            + "\npaper: Table 1 (Theano), i7-5930K CPU / GTX 1080 GPU; backward about "
            + f"{p['backward_over_forward']:.0f}x forward"
            + f"\ntargets at batch {m['target_batch']}: gradient <= "
            + f"{TARGETS['gradient_over_forward']}x forward: "
            + verdict(m["gradient_over_forward_met"])
            + f" (worst {m['max_gradient_over_forward']:.2f}x); deep <= "
            + f"{TARGETS['deep_over_linear']}x linear: "
            + verdict(m["deep_over_linear_met"])
            + f" (worst {m['max_deep_over_linear']:.2f}x)")


def plot(result: ExperimentResult, path: str) -> None:
    """ms per robot-step against batch: ours (lines) and Table 1 (CPU: filled
    markers, GPU: open), forward and gradient side by side."""
    plt = pyplot()
    cases = result.extra["cases"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, mode in zip(axes, ("forward", "gradient")):
        for name, marker, colour in (("linear", "o", "tab:blue"), ("deep", "s", "tab:orange")):
            for be, ls in zip(sorted({r["backend"] for r in cases}), ("-", "--")):
                sel = [r for r in cases if r["backend"] == be and r["controller"] == name]
                if sel:
                    ax.loglog([r["batch"] for r in sel],
                              [r[f"{mode}_ms_per_robot_step"] for r in sel], marker=marker,
                              ls=ls, color=colour, label=f"{be}, {name}")
            paper = [(b, v) for (m, b, c), v in TABLE1.items() if m == mode and c == name]
            for device, k, fill in (("CPU", 0, colour), ("GPU", 1, "none")):
                if paper:
                    ax.loglog([b for b, _ in paper], [v[k] for _, v in paper], marker,
                              ms=10, mfc=fill, mec=colour, ls="none",
                              label=f"paper {device}, {name}")
        ax.set_title(f"{mode} (A2 quadruped, {result.extra['seconds_simulated']:.0f} s runs)")
        ax.set_xlabel("batch (robots simulated side by side)")
    axes[0].set_ylabel("ms per robot-step")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
