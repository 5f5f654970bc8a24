"""The cases `symphys bench` can run: scenes, batches and backends, and the
quick selection the test suite runs."""

from __future__ import annotations

from symphys.compiler.loops import Loops
from symphys.compiler.rewrites import default_for

STEPS = 200
REPEATS = 5
SCENES = ("ball", "spheres16", "arm", "quadruped", "array")
BATCHES = (1, 16, 128, 1024)
# "numba": loops compiled (`Loops.COMPILED`, the steady state of the default
# `Loops.AUTO`); "numba-interpreted": loops in the Python VM, kernels compiled
# (what `Loops.AUTO` runs until a loop's compile ends).
BACKENDS = ("numba", "numba-interpreted", "jax", "cvm")
ARRAY_BODIES = 16                  # spheres per world in the `array` scene
QUICK_CASES = (("ball", 1, "numba", True), ("spheres16", 64, "numba", True),
               ("array", 64, "numba", True), ("array", 64, "numba", False))
SPHERE_SCENES = ("spheres16",)   # the kernel's scenes (ball.json has rolling friction)


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
