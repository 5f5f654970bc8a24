"""Experiment B6: gradient variance of a passive double pendulum
against the horizon, in the 3D engine.

Two 0.1 kg bobs hang from hinges about y: the shoulder at the origin, the
elbow at bob 1; both links are 1 m. The bobs are spheres of radius 0.2 m
(their own inertia is 1.6% of m l²; `reference_height` includes it):
with 2 cm bobs the solver's sweeps, which can meet a hinge 1 m from a
body's centre by spinning a body of almost no inertia instead of moving
it, let the links stretch until 2 of 707 rollouts blew up after 1.2–1.6 s. The
initial state s0 = [q1, q2, q̇1, q̇2] = [π/2, 0, 5, −5] (q about +y from
hanging straight down, q2 relative to link 1) is mapped to the bodies'
positions, velocities and spins and the elbow's anchor (`initial_state`),
so noise w ~ N(0, 0.5² I) on s0 (N = 100 samples, h = 0.001 s: the
authors' settings) perturbs the state the way the paper does. V is bob
2's height at the horizon H.

For each H the first-order samples ∇V(s0 + w_i) and the zeroth-order ones
[V(s0 + w_i) − V(s0)] w_i / σ² give sample variances. Chaos makes the
exact gradients grow exponentially with H while V stays within ±2 m, so
the first-order variance overtakes the zeroth-order one: the crossover
horizon is reported. Every horizon's samples are worlds of one batched
call (each world's loss reads its own horizon).
"""

from __future__ import annotations

import functools

import numpy as np

import symphys as sp
from symphys.api import batch_objective
from symphys.errors import SymphysError
from symphys.experiments.common import ExperimentResult, progress, pyplot, table, verdict
from symphys.learn.estimators import reparameterised, sample_spread

NAME = "suh-double-pendulum"
LINK, MASS, RADIUS, DT, SWEEPS = 1.0, 0.1, 0.2, 0.001, 8
GRAVITY = 9.81
S0 = np.array([np.pi / 2, 0.0, 5.0, -5.0])
SIGMA = 0.5
HORIZONS = (50, 100, 200, 400, 800, 1600, 3200)    # steps of 1 ms
SAMPLES = 100
HORIZONS_QUICK, SAMPLES_QUICK = (50, 1600), 12
PAPER = {"result": "first-order variance overtakes zeroth-order as the horizon grows"}
# The parameters s0 sets, in the order `initial_state` packs them.
WRT = ("bob1.position", "bob2.position", "elbow.anchor", "bob1.velocity", "bob2.velocity",
       "bob1.angular_velocity", "bob2.angular_velocity")


def scene() -> sp.Scene:
    """The pendulum at s0's pose (parameters move it to any other)."""
    params = initial_state(S0[None])[0]
    p1, p2, anchor = params[0:3], params[3:6], params[6:9]
    return (sp.SceneBuilder("double-pendulum", dt=DT, iterations=SWEEPS)
            .sphere("bob1", radius=RADIUS, mass=MASS, position=p1)
            .sphere("bob2", radius=RADIUS, mass=MASS, position=p2)
            .joint("shoulder", "hinge", "world", "bob1", anchor=[0, 0, 0], axis=[0, 1, 0])
            .joint("elbow", "hinge", "bob1", "bob2", anchor=anchor, axis=[0, 1, 0])
            .contacts([])
            .build())


def _down(angle):
    """Unit vector of a link at `angle` (...) about +y from hanging down: (..., 3)."""
    return np.stack([-np.sin(angle), np.zeros_like(angle), -np.cos(angle)], axis=-1)


def _tangent(angle):
    """d/dangle of `_down`, which is also ŷ × `_down`: (..., 3)."""
    return np.stack([-np.cos(angle), np.zeros_like(angle), np.sin(angle)], axis=-1)


