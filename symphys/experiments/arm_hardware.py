"""Experiment A7 (a proposal of the paper; no result is shown there):
optimise the arm's link lengths jointly with its controller.

Task: the A3 arm (`graphs/arm.json`) read through the target (3 inputs, as
in A4) must hold its gripper on each of a fixed set of targets on a high
"shelf" in front of it, partly beyond its reach: distance from the
shoulder pitch axis uniform in 0.8-1.4 m, azimuth in +-45 deg, elevation
in 30-70 deg. With its 0.5 m + 0.5 m links and the elbow's +-90 deg limit
the gripper reaches distances sqrt(a^2 + b^2) .. a + b = 0.71-1.0 m from
the shoulder, so about two thirds of the targets are out of reach.

Controller: target -> 128 -> 128 -> 4 tanh network (servo targets in rad;
17,540 weights) reading the target in the shelf's box
coordinates (`ScaledInput`: each in [-1, 1]); its input is constant in
time, so it learns one posture per target (an inverse-kinematics map)
through the servos' speed and torque limits.
Loss: mean gripper-target distance over the last second of the rollout,
over all targets. Reach error (the metrics `error_fixed_lengths` and
`error_optimised_lengths`): mean final gripper-target distance at the
arm's best iterate (lowest loss seen; the same rule for both arms).

Two runs in the same process, update by update on the same targets, with
the same seed, the same controller initialisation and the same number of
gradient evaluations: one keeps the default lengths, the other also
descends the two link lengths (upper arm a, forearm b) on the exact
gradient.

Hardware parametrisation (`ArmGeometry`): the lengths set the scene
parameters that depend on them through an affine map, so the chain rule
through its constant Jacobian is exact: the boxes' long side
(`<link>.size`), their centres (`<link>.position`), the elbow body and
both elbow joints' anchors at the shoulder + a, the gripper and the wrist
anchor at the shoulder + a + b, and the link masses at the default linear
density (1 kg/m: a longer link is heavier). The compiled function takes
those eleven scene parameters as `wrt_params`; its gradients are mapped
back to the two lengths.

The servos' 10 N m limit bounds what length buys: a straight 0.6 m + 0.6 m
arm held horizontal needs about 11.2 N m at the shoulder, a 0.655 m +
0.66 m one (the best lengths ignoring dynamics) 12.8 N m. Past the limit
the arm cannot hold its posture and drops to a joint limit, a cliff in the
loss: a first run with the shelf at 10-50 deg elevation, without a guard,
jumped from 0.27 m to 0.59 m at 0.57 m + 0.57 m and ended worse than the
fixed arm. At 30-70 deg a static estimate puts every target within the
limit up to 0.6 m + 0.6 m; both arms' Adam runs under a `StepGuard`
(undo an update that raises the loss by half, halve the rates).

Start: both controllers start from the same weights, with the output
bias set to a ready pose (elbow bent 1 rad, the rest 0). Two earlier
versions learned straight arms pointing at every target: from the straight
rest pose (where the gripper's distance to the shoulder is stationary in
the elbow angle) and, with the ready pose, from raw world coordinates as
inputs (the targets differ little relative to their common offset). The
near targets (0.80-0.83 m) then stayed 0.15-0.3 m away after 60-200
updates, and the lengths settled where straight arms split the near and
far targets' errors (0.54-0.57 m each). With box coordinates the fixed
arm's near targets were within 5-8 cm after 60 updates, 1-4 cm after 200.

Bounds: each length in [0.5, 1.5] x its default, kept by projection
(clipping) after every Adam step on the lengths (`HardwareAdam`: its own
Adam, 5 mm per update; the controller's Adam is the same in both runs).
The lengths are held for the first 10 updates: the untrained controller
keeps the arm upright, where the length gradient describes the rest pose,
not reaching (10-50 deg shelf, seed 0: d loss / d length +0.35 for both
links at update 0, -0.2 to -0.45 from update 10 on, once the arm leans
towards the targets).
"""

from __future__ import annotations

