"""`symphys bench`: case selection, batched worlds, peers, ratios and the
target verdicts (the timings themselves are not asserted: shared machines
are noisy)."""

import json
import time
from pathlib import Path

import numpy as np
import pytest

from symphys.bench import cases as bench_cases
from symphys.bench import report, runner, timing
from symphys.errors import ParameterError
from symphys.scene.reader import load_scene


def test_jointed_worlds_move_as_a_whole():
    scene = load_scene("quadruped")
    params = runner._batched_params(scene, 5, np.random.default_rng(0))
    offsets = [params[f"{b.name}.position"] - np.asarray(b.position) for b in scene.bodies]
    for off in offsets[1:]:
        np.testing.assert_allclose(off, offsets[0])
    assert np.all(offsets[0][:, 2] >= 0) and np.ptp(offsets[0][:, 0]) > 0


def test_free_bodies_are_jittered_apart():
    scene = load_scene("spheres16")
    params = runner._batched_params(scene, 3, np.random.default_rng(0))
    a, b = (params[f"{n}.position"] - np.asarray(scene.bodies[i].position)
            for i, n in enumerate(scene.body_names[:2]))
    assert not np.allclose(a, b)
    assert runner._batched_params(scene, 1, np.random.default_rng(0)) == {}


def test_case_selection_and_bad_names():
    assert bench_cases.select_cases(True) == list(bench_cases.QUICK_CASES)
    chosen = bench_cases.select_cases(False, ["ball"], [1, 16], ["jax"], ("on", "off"))
    assert chosen == [("ball", 1, "jax", True), ("ball", 1, "jax", False),
                     ("ball", 16, "jax", True), ("ball", 16, "jax", False)]
    # Each backend's default: numba with the rewrites, jax without.
    assert bench_cases.select_cases(False, ["ball"], [1], ["numba", "jax"], ("default", "off")) \
        == [("ball", 1, "numba", True), ("ball", 1, "numba", False), ("ball", 1, "jax", False)]
    with pytest.raises(ParameterError, match="unknown scenes"):
        runner.main(json_path=None, scenes="balll")
    with pytest.raises(ParameterError, match="batches must be integers"):
        runner.main(json_path=None, scenes="ball", batches="1,x")


def _row(scene, batch, backend, on, fwd, grad, cold=50.0, warm=6.0):
    # Compile figures: the forward's (which holds the kernels) and the gradient's.
    return {"scene": scene, "batch": batch, "backend": backend, "rewrites": on,
            "forward_ns_per_world_step": fwd, "gradient_ns_per_world_step": grad,
            "gradient_over_forward": grad / fwd,
            "gradient_s": grad * bench_cases.STEPS * batch * 1e-9,
            "compile_forward_cold_s": cold / 2, "compile_cold_s": cold / 2,
            "compile_forward_warm_s": warm / 2, "compile_warm_s": warm / 2}


