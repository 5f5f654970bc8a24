"""The cases `symphys bench` can run: scenes, batches and backends, and the
quick selection the test suite runs."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

from symphys.compiler.loops import Loops
from symphys.compiler.rewrites import default_for
from symphys.errors import SymphysError
from symphys.mjcf import load_mjcf
from symphys.scene.reader import load_scene
from symphys.scene.scene import Scene

STEPS = 200
REPEATS = 5
# Robots read from the MJCF files other packages ship: bench name ->
# (package, file in it). MuJoCo runs the very same file beside symphys.
# symphys reads them with Gauss-Seidel, without the armature it cannot hold
# (`mjcf.joints.ARMATURE_LIMIT`, heavy_armature="drop");
# MuJoCo runs the file as it is.
ROBOT_FILES = {"ant": ("gymnasium", "envs/mujoco/assets/ant.xml")}
SCENES = ("ball", "spheres16", "arm", "quadruped", "array", *ROBOT_FILES)
BATCHES = (1, 16, 128, 1024)
# "numba": loops compiled (`Loops.COMPILED`, the steady state of the default
# `Loops.AUTO`); "numba-interpreted": loops in the Python VM, kernels compiled
# (what `Loops.AUTO` runs until a loop's compile ends).
BACKENDS = ("numba", "numba-interpreted", "jax", "cvm")
ARRAY_BODIES = 16                  # spheres per world in the `array` scene
QUICK_CASES = (("ball", 1, "numba", True), ("spheres16", 64, "numba", True),
               ("array", 64, "numba", True), ("array", 64, "numba", False))
SPHERE_SCENES = ("spheres16",)   # the kernel's scenes (ball.json has rolling friction)


def robot_file(name: str) -> Path | None:
    """The MJCF file of a bench robot (`ROBOT_FILES`), None for a scene."""
    if name not in ROBOT_FILES:
        return None
    package, inside = ROBOT_FILES[name]
    try:
        module = importlib.import_module(package)
    except ImportError:
        raise SymphysError(f"bench scene {name!r} is {package}'s {inside}: "
                           f"pip install {package}") from None
    return Path(module.__file__).parent / inside


def bench_scene(name: str) -> Scene:
    """A bench scene by name: a shipped scene, or a robot file read with
    `load_mjcf`."""
    path = robot_file(name)
    if path is None:
        return load_scene(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # the armature left out (documented)
        return load_mjcf(path, heavy_armature="drop")


def engine(bench_backend: str) -> tuple:
    """(symphys backend, `Loops`: how its loops run) of a bench backend name."""
    backend, _, kind = bench_backend.partition("-")
    return backend, Loops(kind or Loops.COMPILED.value)


def select_cases(quick: bool, scenes=None, batches=None, backends=None,
                 rewrites=("default",)) -> list[tuple]:
    """(scene, batch, backend, rewrites_on) cases to run; a rewrites setting
    is "default" (the backend's: `rewrites.default_for`), "on" or "off"."""
    if quick and not (scenes or batches or backends):
        return list(QUICK_CASES)
    cases = []
    for s in scenes or SCENES:
        for b in batches or BATCHES:
            for k in backends or BACKENDS:
                for r in rewrites:
                    case = (s, b, k, default_for(engine(k)[0]) if r == "default"
                            else r == "on")
                    if case not in cases:
                        cases.append(case)
    return cases