import enum
import functools
import time
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from symphys.errors import SceneError
from symphys.experiments.arm_random import arm_scene
from symphys.experiments.common import ExperimentResult, progress, pyplot, table
from symphys.learn import nn
from symphys.learn.closed_loop import closed_loop_function
from symphys.learn.optim import Adam, StepGuard
from symphys.physics.algebra import safe_vector_norm
from symphys.scene.scene import Scene

NAME = "arm-hardware"
LENGTHS = "lengths"          # the link lengths' entry among an arm's parameters
PAPER = {"shown": False,
         "note": "not shown in the paper: Degrave et al. (2016) name hardware optimisation "
                 "jointly with the controller as a future application (proposal only)"}


class Arm(enum.Enum):
    """The two runs compared; the value names their metrics and series."""

    FIXED = "fixed_lengths"
    OPTIMISED = "optimised_lengths"


@dataclass(frozen=True)
class TargetRegion:
    """Targets relative to the shoulder pitch axis: distance (m), azimuth
    about z from +x and elevation above the horizontal (deg), each uniform."""

    distance: tuple[float, float] = (0.8, 1.4)
    azimuth_deg: tuple[float, float] = (-45.0, 45.0)
    elevation_deg: tuple[float, float] = (30.0, 70.0)

    def draw(self, rng, n: int, centre) -> np.ndarray:
        """(n, 3) world points."""
        return self._points(rng.uniform(*self.distance, size=n),
                            rng.uniform(*self.azimuth_deg, size=n),
                            rng.uniform(*self.elevation_deg, size=n), centre)

    def box(self, centre) -> tuple[np.ndarray, np.ndarray]:
        """((3,) middle, (3,) half-width) of the region's bounding box
        (from a grid over it; rounded to mm)."""
        grid = np.meshgrid(np.linspace(*self.distance, 9), np.linspace(*self.azimuth_deg, 9),
                           np.linspace(*self.elevation_deg, 9))
        points = self._points(*(g.ravel() for g in grid), centre)
        low, high = points.min(axis=0), points.max(axis=0)
        return np.round((low + high) / 2, 3), np.round((high - low) / 2, 3)

    @staticmethod
    def _points(r, azimuth_deg, elevation_deg, centre) -> np.ndarray:
        az, el = np.radians(azimuth_deg), np.radians(elevation_deg)
        direction = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], 1)
        return np.asarray(centre) + np.asarray(r)[:, None] * direction


@dataclass(frozen=True)
class ScaledInput:
    """`inner` (an `nn.MLP`) reading (observation - offset) / scale: the
    target in the shelf's box coordinates, each in [-1, 1]."""

    inner: nn.MLP
    offset: tuple[float, ...]
    scale: tuple[float, ...]

    @property
    def n_in(self) -> int:
        return self.inner.n_in

    @property
    def n_out(self) -> int:
        return self.inner.n_out

    @property
    def output_bias(self) -> str:
        """Name of the output layer's bias (the servo targets at zero input)."""
        return f"{self.inner.prefix}.b{len(self.inner.hidden)}"

    def parameter_shapes(self):
        return self.inner.parameter_shapes()

    @property
    def n_parameters(self) -> int:
        return self.inner.n_parameters

    def init(self, seed: int = 0):
        return self.inner.init(seed)

    def carry_sizes(self):
        return self.inner.carry_sizes()

    def apply(self, params, observation, carry, time):
        scaled = (observation - np.asarray(self.offset)) / np.asarray(self.scale)
        return self.inner.apply(params, scaled, carry, time)


