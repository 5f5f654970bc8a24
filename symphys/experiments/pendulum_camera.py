"""EXPERIMENTS.md A6: swing a bar up on a cart and balance it, seeing only
camera images.

Scene `graphs/pendulum_camera.json`: a cart on a rail (slider with a
position servo) carrying a 0.6 m bar on a hinge, hanging down at the start;
the only sensor is the camera (focal length 18 mm, sensor 36 x 12 mm, at
(0, 2, 0.3) looking along -y, checker-textured back wall). Each step the
camera image goes through the paper's controller shape (blocks of two 3 x 3
convolutions and a 2 x 2 max-pool -> dense 128 -> a 128-unit recurrent
memory -> 128 -> 128 -> tanh cart target), the servo drives the cart, the
physics moves the bar, and the next image is rendered from the new state,
all one differentiable graph. Loss: the bar tip's mean distance to
(0, 0, 0.9) over 8 s. Adam on the exact gradient (through physics,
controller and renderer) under a `StepGuard`.

What is ours, not the paper's (stated in the report): the image is
rendered at RESOLUTION (the paper's 288 x 96 field of view, fewer pixels)
and the convolutions have CHANNELS, because the paper's 288 x 96 network
takes 0.6 s per image forward and backward on this CPU (800 images per
rollout); soft edges (`Camera.soft_edge`) anti-alias the thin bar.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytensor.tensor as pt

from symphys import nn
from symphys.algebra import safe_vector_norm
from symphys.closed_loop import closed_loop_function
from symphys.experiments.common import (ExperimentResult, load_checkpoint, progress, pyplot,
                                        save_checkpoint, table, verdict)
from symphys.optim import Adam, StepGuard
from symphys.scene_io import load_scene

NAME = "pendulum-camera"
SCENE = "pendulum_camera"
GOAL = np.array([0.0, 0.0, 0.9])
TIP = np.array([0.0, 0.0, -0.3])          # the bar's free end, bar frame (m)
SECONDS, SECONDS_QUICK = 8.0, 0.5
LAST_SECOND = 1.0
TARGET_M = 0.05                            # mean tip distance over the last second
RESOLUTION, RESOLUTION_QUICK = (96, 32), (32, 16)        # (W, H) pixels
CHANNELS, CHANNELS_QUICK = (8, 16, 16, 16), (4,)
DENSE = MEMORY = 128
HEAD = (128, 128)
SOFT_EDGE = 0.5                            # pixels
CART_RANGE = 1.5                           # m: the tanh output times this is the cart target
EVALUATIONS, EVALUATIONS_QUICK = 300, 4
LEARNING_RATE = 1e-3
FRAMES = 8                                 # camera frames in the plot's strip
PAPER = {"target_m": TARGET_M, "image": [288, 96], "channels": [32, 64, 32, 16],
         "note": "the paper shows the swing-up and balance; it gives no update count"}


def camera_scene(resolution=RESOLUTION):
    """The A6 scene with its camera at `resolution` (W, H), same field of view."""
    scene = load_scene(SCENE)
    return scene.with_camera(dataclasses.replace(scene.cameras[0], resolution=tuple(resolution),
                                                 soft_edge=SOFT_EDGE))


def controller(resolution=RESOLUTION, channels=CHANNELS) -> nn.VisionController:
    w, h = resolution
    return nn.VisionController((h, w, 3), 1, channels=tuple(channels), dense=DENSE,
                               memory=MEMORY, head=HEAD, output_scale=CART_RANGE)


def tip_distance(traj):
    """(..., T+1) distance of the bar's tip to GOAL (symbolic)."""
    tip = traj.position["bar"] + traj.rotation["bar"][..., :, 2] * TIP[2]
    return safe_vector_norm(tip - GOAL)


def loss(traj, task):
    return tip_distance(traj).mean()


def frame_steps(steps: int) -> np.ndarray:
    """The FRAMES steps (0..steps) whose camera images the plot shows."""
    return np.linspace(0, steps, FRAMES).round().astype(int)


