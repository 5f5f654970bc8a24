"""Experiment B4: pushing a block through a spring, in the 3D engine.

Two 0.1 kg spheres of radius 0.5 m, no gravity, start touching at x = 0
and x = 1. Penalty contact (symphys.physics.penalty, damping 0) gives the paper's
spring force k (1 − (x2 − x1)) while the centres are closer than 1 m; the
solver's velocity damping λ = (1 − c)/h gives its v+ = c v + (h/m) F, and
x+ = x + h v+ is symplectic Euler, as in the paper. Sphere 1 runs on a
slider rail with a force motor driven by the per-step commands u (T,)
(`nn.Schedule`); the scene reproduces the paper's update to rounding
(`reference_cost` is that update in NumPy; the tests compare them).

Cost: Σ_t (s_t − s_g)ᵀ Q (s_t − s_g) + u_t², s = [x1, x2, v1, v2],
s_g = [1, 2, 0, 0], Q = diag(0.1, 10, 0.1, 0.1); h = 0.005, T = 200,
u0 = 0.1, σ = 0.1, N = 10, step 1e-3, 500 iterations. A soft spring
(k = 10, c = 0.998) gives informative exact gradients: first-order wins.
A stiff one (k = 1000, c = 0.99) makes them erratic: zeroth-order wins,
and alpha-order should track the better one in both. Stiffness and
damping are inputs of one compiled function, so every case and the
variance study (first- and zeroth-order spreads at u0 for k = 10 … 10⁴)
share it.
"""

from __future__ import annotations

import numpy as np

import symphys as sp
from symphys.experiments.common import ExperimentResult, progress, pyplot, table, verdict
from symphys.learn.closed_loop import command_objective
from symphys.learn.estimators import EstimatorOptions, estimate, values_at
from symphys.learn.optim import SGD

NAME = "suh-pushing"
H, STEPS, MASS = 0.005, 200, 0.1
Q = np.array([0.1, 10.0, 0.1, 0.1])
GOAL = np.array([1.0, 2.0, 0.0, 0.0])
U0, ITERATIONS, RATE = 0.1, 500, 1e-3
QUICK_ITERATIONS = 150
OPTIONS = EstimatorOptions(sigma=0.1, samples=10, gamma=1000.0)
CASES = {"soft": (10.0, 0.998), "stiff": (1000.0, 0.99)}   # (k, c)
STIFFNESSES = (10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0)
VARIANCE_DAMPING = 0.99
VARIANCE_DRAWS, VARIANCE_DRAWS_QUICK = 20, 4
ESTIMATORS = ("first", "zeroth", "alpha")
PAPER = {"soft": "first-order ends with lower cost than zeroth-order",
         "stiff": "zeroth-order ends with lower cost than first-order",
         "alpha": "tracks the better of the two in both",
         "variance": "first-order variance grows with k from 10 to 1e4"}
ALPHA_WITHIN = 0.10             # alpha's final cost within 10% of the better one


def scene() -> sp.Scene:
    """The two blocks; stiffness and damping are overridden per case."""
    return (sp.SceneBuilder("pushing", dt=H, gravity=(0, 0, 0), iterations=1,
                            model="penalty", contact_stiffness=CASES["stiff"][0],
                            contact_damping=0.0,
                            velocity_damping=(1.0 - CASES["stiff"][1]) / H)
            .sphere("block1", radius=0.5, mass=MASS, position=[0, 0, 0])
            .sphere("block2", radius=0.5, mass=MASS, position=[1, 0, 0])
            .joint("rail", "slider", "world", "block1", anchor=[0, 0, 0], axis=[1, 0, 0])
            .motor("push", "rail", mode="torque", max_torque=1e6)
            .contacts([("block1", "block2")])
            .build())


def state_cost(trajectory, task):
    """Σ_t (s_t − s_g)ᵀ Q (s_t − s_g) over steps 1..T per world: (P,)."""
    x1, x2 = trajectory.position["block1"][:, 1:, 0], trajectory.position["block2"][:, 1:, 0]
    v1, v2 = trajectory.velocity["block1"][:, 1:, 0], trajectory.velocity["block2"][:, 1:, 0]
    parts = [x1, x2, v1, v2]
    return sum(q * (s - g) ** 2 for q, s, g in zip(Q, parts, GOAL)).sum(axis=1)


def reference_cost(u, k: float, c: float) -> float:
    """The paper's model in NumPy: the cost of commands u (T,)."""
    x, v, cost = np.array([0.0, 1.0]), np.zeros(2), 0.0
    for command in u:
        push = k * max(0.0, 1.0 - (x[1] - x[0]))
        v = c * v + (H / MASS) * np.array([command - push, push])
        x = x + H * v
        cost += float(Q @ (np.concatenate([x, v]) - GOAL) ** 2)
    return cost + float(np.sum(np.asarray(u) ** 2))


def pushing_objective(k: float, c: float, backend: str = "jax"):
    """Batch objective of the commands: us (S, T) -> (costs (S,), gradients
    (S, T)), S = 1 + 2N worlds of one compiled call."""
    return command_objective(scene(), STEPS, state_cost, 1 + 2 * OPTIONS.samples,
                             params={"solver.contact_stiffness": k,
                                     "solver.velocity_damping": (1.0 - c) / H},
                             backend=backend)


