"""`symphys export SCENE --steps N --out FOLDER`: a scene's compiled function
written to a folder (`symphys.compiler.export.write`)."""

from __future__ import annotations

import numpy as np

from symphys.api import _check_steps, resolve_action, simulate_function, value_and_grad_function
from symphys.compiler.export.manifest import MANIFEST
from symphys.compiler.export.read import read_manifest
from symphys.compiler.export.write import export
from symphys.errors import ParameterError, counted
from symphys.mjcf import load_any
from symphys.scene.params import check_names, resolve_values

# The simulate function's one output: (steps + 1, B, bodies, 18), the last
# axis position xyz, rotation (row-major), velocity xyz, angular velocity xyz.
SIMULATE_OUTPUT_NAMES = ("states",)


def final_position_loss(traj):
    """The `--gradient` loss: the sum over bodies (and worlds) of the squared
    norm of each body's final position."""
    total = 0.0
    for position in traj.position.values():
        final = position[:, -1] if traj.batched else position[-1]
        total = total + (final ** 2).sum()
    return total


def add_parser(subparsers) -> None:
    """Register `symphys export` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "export", help="write a scene's compiled function to a folder (compiled/README.md)")
    p.add_argument("scene", help="a scene name (see `symphys list`), a scene file (.json) "
                                 "or a robot file (MJCF .xml, URDF .urdf)")
    p.add_argument("--steps", type=int, required=True,
                   help="steps of the example run (numba, cvm: an input, any count "
                        "runs; jax: fixed)")
    p.add_argument("--backend", default="numba", choices=["numba", "jax", "cvm"],
                   help="compiler (default numba)")
    p.add_argument("--batch", type=int, default=None,
                   help="B worlds: every parameter gets a leading axis of length B "
                        "(numba and cvm then take any B; the example uses this one)")
    p.add_argument("--gradient", metavar="WRT,...", default=None,
                   help="export (loss, gradients in these parameters) instead of the "
                        "trajectory; loss: sum of squared final positions of every body")
    p.add_argument("--out", required=True, help="the folder to write, e.g. compiled/NAME")
    p.add_argument("--description", default="", help="free text stored in the manifest")
    p.set_defaults(func=cli_main)


def cli_main(args) -> int:
    """`symphys export`: the scene's simulate function (or, with --gradient,
    its value and gradient of `final_position_loss`), exported with the
    scene's default parameters as the example."""
    scene = load_any(args.scene)
    steps = _check_steps(args.steps)
    values, _ = resolve_values(scene, None)
    batch = args.batch
    if batch is not None:
        if batch < 1:
            raise ParameterError(f"--batch must be a positive integer, got {batch}")
        values = {k: np.repeat(np.asarray(v)[None], batch, axis=0) for k, v in values.items()}
    batched = tuple(values) if batch is not None else ()
    action, _, _ = resolve_action(scene, None, batch)
    extra = [] if action is None else [action]
    meta = {"scene": scene.name, "steps": steps, "batch": batch}
    if args.gradient:
        wrt = [w.strip() for w in args.gradient.split(",") if w.strip()]
        check_names(scene, [n for n in wrt if not (n == "action" and scene.motors)],
                    "--gradient")
        fn = value_and_grad_function(scene, steps, final_position_loss, wrt, batched,
                                     args.backend, batch=batch)
        example = [*values.values(), *extra]
        names = ["loss", *(f"grad.{n}" for n in wrt)]
        meta.update(function="value_and_grad", wrt=wrt,
                    loss="sum over bodies of |final position|^2")
    else:
        fn = simulate_function(scene, steps, batched, args.backend, batch=batch)
        example = [np.int64(steps), *values.values(), *extra]
        names = list(SIMULATE_OUTPUT_NAMES)
        meta.update(function="simulate",
                    outputs="states (steps + 1, B, bodies, 18): position xyz, rotation "
                            "row-major, velocity xyz, angular velocity xyz")
    path = export(fn, args.out, scene=scene, example_inputs=example, output_names=names,
                  description=args.description, metadata=meta)
    manifest = read_manifest(path)
    print(f"wrote {path}: {meta['function']} of {scene.name} on {args.backend}, "
          f"{counted(len(manifest.inputs), 'input')}, "
          f"{counted(len(manifest.outputs), 'output')} "
          f"({', '.join(f.file for f in manifest.files)}, {MANIFEST})")
    return 0
