"""System identification of a real double pendulum (experiment C).

Data: IBM's "Double Pendulum Chaotic" recordings (shipped in
`symphys/data/ibm-double-pendulum`, CDLA-Sharing 1.0): pixel positions of
the pivot, the elbow and the tip at 400 frames per second. Angles are the
markers' directions in the image, from image +y towards image +x,
unwrapped: theta1 of the upper arm, theta2 of the lower arm (both
absolute). The camera is not upright (gravity points along image +x in
these recordings), so gravity's direction in the image is fitted.

Model: two uniform boxes hung from hinges about -y (world x is image x,
world -z image y), simulated at two steps per video frame (1/800 s). A rigid double
pendulum's angles reveal four mass-geometry ratios (its equations of motion
do not change when all masses and inertias scale together), and these four
fitted variables fix them: the upper arm's length l1 (with the markers'
pivot-elbow distance, the camera scale in m/px), each arm's centre of mass
as a fraction of l1 (a box hung from its hinge is twice that long, which
sets its inertia), and the lower arm's mass per kg of upper arm. Also
fitted: the gravity angle in the image, and at each hinge viscous damping
and dry friction (per kg of upper arm). The lower arm's length (for
reporting) is the camera scale times its elbow-tip distance.

Starting values come in closed form (`regression_start`): given angles,
rates and accelerations (Savitzky-Golay), the equations of motion are
linear in the ratios, the gravity direction's sine and cosine and the
losses; one linear least-squares solve, then the boxes that realise them.

Multiple shooting: recordings 0-9 are cut into 0.25 s segments (every
`SEGMENT_SPACING`-th of them used), each with its own fitted initial angles
and rates, started from the markers (rates: Savitzky-Golay derivative).
Residuals: both angles every 4th frame. SciPy's trust-region least squares
with the exact Jacobian, then the Gauss-Newton standard errors.

Evaluation, recordings 10-20: from the observed state (angles and
Savitzky-Golay rates) at the start of windows every 0.25 s, the angle
error after 0.1, 0.25 and 0.5 s; RMSE over windows and both angles.
Baselines in the same run: constant velocity (theta + omega h), and the
same model fitted without joint damping or friction.
"""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytensor.tensor as pt
from scipy.signal import savgol_filter

import symphys as sp
from symphys import sysid
from symphys.errors import DataError
from symphys.experiments.common import ExperimentResult, progress, pyplot, table
from symphys.sysid.recordings import parse_column, recording_from_arrays

NAME = "double-pendulum-sysid"
DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "ibm-double-pendulum"
FPS = 400.0
FRAME = 1.0 / FPS
SUBSTEPS = 2                 # simulation steps per video frame (arm 2 turns at up to 67 rad/s)
DT = FRAME / SUBSTEPS
FIT_RECORDINGS = tuple(range(10))
TEST_RECORDINGS = tuple(range(10, 21))
FIT_FRAMES = 100             # 0.25 s segments for the fit
FIT_STEPS = FIT_FRAMES * SUBSTEPS
SEGMENT_SPACING = 59         # fit every 59th segment (three per recording)
EVAL_FRAMES = 200            # 0.5 s windows for the evaluation
EVAL_STEPS = EVAL_FRAMES * SUBSTEPS
OBSERVE_EVERY = 4            # frames between residuals (100 Hz)
HORIZONS = (0.1, 0.25, 0.5)  # s
WINDOW_SPACING = 100         # frames between evaluation windows (0.25 s)
SAVGOL = (15, 3)             # window (frames), polynomial order for rates
CHUNK = 64
WIDTH = 0.02                 # box thickness (m): a fixed, small share of the inertia
QUICK = dict(fit_recordings=(0, 1), test_recordings=(10,), spacing=88, evaluations=4,
             windows=8)
FULL = dict(fit_recordings=FIT_RECORDINGS, test_recordings=TEST_RECORDINGS,
            spacing=SEGMENT_SPACING, evaluations=30, windows=None)
