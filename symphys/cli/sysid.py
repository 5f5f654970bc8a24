"""`symphys sysid SCENE DATA... --fit NAME,...`: fit a scene to recordings.

Prints the fitted values with their standard errors and the RMS residual
per column; `--json` writes `FitResult.summary()` (plus the command line),
`--plot` the observed columns against the predictions before and after the
fit (first segments)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from symphys.errors import ParameterError, counted


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _pairs(text: str | None, what: str, parse) -> dict:
    """{name: parse(value)} from "a=1,b=2"."""
    out = {}
    for item in _names(text):
        name, sep, value = item.partition("=")
        if not sep:
            raise ParameterError(f"--{what}: expected NAME=VALUE, got {item!r}")
        out[name.strip()] = parse(value, name)
    return out


def _number(value: str, name: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ParameterError(f"{name}: not a number: {value!r}") from None


def _interval(value: str, name: str) -> tuple[float, float]:
    lo, sep, hi = value.partition(":")
    if not sep:
        raise ParameterError(f"--bounds {name}: expected LOW:HIGH, got {value!r}")
    return (_number(lo, name) if lo.strip() else -np.inf,
            _number(hi, name) if hi.strip() else np.inf)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("sysid", help="fit scene parameters to recorded trajectories")
    p.add_argument("scene", help="a scene name (see `symphys list`), a scene file (.json) "
                                 "or a robot file (MJCF .xml, URDF .urdf)")
    p.add_argument("data", nargs="+", help="CSV recordings (format: symphys.sysid.recordings)")
    p.add_argument("--fit", required=True, help="parameters shared by all segments, "
                   "comma-separated; NAME[i] fits one component")
    p.add_argument("--segment-fit", help="parameters fitted per segment (initial states)")
    p.add_argument("--segment-steps", type=int,
                   help="cut recordings into segments of this many steps (multiple shooting)")
    p.add_argument("--noise", help="COLUMN=SIGMA,... (default 1 in the column's units)")
    p.add_argument("--bounds", help="NAME=LOW:HIGH,... (empty side: unbounded)")
    p.add_argument("--method", default="least_squares", choices=["least_squares", "lbfgs"],
                   help="optimiser (default least_squares: SciPy's, on the residuals' Jacobian)")
    p.add_argument("--max-evaluations", type=int, default=100,
                   help="most residual evaluations (default 100)")
    p.add_argument("--backend", default="numba", choices=["numba", "jax", "cvm"],
                   help="compiler (default numba)")
    p.add_argument("--chunk", type=int, default=256, help="worlds per compiled call")
    p.add_argument("--json", help="write the fit (values, uncertainties, residuals) here")
    p.add_argument("--plot", help="write recorded against fitted trajectories here as PNG")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cli_main)


def cli_main(args) -> int:
    from symphys import sysid
    from symphys.experiments.common import table
    from symphys.mjcf import load_any
    from symphys.scene.params import resolve_values
    from symphys.sysid.recordings import read_recording

    scene = load_any(args.scene)
    recordings = [read_recording(path, scene) for path in args.data]
    fit_names, segment_names = _names(args.fit), _names(args.segment_fit)
    bounds = _pairs(args.bounds, "bounds", _interval)
    noise = _pairs(args.noise, "noise", _number)
    result = sysid.fit(scene, recordings, fit_names, segment_fit=segment_names,
                       segment_steps=args.segment_steps, bounds=bounds, noise=noise,
                       method=args.method, backend=args.backend, chunk=args.chunk,
                       max_evaluations=args.max_evaluations, progress=not args.no_progress)
    base, _ = resolve_values(scene, None)
    start = {v.name: v.initial for v in sysid.scene_variables(scene, fit_names, base)}
    rows = [[name, np.array2string(np.asarray(start[name]), precision=5),
             np.array2string(np.asarray(result.values[name]), precision=5),
             np.array2string(np.asarray(result.stderr[name]), precision=2)]
            for name in fit_names]
    print(f"{scene.name}: {counted(len(recordings), 'recording')}, "
          f"{counted(result.n_residuals, 'residual')}, "
          f"{counted(result.n_parameters, 'parameter')}; {result.method}, "
          f"{counted(result.evaluations, 'evaluation')}, {counted(result.jacobians, 'Jacobian')}, "
          f"{result.seconds:.1f} s")
    print(table(["parameter", "start", "fitted", "std. error"], rows))
    print("RMS residual per column: " + ", ".join(f"{k} {v:.3g}"
                                                   for k, v in result.rms.items()))
    print(f"cost {result.initial_cost:.6g} -> {result.cost:.6g} ({result.message})")
    if args.json:
        doc = dict(result.summary(), scene=scene.name, data=list(args.data), fit=fit_names,
                   segment_fit=segment_names)
        doc["segment_values"] = {k: np.asarray(result.values[k]).tolist()
                                 for k in segment_names}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=1))
        print(f"wrote {args.json}")
    if args.plot:
        _plot(scene, recordings, args, result, fit_names, segment_names, base, noise)
        print(f"wrote {args.plot}")
    return 0


def _plot(scene, recordings, args, result, fit_names, segment_names, base, noise) -> None:
    """Observed columns against the predictions from the start and the fit."""
    from symphys import sysid
    from symphys.experiments.common import pyplot

    data = sysid.segment_data(scene, recordings, args.segment_steps, noise)
    shown = min(len(data.segments), 4)
    keep = np.arange(shown)
    data = data.subset(keep)
    variables = (sysid.scene_variables(scene, fit_names, base)
                 + sysid.scene_variables(scene, segment_names, base, per_segment=True,
                                         segments=shown))
    fitted = {k: (np.asarray(v)[keep] if k in segment_names else v)
              for k, v in result.values.items()}
    start = {v.name: v.initial for v in variables}
    curves = [sysid.predict(scene, data, values, variables, base=base, backend=args.backend,
                            chunk=args.chunk) for values in (start, fitted)]
    plt = pyplot()
    k = len(data.columns)
    fig, axes = plt.subplots(1, k, figsize=(4 * k, 3.5), squeeze=False)
    t = np.arange(data.steps + 1) * scene.dt
    for c, (ax, col) in enumerate(zip(axes[0], data.columns)):
        for s, seg in enumerate(data.segments):
            offset = seg.start * scene.dt
            seen = data.weights[s, :, c] > 0
            ax.plot(t[seen] + offset, data.observed[s, seen, c], "k.", ms=3,
                    label="recorded" if s == 0 else None)
            ax.plot(t + offset, curves[0][s, :, c], "C1--", label="start" if s == 0 else None)
            ax.plot(t + offset, curves[1][s, :, c], "C0", label="fitted" if s == 0 else None)
        ax.set(xlabel="time (s)", title=col.name)
    axes[0][0].legend()
    fig.tight_layout()
    Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=110)
    plt.close(fig)


__all__ = ["add_parser", "cli_main"]
