"""Optimisers on dictionaries of NumPy parameter arrays.

`Adam` and `SGD` (with momentum) take a float or a schedule (iteration ->
rate: `PiecewiseSchedule`, the paper's ball-throw schedule
`PiecewiseSchedule({1: 2.0, 5: 1.0, ...})`, or `CosineSchedule`), optional
global-norm gradient clipping, and refuse a non-finite gradient with an
error naming the parameter and the entries (`NonFiniteGradient`), so a NaN
is reported where it appears instead of spreading into the parameters.
`StepGuard` undoes updates that make the loss jump (closed-loop cliffs).
`cmaes_minimise` runs the CMA-ES baseline (`cma`) on the same loss.
Gradients come from `symphys.value_and_grad` or any compiled function.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from symphys.learn.estimators import EstimatorOptions, as_estimator, estimate


class NonFiniteGradient(FloatingPointError):
    """A gradient entry is NaN or infinite; the message says which."""


def check_finite(grads: dict, iteration: int) -> None:
    """Raise `NonFiniteGradient` naming every parameter with NaN/inf entries."""
    bad = []
    for name, g in grads.items():
        g = np.asarray(g)
        mask = ~np.isfinite(g)
        if mask.any():
            where = np.argwhere(mask)[:3].tolist()
            bad.append(f"{name!r}: {int(mask.sum())} of {g.size} entries "
                       f"(first at {where})")
    if bad:
        raise NonFiniteGradient(f"non-finite gradient at iteration {iteration}: "
                                + "; ".join(bad))


def clip_by_global_norm(grads: dict, max_norm: float | None) -> tuple[dict, float]:
    """(grads scaled so their joint L2 norm is at most max_norm, the norm
    before clipping). max_norm None: unchanged."""
    norm = math.sqrt(sum(float(np.sum(np.square(g))) for g in grads.values()))
    if max_norm is None or norm <= max_norm:
        return grads, norm
    scale = max_norm / norm
    return {k: np.asarray(g) * scale for k, g in grads.items()}, norm


@dataclass(frozen=True)
class CosineSchedule:
    """Rate decaying from `start` to `end` over `steps` iterations (cosine)."""

    start: float
    end: float
    steps: int

    def __call__(self, iteration: int) -> float:
        x = min(max(iteration - 1, 0), self.steps) / max(self.steps, 1)
        return self.end + 0.5 * (self.start - self.end) * (1 + math.cos(math.pi * x))


@dataclass(frozen=True)
class PiecewiseSchedule:
    """Learning rate that switches value at given (1-based) iterations."""

    values: dict[int, float]

    def __call__(self, iteration: int) -> float:
        rate = None
        for start in sorted(self.values):
            if iteration >= start:
                rate = self.values[start]
        if rate is None:
            raise ValueError(f"schedule starts at iteration {min(self.values)}, "
                             f"asked for {iteration}")
        return rate


@dataclass
class _GradientOptimiser:
    """Shared parts: the learning rate at this iteration, and the gradient
    checked for NaN/inf and clipped to `clip_norm` (global L2 norm)."""

    learning_rate: float | object = 1e-3
    clip_norm: float | None = None
    iteration: int = 0
    last_norm: float = 0.0
    rate_scale: float = 1.0      # multiplies the rate (`StepGuard` lowers it)

    def rate(self) -> float:
        lr = self.learning_rate
        return self.rate_scale * float(lr(self.iteration) if callable(lr) else lr)

    def reset(self) -> None:
        """Forget the moment estimates (the iteration count, and with it the
        schedule, goes on)."""

    def minimise(self, objective, theta0, iterations: int, estimator="alpha",
                 options=None, seed: int = 0, progress: bool = False,
                 executor=None) -> "Descent":
        """Minimise the smoothed objective F(θ) = E[V(θ + w)] of a batch
        objective (`symphys.learn.estimators`; e.g. `symphys.api.batch_objective`)
        from θ0 (d,) for `iterations` steps of this optimiser, each on an
        `estimator` ("first", "zeroth", "alpha" or "finite") estimate of
        ∇F drawn with `options` (`EstimatorOptions`); `progress`: a tqdm bar;
        `executor`: where the samples run (`estimate`)."""
        estimator = as_estimator(estimator)
        options = EstimatorOptions() if options is None else options
        rng = np.random.default_rng(seed)
        theta = np.asarray(theta0, dtype=np.float64).reshape(-1)
        thetas, estimates = [theta], []
        steps = range(int(iterations))
        if progress:
            from symphys.progress import bar
            steps = bar(steps, f"{estimator.value}-order descent")
        for _ in steps:
            est = estimate(objective, theta, estimator, options, rng, executor)
            theta = self.step({"theta": theta}, {"theta": est.gradient})["theta"]
            thetas.append(theta)
            estimates.append(est)
        return Descent(np.asarray(thetas), tuple(estimates), estimator.value)

    def _begin(self, params: dict, grads: dict) -> tuple[float, dict]:
        """Advance the iteration; (rate, checked and clipped gradients)."""
        self.iteration += 1
        grads = {k: np.asarray(grads[k], dtype=np.float64) for k in params}
        check_finite(grads, self.iteration)
        grads, self.last_norm = clip_by_global_norm(grads, self.clip_norm)
        return self.rate(), grads


@dataclass(frozen=True)
class Descent:
    """A `minimise` run: thetas (iterations + 1, d), the estimates taken
    (`symphys.learn.estimators.Estimate`, one per iteration) and the estimator."""

    thetas: np.ndarray
    estimates: tuple
    estimator: str

    @property
    def values(self) -> np.ndarray:
        """V at each iterate before its step, without noise (iterations,)."""
        return np.asarray([e.value for e in self.estimates], dtype=np.float64)

    @property
    def alphas(self) -> np.ndarray:
        """The α rule's choice at each iteration (NaN where not drawn)."""
        return np.asarray([np.nan if e.alpha is None else e.alpha.alpha
                           for e in self.estimates])

    @property
    def flagged(self) -> int:
        """How many iterations found the first-order gradient biased."""
        return sum(e.biased for e in self.estimates)