PAPER = {"note": "Degrave et al. (2016) propose system identification from data but show "
                 "none; no number to compare with"}


# -- data --------------------------------------------------------------------------
def read_markers(data_dir: Path, index: int) -> np.ndarray:
    """(frames, 6) pixel coordinates pivot, elbow, tip of recording `index`
    (N.csv or N.csv.gz in `data_dir`)."""
    data_dir = Path(data_dir)
    for name, opener in ((f"{index}.csv", open), (f"{index}.csv.gz", gzip.open)):
        path = data_dir / name
        if path.exists():
            try:
                with opener(path, "rt") as handle:
                    markers = np.loadtxt(handle, delimiter=",", ndmin=2)
            except ValueError as exc:
                raise DataError(f"{path}: not six comma-separated numbers per line ({exc})")
            if markers.shape[1] != 6 or len(markers) < EVAL_FRAMES + 1:
                raise DataError(f"{path}: expected at least {EVAL_FRAMES + 1} rows of six "
                                f"columns (pivot, elbow, tip x y), got {markers.shape}")
            return markers
    raise DataError(f"{data_dir}: recording {index} not found (looked for {index}.csv and "
                    f"{index}.csv.gz)")


@dataclass(frozen=True)
class Angles:
    """Absolute arm angles and rates per frame, each (frames,)."""

    theta1: np.ndarray
    theta2: np.ndarray
    rate1: np.ndarray
    rate2: np.ndarray

    @property
    def state(self) -> np.ndarray:
        """(frames, 4): theta1, theta2, rate1, rate2."""
        return np.stack([self.theta1, self.theta2, self.rate1, self.rate2], axis=1)


def marker_angles(markers: np.ndarray) -> Angles:
    """Angles from straight down (image y down), unwrapped; rates by a
    Savitzky-Golay derivative."""
    pivot, elbow, tip = markers[:, 0:2], markers[:, 2:4], markers[:, 4:6]

    def angle(a, b):
        d = b - a
        return np.unwrap(np.arctan2(d[:, 0], d[:, 1]))

    t1, t2 = angle(pivot, elbow), angle(elbow, tip)
    window, order = SAVGOL
    rate = [savgol_filter(t, window, order, deriv=1, delta=FRAME) for t in (t1, t2)]
    return Angles(t1, t2, *rate)


def arm_lengths_px(markers: list[np.ndarray]) -> tuple[float, float]:
    """Mean pivot-elbow and elbow-tip marker distances (px)."""
    allm = np.concatenate(markers)
    return (float(np.linalg.norm(allm[:, 2:4] - allm[:, 0:2], axis=1).mean()),
            float(np.linalg.norm(allm[:, 4:6] - allm[:, 2:4], axis=1).mean()))


# -- model -------------------------------------------------------------------------
def scene() -> sp.Scene:
    """Both arms hanging straight down (the pose angles are measured from),
    hinges with viscous damping and dry friction parameters (the model
    without losses holds them at 0, so both models share one compiled
    function)."""
    drag = dict(viscous_damping=1e-3, dry_friction=1e-3)
    return (sp.SceneBuilder("double-pendulum-real", dt=DT, iterations=10)
            .box("upper", size=[WIDTH, WIDTH, 0.2], mass=1.0, position=[0, 0, -0.1])
            .box("lower", size=[WIDTH, WIDTH, 0.2], mass=1.0, position=[0, 0, -0.3])
            .joint("shoulder", "hinge", "world", "upper", anchor=[0, 0, 0], axis=[0, -1, 0],
                   **drag)
            .joint("elbow", "hinge", "upper", "lower", anchor=[0, 0, -0.2], axis=[0, -1, 0],
                   **drag)
            .contacts([])
            .build())


