"""Experiment B1: gradient estimates of a smoothed Heaviside step.

V(θ) = 1[θ ≥ 0], F(θ) = E[V(θ + w)] = Φ(θ / σ) with w ~ N(0, σ²), so
∇F(θ) = φ(θ / σ) / σ. The exact (first-order) gradient of V is 0 wherever
it exists: its estimate is 0 with no spread at every θ, which is biased
near the step. The zeroth-order estimate is unbiased. σ = 0.1, N = 1000
samples per estimate, θ on [-1, 1] (the authors' settings).
"""

from __future__ import annotations

import math

import numpy as np

from symphys.experiments.common import ExperimentResult, progress, pyplot, table, verdict
from symphys.learn.estimators import EstimatorOptions, estimate

NAME = "suh-heaviside"
SIGMA, SAMPLES = 0.1, 1000
PAPER = {"first_order": "0 with zero variance at every theta (biased)",
         "zeroth_order": "unbiased: phi(theta / sigma) / sigma on average"}


def heaviside(thetas):
    """Batch objective: V = 1[θ ≥ 0] (S,), gradient 0 (S, 1)."""
    thetas = np.asarray(thetas, dtype=np.float64)
    return (thetas[:, 0] >= 0.0).astype(np.float64), np.zeros_like(thetas)


def smoothed_slope(theta: float, sigma: float = SIGMA) -> float:
    """∇F(θ) = φ(θ / σ) / σ."""
    return math.exp(-0.5 * (theta / sigma) ** 2) / (math.sqrt(2.0 * math.pi) * sigma)


def zeroth_order_spread(theta: float, sigma: float = SIGMA) -> float:
    """The exact variance of one zeroth-order sample at θ: with a = |θ|/σ,
    E[(Δ w / σ²)²] = (Φ(−a) + a φ(a)) / σ², less the slope²
    (Δ = V(θ + w) − V(θ) is ±1 when the noise crosses the step)."""
    a = abs(theta) / sigma
    tail = 0.5 * math.erfc(a / math.sqrt(2.0))
    return (tail + a * math.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)) / sigma ** 2 \
        - smoothed_slope(theta, sigma) ** 2


def run(quick: bool = False, seed: int = 0, show_progress: bool = True) -> ExperimentResult:
    thetas = np.linspace(-1.0, 1.0, 21 if quick else 81)
    options = EstimatorOptions(sigma=SIGMA, samples=SAMPLES)
    rng = np.random.default_rng(seed)
    rows = []
    for theta in progress(thetas, NAME, show_progress):
        est = estimate(heaviside, [theta], "alpha", options, rng)
        rows.append({"theta": float(theta), "exact": smoothed_slope(theta),
                     "first": float(est.first[0]), "first_spread": est.variance_first,
                     "zeroth": float(est.zeroth[0]), "zeroth_spread": est.variance_zeroth,
                     "alpha": float(est.gradient[0]), "alpha_weight": est.alpha.alpha,
                     "alpha_case": est.alpha.case.value, "flagged": est.biased})
    # Standard errors from the exact spread: far from the step no sample
    # may cross it, and the sample spread is then 0.
    within = [abs(r["zeroth"] - r["exact"])
              <= 3 * math.sqrt(zeroth_order_spread(r["theta"]) / SAMPLES) for r in rows]
    first_zero = all(r["first"] == 0.0 and r["first_spread"] == 0.0 for r in rows)
    flagged = [r["theta"] for r in rows if r["flagged"]]
    metrics = {"first_order_zero_everywhere": first_zero,
               "zeroth_within_3_standard_errors": int(sum(within)),
               "points": len(rows), "flagged_points": len(flagged),
               "largest_flagged_abs_theta": max(map(abs, flagged), default=None),
               "smallest_unflagged_abs_theta": min((abs(r["theta"]) for r in rows
                                                    if not r["flagged"]), default=None)}
    metrics["targets_met"] = bool(first_zero and sum(within) >= 0.95 * len(rows))
    return ExperimentResult(NAME, quick, seed, metrics, PAPER,
                            series={k: [r[k] for r in rows] for k in rows[0]},
                            extra={"sigma": SIGMA, "samples": SAMPLES})


def report(result: ExperimentResult) -> str:
    s, m = result.series, result.metrics
    pick = [i for i, t in enumerate(s["theta"]) if round(t, 6) in (-0.5, -0.2, -0.1, 0.0,
                                                                  0.1, 0.2, 0.5)]
    rows = [[f"{s['theta'][i]:+.2f}", f"{s['exact'][i]:.3f}",
             f"{s['first'][i]:.3f} ± {math.sqrt(s['first_spread'][i]):.3f}",
             f"{s['zeroth'][i]:.3f} ± {math.sqrt(s['zeroth_spread'][i]):.3f}",
             f"{s['alpha'][i]:.3f} ({s['alpha_case'][i]})",
             "yes" if s["flagged"][i] else "no"] for i in pick]
    head = ["theta", "exact dF/dtheta", "first-order (mean ± spread)",
            "zeroth-order (mean ± spread)", "alpha-order", "first-order flagged"]
    return (table(head, rows)
            + f"\npaper: first-order {result.paper['first_order']}; zeroth-order "
            f"{result.paper['zeroth_order']}"
            + f"\nours: first-order 0 with zero spread at every theta: "
            f"{'yes' if m['first_order_zero_everywhere'] else 'NO'}; zeroth-order within 3 "
            f"standard errors of the exact slope at {m['zeroth_within_3_standard_errors']} of "
            f"{m['points']} points"
            + f"\nbias flag: first-order flagged at {m['flagged_points']} of {m['points']} "
            f"points, |theta| <= {m['largest_flagged_abs_theta']:.3f} (true slope there "
            f">= {smoothed_slope(m['largest_flagged_abs_theta']):.3f}); not flagged from "
            f"|theta| = {m['smallest_unflagged_abs_theta']:.3f}"
            + f"\ntargets (first-order 0 everywhere, zeroth-order unbiased at >= 95% of "
            f"points): {verdict(m['targets_met'])}")


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s = result.series
    theta = np.asarray(s["theta"])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(theta, s["exact"], "k-", label="exact dF/dθ = φ(θ/σ)/σ")
    for key, style in (("first", "C0o"), ("zeroth", "C1s")):
        ax.errorbar(theta, s[key], yerr=np.sqrt(s[f"{key}_spread"]), fmt=style, ms=3,
                    capsize=2, alpha=0.7, label=f"{key}-order (± one sample's spread)")
    ax.plot(theta, s["alpha"], "C2^", ms=3, label="alpha-order")
    ax.set_xlabel("θ")
    ax.set_ylabel("gradient estimate")
    ax.set_title(f"smoothed Heaviside, σ = {result.extra['sigma']}, "
                 f"N = {result.extra['samples']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