@dataclass(frozen=True)
class Options:
    """Sizes of one run. steps: rollout length (dt 0.01 s); window: last
    steps the loss averages; targets: the fixed target set (one world
    each); updates: Adam updates per arm (the shared budget); bounds:
    each length's range as fractions of its default; length_warmup: first
    updates in which the lengths are held; ready_pose: the servo targets
    (rad; shoulder yaw, shoulder pitch, elbow yaw, elbow pitch) the
    controller starts from, its output bias (see the module docstring)."""

    steps: int = 300
    window: int = 100
    targets: int = 32
    updates: int = 200
    hidden: tuple[int, ...] = (128, 128)
    learning_rate: float = 3e-3          # controller weights (Adam, clip 1.0)
    length_learning_rate: float = 5e-3   # link lengths, m per update (Adam)
    bounds: tuple[float, float] = (0.5, 1.5)
    length_warmup: int = 10
    ready_pose: tuple[float, ...] = (0.0, 0.0, 0.0, 1.0)
    region: TargetRegion = TargetRegion()

    def __post_init__(self):
        if not 0 < self.window <= self.steps:
            raise ValueError(f"window must be in 1..steps={self.steps}, got {self.window}")
        if not 0 < self.bounds[0] <= 1.0 <= self.bounds[1]:
            raise ValueError(f"bounds must bracket 1 (the default lengths), got {self.bounds}")
        if self.targets < 1 or self.updates < 1 or self.length_warmup < 0:
            raise ValueError("targets and updates must be at least 1, length_warmup at least 0")
        if len(self.ready_pose) != 4:
            raise ValueError(f"ready_pose needs one servo target per motor (4), "
                             f"got {len(self.ready_pose)}")


FULL = Options()
QUICK = Options(steps=150, window=50, targets=8, updates=6, hidden=(32, 32),
                learning_rate=1e-2, length_learning_rate=2e-2, length_warmup=1)


@dataclass(frozen=True)
class ArmGeometry:
    """The arm's scene parameters as an affine function of its link lengths
    (upper arm a, forearm b), read off and checked against the scene.

    parameters(lengths (2,)) -> {name: value}; `jacobian` {name: (*shape,
    2)} is constant, so `length_gradient` is the exact chain rule."""

    defaults: dict
    jacobian: dict
    lengths0: np.ndarray      # (2,) default lengths, m
    shoulder: np.ndarray      # (3,) shoulder pitch anchor (fixed in the world)

    LINKS = ("upper_arm", "forearm")

    @classmethod
    def from_scene(cls, scene: Scene) -> "ArmGeometry":
        p = scene.parameters()
        shoulder = p["shoulder_pitch.anchor"]
        a, b = (float(p[f"{link}.size"][2]) for link in cls.LINKS)
        up = np.array([0.0, 0.0, 1.0])
        expected = {"upper_arm.position": shoulder + up * a / 2,
                    "elbow.position": shoulder + up * a,
                    "elbow_yaw.anchor": shoulder + up * a,
                    "elbow_pitch.anchor": shoulder + up * a,
                    "forearm.position": shoulder + up * (a + b / 2),
                    "gripper.position": shoulder + up * (a + b),
                    "wrist.anchor": shoulder + up * (a + b)}
        for name, value in expected.items():
            if not np.allclose(p[name], value):
                raise SceneError(f"{scene.source}: {name} is {p[name].tolist()}, but the "
                                 f"arm-hardware experiment needs {value.tolist()} (upper arm and "
                                 f"forearm stacked along +z above the shoulder pitch anchor)")
        col = lambda da, db: np.array([[0, 0], [0, 0], [da, db]], dtype=float)   # (3, 2)
        jac = {"upper_arm.size": col(1, 0), "upper_arm.position": col(0.5, 0),
               "upper_arm.mass": np.array([p["upper_arm.mass"] / a, 0.0]),
               "elbow.position": col(1, 0), "elbow_yaw.anchor": col(1, 0),
               "elbow_pitch.anchor": col(1, 0),
               "forearm.size": col(0, 1), "forearm.position": col(1, 0.5),
               "forearm.mass": np.array([0.0, p["forearm.mass"] / b]),
               "gripper.position": col(1, 1), "wrist.anchor": col(1, 1)}
        return cls({n: p[n] for n in jac}, jac, np.array([a, b]), shoulder)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.jacobian)

    def parameters(self, lengths) -> dict:
        """{scene parameter: value} of the arm with these (2,) lengths."""
        d = np.asarray(lengths, dtype=float) - self.lengths0
        return {n: self.defaults[n] + self.jacobian[n] @ d for n in self.names}

    def length_gradient(self, grads: dict) -> np.ndarray:
        """(2,) d loss / d lengths from {scene parameter: gradient}."""
        return sum(np.tensordot(np.asarray(grads[n]), self.jacobian[n],
                                axes=np.ndim(grads[n])) for n in self.names)

    def reach(self, lengths) -> tuple[float, float]:
        """(nearest, farthest) gripper distance from the shoulder allowed by
        the elbow's +-90 deg pitch limit: sqrt(a^2 + b^2), a + b."""
        a, b = lengths
        return float(np.hypot(a, b)), float(a + b)

    def kinematic_floor(self, lengths, targets) -> float:
        """Mean distance from the targets (n, 3) to the reachable shell: what
        any controller leaves at these lengths, ignoring gravity and time."""
        lo, hi = self.reach(lengths)
        r = np.linalg.norm(np.asarray(targets) - self.shoulder, axis=1)
        return float(np.mean(np.maximum(0.0, np.maximum(lo - r, r - hi))))


