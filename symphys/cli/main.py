"""The `symphys` command line. Every argument parser of symphys is in this
package (`sysid`, `export` and `convert` have modules of their own).

Each command imports what it runs when it runs, so that `symphys list` and
`--help` start in under half a second (the engine brings PyTensor, Numba
and JAX in).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from symphys.errors import ParameterError, SimulationWarning, SymphysError, counted
from symphys.scale.executors import RAY_ADDRESS_VARIABLE

DESCRIPTION = """\
symphys: a differentiable rigid-body physics engine. Simulate a scene or a
robot (MJCF or URDF file), run the experiments of Degrave et al. (2016) and
Suh et al. (2022), fit scene parameters to recordings, export compiled
functions, and benchmark. The first run compiles the physics kernels (about a
minute, once per machine); progress goes to stderr."""

EPILOG = """\
examples:
  symphys list                                  shipped scenes, robots and experiments
  symphys simulate ball --steps 500 --plot ball.png
  symphys simulate ball --param ball.velocity=[3,0,5] --json ball.json
  symphys simulate cart_double_pendulum.xml     a robot file (shipped, or any path)
  symphys experiment ball-throw                 the main experiment (about a minute)
  symphys experiment ball-throw --quick --no-progress
  symphys convert two_link_arm.urdf -o arm.json
  symphys COMMAND --help                        a command's options

A run that blows up (NaN, or a speed above 1e6 m/s) prints a warning;
`simulate --strict` makes it an error. Errors print one line
`symphys: error: ...` and exit with status 2. Documentation: README.md
and docs/ in the source tree."""


def _cmd_list(args) -> int:
    from symphys.experiments import EXPERIMENTS
    from symphys.mjcf import ROBOTS_DIR, shipped_robots
    from symphys.scene.reader import available_scenes, scene_summary, scenes_dir

    names = available_scenes()
    robots = shipped_robots()
    width = max(map(len, [*names, *robots, *EXPERIMENTS]))
    print(f"scenes ({scenes_dir()}):")
    for name in names:
        print(f"  {name:<{width}}  {scene_summary(name)}")
    print(f"robot files ({ROBOTS_DIR}; a command or sp.load_mjcf/load_urdf takes the name):")
    for name in robots:
        print(f"  {name:<{width}}  {_robot_summary(ROBOTS_DIR / name)}")
    print("experiments (symphys experiment NAME [--quick]):")
    for name, (_, summary) in EXPERIMENTS.items():
        print(f"  {name:<{width}}  {summary}")
    return 0


def _robot_summary(path: Path) -> str:
    """The first line of a robot file's first XML comment."""
    text = path.read_text()
    start = text.find("<!--")
    return text[start + 4:].splitlines()[0].strip() if start >= 0 else ""


def _cmd_simulate(args) -> int:
    from symphys.api import simulate
    from symphys.experiments.common import table
    from symphys.mjcf import load_any

    scene = load_any(args.scene)
    params = parse_params(args.param)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", SimulationWarning)
        traj = simulate(scene, args.steps, params=params or None, backend=args.backend,
                        strict=args.strict)
    seconds = time.perf_counter() - start
    for warning in said:
        print(f"symphys: warning: {warning.message}", file=sys.stderr)
    rows = [[name, np.array2string(traj.position[name][-1], precision=3),
             np.array2string(traj.velocity[name][-1], precision=3)]
            for name in scene.body_names]
    print(f"{scene.name}: {counted(args.steps, 'step')} of {scene.dt} s on {args.backend} "
          f"({seconds:.1f} s including compilation)")
    print(table(["body", "final position", "final velocity"], rows))
    if args.json:
        doc = {"scene": scene.name, "steps": args.steps, "dt": scene.dt,
               "time": traj.time.tolist(),
               "bodies": {n: {"position": traj.position[n].tolist(),
                              "velocity": traj.velocity[n].tolist(),
                              "angular_velocity": traj.angular_velocity[n].tolist()}
                          for n in scene.body_names}}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc))
        print(f"wrote {args.json}")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        for n in scene.body_names:
            ax1.plot(traj.time, traj.position[n][:, 2], label=n)
            ax2.plot(traj.position[n][:, 0], traj.position[n][:, 2], label=n)
        ax1.set_xlabel("time (s)"); ax1.set_ylabel("height z (m)")
        ax2.set_xlabel("x (m)"); ax2.set_ylabel("z (m)")
        ax1.legend(); fig.suptitle(scene.name); fig.tight_layout()
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")
    return 0