# Variables are scaled to be of order one: length1 in m (the camera scale is
# length1 / the pivot-elbow distance in px), com1 and com2 as fractions of
# length1, mass2 per kg of upper arm, the gravity angle in rad, losses in
# LOSS_UNIT (N m s/rad, N m per kg of upper arm), rates in RATE_UNIT.
SHARED = ("length1", "com1", "com2", "mass2", "gravity_angle")
LOSSES = ("viscous1", "viscous2", "dry1", "dry2")
LOSS_UNIT = 1e-3
RATE_UNIT = 10.0             # rad/s
GRAVITY = 9.81               # m/s^2
BOUNDS = {"length1": (0.02, 3.0), "com1": (0.02, 3.0), "com2": (0.02, 3.0),
          "mass2": (1e-3, 100.0), "gravity_angle": (-2 * np.pi, 2 * np.pi),
          "viscous1": (0.0, 1e3), "viscous2": (0.0, 1e3), "dry1": (0.0, 1e3),
          "dry2": (0.0, 1e3)}
STATE = "state"              # per segment: theta1, theta2, rate1 / RATE_UNIT, rate2 / RATE_UNIT
REGRESSION_SAVGOL = (21, 3)  # window (frames), order for the regression's accelerations


def _regression_rows(a: Angles, losses: bool):
    """Both equations of motion at every frame, linear in the unknowns
    (B, C, D cos phi, D sin phi, E cos phi, E sin phi[, c1, c2, f1, f2]):
    returns (rows (2 F, n), right-hand side (2 F,))."""
    window, order = REGRESSION_SAVGOL
    t1, t2, w1, w2, a1, a2 = (savgol_filter(t, window, order, deriv=k, delta=FRAME)
                              for k in (0, 1, 2) for t in (a.theta1, a.theta2))
    d, rel, z = t1 - t2, w2 - w1, np.zeros_like(t1)
    upper = [np.cos(d) * a2 + np.sin(d) * w2 ** 2, z, np.sin(t1), -np.cos(t1), z, z]
    lower = [np.cos(d) * a1 - np.sin(d) * w1 ** 2, a2, z, z, np.sin(t2), -np.cos(t2)]
    if losses:       # viscous and (smoothed) dry torques at both hinges
        sign = lambda w: np.tanh(w / 0.05)
        upper += [w1, -rel, sign(w1), -sign(rel)]
        lower += [z, rel, z, sign(rel)]
    rows = np.concatenate([np.stack(upper, axis=1), np.stack(lower, axis=1)])
    return rows, np.concatenate([-a1, z])


