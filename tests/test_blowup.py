"""Runs that blow up are said, not passed silently (`symphys.loop.blowup`)."""

import numpy as np
import pytest

import symphys as sp
from symphys.cli.main import main
from symphys.errors import SimulationError, SimulationWarning
from symphys.loop.blowup import Field, find_blowup

# A sideways gravity of 3e7 m/s^2 at dt 0.01 s: the ball's speed is
# 3e5 * k m/s after k steps, past 1e6 m/s at step 4 (it is 3e4 m away then).
RUNAWAY = {"world.gravity": [3e7, 0.0, 0.0]}


@pytest.fixture(scope="module")
def ball():
    return sp.load_scene("ball")


def test_simulate_warns_once_naming_step_body_and_field(ball):
    with pytest.warns(SimulationWarning) as caught:
        traj = sp.simulate(ball, 6, params=RUNAWAY)
    # Only symphys' own: a first run's compile may warn too (pytest.warns
    # records every warning of the block).
    said = [w for w in caught if issubclass(w.category, SimulationWarning)]
    assert len(said) == 1
    text = str(said[0].message)
    assert "step 4 " in text and "'ball'" in text and "'velocity'" in text, text
    assert traj.velocity["ball"][4, 0] > 1e6          # the trajectory still comes back


def test_simulate_strict_raises(ball):
    with pytest.raises(SimulationError, match="step 4 .*'ball' field 'velocity'"):
        sp.simulate(ball, 6, params=RUNAWAY, strict=True)


def test_a_sound_run_says_nothing(ball, recwarn):
    sp.simulate(ball, 6)
    assert not [w for w in recwarn if issubclass(w.category, SimulationWarning)]


def test_cli_warns_and_strict_fails(capsys):
    args = ["simulate", "ball", "--steps", "6", "--param", "world.gravity=[3e7,0,0]"]
    assert main(args) == 0
    assert "symphys: warning:" in capsys.readouterr().err
    assert main(args + ["--strict"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("symphys: error:") and "step 4" in err, err


def test_first_non_finite_entry_is_found_in_a_batch():
    """NaN rotation of body 'b' in world 2 at step 3 (world 1 runs away later)."""
    states = np.zeros((6, 3, 2, 18))
    states[3, 2, 1, 5] = np.nan
    states[4:, 1, 0, 0] = 2e6
    found = find_blowup(states, ["a", "b"], dt=0.5)
    assert (found.step, found.time, found.body, found.field, found.world) == (
        3, 1.5, "b", Field.ROTATION, 2)
    assert "not finite" in found.describe() and "world 2" in found.describe()


def test_value_and_grad_names_a_non_finite_gradient_and_where_the_run_blew_up(
        ball, monkeypatch):
    """The gradient function is a stand-in (NaN gradient); the check runs the
    real forward simulation to find the step."""
    from symphys import api

    monkeypatch.setattr(api, "value_and_grad_function", lambda *args, **kwargs: (
        lambda *values: [np.float64(1.0), np.array([np.nan, 0.0, 0.0])]))
    loss = lambda tr: tr.position["ball"][-1].sum()
    with pytest.warns(SimulationWarning, match="gradient of ball.velocity.*step 4 "):
        sp.value_and_grad(ball, 6, loss, wrt=["ball.velocity"], params=RUNAWAY)
    with pytest.raises(SimulationError, match="gradient of ball.velocity"):
        sp.value_and_grad(ball, 6, loss, wrt=["ball.velocity"], params=RUNAWAY, strict=True)