def test_ratios_and_target_verdicts():
    rows = [_row("quadruped", 128, "numba", True, 1000.0, 3000.0),
            _row("quadruped", 128, "jax", False, 500.0, 2500.0),
            _row("quadruped", 128, "jax", True, 50.0, 250.0),      # not jax's default
            _row("quadruped", 128, "numba-interpreted", True, 1500.0, 4000.0, 20.0, 1.5),
            # A larger batch's figures are not the target's (the smallest batch's are).
            _row("quadruped", 256, "numba-interpreted", True, 1500.0, 4000.0, 90.0, 9.0),
            _row("array", 64, "numba", True, 100.0, 900.0),
            _row("array", 64, "numba", False, 400.0, 1800.0)]
    peers = [{"engine": "mujoco", "method": "mj_step", "scene": "quadruped", "batch": 128,
              "ns_per_world_step": 2000.0}]
    ratio_rows = report.ratios(rows, peers)
    found = {(r["what"], r["scene"]): r["ratio"] for r in ratio_rows}
    assert found[("numba / jax forward", "quadruped")] == pytest.approx(2.0)
    assert found[("numba / jax gradient", "quadruped")] == pytest.approx(1.2)
    assert found[("numba rewrites on / off forward", "array")] == pytest.approx(0.25)
    assert found[("numba forward / mujoco mj_step", "quadruped")] == pytest.approx(0.5)
    verdicts = {t["target"]: t["status"] for t in report.targets(rows, ratio_rows)}
    assert verdicts["quadruped batch 128: forward+backward <= 3x forward"] == "not met"  # jax: 5x
    assert verdicts["numba within 1.5x of jax at batch >= 16 (forward and gradient)"] \
        == "not met"
    assert verdicts["quadruped forward per world-step on numba at most MuJoCo's mj_step"] \
        == "met"
    assert verdicts["quadruped value_and_grad on numba: cold compile <= 30 s"] == "not met"
    assert verdicts["quadruped value_and_grad on numba: warm compile <= 2 s"] == "not met"
    assert verdicts["quadruped value_and_grad on numba-interpreted: cold compile <= 30 s"] \
        == "met"
    assert verdicts["quadruped value_and_grad on numba-interpreted: warm compile <= 2 s"] \
        == "met"
    assert verdicts["quadruped value_and_grad on cvm: cold compile <= 30 s"] == "not measured"
    assert verdicts["sphere scene forward within 1.5x of the hand-written kernel"] \
        == "not measured"


def test_peers_run_on_the_same_scene():
    kernel = runner.measure_peer("kernel", "spheres16", 4)
    assert kernel[0]["engine"] == "kernel" and kernel[0]["ns_per_world_step"] > 0
    pytest.importorskip("mujoco")
    mj = runner.measure_peer("mujoco", "ball", 2)
    assert {p["method"] for p in mj} == {"mj_step", "rollout"}
    assert all(p["batch"] == 2 and p["ns_per_world_step"] > 0 for p in mj)


def test_report_and_plot_from_rows(tmp_path, capsys):
    rows = [dict(_row("array", 64, "numba", on, 100.0 * (1 + on), 900.0), peak_mb=10.0)
            for on in (True, False)]
    doc = {"steps": bench_cases.STEPS, "rows": rows, "peers": [], "notes": ["a note"]}
    doc["ratios"] = report.ratios(rows, [])
    doc["targets"] = report.targets(rows, doc["ratios"])
    report.print_report(doc)
    out = capsys.readouterr().out
    assert "numba rewrites on / off forward" in out and "not measured" in out
    report.plot(doc, str(tmp_path / "bench.png"))
    assert (tmp_path / "bench.png").stat().st_size > 1000