@functools.lru_cache(maxsize=None)
def window_loss(window: int):
    """loss(traj, task): mean gripper-target distance over the last `window`
    steps and all worlds (one function object per window: the cache key)."""
    def loss(traj, task):
        gap = traj.position["gripper"][:, -window:, :] - task[:, None, :]
        return safe_vector_norm(gap).mean()
    return loss


def final_pose(traj, task):
    """(W, 2, 3): elbow and gripper positions at the last step."""
    return pt.stack([traj.position["elbow"][:, -1, :], traj.position["gripper"][:, -1, :]],
                    axis=1)


def compiled(opts: Options, backend: str = "numba", scene: Scene | None = None):
    """(scene, geometry, controller, fn) with fn(task, *weights, *scene
    parameters) -> [loss, *d weights, *d parameters, final pose (W, 2, 3)]."""
    scene = scene or arm_scene()
    geometry = ArmGeometry.from_scene(scene)
    middle, half = opts.region.box(geometry.shoulder)
    ctrl = ScaledInput(nn.MLP(3, 4, hidden=opts.hidden, activation=nn.Activation.TANH),
                       tuple(middle.tolist()), tuple(half.tolist()))
    fn = closed_loop_function(scene, opts.steps, ctrl, window_loss(opts.window),
                              backend=backend, worlds=opts.targets,
                              wrt_params=geometry.names, aux=final_pose)
    return scene, geometry, ctrl, fn


def evaluate(fn, geometry: ArmGeometry, weights: dict, lengths, targets):
    """(loss, d weights {name: array}, d lengths (2,), final pose (W, 2, 3))."""
    values = geometry.parameters(lengths)
    out = fn(targets, *weights.values(), *values.values())
    n = len(weights)
    dweights = dict(zip(weights, out[1:1 + n]))
    dparams = dict(zip(geometry.names, out[1 + n:1 + n + len(values)]))
    return (float(out[0]), dweights, geometry.length_gradient(dparams),
            np.asarray(out[-1]))


@dataclass
class HardwareAdam:
    """Adam on the controller weights and, unless `lengths` is None, a
    second Adam on the LENGTHS entry (2,), projected onto [low, high] after
    each step and held for the first `warmup` steps. One optimiser to
    `StepGuard`: its rate scale and its reset reach both."""

    weights: Adam
    lengths: Adam | None = None
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    warmup: int = 0
    steps: int = 0

    @property
    def iteration(self) -> int:
        return self.weights.iteration

    @property
    def rate_scale(self) -> float:
        return self.weights.rate_scale

    @rate_scale.setter
    def rate_scale(self, value: float) -> None:
        self.weights.rate_scale = value
        if self.lengths is not None:
            self.lengths.rate_scale = value

    def reset(self) -> None:
        self.weights.reset()
        if self.lengths is not None:
            self.lengths.reset()

    def step(self, params: dict, grads: dict) -> dict:
        """params, grads: {weight name: array, LENGTHS: (2,)}; the updated params."""
        out = self.weights.step({k: v for k, v in params.items() if k != LENGTHS}, grads)
        self.steps += 1
        lengths = params[LENGTHS]
        if self.lengths is not None and self.steps > self.warmup:
            moved = self.lengths.step({LENGTHS: lengths}, {LENGTHS: grads[LENGTHS]})[LENGTHS]
            lengths = np.clip(moved, self.low, self.high)     # projection onto the bounds
        return {**out, LENGTHS: lengths}


