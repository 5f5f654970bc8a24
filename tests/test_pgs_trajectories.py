"""The paper's solver (`solver.method` "pgs") reproduces stored
trajectories: positions and velocities every 10 steps of 100, on the Numba
backend, for a contact scene, a scene with every joint kind, servos on a
universal joint and the shipped quadruped walking under a held command.

The file was written by the Gauss-Seidel solve before the converged
solve became the default; `python tests/test_pgs_trajectories.py` writes
it afresh (only after a deliberate change to the sweeps' physics)."""

import dataclasses
import pathlib

import numpy as np
import pytest

import symphys as sp
from symphys.scene.elements import SolverMethod

try:
    from tests import scenes
except ImportError:                      # run as a script
    import scenes

STORED = pathlib.Path(__file__).with_name("data") / "pgs_trajectories.npz"
STEPS, EVERY = 100, 10


def _pgs(scene):
    return dataclasses.replace(scene, solver=dataclasses.replace(scene.solver,
                                                                 method=SolverMethod.PGS))


def _cases():
    """name -> (scene, action or None)."""
    quadruped = sp.load_scene("quadruped")
    return {"mixed": (scenes.mixed(), None),
            "gadgets": (scenes.gadgets(), None),
            "wrist": (scenes.wrist(), np.array([0.4, -0.3])),
            "quadruped": (quadruped, 0.3 * np.sin(np.arange(len(quadruped.motors))))}


def _run(scene, action) -> np.ndarray:
    """(STEPS / EVERY + 1, bodies, 18): every 10th packed state."""
    return np.asarray(sp.simulate(_pgs(scene), STEPS, action=action).states)[::EVERY]


@pytest.mark.parametrize("name", ["mixed", "gadgets", "wrist", "quadruped"])
def test_pgs_reproduces_its_stored_trajectory(name):
    scene, action = _cases()[name]
    stored = np.load(STORED)[name]
    got = _run(scene, action)
    assert got.shape == stored.shape
    np.testing.assert_allclose(got, stored, rtol=1e-9, atol=1e-9)


if __name__ == "__main__":
    import os
    os.environ.setdefault("SYMPHYS_LOOPS", "interpreted")      # as the suite runs them
    np.savez_compressed(STORED, **{name: _run(*case) for name, case in _cases().items()})
    print(f"wrote {STORED}")