def test_gpu_script_runs_on_cpu_at_small_size(tmp_path):
    """The GPU benchmark (`symphys bench-gpu`), on this machine's CPU: the
    ball, 2 worlds, 10 steps (the quadruped at 1,024+ worlds is for a GPU)."""
    from symphys.cli.main import main

    out = tmp_path / "gpu.json"
    assert main(["bench-gpu", "--scene", "ball", "--batches", "2", "--steps", "10",
                 "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(r["batch"], r["steps"], r["platform"]) for r in rows] == [(2, 10, "cpu")]
    assert all(np.isfinite(r[k]) and r[k] > 0 for r in rows
               for k in ("forward_world_steps_per_s", "gradient_world_steps_per_s"))
    assert main(["bench-gpu", "--batches", "2,x"]) == 2


def test_report_only_reads_the_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    rows = [dict(_row("array", 64, "numba", on, 100.0 * (1 + on), 900.0), peak_mb=10.0)
            for on in (True, False)]
    path.write_text(json.dumps({"steps": bench_cases.STEPS, "rows": rows, "peers": [],
                                "notes": []}))
    doc = runner.main(json_path=str(path), report_only=True)
    assert len(doc["rows"]) == 2 and (tmp_path / "bench.png").exists()
    assert "numba rewrites on / off forward" in capsys.readouterr().out
    with pytest.raises(ParameterError, match="nothing to report"):
        runner.main(json_path=str(tmp_path / "missing.json"), report_only=True)


def test_numba_and_cvm_compile_once_per_scene(monkeypatch):
    # A Numba or CVM function serves every batch size: later batched cases
    # of a (scene, backend, rewrites) run warm in the first one's caches and
    # carry its cold figures; JAX specialises to a batch size, so each compiles.
    calls = []

    def fake_run_case(scene, batch, backend, on, cache=None, compiled=None):
        calls.append((scene, batch, backend, cache, compiled and compiled["batch"]))
        if batch == 16 and backend == "cvm":
            raise RuntimeError("child failed")
        return {"scene": scene, "batch": batch, "backend": backend, "rewrites": on}

    monkeypatch.setattr(runner, "run_case", fake_run_case)
    recorded = []
    cases = [("ball", b, k, True) for b in (1, 16, 128, 1024) for k in ("numba", "jax", "cvm")]
    runner.run_cases(cases, lambda case, row: recorded.append((case, row)))
    assert [c[:3] for c, _ in recorded] == [c[:3] for c in cases]
    assert isinstance(recorded[5][1], RuntimeError)            # ball/16/cvm, reported
    by = {(c[1], c[2]): c for c in calls}
    # Batch 1 is an unbatched graph: its own cold compile.
    assert by[(1, "numba")][3] is not None and by[(1, "numba")][4] is None
    assert by[(16, "numba")][3] not in (None, by[(1, "numba")][3])
    assert by[(16, "numba")][4] is None
    assert by[(128, "numba")][3] == by[(1024, "numba")][3] == by[(16, "numba")][3]
    assert by[(128, "numba")][4] == by[(1024, "numba")][4] == 16
    # The failed cvm case at 16 leaves no cache to share: 128 compiles cold.
    assert by[(128, "cvm")][4] is None and by[(1024, "cvm")][4] == 128
    assert by[(128, "cvm")][3] != by[(128, "numba")][3]
    assert all(by[(b, "jax")][3] is None and by[(b, "jax")][4] is None
               for b in (1, 16, 128, 1024))


def test_merge_joins_parts_run_side_by_side(tmp_path, monkeypatch):
    # Two parts of a matrix (say JAX on one core, Numba on the other): the
    # merged document holds both, a case measured twice keeps the later
    # file's figures, and a file run with other step counts is refused.
    def part(name, rows, peers):
        path = tmp_path / name
        path.write_text(json.dumps({"steps": bench_cases.STEPS, "rows": rows, "peers": peers,
                                    "notes": [name]}))
        return str(path)

    peer = {"scene": "ball", "batch": 16, "engine": "mujoco", "method": "mj_step",
            "ns_per_world_step": 2000.0}
    def row(*args):
        return dict(_row(*args), peak_mb=10.0)

    a = part("a.json", [row("ball", 16, "jax", False, 100.0, 300.0),
                        row("ball", 16, "numba", True, 90.0, 250.0)], [peer])
    b = part("b.json", [row("ball", 16, "numba", True, 80.0, 240.0)],
             [dict(peer, ns_per_world_step=2100.0)])
    # Merging runs no case (a full matrix would take hours).
    monkeypatch.setattr(runner, "run_case", lambda *a, **k: pytest.fail("a case was run"))
    doc = runner.main(json_path=str(tmp_path / "all.json"), merge=(a, b), peers=False)
    rows = {(r["backend"], r["forward_ns_per_world_step"]) for r in doc["rows"]}
    assert rows == {("jax", 100.0), ("numba", 80.0)}
    assert [p["ns_per_world_step"] for p in doc["peers"]] == [2100.0]
    assert doc["notes"] == ["a.json", "b.json"]
    assert json.loads((tmp_path / "all.json").read_text())["rows"] == doc["rows"]
    bad = part("c.json", [], [])
    Path(bad).write_text(json.dumps({"steps": bench_cases.STEPS + 1, "rows": []}))
    with pytest.raises(ParameterError, match="steps="):
        runner.main(json_path=None, report_only=True, merge=(bad,))


def test_repeats_stop_at_the_time_budget():
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.02)

    seconds, n = timing.median_time(slow, (), repeats=5, budget_s=0.03)
    assert n == 2 == len(calls) and seconds >= 0.02
    assert timing.median_time(lambda: None, (), repeats=3)[1] == 3


def test_camera_poses_turn_the_bar_about_its_hinge():
    from symphys.bench import camera
    scene = load_scene(camera.SCENE)
    pos, rot = camera.poses(scene, 3)
    bar = scene.body_names.index("bar")
    hinge = np.array([0.0, 0.0, 0.3])
    tips = pos[:, bar] + rot[:, bar] @ np.array([0.0, 0.0, -0.3])
    # Hanging, level, upright: the tip 0.6 m from the hinge each time.
    np.testing.assert_allclose(tips, hinge + 0.6 * np.array([[0, 0, -1], [-1, 0, 0], [0, 0, 1]]),
                               atol=1e-12)
    np.testing.assert_allclose(rot[:, bar] @ rot[:, bar].transpose(0, 2, 1),
                               np.repeat(np.eye(3)[None], 3, 0), atol=1e-12)


def test_camera_case_renders_and_differentiates():
    """One camera case at a small resolution (JAX, soft edges): the image
    shows the scene and the loss gradient reaches the bar."""
    from symphys.bench import camera
    row = camera.measure("jax", 2, "soft", resolution=(32, 16))
    assert (row["width"], row["height"]) == (32, 16)
    assert row["forward_ms_per_image"] > 0 and row["gradient_ms_per_image"] > 0
    assert 0.1 < row["image_mean"] < 0.95 and row["gradient_norm"] > 0


def test_camera_rows_ratios_target_and_report(tmp_path, capsys):
    from symphys.bench import camera

    def row(backend, batch, edges, fwd):
        return {"backend": backend, "batch": batch, "edges": edges, "width": 288,
                "height": 96, "forward_ms_per_image": fwd, "gradient_ms_per_image": 4 * fwd,
                "compile_forward_s": 3.0, "compile_gradient_s": 9.0}

    rows = [row("numba", 16, "hard", 4.0), row("jax", 16, "hard", 2.0),
            row("numba", 1, "soft", 30.0)]
    found = {(r["what"], r["batch"]): r["ratio"] for r in camera.ratios(rows)}
    assert found == {("camera numba / jax forward (hard edges)", 16): pytest.approx(2.0),
                     ("camera numba / jax gradient (hard edges)", 16): pytest.approx(2.0)}
    assert camera.target(rows)["status"] == "met"
    assert camera.target([row("jax", 16, "hard", 6.0)])["status"] == "not met"
    assert camera.target([row("jax", 1, "hard", 1.0)])["status"] == "not measured"
    assert camera.cases(["jax"], [16]) == [("jax", 16, "hard"), ("jax", 16, "soft")]
    assert camera.cases([], None) == []     # --backends cvm: no camera case
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"steps": bench_cases.STEPS, "rows": [], "peers": [], "notes": [],
                                "camera_rows": rows}))
    doc = runner.main(json_path=str(path), report_only=True)
    out = capsys.readouterr().out
    assert "render ms/image" in out and "camera numba / jax forward" in out
    assert any(t["target"].startswith("camera 288x96") and t["status"] == "met"
               for t in doc["targets"])
    assert (tmp_path / "bench.png").stat().st_size > 1000
    with pytest.raises(ParameterError, match="camera must be"):
        runner.main(json_path=None, camera="sometimes")