def run(quick: bool = False, seed: int = 0, backend: str = "numba",
        show_progress: bool = True, updates: int | None = None,
        options: Options | None = None) -> ExperimentResult:
    """Both arms for `updates` (default: the options') Adam updates each."""
    opts = options or (QUICK if quick else FULL)
    updates = updates or opts.updates
    start = time.perf_counter()
    scene, geometry, ctrl, fn = compiled(opts, backend)
    names = list(ctrl.parameter_shapes())
    targets = opts.region.draw(np.random.default_rng(seed), opts.targets, geometry.shoulder)
    init = ctrl.init(seed)
    init[ctrl.output_bias] = np.asarray(opts.ready_pose, dtype=float)
    evaluate(fn, geometry, init, geometry.lengths0, targets)
    compile_s = time.perf_counter() - start
    lo, hi = geometry.lengths0 * opts.bounds[0], geometry.lengths0 * opts.bounds[1]

    def optimiser(arm: Arm) -> HardwareAdam:
        weights = Adam(learning_rate=opts.learning_rate, clip_norm=1.0)
        if arm is Arm.FIXED:
            return HardwareAdam(weights)
        return HardwareAdam(weights, Adam(learning_rate=opts.length_learning_rate), lo, hi,
                            opts.length_warmup)

    def call(params: dict):
        return evaluate(fn, geometry, {n: params[n] for n in names}, params[LENGTHS], targets)

    guards = {arm: StepGuard(optimiser(arm)) for arm in Arm}
    params = {arm: {**init, LENGTHS: geometry.lengths0.copy()} for arm in Arm}
    curves = {arm: [] for arm in Arm}
    paths = {arm: [] for arm in Arm}
    seconds = {arm: 0.0 for arm in Arm}
    bar = progress(range(updates), "updates", show_progress)
    for _ in bar:
        for arm, guard in guards.items():
            t0 = time.perf_counter()
            value, dweights, dlengths, _ = call(params[arm])
            curves[arm].append(value)
            paths[arm].append(params[arm][LENGTHS].copy())
            params[arm] = guard.step(params[arm], value, {**dweights, LENGTHS: dlengths})
            seconds[arm] += time.perf_counter() - t0
        bar.set_postfix(fixed=f"{curves[Arm.FIXED][-1]:.3f}",
                        optimised=f"{curves[Arm.OPTIMISED][-1]:.3f}",
                        a_b="{:.2f},{:.2f}".format(*params[Arm.OPTIMISED][LENGTHS]))
    bar.close()
    # The loss after the last update; then each arm is judged at its best
    # iterate (lowest loss over the run, the same rule for both).
    finals, chosen = {}, {}
    for arm, guard in guards.items():
        value = call(params[arm])[0]
        curves[arm].append(value)
        paths[arm].append(params[arm][LENGTHS].copy())
        if value < guard.best_loss:
            guard.best_loss, guard.best_params = value, params[arm]
        chosen[arm] = guard.best_params
        pose = call(chosen[arm])[3]
        finals[arm] = (np.linalg.norm(pose[:, 1] - targets, axis=1), pose)
    best = _kinematic_optimum(geometry, targets, lo, hi)
    metrics = {f"error_{arm.value}": float(finals[arm][0].mean()) for arm in Arm}
    for arm, guard in guards.items():
        k, lengths = arm.value, chosen[arm][LENGTHS]
        metrics[f"loss_{k}"] = guard.best_loss
        metrics[f"first_loss_{k}"] = curves[arm][0]
        metrics[f"last_loss_{k}"] = curves[arm][-1]
        metrics[f"best_update_{k}"] = int(np.argmin(curves[arm]))
        metrics[f"rejected_steps_{k}"] = guard.rejections
        metrics[f"lengths_{k}"] = [float(x) for x in lengths]
        metrics[f"kinematic_floor_{k}"] = geometry.kinematic_floor(lengths, targets)
        metrics[f"fraction_under_5cm_{k}"] = float(np.mean(finals[arm][0] < 0.05))
    path = np.asarray(paths[Arm.OPTIMISED])
    metrics.update({
        "kinematic_optimum_lengths": best[0], "kinematic_optimum_floor": best[1],
        "error_ratio": metrics["error_optimised_lengths"] / metrics["error_fixed_lengths"],
        "lengths_within_bounds": bool(np.all(path >= lo - 1e-12) and np.all(path <= hi + 1e-12)),
        "optimised_loss_fell": metrics["loss_optimised_lengths"] < curves[Arm.OPTIMISED][0],
        "optimised_beats_fixed": metrics["error_optimised_lengths"]
                                 < metrics["error_fixed_lengths"],
    })
    return ExperimentResult(
        name=NAME, quick=quick, seed=seed, metrics=metrics, paper=PAPER,
        extra={"backend": backend, "steps": opts.steps, "window": opts.window,
               "targets": opts.targets, "updates": updates, "hidden": list(opts.hidden),
               "parameters": ctrl.n_parameters, "learning_rate": opts.learning_rate,
               "length_learning_rate": opts.length_learning_rate,
               "length_warmup": opts.length_warmup,
               "bounds_m": [lo.tolist(), hi.tolist()],
               "default_lengths": geometry.lengths0.tolist(),
               "region": {"distance_m": list(opts.region.distance),
                          "azimuth_deg": list(opts.region.azimuth_deg),
                          "elevation_deg": list(opts.region.elevation_deg)},
               "shoulder": geometry.shoulder.tolist(), "compile_seconds": compile_s,
               **{f"train_seconds_{arm.value}": seconds[arm] for arm in Arm}},
        series={"targets": targets,
                **{f"loss_{arm.value}": curves[arm] for arm in Arm},
                "lengths_optimised_lengths": path,
                **{f"final_distance_{arm.value}": finals[arm][0] for arm in Arm},
                **{f"final_pose_{arm.value}": finals[arm][1] for arm in Arm}})