def parse_params(items) -> dict:
    """{name: value} from `--param NAME=VALUE` options; VALUE is a number or
    a JSON list such as [3,0,5]."""
    params = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise ParameterError(f"--param {item!r}: expected NAME=VALUE, e.g. ball.mass=2 "
                                 f"or ball.velocity=[3,0,5]")
        try:
            params[name.strip()] = json.loads(text)
        except json.JSONDecodeError:
            raise ParameterError(f"--param {item!r}: the value must be a number or a list "
                                 f"such as [3,0,5], got {text!r}") from None
    return params


def _cmd_experiment(args) -> int:
    from symphys import experiments
    from symphys.scene.reader import overriding

    module = experiments.get(args.name)
    # Without --backend each experiment runs on its own default.
    chosen = {} if args.backend is None else {"backend": args.backend}
    if args.backend is not None and "backend" not in inspect.signature(module.run).parameters:
        raise SystemExit(f"symphys experiment {args.name}: runs no simulation, so it takes "
                         f"no --backend")
    if args.checkpoint:
        if "checkpoint" not in inspect.signature(module.run).parameters:
            raise SystemExit(f"symphys experiment {args.name}: --checkpoint is not supported "
                             f"by this experiment")
        chosen["checkpoint"] = args.checkpoint
    if args.data:
        if "data_dir" not in inspect.signature(module.run).parameters:
            raise SystemExit(f"symphys experiment {args.name}: reads no recordings, so it "
                             f"takes no --data")
        chosen["data_dir"] = args.data
    address = args.ray or os.environ.get(RAY_ADDRESS_VARIABLE) or None
    if address:
        if "executor" not in inspect.signature(module.run).parameters:
            if args.ray:
                raise SystemExit(f"symphys experiment {args.name}: evaluates no populations, "
                                 f"so it takes no --ray (ball-throw, arm-fixed and suh-ball-wall do)")
        else:
            from symphys.scale import RayCluster
            chosen["executor"] = RayCluster(address)
    params = parse_params(args.param)
    with overriding(params):
        result = module.run(quick=args.quick, seed=args.seed,
                            show_progress=not args.no_progress, **chosen)
    if params:
        print("scene parameters set: " + ", ".join(f"{k}={v}" for k, v in params.items()))
        result = dataclasses.replace(result, extra={**result.extra, "parameters": params})
    print(module.report(result))
    if args.quick:
        print("(a quick run: the paper's numbers and targets are for full runs; "
              "drop --quick for one)")
    json_path = args.json or f"results/{args.name}.json"
    # Without --plot the PNG goes beside the JSON.
    plot_path = args.plot or str(Path(json_path).with_suffix(".png"))
    result.save(json_path)
    Path(plot_path).parent.mkdir(parents=True, exist_ok=True)
    module.plot(result, plot_path)
    print(f"wrote {json_path} and {plot_path}")
    return 0


def _cmd_bench(args) -> int:
    from symphys.bench import runner

    runner.main(json_path=args.json, quick=args.quick, backends=args.backends,
               scenes=args.scenes, batches=args.batches, rewrites=args.rewrites,
               resume=args.resume, peers=not args.no_peers, plot_path=args.plot,
               report_only=args.report, merge=tuple(args.merge or ()), camera=args.camera)
    return 0


def _cmd_bench_gpu(args) -> int:
    from symphys.bench import gpu

    batches = _integers(args.batches, "--batches")
    gpu.main(scene=args.scene, batches=batches, steps=args.steps, json_path=args.json)
    return 0


