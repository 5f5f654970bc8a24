"""`symphys convert ROBOT -o SCENE.json`: a robot from an MJCF or URDF file,
written as a symphys scene file to read, edit and load."""

from __future__ import annotations

import warnings
from pathlib import Path

from symphys.errors import SymphysError, counted
from symphys.mjcf import ROBOT_SUFFIXES, load_mjcf, load_urdf
from symphys.scene.elements import SolverMethod
from symphys.scene.writer import write_scene


def add_parser(sub) -> None:
    p = sub.add_parser("convert", help="write a robot from an MJCF (.xml) or URDF (.urdf) "
                                       "file as a symphys scene file")
    p.add_argument("robot", help="an MJCF (.xml) or URDF (.urdf) file")
    p.add_argument("-o", "--output", help="the scene file to write (default: the robot's "
                                          "name with .json, in the current folder)")
    p.add_argument("--drop-unsupported", action="store_true",
                   help="leave out geoms symphys cannot represent (each is listed) instead "
                        "of refusing the file")
    p.add_argument("--drop-heavy-armature", action="store_true",
                   help="with the Gauss-Seidel solve: leave out armature heavier than it "
                        "holds (each is listed) instead of refusing the file")
    p.add_argument("--solver-method", choices=[m.value for m in SolverMethod],
                   help="the scene's solve (default: newton where the robot needs it: "
                        "heavy armature, or a body with several joints)")
    p.add_argument("--drop-passive-tendons", action="store_true",
                   help="leave out tendons no actuator drives (each is listed, with the "
                        "forces it would have made) instead of refusing the file")
    p.add_argument("--cylinders-as-capsules", action="store_true",
                   help="collide cylinders as capsules of the same radius and axis segment")
    p.set_defaults(func=cli_main)


def cli_main(args) -> int:
    suffix = Path(args.robot).suffix.lower()
    if suffix not in ROBOT_SUFFIXES:
        raise SymphysError(f"{args.robot}: expected an MJCF (.xml) or URDF (.urdf) file")
    load = load_urdf if suffix == ".urdf" else load_mjcf
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scene = load(args.robot, on_unsupported="drop" if args.drop_unsupported else "error",
                     heavy_armature="drop" if args.drop_heavy_armature else "error",
                     passive_tendons="drop" if args.drop_passive_tendons else "error",
                     cylinders_as_capsules=args.cylinders_as_capsules,
                     solver_method=args.solver_method)
    for warning in caught:
        print(warning.message)
    out = Path(args.output or f"{Path(args.robot).stem}.json")
    write_scene(scene, out)
    print(f"{args.robot}: {counted(len(scene.bodies), 'body', 'bodies')}, "
          f"{counted(len(scene.joints), 'joint')}, {counted(len(scene.motors), 'motor')}, "
          f"{counted(len(scene.contacts), 'contact pair')}, "
          f"{'a ground' if scene.ground is not None else 'no ground'}")
    print(f"wrote {out}")
    return 0
