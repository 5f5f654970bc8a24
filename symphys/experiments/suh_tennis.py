"""Experiment B7: tennis, a linear feedback policy returning a ball
with a paddle, in the 3D engine.

The ball (a sphere, r = 0.15 m, restitution 0.8) flies in the x-y plane
without gravity. The paddle is a box with half extents 0.8 × 0.05 m in
that plane, so the ball's centre touches it within 0.8 + r and 0.05 + r of
its centre, as in the paper. It rides two sliders (x, then y) and a hinge
(about z), each with a velocity servo: the action u = (ẋ, ẏ, θ̇) of the
paddle. Velocity damping λ = 0.02/s multiplies every velocity by
1 − λ h = 0.999 per step, the paper's factor on the tangential velocity;
contacts use the engine's time-of-impact correction. Unlike the paper's
model, the paddle's own velocity enters the bounce (a moving paddle hits
harder), as it does in any rigid-body engine. The two carriages between
the sliders are heavy (100 and 10 kg, with a 1 m radius's inertia, and no
contacts), so that 8 sweeps hold the chain: with equal light carriages the
servos lagged and a hit tilted the paddle.

Policy: u = K x + w, x = [ball x, y, vx, vy, paddle x, y, θ], K (3, 7)
(d = 21) from K = 0, w ~ N(0, σ² I) per step (σ = 0.01); H = 200 steps of
h = 0.05 s. Cost: 100 [(x_T)² + (y_T − 2.5)² + 0.1 vx_T² + 0.1 vy_T²] + R Σ ‖u‖²
with R = 0.1 on the paddle's realised velocities, which the servos hold at
u (the authors' code: Qd = 100 diag(1, 1, 0.1, 0.1), R = 0.1). Initial
states (the authors' code): ball x ~ U(0, 3), y ~ 2 + N(0, 0.2²), velocity
−0.2 × position + N(0, 0.01²) (heading for the origin); paddle x ~ N(0, 0.5²),
y, θ ~ N(0, 0.05²). N = 1,000 rollouts per estimator and iteration, each
from its own initial state; every estimator descends with the same rate
1e-5 · k^−0.1 for 100 iterations, and the α rule uses δ = 0.95, L = 1000,
γ = 2000 (the authors' code for B7). Evaluation: the noise-free policy
on 200 fresh initial states, counting balls that end within 0.5 m of
(0, 2.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

import symphys as sp
from symphys.errors import SymphysError
from symphys.experiments.common import ExperimentResult, progress, pyplot, table, verdict
from symphys.learn import nn
from symphys.learn.closed_loop import closed_loop_function
from symphys.learn.estimators import EstimatorOptions, PolicyObjective, in_chunks
from symphys.learn.optim import SGD

NAME = "suh-tennis"
H, STEPS = 0.05, 200
RADIUS, HALF_LENGTH, HALF_THICKNESS, DEPTH = 0.15, 0.8, 0.05, 0.4
RESTITUTION, DAMPING = 0.8, 0.02                  # 1 − λ h = 0.999 per step
GOAL = np.array([0.0, 2.5])
TERMINAL = 100.0 * np.array([1.0, 1.0, 0.1, 0.1])  # on x, y, vx, vy at step H
EFFORT = 0.1
RADIUS_OK = 0.5
FEATURES = ("ball x", "ball y", "ball vx", "ball vy", "paddle x", "paddle y", "paddle θ")
ITERATIONS, QUICK_ITERATIONS = 100, 20
SAMPLES, QUICK_SAMPLES, CHUNK = 1000, 60, 250
EVALUATION, QUICK_EVALUATION = 200, 60
SIGMA, GAMMA, BOUND = 0.01, 2000.0, 1000.0
ESTIMATORS = ("first", "zeroth", "alpha")
PAPER = {"result": "zeroth- and alpha-order policies return balls from many initial "
                   "conditions; the first-order policy misses many"}


def learning_rate(iteration: int) -> float:
    """1e-5 · k^−0.1 at iteration k = 1, 2, ... (the authors' schedule)."""
    return 1e-5 / max(iteration, 1) ** 0.1


def scene() -> sp.Scene:
    """Ball and paddle; the paddle on x and y sliders and a z hinge."""
    return (sp.SceneBuilder("tennis", dt=H, gravity=(0.0, 0.0, 0.0), iterations=8,
                            restitution_threshold=0.01, velocity_damping=DAMPING)
            .sphere("ball", radius=RADIUS, mass=0.1, position=[1.5, 2.0, 0.0],
                    restitution=RESTITUTION, friction=0.0)
            .sphere("carriage_x", radius=1.0, mass=100.0, position=[0, 0, 0])
            .sphere("carriage_y", radius=1.0, mass=10.0, position=[0, 0, 0])
            .box("paddle", size=[2 * HALF_LENGTH, 2 * HALF_THICKNESS, DEPTH], mass=1.0,
                 position=[0, 0, 0], restitution=RESTITUTION, friction=0.0)
            .joint("slide_x", "slider", "world", "carriage_x", anchor=[0, 0, 0], axis=[1, 0, 0])
            .joint("slide_y", "slider", "carriage_x", "carriage_y", anchor=[0, 0, 0],
                   axis=[0, 1, 0])
            .joint("turn", "hinge", "carriage_y", "paddle", anchor=[0, 0, 0], axis=[0, 0, 1])
            .motor("drive_x", "slide_x", mode="velocity", max_velocity=100.0, max_torque=1e5)
            .motor("drive_y", "slide_y", mode="velocity", max_velocity=100.0, max_torque=1e5)
            .motor("drive_turn", "turn", mode="velocity", max_velocity=100.0,
                   max_torque=1e5)
            .sensor("position", body="ball").sensor("velocity", body="ball")
            .sensor("position", body="paddle").sensor("orientation", body="paddle")
            .contacts([("ball", "paddle")])
            .build())


START_PARAMS = ("ball.position", "ball.velocity", "carriage_x.position",
                "carriage_y.position", "paddle.position", "paddle.quaternion", "slide_x.anchor",
                "slide_y.anchor", "turn.anchor")


def start_params(starts: np.ndarray) -> list[np.ndarray]:
    """Per-world values of START_PARAMS for initial states (S, 7) =
    [ball x, y, vx, vy, paddle x, y, θ]: the carriages and the joints'
    anchors follow the paddle, so every joint starts closed with its anchor
    at its child's centre."""
    s = np.asarray(starts, dtype=np.float64)
    zero = np.zeros(len(s))
    paddle = np.stack([s[:, 4], s[:, 5], zero], axis=1)
    half = 0.5 * s[:, 6]
    quaternion = np.stack([np.cos(half), zero, zero, np.sin(half)], axis=1)
    carriage = np.stack([s[:, 4], zero, zero], axis=1)
    return [np.stack([s[:, 0], s[:, 1], zero], axis=1), np.stack([s[:, 2], s[:, 3], zero], axis=1),
            carriage, paddle, paddle, quaternion, carriage, paddle, paddle]


def sample_starts(rng: np.random.Generator, n: int) -> np.ndarray:
    """n initial states (n, 7) from the authors' distribution."""
    x = rng.uniform(0.0, 3.0, n)
    y = 2.0 + rng.normal(0.0, 0.2, n)
    vx = -0.2 * x + rng.normal(0.0, 0.01, n)
    vy = -0.2 * y + rng.normal(0.0, 0.01, n)
    return np.stack([x, y, vx, vy, rng.normal(0.0, 0.5, n), rng.normal(0.0, 0.05, n),
                     rng.normal(0.0, 0.05, n)], axis=1)


def _features(ball_position, ball_velocity, paddle_position, r00, r10):
    """x = [ball x, y, vx, vy, paddle x, y, θ] stacked on a new last axis."""
    return pt.stack([ball_position[..., 0], ball_position[..., 1], ball_velocity[..., 0],
                     ball_velocity[..., 1], paddle_position[..., 0], paddle_position[..., 1],
                     pt.arctan2(r10, r00)], axis=-1)


@dataclass(frozen=True)
class TennisPolicy:
    """u = K x (K: `prefix.K` (3, 7)) on the features x (`FEATURES`) read
    from the scene's sensors: ball position and velocity, paddle position
    and orientation (θ = atan2(R10, R00))."""

    prefix: str = "policy"
    n_out: int = 3

    def parameter_shapes(self):
        return {f"{self.prefix}.K": (self.n_out, len(FEATURES))}

    def init(self, seed: int = 0):
        return {f"{self.prefix}.K": np.zeros((self.n_out, len(FEATURES)))}

    def carry_sizes(self):
        return ()

    def apply(self, params, observation, carry, time):
        o = observation
        x = _features(o[:, 0:3], o[:, 3:6], o[:, 6:9], o[:, 9], o[:, 12])
        gain = params[f"{self.prefix}.K"]
        return nn.matmul(x, pt.swapaxes(gain, -1, -2)), carry


def controller(steps: int = STEPS) -> nn.ActionNoise:
    return nn.ActionNoise(TennisPolicy(), steps, H, prefix="noise")


def trajectory_features(trajectory, task):
    """The policy's features at steps 0..T, per world: (P, T + 1, 7)."""
    rot = trajectory.rotation["paddle"]
    return _features(trajectory.position["ball"], trajectory.velocity["ball"],
                     trajectory.position["paddle"], rot[..., 0, 0], rot[..., 1, 0])


def cost(trajectory, task):
    """Terminal cost of the ball plus R Σ ‖paddle velocity‖² over steps
    1..T, per world: (P,)."""
    p, v = trajectory.position["ball"][:, -1], trajectory.velocity["ball"][:, -1]
    terminal = (TERMINAL[0] * (p[:, 0] - GOAL[0]) ** 2 + TERMINAL[1] * (p[:, 1] - GOAL[1]) ** 2
                + TERMINAL[2] * v[:, 0] ** 2 + TERMINAL[3] * v[:, 1] ** 2)
    pv = trajectory.velocity["paddle"][:, 1:]
    spin = trajectory.angular_velocity["paddle"][:, 1:, 2]
    return terminal + EFFORT * (pv[..., 0] ** 2 + pv[..., 1] ** 2 + spin ** 2).sum(axis=1)


def gradient_function(rows: int, steps: int = STEPS, backend: str = "numba"):
    """f(gains (rows, 3, 7), noise (rows, steps, 3), starts (rows, 7)) ->
    (costs (rows,), d costs / d gains (rows, 3, 7)): world s runs policy
    gains[s] with action noise noise[s] from starts[s]."""
    fn = closed_loop_function(scene(), steps, controller(steps), cost, backend=backend,
                              population=rows, world_params=START_PARAMS)
    task = np.zeros((rows, 0))

    def run(gains, noise, starts):
        values, grad_gain, _ = fn(task, gains, noise, *start_params(starts))
        return np.asarray(values), np.asarray(grad_gain)

    return run


def forward_function(rows: int, steps: int = STEPS, backend: str = "numba"):
    """f(gains, noise, starts) as `gradient_function` -> (costs (rows,),
    features (rows, steps + 1, 7)): no reverse pass."""
    fn = closed_loop_function(scene(), steps, controller(steps), cost, backend=backend,
                              population=rows, world_params=START_PARAMS,
                              aux=trajectory_features, gradient=False)
    task = np.zeros((rows, 0))

    def run(gains, noise, starts):
        values, feats = fn(task, gains, noise, *start_params(starts))
        return np.asarray(values), np.asarray(feats)

    return run


def _gains(theta, rows: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(theta, dtype=np.float64).reshape(3, 7), (rows, 3, 7))


def tennis_objective(chunk: int, steps: int = STEPS, backend: str = "numba"):
    """(the `PolicyObjective` of K (21,), final(K, starts) -> the ball's
    final x, y): any number of worlds per call, run `chunk` at a time with
    gradients and 2 · chunk at a time without."""
    with_gradient = gradient_function(chunk, steps, backend)
    forward = forward_function(2 * chunk, steps, backend)

    def gradients(theta, noise, starts):
        values, grads = in_chunks(lambda w, x: with_gradient(_gains(theta, chunk), w, x),
                                  chunk, noise, starts)
        return values, grads.reshape(len(values), -1)

    def rollouts(theta, noise, starts):
        """(costs (S,), features (S, steps + 1, 7)) without a reverse pass."""
        return in_chunks(lambda w, x: forward(_gains(theta, 2 * chunk), w, x),
                         2 * chunk, noise, starts)

    def values(theta, noise, starts):
        values, feats = rollouts(theta, noise, starts)
        # Score of u = K x + w: Σ_h w_h x_hᵀ, the features the policy read at step h.
        scores = np.einsum("shm,shk->smk", noise, feats[:, :steps]).reshape(len(values), -1)
        return values, scores

    def final(theta, starts):
        """The ball's final x, y (S, 2) under the noise-free policy."""
        _, feats = rollouts(theta, np.zeros((len(starts), steps, 3)), starts)
        return feats[:, -1, :2]

    return PolicyObjective(gradients, values, sample_starts, (steps, 3), 21), final


def run(quick: bool = False, seed: int = 0, backend: str = "numba",
        show_progress: bool = True) -> ExperimentResult:
    iterations = QUICK_ITERATIONS if quick else ITERATIONS
    samples = QUICK_SAMPLES if quick else SAMPLES
    n_eval = QUICK_EVALUATION if quick else EVALUATION
    objective, final = tennis_objective(CHUNK if samples % CHUNK == 0 else samples,
                                        backend=backend)
    curves, gains, alphas, flagged = {}, {}, {}, {}
    for estimator in progress(ESTIMATORS, NAME, show_progress):
        # Only alpha-order needs both kinds of samples (and flags biased steps).
        options = EstimatorOptions(sigma=SIGMA, samples=samples, gamma=GAMMA, bound=BOUND,
                                   diagnose=estimator == "alpha")
        descent = SGD(learning_rate=learning_rate).minimise(
            objective, np.zeros(21), iterations, estimator, options, seed=seed,
            progress=show_progress)
        curves[estimator] = descent.values.tolist()
        gains[estimator] = descent.thetas[-1]
        alphas[estimator] = descent.alphas.tolist()
        flagged[estimator] = int(descent.flagged)
    # Fresh initial states (their own stream), the same for every policy.
    starts = sample_starts(np.random.default_rng([seed, 7]), n_eval)
    ends, returned = {}, {}
    for e in ESTIMATORS:
        xy = final(gains[e], starts)
        if not np.all(np.isfinite(xy)):
            raise SymphysError(f"{NAME}: the {e}-order policy's evaluation rollouts are "
                               f"not finite")
        ends[e] = xy
        returned[e] = int(np.sum(np.linalg.norm(xy - GOAL, axis=1) < RADIUS_OK))
    metrics = {"returned": returned, "evaluated": n_eval, "final_cost": {
        e: curves[e][-1] for e in ESTIMATORS}, "initial_cost": curves["first"][0],
        "iterations": iterations, "samples": samples, "backend": backend}
    metrics["targets_met"] = bool(returned["zeroth"] > returned["first"]
                                  and returned["alpha"] > returned["first"])
    return ExperimentResult(NAME, quick, seed, metrics, PAPER,
                            series={**{"cost_" + e: curves[e] for e in ESTIMATORS},
                                    **{"alpha_" + e: alphas[e] for e in ESTIMATORS},
                                    **{"gain_" + e: gains[e] for e in ESTIMATORS},
                                    **{"final_" + e: ends[e] for e in ESTIMATORS},
                                    "starts": starts},
                            extra={"flagged_iterations": flagged})


def report(result: ExperimentResult) -> str:
    m = result.metrics
    rows = [[e, f"{m['returned'][e]} / {m['evaluated']}", f"{m['final_cost'][e]:.2f}",
             result.extra["flagged_iterations"][e] if e == "alpha" else "(not drawn)"]
            for e in ESTIMATORS]
    head = ["estimator", f"balls within {RADIUS_OK} m of the goal", "expected cost at the end",
            "iterations flagged as biased"]
    return (f"expected cost at K = 0: {m['initial_cost']:.2f}\n" + table(head, rows)
            + f"\npaper: {result.paper['result']}"
            + "\ntarget (zeroth- and alpha-order policies return more balls than "
              "first-order): " + verdict(m["targets_met"]))


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s, m = result.series, result.metrics
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.2))
    for i, e in enumerate(ESTIMATORS):
        axes[0].plot(s["cost_" + e], color=f"C{i + 1}", label=f"{e}-order")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("iteration")
    axes[0].set_ylabel("expected cost (noise-free, N starts)")
    axes[0].set_title("tennis: policy descent")
    axes[0].legend(fontsize=8)
    starts = np.asarray(s["starts"])
    for ax, (i, e) in zip(axes[1:], enumerate(ESTIMATORS)):
        xy = np.asarray(s["final_" + e])
        ax.scatter(starts[:, 0], starts[:, 1], s=6, color="0.6", label="ball start")
        ax.scatter(xy[:, 0], xy[:, 1], s=6, color=f"C{i + 1}", label="ball at T")
        ax.add_patch(plt.Circle(GOAL, RADIUS_OK, fill=False, color="k"))
        ax.set_xlim(-3, 4)
        ax.set_ylim(-3, 4)
        ax.set_aspect("equal")
        ax.set_title(f"{e}-order: {m['returned'][e]} / {m['evaluated']} within {RADIUS_OK} m")
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