def _kinematic_optimum(geometry: ArmGeometry, targets, lo, hi, n: int = 101):
    """(lengths, floor): the grid point in the bounds with the lowest
    kinematic floor (a reference for what the gradient should approach)."""
    grid = [(a, b) for a in np.linspace(lo[0], hi[0], n) for b in np.linspace(lo[1], hi[1], n)]
    floors = [geometry.kinematic_floor(g, targets) for g in grid]
    i = int(np.argmin(floors))
    return [float(x) for x in grid[i]], float(floors[i])


def report(result: ExperimentResult) -> str:
    m, x = result.metrics, result.extra
    rows = []
    for arm, label in ((Arm.FIXED, "fixed lengths (ours)"),
                       (Arm.OPTIMISED, "optimised lengths (ours)")):
        k = arm.value
        rows.append([label, "{:.3f} + {:.3f}".format(*m[f"lengths_{k}"]),
                     f"{m[f'first_loss_{k}']:.3f}", f"{m[f'loss_{k}']:.4f}",
                     m[f"best_update_{k}"], m[f"rejected_steps_{k}"],
                     f"{m[f'error_{k}']:.4f}", f"{m[f'fraction_under_5cm_{k}']:.2f}",
                     f"{m[f'kinematic_floor_{k}']:.4f}", f"{x[f'train_seconds_{k}']:.0f}"])
    rows.append(["optimised lengths (paper)", "-", "-", "-", "-", "-",
                 "not shown in the paper (proposal only)",
                 "-", "-", "-"])
    head = ["arm", "lengths a + b m", "first loss m", "best loss m", "at update", "undone",
            "reach error m", "final < 5 cm", "kinematic floor m", "train s"]
    lo, hi = x["bounds_m"]
    return (table(head, rows)
            + f"\n{x['targets']} targets, {x['updates']} Adam updates per arm, "
            + f"{x['steps']} steps (loss: last {x['window']}); bounds a in "
            + f"[{lo[0]:.2f}, {hi[0]:.2f}] m, b in [{lo[1]:.2f}, {hi[1]:.2f}] m (projection), "
            + f"held for the first {x['length_warmup']} updates"
            + "\nkinematic optimum in the bounds: {:.3f} + {:.3f} m, floor {:.4f} m".format(
                *m["kinematic_optimum_lengths"], m["kinematic_optimum_floor"])
            + f"\nreach error with optimised / fixed lengths: {m['error_ratio']:.2f}"
            + f"; compile {x['compile_seconds']:.0f} s")