@dataclass
class Adam(_GradientOptimiser):
    """Adam (Kingma & Ba) on {name: array} parameters.

    learning_rate: a float or a callable iteration -> rate.
    """

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    _m: dict = field(default_factory=dict)
    _v: dict = field(default_factory=dict)
    _since_reset: int = 0

    def reset(self) -> None:
        self._m.clear()
        self._v.clear()
        self._since_reset = 0

    def step(self, params: dict, grads: dict) -> dict:
        """Return the updated parameters (inputs are not modified)."""
        lr, grads = self._begin(params, grads)
        self._since_reset += 1
        t = self._since_reset
        out = {}
        for name, value in params.items():
            g = grads[name]
            m = self._m.get(name, np.zeros_like(g))
            v = self._v.get(name, np.zeros_like(g))
            m = self.beta1 * m + (1 - self.beta1) * g
            v = self.beta2 * v + (1 - self.beta2) * g * g
            self._m[name], self._v[name] = m, v
            m_hat = m / (1 - self.beta1 ** t)
            v_hat = v / (1 - self.beta2 ** t)
            out[name] = np.asarray(value, dtype=np.float64) - lr * m_hat / (np.sqrt(v_hat) + self.eps)
        return out


@dataclass
class SGD(_GradientOptimiser):
    """Gradient descent with (optionally Nesterov) momentum on {name: array}."""

    momentum: float = 0.0
    nesterov: bool = False
    _velocity: dict = field(default_factory=dict)

    def reset(self) -> None:
        self._velocity.clear()

    def step(self, params: dict, grads: dict) -> dict:
        """Return the updated parameters (inputs are not modified)."""
        lr, grads = self._begin(params, grads)
        out = {}
        for name, value in params.items():
            g = grads[name]
            vel = self.momentum * self._velocity.get(name, np.zeros_like(g)) + g
            self._velocity[name] = vel
            direction = g + self.momentum * vel if self.nesterov else vel
            out[name] = np.asarray(value, dtype=np.float64) - lr * direction
        return out


