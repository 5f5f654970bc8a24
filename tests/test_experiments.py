"""Quick versions of the experiments run end to end and reach their goals."""

import json

import pytest

from symphys.cli import main


def test_ball_throw_quick(tmp_path, capsys):
    js, png = tmp_path / "ball.json", tmp_path / "ball.png"
    assert main(["experiment", "ball-throw", "--quick", "--no-progress",
                 "--json", str(js), "--plot", str(png)]) == 0
    doc = json.loads(js.read_text())
    assert set(doc["gradient"]) >= {"iterations", "evaluations", "seconds",
                                    "compile_seconds", "final_loss", "final_position"}
    assert set(doc["cmaes"]) >= set(doc["gradient"]) - {"velocity", "angular_velocity"}
    g, c = doc["gradient"], doc["cmaes"]
    # Gradient descent makes real progress from the initial loss of 10 (ball at
    # rest 10 m from the target). With rolling friction the ball only stops
    # with exact backspin, and the paper's schedule does not reach 0.02 here
    # (README, "Ball throw"); CMA-ES does within its budget.
    losses = doc["series"]["gradient_loss"]
    assert losses[0] == pytest.approx(10.0, abs=1e-6)
    assert min(losses) < 5.0
    assert c["final_loss"] < 0.02
    assert abs(c["final_position"][0] - 10.0) < 0.02
    assert doc["paper"]["gradient"]["iterations"] == 88
    assert png.stat().st_size > 1000
    assert "gradient (paper)" in capsys.readouterr().out