def initial_state(states):
    """Joint states (S, 4) -> the parameters in `WRT` order, flattened (S, 21)."""
    q1, q2, r1, r2 = states.T
    e1, e2 = _down(q1), _down(q1 + q2)
    t1, t2 = _tangent(q1), _tangent(q1 + q2)
    p1 = LINK * e1
    p2 = p1 + LINK * e2
    v1 = (LINK * r1)[:, None] * t1
    v2 = v1 + (LINK * (r1 + r2))[:, None] * t2
    y = np.array([0.0, 1.0, 0.0])
    w1, w2 = r1[:, None] * y, (r1 + r2)[:, None] * y
    return np.concatenate([p1, p2, p1, v1, v2, w1, w2], axis=1)


def initial_state_jacobian(states):
    """∂ initial_state / ∂ states: (S, 21, 4)."""
    q1, q2, r1, r2 = states.T
    e1, e2 = _down(q1), _down(q1 + q2)
    t1, t2 = _tangent(q1), _tangent(q1 + q2)
    zero = np.zeros_like(t1)
    y = np.broadcast_to([0.0, 1.0, 0.0], t1.shape)
    r12 = (r1 + r2)[:, None]
    # Columns: ∂/∂q1, ∂/∂q2, ∂/∂q̇1, ∂/∂q̇2 of each 3-vector (t' = −e).
    blocks = [
        [LINK * t1, zero, zero, zero],                                   # p1
        [LINK * (t1 + t2), LINK * t2, zero, zero],                       # p2
        [LINK * t1, zero, zero, zero],                                   # elbow anchor
        [-LINK * r1[:, None] * e1, zero, LINK * t1, zero],               # v1
        [-LINK * (r1[:, None] * e1 + r12 * e2), -LINK * r12 * e2,
         LINK * (t1 + t2), LINK * t2],                                   # v2
        [zero, zero, y, zero],                                           # w1
        [zero, zero, y, y],                                              # w2
    ]
    return np.concatenate([np.stack(cols, axis=-1) for cols in blocks], axis=1)


def reference_height(state, seconds: float, substeps: int = 20000) -> float:
    """Bob 2's height after `seconds` from joint state (4,), by RK4 of the
    double pendulum with point-mass links and bobs of inertia I = 0.4 m r²
    (absolute angles φ1 = q1, φ2 = q1 + q2):
        [2ml² + I, ml² cos Δ; ml² cos Δ, ml² + I] φ̈
            = [−ml² sin Δ φ̇2² − 2mgl sin φ1, ml² sin Δ φ̇1² − mgl sin φ2],
    Δ = φ1 − φ2."""
    m, l, g = MASS, LINK, GRAVITY
    inertia = 0.4 * m * RADIUS ** 2

    def rates(y):
        a1, a2, w1, w2 = y
        d = a1 - a2
        mass = np.array([[2 * m * l * l + inertia, m * l * l * np.cos(d)],
                         [m * l * l * np.cos(d), m * l * l + inertia]])
        force = np.array([-m * l * l * np.sin(d) * w2 ** 2 - 2 * m * g * l * np.sin(a1),
                          m * l * l * np.sin(d) * w1 ** 2 - m * g * l * np.sin(a2)])
        return np.concatenate([[w1, w2], np.linalg.solve(mass, force)])

    q1, q2, r1, r2 = state
    y, h = np.array([q1, q1 + q2, r1, r1 + r2], dtype=np.float64), seconds / substeps
    for _ in range(substeps):
        k1 = rates(y)
        k2 = rates(y + 0.5 * h * k1)
        k3 = rates(y + 0.5 * h * k2)
        k4 = rates(y + h * k3)
        y = y + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return float(-l * np.cos(y[0]) - l * np.cos(y[1]))


def _horizon_loss(masks):
    """Per-world loss: bob 2's height at the world's own horizon, (W,)."""
    def loss(trajectory):
        return (trajectory.position["bob2"][:, :, 2] * masks).sum(axis=1)
    return loss