@dataclass
class StepGuard:
    """Undo an update that made the loss much worse, and go on with a
    smaller rate.

    Closed-loop losses can jump at a stability boundary: one step from a
    good controller makes the robot run away (on the A3 arm, a line search
    across one Adam step found the loss flat at 0.12 m up to 12.5% of the
    step and 1.18 m from 15% on: a cliff the gradient cannot see). `step`
    is called with each evaluated loss: when it exceeds the best so far by
    more than (`tolerance` - 1) x |best| (for a positive loss: more than
    `tolerance` x the best; minus a speed works too), or it or its
    gradient is not finite (the simulation blew up), the guard returns
    the best parameters, multiplies the optimiser's rate by `shrink` and
    resets its moments; otherwise it takes the optimiser's
    step. The evaluation spent on a rejected point counts. (Raising the
    rate again by 5% per accepted step did not help on the A3 arm: 0.0179 m
    after 150 evaluations against 0.0186 m, with 14 rejections against 6.)

        guard = StepGuard(Adam(3e-3))
        for _ in range(n):
            value, *grads = fn(*params.values())
            params = guard.step(params, value, dict(zip(params, grads)))
        guard.best_params, guard.best_loss
    """

    optimiser: _GradientOptimiser
    tolerance: float = 1.5
    shrink: float = 0.5
    best_loss: float = math.inf
    best_params: dict | None = None
    rejections: int = 0

    def step(self, params: dict, loss: float, grads: dict) -> dict:
        loss = float(loss)
        finite = math.isfinite(loss) and all(np.isfinite(g).all() for g in grads.values())
        if not finite and self.best_params is None:
            raise FloatingPointError(f"loss is {loss} (or its gradient is not finite) at "
                                     f"iteration {self.optimiser.iteration + 1}, before any "
                                     f"finite point to go back to")
        # A simulation that blew up (non-finite loss or gradient) is the
        # worst step of all: undone like a jump.
        worse = not finite or loss - self.best_loss > (self.tolerance - 1.0) * abs(self.best_loss)
        if self.best_params is not None and worse:
            self.rejections += 1
            self.optimiser.rate_scale *= self.shrink
            self.optimiser.reset()
            return self.best_params
        if loss < self.best_loss:
            self.best_loss, self.best_params = loss, params
        return self.optimiser.step(params, grads)


@dataclass(frozen=True)
class CmaResult:
    """Outcome of `cmaes_minimise`: best point, its loss, and the best loss
    after each generation against the evaluations spent so far."""

    x: np.ndarray
    loss: float
    evaluations: int
    curve: list
    curve_evaluations: list


def cmaes_minimise(loss_batch, x0, sigma0: float, max_evaluations: int,
                   target: float = -np.inf, seed: int = 0, popsize: int | None = None,
                   callback: Callable | None = None, executor=None) -> CmaResult:
    """CMA-ES (Hansen's `cma`) on a loss evaluated a population at a time.

    loss_batch: (P, D) candidates -> (P,) losses (one batched simulation),
    or with `executor` (a Ray address or a `symphys.scale` executor) the
    `symphys.scale.Recipe` that builds it on each worker (a recipe without
    an executor is built and run in this process); stops at
    `max_evaluations` or when the best loss is below `target`.
    callback(evaluations, best_loss) after each generation (progress bars)."""
    import cma

    from symphys.scale import Recipe

    if executor is not None or isinstance(loss_batch, Recipe):
        from symphys.scale import bind
        loss_batch = bind(loss_batch, executor)

    options = {"seed": seed + 1, "verbose": -9, "ftarget": target,
               "maxfevals": max_evaluations}
    if popsize is not None:
        options["popsize"] = popsize
    es = cma.CMAEvolutionStrategy(np.asarray(x0, dtype=np.float64), sigma0, options)
    best_x, best, evals, curve, counts = np.asarray(x0, float), np.inf, 0, [], []
    while not es.stop() and evals < max_evaluations:
        candidates = np.asarray(es.ask())
        losses = np.asarray(loss_batch(candidates), dtype=np.float64)
        es.tell(list(candidates), list(losses))
        evals += len(candidates)
        k = int(np.argmin(losses))
        if losses[k] < best:
            best, best_x = float(losses[k]), candidates[k].copy()
        curve.append(best)
        counts.append(evals)
        if callback is not None:
            callback(evals, best)
        if best < target:
            break
    return CmaResult(best_x, best, evals, curve, counts)
