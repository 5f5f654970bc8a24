"""Quick versions of the experiments run end to end and reach their goals."""

import json

import pytest

from symphys.cli import main


def test_ball_throw_quick(tmp_path, capsys):
    js, png = tmp_path / "ball.json", tmp_path / "ball.png"
    assert main(["experiment", "ball-throw", "--quick", "--no-progress", "--backend", "jax",
                 "--json", str(js), "--plot", str(png)]) == 0
    doc = json.loads(js.read_text())
    assert set(doc["gradient"]) >= {"iterations", "evaluations", "seconds",
                                    "compile_seconds", "final_loss", "final_position"}
    assert set(doc["cmaes"]) >= set(doc["gradient"]) - {"velocity", "angular_velocity"}
    g, c = doc["gradient"], doc["cmaes"]
    # Gradient descent (the paper's Adam schedule) reaches the goal within the
    # paper's 88 iterations; CMA-ES reaches it from every seed, using more
    # simulations than gradient descent.
    losses = doc["series"]["gradient_loss"]
    assert losses[0] == pytest.approx(10.0, abs=1e-6)
    assert g["final_loss"] < 0.02 and g["iterations"] <= 88
    assert abs(g["final_position"][0] - 10.0) < 0.02
    assert c["final_loss"] < 0.02 and doc["metrics"]["cmaes_all_seeds_reached_goal"]
    assert min(c["evaluations_per_seed"]) > 5 * g["evaluations"]
    # Without rolling friction the ball never comes to rest: no convergence.
    assert doc["gradient_no_rolling_friction"]["final_loss"] > 1.0
    assert doc["paper"]["gradient"]["iterations"] == 88
    assert png.stat().st_size > 1000
    assert "gradient (paper)" in capsys.readouterr().out