def _sketch(ax, result: ExperimentResult, arm: Arm, colour: str) -> None:
    """Side view (horizontal distance from the base axis, height) of the
    final poses, the targets and the reachable shell."""
    s, m, x = result.series, result.metrics, result.extra
    shoulder = np.asarray(x["shoulder"])
    targets = np.asarray(s["targets"])
    pose = np.asarray(s[f"final_pose_{arm.value}"])
    side = lambda p: (np.hypot(p[..., 0], p[..., 1]), p[..., 2])
    lengths = m[f"lengths_{arm.value}"]
    near, far = float(np.hypot(*lengths)), float(sum(lengths))
    phi = np.linspace(-0.1, np.pi / 2, 100)
    for radius in (near, far):
        ax.plot(radius * np.cos(phi), shoulder[2] + radius * np.sin(phi), color=colour,
                lw=0.8, ls="--")
    for k in range(len(targets)):
        px, pz = side(np.stack([shoulder, pose[k, 0], pose[k, 1]]))
        ax.plot(px, pz, color=colour, lw=1, alpha=0.5)
    tx, tz = side(targets)
    gx, gz = side(pose[:, 1])
    ax.plot(gx, gz, "o", color=colour, ms=3, label="gripper at the end")
    ax.plot(tx, tz, "kx", ms=4, label="targets")
    ax.set_aspect("equal")
    ax.set_xlim(-0.1, 1.6)
    ax.set_ylim(-0.1, 1.6)
    ax.set_xlabel("horizontal distance from the base axis (m)")
    ax.set_ylabel("height (m)")
    ax.set_title(f"{arm.value.replace('_', ' ')}: a + b = {lengths[0]:.2f} + {lengths[1]:.2f} m;"
                 f" error {m[f'error_{arm.value}'] * 100:.1f} cm", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s, m, x = result.series, result.metrics, result.extra
    fig, axes = plt.subplots(2, 2, figsize=(11, 9))
    ax = axes[0, 0]
    for arm, colour in ((Arm.FIXED, "C0"), (Arm.OPTIMISED, "C1")):
        curve = s[f"loss_{arm.value}"]
        ax.semilogy(range(len(curve)), curve, color=colour, label=arm.value.replace("_", " "))
        best = m[f"best_update_{arm.value}"]
        ax.plot([best], [curve[best]], "o", color=colour, ms=5)
        ax.axhline(m[f"kinematic_floor_{arm.value}"], color=colour, ls=":", lw=1,
                   label="kinematic floor")
    ax.set_xlabel("update")
    ax.set_ylabel("mean distance, last second (m)")
    ax.legend(fontsize=8)
    ax.set_title("loss, same budget, same start (dot: best iterate)")
    ax = axes[0, 1]
    path_ = np.asarray(s["lengths_optimised_lengths"])
    lo, hi = x["bounds_m"]
    for i, (label, colour) in enumerate((("upper arm a", "C2"), ("forearm b", "C3"))):
        ax.plot(path_[:, i], color=colour, label=label)
        ax.axhline(m["kinematic_optimum_lengths"][i], color=colour, ls=":", lw=1)
    ax.axhspan(lo[0], hi[0], color="grey", alpha=0.08, label="bounds")
    ax.set_xlabel("update")
    ax.set_ylabel("link length (m)")
    ax.set_title("lengths (dotted: kinematic optimum)")
    ax.legend(fontsize=8)
    _sketch(axes[1, 0], result, Arm.FIXED, "C0")
    _sketch(axes[1, 1], result, Arm.OPTIMISED, "C1")
    fig.suptitle("arm-hardware (A7 proposal; not in the paper): link lengths optimised "
                 "with the controller")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
