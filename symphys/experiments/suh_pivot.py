"""Experiment B3: angular momentum transfer ("pivot"), a cliff.

V(θ) = −sin²θ for |θ| ≤ 45°, else 0: the cost falls towards the cliff edge
at π/4 and is 0 beyond it. Gradient descent on the smoothed objective from
θ0 = 0.1 with each estimator (N = 50, σ = 0.02, step 0.01, 500 iterations,
γ = 0.2; the authors' settings), from several seeds. The exact gradient
sees no cliff and walks over it; the zeroth- and alpha-order estimates feel
it through the noise and stop short.
"""

from __future__ import annotations

import numpy as np

from symphys.experiments.common import (ExperimentResult, draw_paths, progress, pyplot, table,
                                        verdict)
from symphys.learn.estimators import EstimatorOptions
from symphys.learn.optim import SGD

NAME = "suh-pivot"
CLIFF = np.pi / 4
THETA0, ITERATIONS, RATE = 0.1, 500, 0.01
OPTIONS = EstimatorOptions(sigma=0.02, samples=50, gamma=0.2)
ESTIMATORS = ("first", "zeroth", "alpha")
SEEDS, SEEDS_QUICK = 10, 3
PAPER = {"first": 0.843, "zeroth": (0.74, 0.76), "alpha": (0.74, 0.76)}


def pivot(thetas):
    """Batch objective: V (S,) and its gradient (S, 1), 0 beyond the cliff."""
    t = np.asarray(thetas, dtype=np.float64)[:, 0]
    inside = np.abs(t) <= CLIFF
    return (np.where(inside, -np.sin(t) ** 2, 0.0),
            np.where(inside, -np.sin(2.0 * t), 0.0)[:, None])


def run(quick: bool = False, seed: int = 0, show_progress: bool = True) -> ExperimentResult:
    seeds = list(range(seed, seed + (SEEDS_QUICK if quick else SEEDS)))
    finals, paths, flagged = {}, {}, {}
    cases = [(e, s) for e in ESTIMATORS for s in seeds]
    for estimator, s in progress(cases, NAME, show_progress):
        descent = SGD(learning_rate=RATE).minimise(pivot, [THETA0], ITERATIONS, estimator,
                                                    OPTIONS, seed=s)
        finals.setdefault(estimator, []).append(float(descent.thetas[-1, 0]))
        flagged.setdefault(estimator, []).append(descent.flagged)
        if s == seed:
            paths[estimator] = descent.thetas[:, 0].tolist()
    median = {e: float(np.median(finals[e])) for e in ESTIMATORS}
    metrics = {"median_final_theta": median,
               "first_past_cliff": sum(f > CLIFF for f in finals["first"]),
               "zeroth_inside": sum(f <= CLIFF for f in finals["zeroth"]),
               "alpha_inside": sum(f <= CLIFF for f in finals["alpha"]),
               "runs": len(seeds)}
    metrics["targets_met"] = bool(metrics["first_past_cliff"] == len(seeds)
                                  and metrics["zeroth_inside"] == len(seeds)
                                  and metrics["alpha_inside"] == len(seeds))
    return ExperimentResult(NAME, quick, seed, metrics, PAPER,
                            series={"path_" + e: paths[e] for e in ESTIMATORS},
                            extra={"final_theta": finals, "flagged_iterations": flagged,
                                   "seeds": seeds})


def report(result: ExperimentResult) -> str:
    m, p = result.metrics, result.paper
    finals = result.extra["final_theta"]
    paper = {"first": f"{p['first']:.3f}",
             "zeroth": f"{p['zeroth'][0]:.2f}-{p['zeroth'][1]:.2f}",
             "alpha": f"{p['alpha'][0]:.2f}-{p['alpha'][1]:.2f}"}
    rows = [[e, paper[e], f"{m['median_final_theta'][e]:.3f}",
             f"{min(finals[e]):.3f}-{max(finals[e]):.3f}",
             f"{sum(f > CLIFF for f in finals[e])} of {m['runs']}",
             f"{np.mean(result.extra['flagged_iterations'][e]):.0f}"] for e in ESTIMATORS]
    head = ["estimator", "paper final theta", "ours (median)", "ours (range)",
            "past the cliff (0.785)", "iterations flagged (mean)"]
    return (table(head, rows)
            + "\ntargets (first-order crosses the cliff, zeroth and alpha stay inside, in "
            f"every run): {verdict(m['targets_met'])}")


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    theta = np.linspace(-0.2, 1.0, 600)
    ax1.plot(theta, pivot(theta[:, None])[0], "k-")
    ax1.axvline(CLIFF, color="grey", ls=":", label="cliff (π/4)")
    for e in ESTIMATORS:
        final = result.series["path_" + e][-1]
        ax1.plot([final], pivot(np.array([[final]]))[0], "o", label=f"{e}-order end")
    ax1.set_xlabel("θ (rad)")
    ax1.set_ylabel("cost V(θ)")
    ax1.legend(fontsize=8)
    ax1.set_title("pivot: cost and where each estimator ends")
    ax2.axhline(CLIFF, color="grey", ls=":", label="cliff")
    draw_paths(ax2, result.series, ESTIMATORS, "θ (rad)",
               f"descent from θ0 = {THETA0} (seed {result.seed})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
