"""Gradient estimators for smoothed objectives (Suh et al. 2022;
experiments B1-B7).

The objective is F(θ) = E_w[V(θ + w)], w ~ N(0, σ² I): the expected value
of a rollout's loss V under Gaussian noise on the parameters θ (d,).

An objective is given as a *batch objective*: one call evaluates V, and
where it can its gradient, at S parameter vectors,

    objective(thetas: (S, d)) -> (values: (S,), gradients: (S, d) or None)

so an estimate's samples run along the batch axis of one compiled function
(`symphys.api.batch_objective` builds one from a scene and a loss), never
in a Python loop over samples.

Estimators (`Estimator`):
- FIRST (pathwise): ḡ1 = mean ∇V(θ + w_i), differentiating through the
  simulation.
- ZEROTH (score function, noise-free baseline):
  ḡ0 = mean [V(θ + w_i) − V(θ)] w_i / σ².
- ALPHA: α ḡ1 + (1 − α) ḡ0, with α from the empirical Bernstein bound of
  the zeroth-order mean (`alpha_rule`).
- FINITE: central differences of V at θ itself (no noise), step h.

A policy under Gaussian *action* noise (a noise table w (H, m) added to
its action at every step, and an initial state drawn per rollout) is a
`PolicyObjective` instead: its zeroth-order samples need the score
Σ_h (∂π/∂θ)ᵀ w_h along each noisy rollout, which the objective returns
beside the values (`estimate_policy`).

Every noisy estimate also draws the other kind's samples (from an
independent noise batch, in the same call) unless `diagnose=False` (or,
for ZEROTH, the objective has no gradients), and
reports both means, their sample spreads σ̂² = Σ‖g_i − ḡ‖² / (N − 1), the
α rule's choice and why, and whether ‖ḡ1 − ḡ0‖ exceeds what noise alone
explains (`Estimate.biased`): exact gradients of a simulation mislead near
contacts and stiff springs, and this is how a user finds out.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from symphys.errors import ParameterError, counted, member
from symphys.scale.recipe import pad

BatchObjective = Callable[[np.ndarray], tuple[np.ndarray, "np.ndarray | None"]]


class Estimator(enum.Enum):
    FIRST = "first"
    ZEROTH = "zeroth"
    ALPHA = "alpha"
    FINITE = "finite"


def as_estimator(estimator: "str | Estimator") -> Estimator:
    return member(estimator, Estimator, "estimator", ParameterError)


class AlphaCase(enum.Enum):
    """Which branch of the α rule chose α."""

    INFEASIBLE = "infeasible"     # ε > γ: zeroth-order alone is not trusted to γ; α = 0
    FEASIBLE = "feasible"         # α* = σ̂0² / (σ̂0² + σ̂1²) keeps the bias within γ − ε
    CONSTRAINED = "constrained"   # α*‖ḡ1 − ḡ0‖ > γ − ε: α = (γ − ε) / ‖ḡ1 − ḡ0‖


@dataclass(frozen=True)
class EstimatorOptions:
    """sigma: noise standard deviation σ; samples: N per estimator;
    delta, gamma, bound: the α rule's δ (in ℓ = log((d + 1) / δ); the
    authors' code uses 0.95), tolerance γ and sample bound L; flag_z: how
    many standard errors of ḡ1 − ḡ0 count as a biased first-order estimate;
    step: the finite-difference step h; diagnose: draw the other
    estimator's samples too (doubles the batch of FIRST and ZEROTH)."""

    sigma: float = 0.1
    samples: int = 50
    delta: float = 0.95
    gamma: float = 0.01
    bound: float = 1.0
    flag_z: float = 3.0
    step: float = 1e-6
    diagnose: bool = True

    def __post_init__(self):
        positive = {"sigma": self.sigma, "delta": self.delta, "gamma": self.gamma,
                    "bound": self.bound, "flag_z": self.flag_z, "step": self.step}
        for name, value in positive.items():
            if not (np.isfinite(value) and value > 0):
                raise ParameterError(f"EstimatorOptions.{name} must be a positive finite "
                                     f"number, got {value!r}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, (int, np.integer)) \
                or self.samples < 2:
            raise ParameterError(f"EstimatorOptions.samples must be an integer >= 2 "
                                 f"(a spread needs two samples), got {self.samples!r}")


@dataclass(frozen=True)
class AlphaChoice:
    """The α rule's result: alpha in [0, 1], its `case`, the Bernstein
    bound `epsilon` of the zeroth-order mean and the gap ‖ḡ1 − ḡ0‖."""

    alpha: float
    case: AlphaCase
    epsilon: float
    gap: float

    @property
    def reason(self) -> str:
        if self.case is AlphaCase.INFEASIBLE:
            return (f"alpha = 0: the zeroth-order bound epsilon = {self.epsilon:.3g} exceeds "
                    f"gamma, so only the unbiased zeroth-order estimate is used")
        if self.case is AlphaCase.CONSTRAINED:
            return (f"alpha = {self.alpha:.3g}, constrained: the estimates differ by "
                    f"{self.gap:.3g}, so the first-order share is capped to keep the bias "
                    f"within gamma - epsilon")
        return (f"alpha = {self.alpha:.3g}, the variance-optimal mix "
                f"(the estimates differ by {self.gap:.3g}, within gamma - epsilon)")


@dataclass(frozen=True)
class Estimate:
    """A gradient estimate (d,) with its diagnostics.

    value: V(θ) without noise (None where not evaluated); first, zeroth:
    the means ḡ1, ḡ0 (d,) and variance_first, variance_zeroth their sample
    spreads σ̂² (None where not drawn); alpha: the α rule's choice (ALPHA, or
    any estimate with both kinds drawn); gap, gap_bound: ‖ḡ1 − ḡ0‖ and
    `flag_z` standard errors of it; biased: gap > gap_bound, explained in
    `message`."""

    gradient: np.ndarray
    estimator: Estimator
    value: float | None = None
    first: np.ndarray | None = None
    zeroth: np.ndarray | None = None
    variance_first: float | None = None
    variance_zeroth: float | None = None
    alpha: AlphaChoice | None = None
    gap: float | None = None
    gap_bound: float | None = None
    biased: bool = False
    message: str = ""


def sample_spread(samples: np.ndarray) -> float:
    """σ̂² = Σ‖g_i − ḡ‖² / (N − 1) of samples (N, d)."""
    samples = np.asarray(samples, dtype=np.float64)
    return float(np.sum((samples - samples.mean(axis=0)) ** 2) / (len(samples) - 1))


def bernstein_epsilon(spread: float, n: int, dim: int, options: EstimatorOptions) -> float:
    """ε = sqrt(2 σ̂² ℓ / N) + 2 L ℓ / (3 N), ℓ = log((d + 1) / δ): how far
    a mean of N samples with spread σ̂² may lie from its expectation."""
    ell = math.log((dim + 1) / options.delta)
    return math.sqrt(2.0 * spread * ell / n) + 2.0 * options.bound * ell / (3.0 * n)


def alpha_rule(first: np.ndarray, zeroth: np.ndarray, options: EstimatorOptions) -> AlphaChoice:
    """α for ĝ = α ḡ1 + (1 − α) ḡ0 from first- and zeroth-order samples
    (N, d) each: 0 when ε > γ; else α* = σ̂0² / (σ̂1² + σ̂0²), lowered to
    (γ − ε) / ‖ḡ1 − ḡ0‖ when α*‖ḡ1 − ḡ0‖ > γ − ε."""
    first, zeroth = np.asarray(first, np.float64), np.asarray(zeroth, np.float64)
    s1, s0 = sample_spread(first), sample_spread(zeroth)
    eps = bernstein_epsilon(s0, len(zeroth), first.shape[1], options)
    gap = float(np.linalg.norm(first.mean(axis=0) - zeroth.mean(axis=0)))
    if eps > options.gamma:
        return AlphaChoice(0.0, AlphaCase.INFEASIBLE, eps, gap)
    best = s0 / (s1 + s0) if s1 + s0 > 0 else 1.0
    if best * gap > options.gamma - eps:
        return AlphaChoice((options.gamma - eps) / gap, AlphaCase.CONSTRAINED, eps, gap)
    return AlphaChoice(best, AlphaCase.FEASIBLE, eps, gap)


def _call(objective: BatchObjective, thetas: np.ndarray, need_gradients: bool):
    """(values (S,), gradients (S, d) or None), checked; `need_gradients`:
    a missing gradient is an error."""
    values, grads = objective(thetas)
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.shape != (len(thetas),):
        raise ParameterError(f"the objective returned {counted(values.size, 'value')} for "
                             f"{counted(len(thetas), 'parameter vector')}; it must return one "
                             f"each")
    if grads is None and need_gradients:
        raise ParameterError("the first-order estimate needs the objective's gradients, "
                             "but it returned None")
    if grads is not None:
        grads = np.asarray(grads, dtype=np.float64)
        if grads.shape != thetas.shape:
            raise ParameterError(f"the objective's gradients have shape {grads.shape}; "
                                 f"expected {thetas.shape}, one per parameter vector")
    bad = ~np.isfinite(values)
    if bad.any():
        raise ParameterError(f"the objective returned non-finite values at "
                             f"{int(bad.sum())} of {counted(len(values), 'sample')}")
    return values, grads


def reparameterised(objective: BatchObjective, params_of: Callable, jacobian_of: Callable,
                     dim: int) -> BatchObjective:
    """The batch objective of φ (S, dim) where the wrapped objective's
    parameters are θ = params_of(φ) (S, d): values unchanged, gradients by
    the chain rule with jacobian_of(φ) (S, d, dim) = ∂θ/∂φ (a throw angle
    mapped to a launch velocity, say)."""

    def wrapped(phis):
        phis = np.asarray(phis, dtype=np.float64)
        if phis.ndim != 2 or phis.shape[1] != dim:
            raise ParameterError(f"the reparameterised objective takes vectors of shape "
                                 f"(S, {dim}); got {phis.shape}")
        values, grads = objective(np.asarray(params_of(phis), dtype=np.float64))
        if grads is None:
            return values, None
        return values, np.einsum("sd,sdk->sk", np.asarray(grads), jacobian_of(phis))

    wrapped.dim = dim
    return wrapped


def pad_rows(thetas, rows: int) -> np.ndarray:
    """thetas (K, d) padded to (rows, d) with copies of the last vector,
    for functions compiled for a fixed batch of `rows` >= K."""
    return pad(np.atleast_2d(np.asarray(thetas, dtype=np.float64)), rows)


def values_at(objective: BatchObjective, thetas) -> np.ndarray:
    """V at each of thetas (K, d), no noise, in one call. An objective
    compiled for a fixed batch says so in `objective.rows` (>= K): the
    vectors are padded with copies of the last to fill it."""
    thetas = np.atleast_2d(np.asarray(thetas, dtype=np.float64))
    padded = pad_rows(thetas, getattr(objective, "rows", len(thetas)))
    return _call(objective, padded, False)[0][:len(thetas)]


def finite_difference(objective: BatchObjective, theta: np.ndarray, step: float) -> np.ndarray:
    """Central differences (d,) of V at θ: the 2d shifted vectors in one call."""
    theta = np.asarray(theta, dtype=np.float64)
    shifts = np.eye(theta.size) * step
    values, _ = _call(objective, np.concatenate([theta + shifts, theta - shifts]), False)
    return (values[:theta.size] - values[theta.size:]) / (2.0 * step)


@dataclass(frozen=True)
class PolicyObjective:
    """The objective of a policy under Gaussian action noise:
    F(θ) = E_{x0, w}[V(θ; x0, w)], w (H, m) added to the policy's action at
    each of H steps, x0 an initial state drawn by `sample_starts`.

    World s of a call runs from starts[s] (S, k) with noise table
    noise[s] (S, H, m):
    - gradients(θ (d,), noise, starts) -> (values (S,), ∇θ V (S, d)),
      through the simulation;
    - values(θ, noise, starts) -> (values (S,), scores (S, d)), the scores
      Σ_h (∂π/∂θ at x_h)ᵀ w_h read off the same rollouts (for u = K x:
      Σ_h w_h x_hᵀ), without a reverse pass;
    - sample_starts(rng, n) -> (n, k)."""

    gradients: Callable
    values: Callable
    sample_starts: Callable
    noise_shape: tuple[int, int]
    dim: int


def in_chunks(call: Callable, chunk: int, *arrays) -> tuple:
    """call(*arrays) for a function compiled for `chunk` rows: the arrays
    (S, ...) go in slices of `chunk` rows, the last padded with copies of
    its last row; each output is concatenated back to S rows."""
    total = len(arrays[0])
    outs = []
    for lo in range(0, total, chunk):
        part = [a[lo:lo + chunk] for a in arrays]
        kept = len(part[0])
        outs.append([np.asarray(o)[:kept] for o in call(*(pad(a, chunk) for a in part))])
    return tuple(np.concatenate(o) for o in zip(*outs))


def estimate_policy(objective: PolicyObjective, theta, estimator: Estimator,
                    options: EstimatorOptions, rng: np.random.Generator) -> Estimate:
    """∇F(θ) for a `PolicyObjective`: N noisy rollouts give the
    first-order samples ∇V; N more (independent starts and noise) with
    their N noise-free twins (same starts) give the zeroth-order samples
    [V(w) − V(0)] · score / σ². Without `diagnose`, FIRST and ZEROTH draw
    only their own (FIRST then runs N noise-free twins of its starts for
    the value). `value` is the mean noise-free V over N drawn starts."""
    if estimator is Estimator.FINITE:
        raise ParameterError("finite differences need a deterministic objective; a policy "
                             "objective averages over drawn initial states")
    n, sigma = options.samples, options.sigma
    shape = (n, *objective.noise_shape)
    want_first = estimator is not Estimator.ZEROTH or options.diagnose
    want_zeroth = estimator is not Estimator.FIRST or options.diagnose
    first = zeroth = None
    if want_first:
        starts = objective.sample_starts(rng, n)
        values, grads = objective.gradients(theta, rng.normal(0.0, sigma, shape), starts)
        _check_finite_rollouts(values)
        first = np.asarray(grads, dtype=np.float64)
        if not want_zeroth:
            base, _ = objective.values(theta, np.zeros(shape), starts)
            _check_finite_rollouts(base)
    if want_zeroth:
        starts = objective.sample_starts(rng, n)
        noise = np.concatenate([rng.normal(0.0, sigma, shape), np.zeros(shape)])
        values, scores = objective.values(theta, noise, np.concatenate([starts, starts]))
        _check_finite_rollouts(values)
        base = values[n:]
        zeroth = ((values[:n] - base)[:, None] * np.asarray(scores, dtype=np.float64)[:n]
                  / sigma ** 2)
    return _assemble(estimator, float(np.mean(base)), first, zeroth, options)


def _check_finite_rollouts(values) -> None:
    bad = ~np.isfinite(np.asarray(values, dtype=np.float64))
    if bad.any():
        raise ParameterError(f"the policy objective returned non-finite values in "
                             f"{int(bad.sum())} of {bad.size} rollouts")


def estimate(objective: "BatchObjective | PolicyObjective", theta,
             estimator: "str | Estimator" = Estimator.ALPHA,
             options: EstimatorOptions = EstimatorOptions(),
             rng: np.random.Generator | None = None, executor=None) -> Estimate:
    """Estimate ∇F(θ) (θ: (d,)) with `estimator`; one call of `objective`
    on a batch of 1 + 2N vectors (N + 1 or N without `diagnose`; 2d for
    FINITE), or for a `PolicyObjective` of N + 2N rollouts
    (`estimate_policy`). With `executor` (a Ray address or a
    `symphys.scale` executor) the objective is the `symphys.scale.Recipe`
    of a batch objective, and the samples are spread over its workers (a
    recipe without an executor is built and run in this process)."""
    estimator = as_estimator(estimator)
    from symphys.scale import Recipe

    if executor is not None or isinstance(objective, Recipe):
        if isinstance(objective, PolicyObjective):
            raise ParameterError("a policy objective runs in this process; to spread "
                                 "samples over workers, pass the Recipe of a batch "
                                 "objective (thetas (S, d) -> values, gradients)")
        from symphys.scale import bind
        objective = bind(objective, executor)
    theta = np.asarray(theta, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(theta)):
        raise ParameterError("theta contains NaN or inf")
    if isinstance(objective, PolicyObjective):
        return estimate_policy(objective, theta, estimator, options,
                               np.random.default_rng() if rng is None else rng)
    if estimator is Estimator.FINITE:
        return Estimate(finite_difference(objective, theta, options.step), estimator)
    rng = np.random.default_rng() if rng is None else rng
    n, d, sigma = options.samples, theta.size, options.sigma
    want_first = estimator is not Estimator.ZEROTH or options.diagnose
    want_zeroth = estimator is not Estimator.FIRST or options.diagnose
    noise_first = rng.normal(0.0, sigma, (n, d)) if want_first else np.zeros((0, d))
    noise_zeroth = rng.normal(0.0, sigma, (n, d)) if want_zeroth else np.zeros((0, d))
    thetas = np.concatenate([theta[None], theta + noise_first, theta + noise_zeroth])
    values, grads = _call(objective, thetas, estimator is not Estimator.ZEROTH)
    # A zeroth-order estimate of an objective without gradients skips the diagnostics.
    first = grads[1:1 + n] if want_first and grads is not None else None
    zeroth = None
    if want_zeroth:
        zeroth = (values[-n:] - values[0])[:, None] * noise_zeroth / sigma ** 2
    return _assemble(estimator, float(values[0]), first, zeroth, options)


def _assemble(estimator: Estimator, value: float, first, zeroth,
              options: EstimatorOptions) -> Estimate:
    """The estimate and its diagnostics from the samples drawn (N, d)."""
    g1 = None if first is None else first.mean(axis=0)
    g0 = None if zeroth is None else zeroth.mean(axis=0)
    s1 = None if first is None else sample_spread(first)
    s0 = None if zeroth is None else sample_spread(zeroth)
    if g1 is None or g0 is None:
        return Estimate(g1 if g0 is None else g0, estimator, value, g1, g0, s1, s0)
    choice = alpha_rule(first, zeroth, options)
    n = len(first)
    gap_bound = options.flag_z * math.sqrt((s1 + s0) / n)
    biased = choice.gap > gap_bound
    message = ""
    if biased:
        message = (f"the first-order gradient differs from the zeroth-order one by "
                   f"{choice.gap:.3g}, more than the {gap_bound:.3g} ({options.flag_z:g} "
                   f"standard errors) that sampling noise explains: the simulation's exact "
                   f"gradient is likely biased here (a contact, a cliff or a stiff spring); "
                   f"estimator='alpha' or 'zeroth' is safer")
    gradient = {Estimator.FIRST: g1, Estimator.ZEROTH: g0,
                Estimator.ALPHA: choice.alpha * g1 + (1.0 - choice.alpha) * g0}[estimator]
    return Estimate(gradient, estimator, value, g1, g0, s1, s0, choice, choice.gap,
                    gap_bound, biased, message)
