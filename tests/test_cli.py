"""The command line: list, simulate with JSON and plot, clear errors."""

import json
import subprocess
import sys

import pytest

from symphys.cli.main import main


def test_list(capsys):
    """Every shipped scene and experiment on a line of its own, with what it is."""
    from importlib.util import find_spec

    from symphys.experiments import EXPERIMENTS
    from symphys.scene.reader import available_scenes

    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in [*available_scenes(), *EXPERIMENTS]:
        line = next(line for line in lines if line.split()[:1] == [name])
        assert len(line.split()) > 2, line                # a description follows the name
    assert any(line.split()[:2] == ["ball-throw", "A1:"] for line in lines)
    for module, _ in EXPERIMENTS.values():
        assert find_spec(f"symphys.experiments.{module}") is not None, module


def test_simulate_takes_parameter_overrides(tmp_path, capsys):
    js = tmp_path / "b.json"
    assert main(["simulate", "ball", "--steps", "5", "--param", "ball.velocity=[3,0,5]",
                 "--param", "ball.mass=2", "--json", str(js)]) == 0
    assert capsys.readouterr().out.startswith("ball: 5 steps of 0.01 s")   # the scene's name
    doc = json.loads(js.read_text())
    assert doc["scene"] == "ball"
    assert doc["bodies"]["ball"]["velocity"][0] == [3.0, 0.0, 5.0]


@pytest.mark.parametrize("param, words", [
    ("ball.mass", "expected NAME=VALUE"),
    ("ball.mass=heavy", "must be a number or a list"),
    ("ball.mass=-1", "'ball.mass' must be > 0"),
    ("ball.mas=1", "did you mean 'ball.mass'"),
])
def test_bad_parameter_override_is_one_line(param, words, capsys):
    assert main(["simulate", "ball", "--steps", "5", "--param", param]) == 2
    err = capsys.readouterr().err
    assert err.startswith("symphys: error:") and words in err


def test_backend_without_jax_names_the_extra():
    """Without JAX installed, `--backend jax` and the experiments that run on
    JAX by default stop with one line naming the extra to install."""
    block = "import sys; sys.modules['jax'] = None; from symphys.cli.main import main; "
    for argv in (["simulate", "ball", "--steps", "3", "--backend", "jax"],
                 ["experiment", "suh-pushing", "--quick", "--no-progress"]):
        out = subprocess.run([sys.executable, "-c", block + f"sys.exit(main({argv!r}))"],
                             capture_output=True, text=True)
        assert out.returncode == 2, out.stderr
        assert "backend 'jax' needs JAX: pip install 'symphys[jax]'" in out.stderr
        assert "Traceback" not in out.stderr


def test_simulate_writes_json_and_plot(tmp_path, capsys):
    js, png = tmp_path / "b.json", tmp_path / "b.png"
    assert main(["simulate", "ball", "--steps", "50", "--backend", "jax",
                 "--json", str(js), "--plot", str(png)]) == 0
    doc = json.loads(js.read_text())
    assert len(doc["bodies"]["ball"]["position"]) == 51
    assert png.stat().st_size > 1000
    assert "final position" in capsys.readouterr().out


def test_bad_scene_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "symphys-scene/1", "bodies": [{"name": "x", "shape": "cone"}]}')
    out = subprocess.run([sys.executable, "-m", "symphys.cli.main", "simulate", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "symphys: error" in out.stderr and "field 'shape'" in out.stderr
    assert "Traceback" not in out.stderr


def test_experiment_param_reaches_the_scenes_it_reads(tmp_path, monkeypatch, capsys):
    """`experiment --param` gives the scenes an experiment reads new
    defaults, records them in the JSON, and refuses a name no scene has."""
    import types

    from symphys import experiments
    from symphys.experiments.common import ExperimentResult
    from symphys.scene.reader import load_scene

    def run(quick, seed, show_progress):
        scene = load_scene("ball")
        return ExperimentResult("fake", quick, seed, {"mass": scene.bodies[0].mass}, {})

    fake = types.SimpleNamespace(run=run, report=lambda r: f"mass {r.metrics['mass']}",
                                 plot=lambda r, path: None)
    monkeypatch.setattr(experiments, "get", lambda name: fake)
    js = tmp_path / "fake.json"
    assert main(["experiment", "fake", "--param", "ball.mass=3.5", "--json", str(js)]) == 0
    assert "mass 3.5" in capsys.readouterr().out
    doc = json.loads(js.read_text())
    assert doc["metrics"]["mass"] == 3.5 and doc["parameters"] == {"ball.mass": 3.5}
    assert main(["experiment", "fake", "--param", "wall.mass=2", "--json", str(js)]) == 2
    err = capsys.readouterr().err
    assert "wall.mass" in err and "no scene this run read" in err and "ball" in err