def rollout_record(scene, steps: int):
    """aux of the training function: world 0's tip distance (T+1,), cart x
    (T+1,) and camera frames (FRAMES, H, W, 3) at `frame_steps`, so one
    compiled function trains and records."""
    from symphys.camera import render

    index = frame_steps(steps)
    names = scene.body_names

    def record(traj, task):
        world0 = (lambda x: x[0]) if traj.batched else (lambda x: x)
        pos = pt.stack([world0(traj.position[n])[index] for n in names], axis=1)   # (F, N, 3)
        rot = pt.stack([world0(traj.rotation[n])[index] for n in names], axis=1)   # (F, N, 3, 3)
        frames = render(scene, scene.cameras[0], pos, rot)
        return world0(tip_distance(traj)), world0(traj.position["cart"])[:, 0], frames

    return record


def _train(scene, ctrl, steps, evaluations, backend, seed, show, checkpoint):
    """Adam under a StepGuard. Returns the losses, the gradient norms (all
    weights; the first convolution's), the first and the best rollouts'
    records ({tip, cart_x, frames}), wall and compile seconds and the
    rejected steps."""
    start = time.perf_counter()
    fn = closed_loop_function(scene, steps, ctrl, loss, backend=backend,
                              aux=rollout_record(scene, steps))
    task = np.zeros((1, 0))
    first_conv = f"{ctrl.prefix}.conv0_0_w"
    config = {"experiment": NAME, "steps": steps, "seed": seed, "backend": backend,
              "resolution": list(scene.cameras[0].resolution), "channels": list(ctrl.channels),
              "learning_rate": LEARNING_RATE, "optimiser": "adam+step_guard"}
    state = load_checkpoint(checkpoint, config) if checkpoint else None
    if state is None:
        state = {"weights": ctrl.init(seed), "losses": [], "wall_seconds": 0.0, "first": None,
                 "gradient_norms": [], "conv_gradient_norms": [],
                 "guard": StepGuard(Adam(learning_rate=LEARNING_RATE, clip_norm=1.0))}
    fn(task, *state["weights"].values())
    compile_s = time.perf_counter() - start
    guard, losses = state["guard"], state["losses"]
    bar = progress(range(len(losses), evaluations), "gradient", show, total=evaluations,
                   initial=len(losses))
    for _ in bar:
        start = time.perf_counter()
        value, *grads, tip, cart_x, frames = fn(task, *state["weights"].values())
        if state["first"] is None:
            state["first"] = {"tip": tip, "cart_x": cart_x, "frames": frames}
        losses.append(float(value))
        grads = dict(zip(state["weights"], grads))
        state["gradient_norms"].append(float(np.sqrt(sum(np.sum(g ** 2)
                                                         for g in grads.values()))))
        # How much of it reaches the first convolution (the pixels' filters).
        state["conv_gradient_norms"].append(float(np.linalg.norm(grads[first_conv])))
        bar.set_postfix(loss=f"{losses[-1]:.3f} m", rejected=guard.rejections)
        state["weights"] = guard.step(state["weights"], value, grads)
        state["wall_seconds"] += time.perf_counter() - start
        if checkpoint:
            save_checkpoint(checkpoint, config, state)
    bar.close()
    _, *_, tip, cart_x, frames = fn(task, *guard.best_params.values())
    best = {"tip": tip, "cart_x": cart_x, "frames": frames}
    norms = {"gradient_norm": state["gradient_norms"],
             "conv_gradient_norm": state["conv_gradient_norms"]}
    return (losses, norms, state["first"], best, state["wall_seconds"], compile_s,
            guard.rejections)


