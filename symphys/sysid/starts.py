"""System identification from several starts: the same fit run from the
given starting values and from `starts - 1` drawn ones, each a whole job
(in this process, or one Ray task each with `executor=`), the lowest final
cost kept. A fit that falls into a local minimum from one start (a link
length mistaken for its mirror, a friction the data cannot tell from a
mass) is then caught by another.

Drawn starts: a variable bounded on both sides is drawn uniformly inside
its bounds; one bounded below by 0 (masses, gains) is its starting value
times exp(spread N(0, 1)); any other its starting value plus
spread max(|value|, 1) N(0, 1), kept strictly inside its bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from symphys.errors import ParameterError
from symphys.scene.scene import Scene
from symphys.sysid.data import Variable, segment_data
from symphys.sysid.fitting import FitResult, fit, fit_base, fit_variables
from symphys.sysid.recordings import Recording


@dataclass(frozen=True)
class MultiStartResult:
    """The best fit, every fit (in the order of `starts`) and the shared
    variables' starting values of each."""

    best: FitResult
    results: tuple[FitResult, ...]
    starts: tuple[dict, ...]

    @property
    def costs(self) -> np.ndarray:
        return np.array([r.cost for r in self.results])


def drawn_start(variable: Variable, rng: np.random.Generator, spread: float) -> np.ndarray:
    """A starting value for a shared variable, drawn as the module says."""
    initial = np.asarray(variable.initial, dtype=np.float64)
    lower = np.broadcast_to(np.asarray(variable.lower, dtype=np.float64), initial.shape)
    upper = np.broadcast_to(np.asarray(variable.upper, dtype=np.float64), initial.shape)
    noise = rng.normal(size=initial.shape)
    finite = np.isfinite(lower) & np.isfinite(upper)
    positive = (lower == 0.0) & (initial > 0.0)
    value = np.where(positive, initial * np.exp(spread * noise),
                     initial + spread * np.maximum(np.abs(initial), 1.0) * noise)
    value = np.where(finite, lower + (upper - lower) * rng.uniform(size=initial.shape), value)
    # strictly inside the bounds, as the fit requires
    width = np.where(np.isfinite(upper - lower), upper - lower, np.abs(value) + 1.0)
    inside = 1e-6 * width
    return np.clip(value, lower + inside, upper - inside)


def _fit_job(job: tuple):
    scene, recordings, variables, options = job
    return fit(scene, recordings, variables=variables, progress=False, **options)


def fit_from_starts(scene: Scene, recordings: Sequence[Recording], fit_names: Sequence[str] = (),
                    *, starts: int = 4, spread: float = 0.5, seed: int = 0, executor=None,
                    segment_fit: Sequence[str] = (), segment_steps: int | None = None,
                    params: dict | None = None, bounds: dict | None = None,
                    noise: dict | None = None, progress: bool = True,
                    **options) -> MultiStartResult:
    """`sysid.fit` from `starts` starting points (the first the given
    values, the others drawn with `seed`); executor: None (in this
    process), a Ray address or a `symphys.scale` executor. Per-segment
    variables start from the data in every fit. `options` go to `fit`
    (method, backend, chunk, max_evaluations, uncertainty)."""
    from symphys.scale import as_executor

    if starts < 1:
        raise ParameterError(f"starts must be at least 1, got {starts}")
    if spread <= 0:
        raise ParameterError(f"spread must be positive, got {spread}")
    for key in ("variables", "derive", "derive_key"):
        if key in options:
            raise ParameterError(f"fit_from_starts draws starts of scene parameters; "
                                 f"'{key}' is not supported here (call sysid.fit)")
    base = fit_base(scene, params)
    data = segment_data(scene, recordings, segment_steps, noise)
    shared, local = fit_variables(scene, data, fit_names, segment_fit, base, bounds)
    rng = np.random.default_rng(seed)
    chosen = [shared] + [[replace(v, initial=drawn_start(v, rng, spread)) for v in shared]
                         for _ in range(starts - 1)]
    options = dict(options, params=params, segment_steps=segment_steps, noise=noise)
    jobs = [(scene, list(recordings), variables + local, options) for variables in chosen]
    results = as_executor(executor).run(_fit_job, jobs, desc="sysid starts", show=progress)
    best = min(results, key=lambda r: r.cost)
    return MultiStartResult(best, tuple(results),
                            tuple({v.name: np.asarray(v.initial) for v in variables}
                                  for variables in chosen))