def _cmd_bench_scale(args) -> int:
    from symphys.bench import scale

    scale.main(json_path=args.json, plot_path=args.plot,
               populations=_integers(args.populations, "--populations"))
    return 0


def _cmd_bench_solver(args) -> int:
    from symphys.bench import solver

    solver.main(json_path=args.json, plot_path=args.plot, steps=args.steps)
    return 0


def _integers(text: str, option: str) -> list[int]:
    try:
        values = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise ParameterError(f"{option} must be comma-separated integers, got {text!r}") \
            from None
    if not values or min(values) < 1:
        raise ParameterError(f"{option} must be positive integers, got {text!r}")
    return values


def _cmd_figure(args) -> int:
    from symphys.experiments import suh_figure

    drawn, missing = suh_figure.combined(args.dir, args.out)
    print(f"wrote {args.out}: {len(drawn)} panels"
          + (f"; no results yet for {', '.join(missing)}" if missing else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="symphys", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="shipped scenes, robot files and experiments, one a line"
                   ).set_defaults(func=_cmd_list)

    p = sub.add_parser("simulate", help="simulate a scene or robot and print each body's "
                       "final position and velocity")
    p.add_argument("scene", help="a scene name (see `symphys list`), a scene file (.json) "
                                 "or a robot file (MJCF .xml, URDF .urdf)")
    p.add_argument("--steps", type=int, default=500, help="time steps to run (default 500)")
    p.add_argument("--backend", default="numba", choices=["numba", "jax", "cvm"],
                   help="compiler (default numba)")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="override a parameter, e.g. ball.mass=2 or ball.velocity=[3,0,5] "
                        "(repeatable; an unknown name lists the valid ones)")
    p.add_argument("--json", help="write the trajectory here as JSON")
    p.add_argument("--plot", help="write heights and paths here as PNG")
    p.add_argument("--strict", action="store_true",
                   help="a run that blows up (a non-finite state, a speed above 1e6 m/s or "
                        "a position beyond 1e6 m) is an error (exit 2) instead of a warning")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser("experiment", help="run one of the papers' experiments and print it "
                       "beside the paper's numbers (`symphys list` names them)")
    p.add_argument("name", help="an experiment (see `symphys list`)")
    p.add_argument("--quick", action="store_true",
                   help="a small, fast version (the paper's targets apply to full runs)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--backend", choices=["numba", "jax", "cvm"],
                   help="default: the experiment's own (numba; jax for suh-friction and "
                   "suh-pushing, whose penalty contacts and friction cone the kernels lack)")
    p.add_argument("--json", help="default results/NAME.json")
    p.add_argument("--plot", help="default: beside the JSON (results/NAME.png)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--checkpoint", help="save the run here after every evaluation and resume "
                   "from it when it exists (quadruped-gait, quadruped-speed; "
                   "pendulum-camera keeps its distilled controller there)")
    p.add_argument("--data", help="a folder of other recordings (double-pendulum-sysid)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="evaluate populations on this Ray cluster (host:port, "
                        "ray://host:port, auto, or local to start one here; default: "
                        f"${RAY_ADDRESS_VARIABLE}, else in this process): CMA-ES in "
                        "ball-throw and arm-fixed, estimator samples in suh-ball-wall")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a new default for a parameter of the scenes the experiment reads, "
                        "e.g. ground.friction=0.5 (repeatable; a name no scene has is an "
                        "error)")
    p.set_defaults(func=_cmd_experiment)

    p = sub.add_parser("figure", help="draw the Suh et al. experiments' results in one "
                       "figure")
    p.add_argument("which", choices=["suh"], help="suh: the Suh et al. experiments (B)")
    p.add_argument("--dir", default="docs", help="folder of the suh-*.json files")
    p.add_argument("--out", default="docs/suh-combined.png", help="the PNG to write")
    p.set_defaults(func=_cmd_figure)

    p = sub.add_parser("bench-gpu", help="world-steps per second, forward and gradient, "
                       "at large batches on the device JAX picks (a GPU where present)")
    p.add_argument("--scene", default="quadruped", help="a scene (default quadruped)")
    p.add_argument("--batches", default="1024,4096,16384",
                   help="comma-separated world counts (default 1024,4096,16384)")
    p.add_argument("--steps", type=int, default=200, help="steps per rollout (default 200)")
    p.add_argument("--json", default="results/gpu_bench.json", help="results file")
    p.set_defaults(func=_cmd_bench_gpu)

    p = sub.add_parser("bench-scale", help="time CMA-ES generations in this process and on a "
                       "local Ray cluster of 1 and 2 workers")
    p.add_argument("--populations", default="16,128,1024",
                   help="comma-separated population sizes (default 16,128,1024)")
    p.add_argument("--json", default="results/bench-scale.json", help="results file")
    p.add_argument("--plot", default=None, help="PNG path (default: beside the JSON)")
    p.set_defaults(func=_cmd_bench_scale)

    p = sub.add_parser("bench-solver", help="the solver methods' convergence and cost on the "
                       "quadruped and the ant, and robots held against MuJoCo")
    p.add_argument("--steps", type=int, default=300, help="steps of the quadruped's gait")
    p.add_argument("--json", default="results/bench-solver.json", help="results file")
    p.add_argument("--plot", default=None, help="PNG path (default: beside the JSON)")
    p.set_defaults(func=_cmd_bench_solver)

    p = sub.add_parser("bench", help="time symphys against MuJoCo and a hand-written kernel "
                       "(hours in full; --quick: minutes)")
    p.add_argument("--json", default="results/bench.json", help="results file (and resume point)")
    p.add_argument("--plot", default=None, help="PNG path (default: beside the JSON)")
    p.add_argument("--quick", action="store_true", help="four small cases")
    p.add_argument("--scenes", default=None,
                   help="comma-separated, from ball,spheres16,arm,quadruped,array (default all)")
    p.add_argument("--batches", default=None, help="comma-separated (default 1,16,128,1024)")
    p.add_argument("--backends", default=None, help="comma-separated (default numba,numba-interpreted,jax,cvm)")
    p.add_argument("--rewrites", default="default",
                   help="default (numba, cvm: on; jax: off), on, off, or a list such as "
                        "on,off: with and without symphys' rewrites")
    p.add_argument("--resume", action="store_true",
                   help="keep the cases already in --json and run the rest")
    p.add_argument("--no-peers", action="store_true", help="skip MuJoCo and the kernel")
    p.add_argument("--report", action="store_true",
                   help="run nothing: print the tables and redraw the plot from --json")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="join these bench JSONs (parts run side by side) into --json; "
                        "runs nothing")
    p.add_argument("--camera", choices=["on", "off", "only"], default=None,
                   help="the camera cases (ms per 288x96 image, numba and jax, batch 1 "
                        "and 16, hard and soft edges): on (default), off (default with "
                        "--quick), only")
    p.set_defaults(func=_cmd_bench)
    from symphys.cli.convert import add_parser as add_convert_parser
    from symphys.cli.export import add_parser as add_export_parser
    from symphys.cli.sysid import add_parser as add_sysid_parser
    add_sysid_parser(sub)
    add_export_parser(sub)
    add_convert_parser(sub)
    for command in sub.choices.values():
        if "--no-progress" not in command._option_string_actions:
            command.add_argument("--no-progress", action="store_true",
                                 help="no progress bars or progress lines on stderr "
                                      "(warnings and errors still print)")
    return parser


@contextlib.contextmanager
def _progress_shown(shown: bool):
    """Progress off (`symphys.progress`, worker processes included) while
    the command runs, when not `shown`."""
    from symphys.progress import VARIABLE

    before = os.environ.get(VARIABLE)
    if not shown:
        os.environ[VARIABLE] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = before


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _progress_shown(not args.no_progress):
            return args.func(args)
    except SymphysError as exc:
        print(f"symphys: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