def regression_start(angles: list[Angles], losses: bool) -> dict:
    """Starting values of the shared variables from the equation error.

    With the upper arm's inertia about the pivot A as the unit, a rigid
    double pendulum's equations of motion (absolute angles, gravity at
    image angle phi)

        A a1 + B (cos(d) a2 + sin(d) w2^2) + D sin(t1 - phi) = losses
        B (cos(d) a1 - sin(d) w1^2) + C a2 + E sin(t2 - phi) = losses

    (d = t1 - t2) are linear in B/A, C/A, D/A, E/A, phi's sine and cosine
    and the losses, given angles, rates and accelerations (Savitzky-Golay).
    One linear least-squares solve; then the uniform boxes hung from their
    hinges that have these ratios: l1 = g B / E, and the upper arm's mass
    as the unit."""
    parts = [_regression_rows(a, losses) for a in angles]
    rows = np.concatenate([r for r, _ in parts])
    rhs = np.concatenate([b for _, b in parts])
    x = np.linalg.lstsq(rows, rhs, rcond=None)[0]
    B, C, Dc, Ds, Ec, Es = x[:6]
    D, E = np.hypot(Dc, Ds), np.hypot(Ec, Es)
    phi = float(np.arctan2(Ds + Es, Dc + Ec))
    g, w2 = GRAVITY, WIDTH ** 2 / 12
    l1 = g * B / E
    # Lower arm (mass m2, centre d2, own inertia about the elbow
    # m2 (4/3 d2^2 + w^2/12)): C / E = (4/3 d2^2 + w^2/12) / (g d2).
    q = C * g / E
    disc = q * q - 4 * (4 / 3) * w2
    if not (l1 > 0 and C > 0 and disc > 0):
        raise DataError(f"{NAME}: the equation-error regression gives no physical double "
                        f"pendulum (B/A={B:.4g}, C/A={C:.4g}, D/A={D:.4g}, E/A={E:.4g}); "
                        "are the markers pivot, elbow, tip?")
    d2 = (q + np.sqrt(disc)) / (8 / 3)
    # With k = A (kg m^2, upper mass 1 kg): m2 = E k / (g d2), d1 = alpha k,
    # and A = 4/3 d1^2 + w^2/12 + m2 l1^2, a quadratic in k (larger root).
    alpha = D / g - E * l1 / (g * d2)
    a_, b_, c_ = 4 / 3 * alpha ** 2, E * l1 ** 2 / (g * d2) - 1.0, w2
    k = (-b_ + np.sqrt(b_ * b_ - 4 * a_ * c_)) / (2 * a_)
    m2, d1 = E * k / (g * d2), alpha * k
    if not (k > 0 and d1 > 0 and m2 > 0):
        raise DataError(f"{NAME}: the equation-error regression gives no physical double "
                        f"pendulum (upper centre {d1:.4g} m, mass ratio {m2:.4g})")
    start = {"length1": l1, "com1": d1 / l1, "com2": d2 / l1, "mass2": m2,
             "gravity_angle": phi}
    loss = x[6:] * k / LOSS_UNIT if losses else np.zeros(4)
    start.update({n: max(float(v), 1e-2) if losses else 0.0 for n, v in zip(LOSSES, loss)})
    return {n: float(v) for n, v in start.items()}


def variables(start: dict, losses: bool, segment_states: np.ndarray) -> list[sysid.Variable]:
    """The fitted variables from `start` (regression_start); segment_states
    (S, 4): theta1, theta2, rate1, rate2 (rad, rad/s) at each segment's
    start. Without `losses` the loss variables are held at 0 (bounds 0, 0)."""
    out = [sysid.Variable(n, (), np.asarray(start[n]), *BOUNDS[n]) for n in SHARED]
    out += [sysid.Variable(n, (), np.asarray(start[n]), *BOUNDS[n]) if losses else
            sysid.Variable(n, (), np.asarray(0.0), 0.0, 0.0) for n in LOSSES]
    scaled = np.asarray(segment_states, float) / np.array([1.0, 1.0, RATE_UNIT, RATE_UNIT])
    return out + [sysid.Variable(STATE, (4,), scaled, per_segment=True)]


def states(values: dict) -> np.ndarray:
    """Per segment theta1, theta2, rate1, rate2 (rad, rad/s) from fitted values."""
    return np.asarray(values[STATE]) * np.array([1.0, 1.0, RATE_UNIT, RATE_UNIT])


