"""The command line: list, simulate with JSON and plot, clear errors."""

import json
import subprocess
import sys

from symphys.cli import main


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "ball" in out and "ball-throw" in out


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
    out = subprocess.run([sys.executable, "-m", "symphys.cli", "simulate", str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "symphys: error" in out.stderr and "field 'shape'" in out.stderr
    assert "Traceback" not in out.stderr