def run(quick: bool = False, seed: int = 0, backend: str = "jax",
        show_progress: bool = True) -> ExperimentResult:
    iterations = QUICK_ITERATIONS if quick else ITERATIONS
    u0 = np.full(STEPS, U0)
    finals, curves, alphas, flagged = {}, {}, {}, {}
    jobs = [(case, e) for case in CASES for e in ESTIMATORS]
    for case, estimator in progress(jobs, NAME, show_progress):
        objective = pushing_objective(*CASES[case], backend)
        descent = SGD(learning_rate=RATE).minimise(objective, u0, iterations, estimator,
                                                    OPTIONS, seed=seed)
        curves[f"{case}_{estimator}"] = descent.values.tolist()
        finals.setdefault(case, {})[estimator] = float(values_at(objective,
                                                                 descent.thetas[-1])[0])
        alphas[f"{case}_{estimator}"] = float(np.mean(descent.alphas))
        flagged[f"{case}_{estimator}"] = int(descent.flagged)
    # Variance of each estimator's samples at u0 against the stiffness.
    rng = np.random.default_rng(seed)
    draws = VARIANCE_DRAWS_QUICK if quick else VARIANCE_DRAWS
    spreads = {"first": [], "zeroth": []}
    for k in progress(STIFFNESSES, f"{NAME} variance", show_progress):
        objective = pushing_objective(k, VARIANCE_DAMPING, backend)
        ests = [estimate(objective, u0, "alpha", OPTIONS, rng) for _ in range(draws)]
        spreads["first"].append(float(np.mean([e.variance_first for e in ests])))
        spreads["zeroth"].append(float(np.mean([e.variance_zeroth for e in ests])))
    soft, stiff = finals["soft"], finals["stiff"]
    within = {case: (finals[case]["alpha"] - min(finals[case]["first"], finals[case]["zeroth"]))
              / min(finals[case]["first"], finals[case]["zeroth"]) for case in CASES}
    grows = bool(spreads["first"][-1] > spreads["first"][0])
    metrics = {"final_cost": finals, "alpha_excess_over_better": within,
               "soft_first_wins": bool(soft["first"] < soft["zeroth"]),
               "stiff_zeroth_wins": bool(stiff["zeroth"] < stiff["first"]),
               "alpha_tracks": bool(all(w <= ALPHA_WITHIN for w in within.values())),
               "first_variance_grows_with_k": grows,
               "initial_cost": {case: float(values_at(pushing_objective(*CASES[case], backend),
                                                      u0)[0]) for case in CASES},
               "iterations": iterations, "backend": backend}
    metrics["targets_met"] = bool(metrics["soft_first_wins"] and metrics["stiff_zeroth_wins"]
                                  and metrics["alpha_tracks"] and grows)
    return ExperimentResult(NAME, quick, seed, metrics, PAPER,
                            series={"stiffness": list(STIFFNESSES),
                                    "variance_first": spreads["first"],
                                    "variance_zeroth": spreads["zeroth"],
                                    **{"cost_" + k: v for k, v in curves.items()}},
                            extra={"mean_alpha": alphas, "flagged_iterations": flagged,
                                   "cases": {c: {"k": k, "c": d} for c, (k, d) in CASES.items()}})


def report(result: ExperimentResult) -> str:
    m = result.metrics
    rows = []
    for case, (k, c) in CASES.items():
        f = m["final_cost"][case]
        rows.append([f"k = {k:g}, c = {c}", f"{m['initial_cost'][case]:.1f}",
                     *(f"{f[e]:.2f}" for e in ESTIMATORS),
                     f"{100 * m['alpha_excess_over_better'][case]:+.1f}%",
                     "first-order" if case == "soft" else "zeroth-order"])
    head = ["case", "cost at u0", "first", "zeroth", "alpha", "alpha vs better",
            "paper: better"]
    s = result.series
    var_rows = [[f"{k:g}", f"{a:.3g}", f"{b:.3g}"]
                for k, a, b in zip(s["stiffness"], s["variance_first"], s["variance_zeroth"])]
    return (table(head, rows)
            + "\n\nsample variance of the estimates at u0 (c = 0.99)\n"
            + table(["k", "first-order", "zeroth-order"], var_rows)
            + f"\ntargets (k = 10: first-order ends lower; k = 1000: zeroth-order ends lower; "
            f"alpha within {ALPHA_WITHIN:.0%} of the better at both; first-order variance "
            f"grows with k): {verdict(m['targets_met'])}")


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s = result.series
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (case, (k, c)) in zip(axes[:2], CASES.items()):
        for i, e in enumerate(ESTIMATORS):
            ax.plot(s[f"cost_{case}_{e}"], label=f"{e}-order", color=f"C{i + 1}")
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel("cost at the iterate")
        ax.set_title(f"pushing, k = {k:g}, c = {c}")
        ax.legend(fontsize=8)
    axes[2].loglog(s["stiffness"], s["variance_first"], "o-", color="C1", label="first-order")
    axes[2].loglog(s["stiffness"], s["variance_zeroth"], "s-", color="C2",
                   label="zeroth-order")
    axes[2].set_xlabel("spring stiffness k (N/m)")
    axes[2].set_ylabel("sample variance at u0")
    axes[2].set_title("variance against stiffness")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