def make_derive():
    """derive(variables, base) -> the scene's parameters, batched (B, ...)."""

    def derive(v: dict, base: dict) -> dict:
        l1 = v["length1"]                               # pivot to elbow (m)
        th1, th2 = v[STATE][:, 0], v[STATE][:, 1]
        w1, w2 = v[STATE][:, 2] * RATE_UNIT, v[STATE][:, 3] * RATE_UNIT
        zero = pt.zeros_like(th1)

        def down(th):                                   # (B, 3) unit vector along an arm
            return pt.stack([pt.sin(th), zero, -pt.cos(th)], axis=1)

        def across(th):                                 # d down / d theta
            return pt.stack([pt.cos(th), zero, pt.sin(th)], axis=1)

        def quaternion(th):                             # a turn of theta about -y
            return pt.stack([pt.cos(th / 2), zero, -pt.sin(th / 2), zero], axis=1)

        d1, d2 = v["com1"] * l1, v["com2"] * l1
        elbow = l1[:, None] * down(th1)
        # Uniform boxes hung from their hinges: length 2 x the centre's distance.
        size = lambda d: pt.stack([WIDTH + zero, WIDTH + zero, 2 * d], axis=1)
        phi = v["gravity_angle"] + zero
        params = {
            "upper.position": d1[:, None] * down(th1),
            "upper.quaternion": quaternion(th1),
            "upper.velocity": (d1 * w1)[:, None] * across(th1),
            "upper.angular_velocity": pt.stack([zero, -w1, zero], axis=1),
            "upper.size": size(d1),
            "lower.position": elbow + d2[:, None] * down(th2),
            "lower.quaternion": quaternion(th2),
            "lower.velocity": (l1 * w1)[:, None] * across(th1)
                              + (d2 * w2)[:, None] * across(th2),
            "lower.angular_velocity": pt.stack([zero, -w2, zero], axis=1),
            "lower.size": size(d2),
            "lower.mass": v["mass2"],
            "shoulder.anchor": pt.zeros_like(elbow),
            "elbow.anchor": elbow,
            "world.gravity": GRAVITY * down(phi),
        }
        params.update({"shoulder.viscous_damping": v["viscous1"] * LOSS_UNIT,
                       "elbow.viscous_damping": v["viscous2"] * LOSS_UNIT,
                       "shoulder.dry_friction": v["dry1"] * LOSS_UNIT,
                       "elbow.dry_friction": v["dry2"] * LOSS_UNIT})
        return params

    return derive


ANGLE_COLUMNS = ("shoulder.angle", "elbow.angle")   # upper absolute, lower relative


def angle_recording(model: sp.Scene, angles: Angles, source: str, every: int = OBSERVE_EVERY):
    """Observations: the hinge angles (upper absolute, lower relative)
    every `every` frames."""
    rows = np.arange(0, len(angles.theta1), every)
    return recording_from_arrays(model, rows * FRAME, dict(zip(ANGLE_COLUMNS, (
        angles.theta1[rows], (angles.theta2 - angles.theta1)[rows]))), source=source)


# -- the experiment ------------------------------------------------------------------
def _segments(recordings, data: sysid.Data, spacing: int):
    """Indices of every `spacing`-th segment of each recording."""
    keep, seen = [], {}
    for k, seg in enumerate(data.segments):
        n = seen.get(seg.recording, 0)
        if n % spacing == 0:
            keep.append(k)
        seen[seg.recording] = n + 1
    return np.asarray(keep)


