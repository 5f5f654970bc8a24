"""System identification: fit scene parameters to recorded trajectories.

    result = fit(scene, [recording, ...], ["cart.mass", "pivot.anchor[2]"],
                 segment_steps=200, segment_fit=["cart.position", "cart.velocity"])

The residuals are (prediction - observation) / sigma at every observed
entry of every recording (`symphys.sysid.recordings`; angles wrap around 2 pi).
Recordings are cut into segments of `segment_steps` steps (multiple
shooting), each simulated from its own initial state: the parameters in
`segment_fit` get one value per segment, fitted with the shared ones, so a
long recording of a chaotic system never has to be followed by one
simulation from its start.

Exact derivatives from one compiled function f(variables, observed,
weights, probe, alpha) -> (residuals r, d/dvariables sum (probe + alpha r) r)
(the second term without a gradient through its r):

- alpha = 1, probe = 0: the gradient of the cost sum r^2 / 2 (L-BFGS-B);
- alpha = 0, probe = a one-hot entry: one row of the Jacobian dr/dx, one
  world per observed entry (SciPy's least_squares, trust-region reflective,
  with bounds) and the Gauss-Newton covariance s^2 (J^T J)^-1 at the end
  (s^2 = sum r^2 / (n - p)).

Worlds are padded to a fixed batch (`chunk`), so the function compiles once
for every call, on any backend.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.gradient import disconnected_grad

from symphys.compiler.backends import Backend, as_backend, compile
from symphys.compiler.caches.compiled_functions import cached
from symphys.errors import ParameterError
from symphys.learn.nn import Schedule
from symphys.loop.rollout import rollout
from symphys.scene.params import parameter_shapes, resolve_values
from symphys.scene.scene import Scene
from symphys.sysid.data import (Data, Variable, observe, scene_parameters, scene_variables,
                                segment_data, starts_from_data, wrap_angles)
from symphys.sysid.recordings import Recording


class Method(enum.Enum):
    LEAST_SQUARES = "least_squares"   # trust-region reflective with the exact Jacobian
    LBFGS = "lbfgs"                   # L-BFGS-B with the exact gradient (large problems)


@dataclass(frozen=True)
class FitResult:
    """Fitted values {variable: array} (per-segment ones (S,) + shape),
    their standard errors from the Gauss-Newton covariance (None when not
    computed), the final cost sum r^2 / 2, per-column RMS residuals (in the
    column's units) and the optimiser's record."""

    values: dict
    stderr: dict | None
    cost: float
    initial_cost: float
    rms: dict
    evaluations: int
    jacobians: int
    seconds: float
    success: bool
    message: str
    method: str
    n_residuals: int
    n_parameters: int
    history: list = field(default_factory=list)
    per_segment: tuple[str, ...] = ()     # names of the per-segment variables

    def summary(self) -> dict:
        """JSON-ready values and errors of the shared variables."""
        def plain(x):
            return np.asarray(x).tolist()
        shared = {k: v for k, v in self.values.items() if k not in self.per_segment}
        return {"values": {k: plain(v) for k, v in shared.items()},
                "stderr": None if self.stderr is None else {k: plain(v) for k, v in
                                                            self.stderr.items()},
                "cost": self.cost, "initial_cost": self.initial_cost,
                "rms": self.rms, "evaluations": self.evaluations,
                "jacobians": self.jacobians, "seconds": self.seconds,
                "success": self.success, "message": self.message, "method": self.method,
                "n_residuals": self.n_residuals, "n_parameters": self.n_parameters}


# -- the compiled residual function --------------------------------------------
Derive = Callable[[dict, dict], dict]


def residual_function(scene: Scene, variables: Sequence[Variable], columns: tuple,
                      steps: int, chunk: int, base: dict, derive: Derive | None = None,
                      backend="numba", key_extra=()):
    """Compiled f(*variables (chunk,) + shape, observed, weights, probe
    (chunk, T + 1, K), alpha[, commands (chunk, T, M)]) -> [r, *gradients];
    see the module docstring. `key_extra` must identify `derive` and `base`
    for the in-process cache (`base`, the values of every parameter not
    fitted, is part of the key and built into the graph)."""
    backend = as_backend(backend)
    names = tuple(v.name for v in variables)
    key = ("sysid", scene.structure_key(), names, tuple(v.shape for v in variables),
           tuple(c.name for c in columns), steps, chunk, backend, derive is None, key_extra,
           tuple(sorted((k, np.asarray(v).tobytes()) for k, v in base.items())))

    def build():
        size = chunk if backend is Backend.JAX else None
        sym = {v.name: pt.tensor(name=v.name, dtype="float64", shape=(size,) + v.shape)
               for v in variables}
        grid = (size, steps + 1, len(columns))
        observed = pt.tensor("observed", dtype="float64", shape=grid)
        weights = pt.tensor("weights", dtype="float64", shape=grid)
        probe = pt.tensor("probe", dtype="float64", shape=grid)
        alpha = pt.scalar("alpha", dtype="float64")
        fitted = (derive(sym, base) if derive is not None
                  else scene_parameters(scene, sym, base))
        # The parameters not fitted keep their `base` values (constants).
        params = dict({k: np.asarray(v, dtype=np.float64) for k, v in base.items()},
                      **fitted)
        # Every world's parameters carry its batch axis (as a template) so
        # that unfitted ones broadcast over the worlds.
        params = _batched(scene, params, base, observed.shape[0])
        extra, controller, cparams = [], None, None
        if scene.motors:
            commands = pt.tensor("commands", dtype="float64",
                                 shape=(size, steps, len(scene.motors)))
            extra = [commands]
            controller = Schedule(len(scene.motors), steps, scene.dt, prefix="command")
            cparams = {"command.u": commands}
        traj = rollout(scene, steps, params=params, controller=controller,
                       controller_params=cparams)
        diff = wrap_angles(observe(scene, traj, columns) - observed, columns)
        r = diff * weights
        per_world = ((probe + alpha * disconnected_grad(r)) * r).sum()
        grads = pytensor.grad(per_world, list(sym.values()))
        return compile([*sym.values(), observed, weights, probe, alpha, *extra],
                       [r, *grads], backend)

    return cached(key, build, backend)


def _batched(scene: Scene, params: dict, base: dict, batch) -> dict:
    """params with at least one value carrying the world axis: a fitted
    variable always does; this keeps the rollout batched when derive
    returns only unbatched values."""
    shapes = parameter_shapes(scene)
    if any(pt.as_tensor_variable(v).ndim == len(shapes[k]) + 1 for k, v in params.items()):
        return params
    name = "world.gravity"
    value = params.get(name, pt.as_tensor_variable(np.asarray(base[name])))
    return dict(params, **{name: pt.broadcast_to(value, (batch, 3))})


# -- the fit ---------------------------------------------------------------------
@dataclass
class _Packing:
    """x = [shared variables flattened, then per segment its variables]."""

    variables: tuple[Variable, ...]
    segments: int

    @property
    def shared(self):
        return [v for v in self.variables if not v.per_segment]

    @property
    def local(self):
        return [v for v in self.variables if v.per_segment]

    @property
    def n_shared(self) -> int:
        return sum(v.size for v in self.shared)

    @property
    def n_local(self) -> int:
        return sum(v.size for v in self.local)

    @property
    def size(self) -> int:
        return self.n_shared + self.segments * self.n_local

    def pack(self, values: dict) -> np.ndarray:
        head = [np.ravel(values[v.name]) for v in self.shared]
        tail = [np.reshape(values[v.name], (self.segments, -1)) for v in self.local]
        tail = np.concatenate(tail, axis=1).ravel() if tail else np.zeros(0)
        return np.concatenate(head + [tail]) if head else tail

    def unpack(self, x: np.ndarray) -> dict:
        out, at = {}, 0
        for v in self.shared:
            out[v.name] = x[at:at + v.size].reshape(v.shape)
            at += v.size
        local = x[at:].reshape(self.segments, self.n_local)
        at = 0
        for v in self.local:
            out[v.name] = local[:, at:at + v.size].reshape((self.segments,) + v.shape)
            at += v.size
        return out

    def bounds(self):
        lo = {v.name: np.broadcast_to(v.lower, (self.segments,) * v.per_segment + v.shape)
              for v in self.variables}
        hi = {v.name: np.broadcast_to(v.upper, (self.segments,) * v.per_segment + v.shape)
              for v in self.variables}
        return self.pack(lo).astype(float), self.pack(hi).astype(float)

    def world_values(self, values: dict, segment_of_world: np.ndarray) -> list:
        """Per variable, (W,) + shape for worlds running segments
        `segment_of_world` (W,)."""
        out = []
        for v in self.variables:
            value = np.asarray(values[v.name], dtype=np.float64)
            if v.per_segment:
                out.append(value[segment_of_world])
            else:
                out.append(np.broadcast_to(value, (len(segment_of_world),) + v.shape).copy())
        return out

    def columns_of(self, v: Variable, segment: int) -> slice:
        at = 0
        for u in self.shared:
            if u is v:
                return slice(at, at + v.size)
            at += u.size
        start = self.n_shared + segment * self.n_local
        for u in self.local:
            if u is v:
                return slice(start, start + v.size)
            start += u.size
        raise KeyError(v.name)


class _Evaluator:
    """Residuals, cost gradients and Jacobians of a packed x, in fixed-size
    compiled calls."""

    def __init__(self, fn, packing: _Packing, data: Data, chunk: int, progress=None):
        self.fn, self.packing, self.data, self.chunk = fn, packing, data, chunk
        self.mask = data.weights > 0                        # (S, T + 1, K)
        self.rows = np.argwhere(self.mask)                  # (n, 3): segment, step, column
        self.progress = progress
        self.evaluations = 0
        self.jacobians = 0
        self.history: list = []

    def _call(self, values: dict, segment_of_world, probe, alpha):
        """Runs worlds in chunks; returns (r (W, T + 1, K), grads per variable)."""
        n = len(segment_of_world)
        rs, grads = [], [[] for _ in self.packing.variables]
        for start in range(0, n, self.chunk):
            part = segment_of_world[start:start + self.chunk]
            pad = self.chunk - len(part)
            seg = np.concatenate([part, np.full(pad, part[0])]) if pad else part
            p = probe[start:start + self.chunk]
            if pad:
                p = np.concatenate([p, np.zeros((pad,) + p.shape[1:])])
            args = self.packing.world_values(values, seg)
            args += [self.data.observed[seg], self.data.weights[seg], p, np.float64(alpha)]
            if self.data.commands is not None:
                args.append(self.data.commands[seg])
            out = self.fn(*args)
            keep = len(part)
            rs.append(out[0][:keep])
            for g, got in zip(grads, out[1:]):
                g.append(np.asarray(got)[:keep])
        return np.concatenate(rs), [np.concatenate(g) for g in grads]

    def residuals(self, x: np.ndarray, with_gradient: bool = False, tolerate: bool = False):
        """(residual vector (n,), cost gradient (len x,) or None); with
        `tolerate`, a failed simulation gives infinite residuals instead of
        an error."""
        values = self.packing.unpack(x)
        segs = np.arange(len(self.data.segments))
        probe = np.zeros(self.data.observed.shape)
        r, grads = self._call(values, segs, probe, 1.0 if with_gradient else 0.0)
        if tolerate and not np.all(np.isfinite(r)):
            self.evaluations += 1
            return np.full(int(self.mask.sum()), np.inf), None
        if not np.all(np.isfinite(r)):
            raise ParameterError(
                "system identification: the simulation gave non-finite values at "
                + ", ".join(f"{k}={np.round(v, 6).tolist()}" for k, v in values.items()
                            if np.ndim(v) < 2))
        self.evaluations += 1
        vec = r[self.mask]
        cost = 0.5 * float(vec @ vec)
        self.history.append(cost)
        if self.progress is not None:
            self.progress.update(1)
            self.progress.set_postfix(cost=f"{cost:.4g}")
        if not with_gradient:
            return vec, None
        # World s runs segment s: a shared variable's gradient sums over them.
        grad = np.zeros(self.packing.size)
        for v, g in zip(self.packing.variables, grads):
            for s in segs:
                grad[self.packing.columns_of(v, s)] += np.ravel(g[s])
        return vec, grad

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """J (n, len x): one world per observed entry."""
        values = self.packing.unpack(x)
        segs = self.rows[:, 0]
        probe = np.zeros((len(self.rows),) + self.data.observed.shape[1:])
        probe[np.arange(len(self.rows)), self.rows[:, 1], self.rows[:, 2]] = 1.0
        _, grads = self._call(values, segs, probe, 0.0)
        self.jacobians += 1
        J = np.zeros((len(self.rows), self.packing.size))
        for v, g in zip(self.packing.variables, grads):
            g = np.reshape(g, (len(self.rows), -1))
            if not v.per_segment:
                J[:, self.packing.columns_of(v, 0)] = g
            else:
                for s in np.unique(segs):
                    rows = segs == s
                    J[rows, self.packing.columns_of(v, s)] = g[rows]
        if not np.all(np.isfinite(J)):
            raise ParameterError("system identification: non-finite Jacobian entries")
        return J


def fit_base(scene: Scene, params: dict | None) -> dict:
    """The scene's parameter values with `params` over them (one world)."""
    base, batch = resolve_values(scene, params)
    if batch is not None:
        raise ParameterError(f"{scene.source}: params for a fit must not carry a batch axis")
    return base


def fit_variables(scene: Scene, data: Data, fit: Sequence[str], segment_fit: Sequence[str],
                  base: dict, bounds: dict | None) -> tuple[list, list]:
    """(shared, per-segment) variables of the parameters named in `fit` and
    `segment_fit`: shared ones start from `base` (`fit_base`), per-segment
    ones from the data (`starts_from_data`)."""
    local = scene_variables(scene, segment_fit, base, per_segment=True,
                            segments=len(data.segments), bounds=bounds)
    return (scene_variables(scene, fit, base, bounds=bounds),
            [replace(v, initial=starts_from_data(data, v, scene.dt)) for v in local])


def fit(scene: Scene, recordings: Sequence[Recording], fit: Sequence[str] = (), *,
        segment_fit: Sequence[str] = (), segment_steps: int | None = None,
        params: dict | None = None, bounds: dict | None = None, noise: dict | None = None,
        variables: Sequence[Variable] | None = None, derive: Derive | None = None,
        derive_key=(), method: "str | Method" = Method.LEAST_SQUARES,
        backend="numba", chunk: int = 256, max_evaluations: int = 100,
        uncertainty: bool = True, progress: bool = True) -> FitResult:
    """Fit the parameters named in `fit` (shared by all segments) and
    `segment_fit` (one value per segment) to the recordings.

    Names are scene parameters, `name[i]` for one component of a vector
    (e.g. "pivot.anchor[2]"). params: starting values of any parameter
    (the rest: the scene's); bounds: {name: (lower, upper)} (masses, sizes,
    gains, friction and damping default to lower 0); noise: {column:
    sigma}. A model whose fitted quantities are not scene parameters gives
    `variables` and `derive(variables, base) -> scene parameters` instead
    (and a `derive_key` naming it). Returns a `FitResult`."""
    base = fit_base(scene, params)
    data = segment_data(scene, recordings, segment_steps, noise)
    if variables is None:
        shared, local = fit_variables(scene, data, fit, segment_fit, base, bounds)
        variables = shared + local
    return fit_data(scene, data, variables, params=params, derive=derive,
                    derive_key=derive_key, method=method, backend=backend, chunk=chunk,
                    max_evaluations=max_evaluations, uncertainty=uncertainty,
                    progress=progress)


def fit_data(scene: Scene, data: Data, variables: Sequence[Variable], *,
             params: dict | None = None, derive: Derive | None = None, derive_key=(),
             method: "str | Method" = Method.LEAST_SQUARES, backend="numba",
             chunk: int = 256, max_evaluations: int = 100, uncertainty: bool = True,
             progress: bool = True) -> FitResult:
    """`fit` on data already on the step grid (`segment_data`) with the
    variables given (per-segment ones with one starting value per segment).
    A variable whose bounds are equal (and its start) is held there: one
    compiled function then serves a model and its restriction."""
    from scipy.optimize import least_squares, minimize

    from symphys.progress import bar as progress_bar

    method = Method(method) if not isinstance(method, Method) else method
    base, _ = resolve_values(scene, params)
    n_seg = len(data.segments)
    variables = tuple(variables)
    if not variables:
        raise ParameterError("nothing to fit: name parameters in fit= or segment_fit=")
    names = [v.name for v in variables]
    if len(set(names)) != len(names):
        raise ParameterError(f"a parameter is named twice in fit/segment_fit: {names}")
    for v in variables:
        want = ((n_seg,) if v.per_segment else ()) + v.shape
        if np.shape(v.initial) != want:
            raise ParameterError(f"variable '{v.name}': starting value has shape "
                                 f"{np.shape(v.initial)}, expected {want}")
    packing = _Packing(variables, n_seg)
    fn = residual_function(scene, variables, data.columns, data.steps, chunk, base, derive,
                           backend, derive_key)
    x0 = packing.pack({v.name: v.initial for v in variables})
    lo, hi = packing.bounds()
    fixed = (lo == hi) & (x0 == lo)
    bad = np.flatnonzero(((x0 <= lo) | (x0 >= hi)) & ~fixed)
    if len(bad):
        raise ParameterError(f"starting values must lie strictly inside the bounds; "
                             f"{len(bad)} do not (first at packed index {bad[0]}: "
                             f"{x0[bad[0]]} not in ({lo[bad[0]]}, {hi[bad[0]]}))")
    bar = progress_bar(None, "sysid", progress, unit="eval")
    evaluator = _Evaluator(fn, packing, data, chunk, bar)
    start = time.perf_counter()
    r0, _ = evaluator.residuals(x0)
    initial_cost = 0.5 * float(r0 @ r0)
    # The optimisers see the free entries only; fixed ones stay at x0.
    free = ~fixed

    def full(xf):
        x = x0.copy()
        x[free] = xf
        return x

    if method is Method.LEAST_SQUARES:
        cache = {}

        def fun(xf):
            # A trial point where the simulation fails gets non-finite
            # residuals: the trust region shrinks instead of the fit stopping.
            return evaluator.residuals(full(xf), tolerate=True)[0]

        def jac(xf):
            key = xf.tobytes()
            if key not in cache:
                cache.clear()
                cache[key] = evaluator.jacobian(full(xf))[:, free]
            return cache[key]

        out = least_squares(fun, x0[free], jac=jac, bounds=(lo[free], hi[free]),
                            method="trf", x_scale="jac", max_nfev=max_evaluations)
    else:
        def cost_and_grad(xf):
            vec, grad = evaluator.residuals(full(xf), with_gradient=True)
            return 0.5 * float(vec @ vec), grad[free]

        out = minimize(cost_and_grad, x0[free], jac=True, method="L-BFGS-B",
                       bounds=list(zip(lo[free], hi[free])),
                       options={"maxfun": max_evaluations})
    x, success, message = full(out.x), bool(out.success), str(out.message)
    bar.close()
    r, _ = evaluator.residuals(x)
    values = packing.unpack(x)
    stderr = None
    if uncertainty:
        J = evaluator.jacobian(x)
        stderr = _standard_errors(J, r, packing)
    seconds = time.perf_counter() - start
    return FitResult(values=values, stderr=stderr, cost=0.5 * float(r @ r),
                     initial_cost=initial_cost, rms=_rms(evaluator, r),
                     evaluations=evaluator.evaluations, jacobians=evaluator.jacobians,
                     seconds=seconds, success=success, message=message, method=method.value,
                     n_residuals=len(r), n_parameters=packing.size,
                     history=list(evaluator.history),
                     per_segment=tuple(v.name for v in packing.local))


def _standard_errors(J: np.ndarray, r: np.ndarray, packing: _Packing) -> dict:
    """Gauss-Newton standard errors of the shared variables:
    sqrt(diag(s^2 (J^T J)^-1)), s^2 = r.r / (n - p); segment variables are
    part of p (they are marginalised, not reported)."""
    n, p = J.shape
    dof = max(n - p, 1)
    s2 = float(r @ r) / dof
    cov = s2 * np.linalg.pinv(J.T @ J)
    err = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    out, at = {}, 0
    for v in packing.shared:
        out[v.name] = err[at:at + v.size].reshape(v.shape)
        at += v.size
    return out


def _rms(evaluator: _Evaluator, r: np.ndarray) -> dict:
    """RMS residual per column in its own units (residual x sigma), from
    the residual vector r (n,) of the observed entries."""
    rows, w = evaluator.rows, evaluator.data.weights
    plain = r / w[tuple(rows.T)]
    return {col.name: float(np.sqrt(np.mean(plain[rows[:, 2] == k] ** 2)))
            for k, col in enumerate(evaluator.data.columns) if (rows[:, 2] == k).any()}


def predict(scene: Scene, data: Data, values: dict, variables: Sequence[Variable], *,
            base: dict, derive: Derive | None = None, derive_key=(), backend="numba",
            chunk: int = 256) -> np.ndarray:
    """Predicted columns (S, T + 1, K) of every segment at `values`
    (residuals plus observations where observed, also elsewhere)."""
    fn = residual_function(scene, variables, data.columns, data.steps, chunk, base, derive,
                           backend, derive_key)
    packing = _Packing(tuple(variables), len(data.segments))
    ones = np.ones_like(data.weights)
    zeros = np.zeros_like(data.observed)
    evaluator = _Evaluator(fn, packing, Data(data.columns, data.segments, data.steps, zeros,
                                             ones, data.commands), chunk)
    r, _ = evaluator._call(values, np.arange(len(data.segments)), zeros, 0.0)
    return r