def run(quick: bool = False, seed: int = 0, backend: str = "jax", show_progress: bool = True,
        seconds: float | None = None, evaluations: int | None = None,
        checkpoint: str | None = None) -> ExperimentResult:
    """checkpoint: a file to save the run to after every update and to resume
    from when it exists (same settings), so the long run can be spread over
    several sittings."""
    resolution = RESOLUTION_QUICK if quick else RESOLUTION
    scene = camera_scene(resolution)
    ctrl = controller(resolution, CHANNELS_QUICK if quick else CHANNELS)
    seconds = seconds or (SECONDS_QUICK if quick else SECONDS)
    evaluations = evaluations or (EVALUATIONS_QUICK if quick else EVALUATIONS)
    steps = int(round(seconds / scene.dt))
    losses, norms, first, best, wall, compile_s, rejected = _train(
        scene, ctrl, steps, evaluations, backend, seed, show_progress, checkpoint)
    last = max(1, int(round(min(LAST_SECOND, seconds) / scene.dt)))
    final = float(np.mean(best["tip"][-last:]))
    metrics = {
        "updates": len(losses),
        "final_tip_distance": final,
        "first_loss": losses[0],
        "best_loss": min(losses),
        "target_met": final < TARGET_M,
        "loss_fell": min(losses) < losses[0],
        "rejected_steps": rejected,
        "parameters": ctrl.n_parameters,
    }
    return ExperimentResult(
        name=NAME, quick=quick, seed=seed, metrics=metrics, paper=PAPER,
        extra={"backend": backend, "steps": steps, "dt": scene.dt,
               "seconds_simulated": steps * scene.dt, "wall_seconds": wall,
               "compile_seconds": compile_s, "resolution": list(resolution),
               "channels": list(ctrl.channels), "learning_rate": LEARNING_RATE,
               "soft_edge_px": SOFT_EDGE},
        series={"loss": losses, **norms, "time": np.arange(steps + 1) * scene.dt,
                "tip_distance_first": first["tip"], "tip_distance_best": best["tip"],
                "cart_x_best": best["cart_x"], "frame_times": frame_steps(steps) * scene.dt,
                "frames": np.round(best["frames"], 3)})


def report(result: ExperimentResult) -> str:
    m, x = result.metrics, result.extra
    w, h = x["resolution"]
    rows = [["gradient (ours)", m["updates"], f"{m['first_loss']:.3f}", f"{m['best_loss']:.3f}",
             f"{m['final_tip_distance']:.3f}", f"{w}x{h}", "/".join(map(str, x["channels"])),
             f"{x['wall_seconds']:.0f}", f"{x['compile_seconds']:.0f}"],
            ["swing-up (paper)", "-", "-", "-", f"< {TARGET_M} (swung up, balanced)", "288x96",
             "32/64/32/16", "-", "-"]]
    head = ["method", "updates", "first loss m", "best loss m", "last-second tip distance m",
            "image", "channels", "wall s", "compile s"]
    return (table(head, rows)
            + f"\ncontroller: {m['parameters']} parameters, sees only the camera "
            + f"({x['seconds_simulated']:.1f} s at dt {x['dt']} s, {x['backend']})"
            + f"\ntarget: mean tip distance over the last second < {TARGET_M} m: "
            + verdict(m["target_met"])
            + f"\nsteps undone by the guard: {m['rejected_steps']}")


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s = result.series
    frames = np.asarray(s["frames"])
    fig = plt.figure(figsize=(12, 7))
    grid = fig.add_gridspec(3, len(frames), height_ratios=[0.6, 1, 1])
    for k, image in enumerate(frames):
        ax = fig.add_subplot(grid[0, k])
        ax.imshow(np.clip(image, 0, 1), interpolation="nearest")
        ax.set_title(f"{s['frame_times'][k]:.1f} s", fontsize=8)
        ax.axis("off")
    half = len(frames) // 2
    ax_tip = fig.add_subplot(grid[1:, :half])
    ax_tip.plot(s["time"], s["tip_distance_first"], color="0.6", label="first controller")
    ax_tip.plot(s["time"], s["tip_distance_best"], color="C0", label="best controller")
    ax_tip.axhline(TARGET_M, ls="--", color="k", lw=0.8, label=f"target {TARGET_M} m")
    ax_tip.set_xlabel("time (s)")
    ax_tip.set_ylabel("tip distance to (0, 0, 0.9) (m)")
    ax_tip.legend(fontsize=8)
    ax_loss = fig.add_subplot(grid[1:, half:])
    ax_loss.plot(range(1, len(s["loss"]) + 1), s["loss"])
    ax_loss.set_xlabel("update")
    ax_loss.set_ylabel("loss: mean tip distance (m)")
    w, h = result.extra["resolution"]
    fig.suptitle(f"A6 pendulum swing-up from a {w}x{h} camera: best controller's frames")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