def fit_model(losses: bool, angles: list[Angles], spacing: int, evaluations: int,
              backend: str, show_progress: bool, uncertainty: bool = True):
    """Fit on the given recordings' angles; returns (FitResult, scene, derive)."""
    model = scene()
    recs = [angle_recording(model, a, f"recording {i}") for i, a in enumerate(angles)]
    data = sysid.segment_data(model, recs, FIT_STEPS)
    keep = _segments(recs, data, spacing)
    starts = np.array([angles[data.segments[k].recording].state[data.segments[k].start
                                                                 // SUBSTEPS]
                       for k in keep])
    derive = make_derive()
    start = regression_start(angles, losses)
    result = sysid.fit_data(model, data.subset(keep), variables(start, losses, starts),
                            derive=derive, derive_key=(NAME,),
                            method=sysid.Method.LEAST_SQUARES, backend=backend, chunk=CHUNK,
                            max_evaluations=evaluations, progress=show_progress,
                            uncertainty=uncertainty)
    return result, model, derive, start


def _windows(n_frames: int, limit: int | None, frames: int) -> np.ndarray:
    starts = np.arange(0, n_frames - frames - 1, WINDOW_SPACING)
    return starts if limit is None else starts[:limit]


def evaluate(result, model, derive, losses, angles: list[Angles], limit,
             backend: str, frames: int = EVAL_FRAMES):
    """Predicted absolute angles (W, frames + 1, 2) and observed ones from
    every window's observed starting state (`limit` windows per recording;
    None: all). frames = FIT_FRAMES reuses the fit's compiled function."""
    steps = frames * SUBSTEPS
    starts, truth = [], []
    for a in angles:
        for w in _windows(len(a.theta1), limit, frames):
            starts.append(a.state[w])
            truth.append(np.stack([a.theta1[w:w + frames + 1],
                                   a.theta2[w:w + frames + 1]], axis=1))
    starts, truth = np.array(starts), np.array(truth)
    shared = {k: v for k, v in result.values.items() if k != STATE}
    values = dict(shared, **{STATE: starts / np.array([1.0, 1.0, RATE_UNIT, RATE_UNIT])})
    cols = tuple(parse_column(model, name, NAME) for name in ANGLE_COLUMNS)
    grid = sysid.Data(cols, tuple(sysid.Segment(0, 0) for _ in starts), steps,
                      np.zeros((len(starts), steps + 1, 2)),
                      np.ones((len(starts), steps + 1, 2)), None)
    pred = sysid.predict(model, grid, values, variables(shared, losses, starts),
                         base=model.parameters(),
                         derive=derive, derive_key=(NAME,),
                         backend=backend, chunk=CHUNK)
    frames = pred[:, ::SUBSTEPS]
    absolute = np.stack([frames[..., 0], frames[..., 0] + frames[..., 1]], axis=-1)
    return absolute, truth, starts


def _wrapped(d):
    return np.arctan2(np.sin(d), np.cos(d))


def horizon_rmse(pred, truth) -> dict:
    """{horizon: RMSE over windows and both angles (rad)} for the horizons
    the windows reach, and the RMSE per frame."""
    err = _wrapped(pred - truth)
    out = {}
    for h in HORIZONS:
        k = int(round(h / FRAME))
        if k >= err.shape[1]:
            continue
        out[h] = float(np.sqrt(np.mean(err[:, k] ** 2)))
    return out, np.sqrt(np.mean(err ** 2, axis=(0, 2)))


def constant_velocity(starts, frames: int) -> np.ndarray:
    t = np.arange(frames + 1) * FRAME
    return np.stack([starts[:, None, 0] + starts[:, None, 2] * t,
                     starts[:, None, 1] + starts[:, None, 3] * t], axis=-1)


def run(quick: bool = False, seed: int = 0, backend: str = "numba", show_progress: bool = True,
        data_dir: str | Path | None = None) -> ExperimentResult:
    cfg = QUICK if quick else FULL
    data_dir = Path(data_dir) if data_dir is not None else DATA_DIR
    start = time.perf_counter()
    fit_markers = [read_markers(data_dir, i) for i in cfg["fit_recordings"]]
    test_markers = [read_markers(data_dir, i) for i in cfg["test_recordings"]]
    lengths_px = arm_lengths_px(fit_markers)
    fit_angles = [marker_angles(m) for m in fit_markers]
    test_angles = [marker_angles(m) for m in test_markers]
    fits, starts_from, rmse, curves, examples = {}, {}, {}, {}, {}
    for losses in progress((True, False), NAME, show_progress):
        key = "damped" if losses else "no_damping"
        # Standard errors for the model reported (the baseline's are not shown).
        result, model, derive, starts_from[key] = fit_model(
            losses, fit_angles, cfg["spacing"], cfg["evaluations"], backend, show_progress,
            uncertainty=losses)
        pred, truth, starts = evaluate(result, model, derive, losses, test_angles,
                                       cfg["windows"], backend)
        fits[key] = result
        rmse[key], curves[key] = horizon_rmse(pred, truth)
        examples[key] = pred[0]
    cv = constant_velocity(starts, EVAL_FRAMES)
    rmse["constant_velocity"], curves["constant_velocity"] = horizon_rmse(cv, truth)
    examples["constant_velocity"], examples["recorded"] = cv[0], truth[0]
    metrics = {f"rmse_{h:g}": rmse["damped"][h] for h in HORIZONS}
    metrics.update({f"constant_velocity_rmse_{h:g}": rmse["constant_velocity"][h]
                    for h in HORIZONS})
    metrics.update({f"no_damping_rmse_{h:g}": rmse["no_damping"][h] for h in HORIZONS})
    metrics["windows"] = int(len(truth))
    metrics["seconds"] = time.perf_counter() - start
    extra = {"fits": {k: f.summary() for k, f in fits.items()},
             "regression_starts": starts_from,
             "arm_lengths_px": list(lengths_px),
             "camera_scale_m_per_px": float(fits["damped"].values["length1"]) / lengths_px[0],
             "arm_lengths_m": [float(fits["damped"].values["length1"]),
                               float(fits["damped"].values["length1"]) * lengths_px[1]
                               / lengths_px[0]],
             "data": str(data_dir), "fit_recordings": list(cfg["fit_recordings"]),
             "test_recordings": list(cfg["test_recordings"])}
    series = {f"rmse_curve_{k}": v for k, v in curves.items()}
    series.update({f"example_{k}": v for k, v in examples.items()})
    series.update({f"fit_cost_{k}": f.history for k, f in fits.items()})
    return ExperimentResult(NAME, quick, seed, metrics, PAPER, series=series, extra=extra)


def report(result: ExperimentResult) -> str:
    m = result.metrics
    rows = [[name] + [f"{m[prefix + f'rmse_{h:g}']:.4f}" for h in HORIZONS]
            for name, prefix in (("model with joint losses", ""),
                                 ("model without joint losses", "no_damping_"),
                                 ("constant velocity", "constant_velocity_"))]
    head = ["predictor"] + [f"RMSE at {h:g} s (rad)" for h in HORIZONS]
    fit = result.extra["fits"]["damped"]
    lines = [table(head, rows),
             f"{m['windows']} windows on recordings {result.extra['test_recordings']}; "
             f"fitted on {result.extra['fit_recordings']}",
             "fitted (with losses): " + ", ".join(
                 f"{k} = {v:.4g} ± {fit['stderr'].get(k, float('nan')):.2g}"
                 if fit["stderr"] else f"{k} = {v:.4g}"
                 for k, v in fit["values"].items() if np.ndim(v) == 0),
             "(com: centres as fractions of the upper arm's length, uniform boxes hung from "
             "their hinges; gravity_angle: gravity's direction in the image, rad from image +y "
             "towards +x; losses in 1e-3 N m s/rad "
             "and N m per kg of upper arm)",
             f"arm lengths {result.extra['arm_lengths_m'][0]:.3f} m, "
             f"{result.extra['arm_lengths_m'][1]:.3f} m",
             f"paper: {result.paper['note']}"]
    return "\n".join(lines)


def plot(result: ExperimentResult, path: str) -> None:
    plt = pyplot()
    s = result.series
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    t = np.arange(EVAL_FRAMES + 1) * FRAME
    for k, label in (("damped", "with joint losses"), ("no_damping", "without losses"),
                     ("constant_velocity", "constant velocity")):
        axes[0].plot(t, s[f"rmse_curve_{k}"], label=label)
    axes[0].set(xlabel="horizon (s)", ylabel="angle RMSE (rad)",
                title="prediction error, held-out recordings")
    axes[0].legend()
    rec = np.asarray(s["example_recorded"])
    for i, ax in enumerate(axes[1:]):
        ax.plot(t, rec[:, i], "k", lw=2, label="recorded")
        for k, label in (("damped", "with joint losses"), ("no_damping", "without losses"),
                         ("constant_velocity", "constant velocity")):
            # Predicted angles come wrapped into (-pi, pi]: unwrap them and
            # start them on the recorded turn.
            y = np.unwrap(np.asarray(s[f"example_{k}"])[:, i])
            y += 2 * np.pi * np.round((rec[0, i] - y[0]) / (2 * np.pi))
            ax.plot(t, y, label=label)
        ax.set(xlabel="time from window start (s)", ylabel=f"theta{i + 1} (rad)",
               title=f"{'upper' if i == 0 else 'lower'} arm, first test window")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