@functools.lru_cache(maxsize=4)
def horizon_function(horizons: tuple, samples: int, backend: str = "numba"):
    """Batch objective of joint states: states (W, 4) -> (V (W,), ∇V (W, 4))
    for exactly W = len(horizons) × (1 + samples) worlds, one call; block j
    of 1 + samples rows reads horizon j."""
    rows = 1 + samples
    steps = max(horizons)
    masks = np.zeros((len(horizons) * rows, steps + 1))
    for j, h in enumerate(horizons):
        masks[j * rows:(j + 1) * rows, h] = 1.0
    parameters = batch_objective(scene(), steps, _horizon_loss(masks), WRT, backend=backend)
    return reparameterised(parameters, initial_state, initial_state_jacobian, 4)


def run(quick: bool = False, seed: int = 0, backend: str = "numba",
        show_progress: bool = True) -> ExperimentResult:
    horizons = HORIZONS_QUICK if quick else HORIZONS
    samples = SAMPLES_QUICK if quick else SAMPLES
    rng = np.random.default_rng(seed)
    noise = rng.normal(0.0, SIGMA, (len(horizons), samples, 4))
    states = np.concatenate([np.vstack([S0, S0 + noise[j]]) for j in range(len(horizons))])
    evaluate = horizon_function(horizons, samples, backend)
    for _ in progress(range(1), NAME, show_progress):
        values, grads = evaluate(states)
    bad = ~(np.isfinite(values) & np.isfinite(grads).all(axis=1))
    if bad.any():
        raise SymphysError(f"{NAME}: {int(bad.sum())} of {len(values)} rollouts gave "
                           f"non-finite values or gradients (first at joint state "
                           f"{states[np.argmax(bad)].round(4).tolist()})")
    rows = 1 + samples
    first, zeroth = [], []
    for j in range(len(horizons)):
        block = slice(j * rows, (j + 1) * rows)
        v, g = values[block], grads[block]
        first.append(sample_spread(g[1:]))
        zeroth.append(sample_spread((v[1:] - v[0])[:, None] * noise[j] / SIGMA ** 2))
    seconds = [h * DT for h in horizons]
    above = [f > z for f, z in zip(first, zeroth)]
    crossover = next((seconds[i] for i, a in enumerate(above) if a and all(above[i:])), None)
    metrics = {"crossover_horizon_s": crossover,
               "first_below_at_shortest": bool(not above[0]),
               "first_above_at_longest": bool(above[-1]),
               "samples": samples, "backend": backend}
    metrics["targets_met"] = bool(metrics["first_below_at_shortest"]
                                  and metrics["first_above_at_longest"])
    return ExperimentResult(NAME, quick, seed, metrics, PAPER,
                            series={"horizon_s": seconds, "variance_first": first,
                                    "variance_zeroth": zeroth},
                            extra={"s0": S0, "sigma": SIGMA, "dt": DT})


def report(result: ExperimentResult) -> str:
    s, m = result.series, result.metrics
    rows = [[f"{t:.3f}", f"{a:.3g}", f"{b:.3g}", "first" if a > b else "zeroth"]
            for t, a, b in zip(s["horizon_s"], s["variance_first"], s["variance_zeroth"])]
    cross = m["crossover_horizon_s"]
    return (table(["horizon (s)", "first-order variance", "zeroth-order variance",
                   "larger"], rows)
            + "\ncrossover horizon: "
            + (f"{cross:.3f} s (first-order above from there on)" if cross is not None
               else "none within the horizons run")
            + f"\npaper: {result.paper['result']}"
            + "\ntargets (first-order below zeroth-order at the shortest horizon, above at "
            f"the longest): {verdict(m['targets_met'])}")


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s = result.series
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(s["horizon_s"], s["variance_first"], "o-", color="C1", label="first-order")
    ax.loglog(s["horizon_s"], s["variance_zeroth"], "s-", color="C2", label="zeroth-order")
    if result.metrics["crossover_horizon_s"] is not None:
        ax.axvline(result.metrics["crossover_horizon_s"], color="grey", ls=":",
                   label="crossover")
    ax.set_xlabel("horizon (s)")
    ax.set_ylabel("sample variance of the gradient")
    ax.set_title("double pendulum: variance against horizon")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
