"""Quick versions of the experiments run end to end and reach their goals."""

import json

import numpy as np
import pytest

from symphys.cli.main import main


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
    out = capsys.readouterr().out
    assert "gradient (paper)" in out
    assert "targets are for full runs" in out          # a quick run says so


def _ball_throw_result(gradient_iterations, cmaes_evaluations):
    """A ball-throw result as `run` makes it (both reach the goal; CMA-ES
    faster in wall time, as here), without running anything."""
    from symphys.experiments import ball_throw
    from symphys.experiments.common import ExperimentResult

    g = {"iterations": gradient_iterations, "evaluations": gradient_iterations,
         "seconds": 0.25, "compile_seconds": 38.0, "final_loss": 0.0199,
         "final_position": [9.98, 0, 0.5]}
    c = {"iterations": cmaes_evaluations // 9, "evaluations": cmaes_evaluations,
         "seconds": 0.14, "compile_seconds": 8.0, "final_loss": 0.015,
         "final_position": [10.0, 0, 0.5], "seeds": [0, 1, 2],
         "evaluations_per_seed": [cmaes_evaluations] * 3}
    metrics = {"gradient_reached_goal": True, "cmaes_reached_goal": True,
               "evaluation_ratio": cmaes_evaluations / gradient_iterations}
    metrics["targets_met"] = gradient_iterations <= 88 and metrics["evaluation_ratio"] > 1
    return ExperimentResult(
        name="ball-throw", quick=False, seed=0, metrics=metrics, paper=ball_throw.PAPER,
        extra={"gradient": g, "cmaes": c, "gradient_no_rolling_friction": {
            "iterations": 300, "evaluations": 300, "seconds": 2.1, "final_loss": 3.3,
            "final_position": [10.0, 0, 0.5]}})


def test_ball_throw_report_ends_matched_when_the_claims_hold():
    """31 iterations and 14.5x fewer simulations than CMA-ES match the paper's
    claims (88 iterations, fewer simulations), though CMA-ES ran faster."""
    from symphys.experiments import ball_throw

    text = ball_throw.report(_ball_throw_result(31, 450))
    last = text.splitlines()[-1]
    assert last.startswith("Result: matches the paper"), last
    assert "NOT" not in text
    assert "16.3 s vs 59.9 s" in text and "0.25 s vs 0.14 s" in text   # both wall times
    assert "27.5x fewer" in text and "14.5x fewer" in text
    late = ball_throw.report(_ball_throw_result(120, 450)).splitlines()[-1]
    assert "does NOT match" in late and "within 88 iterations" in late, late


def _run_quick(name, tmp_path, **sizes):
    """Run an experiment module at test sizes; write and read back its JSON
    and PNG and its report."""
    from symphys import experiments
    module = experiments.get(name)
    result = module.run(quick=True, show_progress=False, **sizes)
    js, png = tmp_path / f"{name}.json", tmp_path / f"{name}.png"
    result.save(js)
    module.plot(result, str(png))
    assert png.stat().st_size > 1000
    text = module.report(result)
    assert "(paper)" in text or "paper:" in text
    return json.loads(js.read_text()), text


def test_arm_fixed_quick(tmp_path):
    """A3 at test size: Adam lowers the mean gripper-target distance, and
    CMA-ES runs in the same experiment on the same loss."""
    doc, _ = _run_quick("arm-fixed", tmp_path, steps=150, evaluations=8, cmaes_budget=24)
    curve = doc["series"]["gradient_loss"]
    assert len(curve) == 8 and min(curve[1:]) < 0.9 * curve[0]
    assert doc["metrics"]["parameters"] == 17_284
    assert doc["cmaes"]["best_loss"] <= doc["cmaes"]["start_loss"]
    assert doc["series"]["cmaes_evaluations"][-1] >= 24
    # Constant servo targets near the reaching pose beat the untrained
    # network (which starts near the rest pose, 0.93 m away).
    assert doc["metrics"]["constant_targets_floor_m"] < 0.5 * curve[0]
    assert isinstance(doc["gradient"]["rejected_steps"], int)    # reported


def test_arm_random_quick(tmp_path):
    """A4 at test size: after updates on random target batches the arm ends
    closer to targets it has never seen (the same held-out targets, before
    and after training)."""
    doc, _ = _run_quick("arm-random", tmp_path, updates=10)
    assert len(doc["series"]["loss"]) == 10
    m = doc["metrics"]
    assert m["median_final_distance_m"] < 0.9 * m["initial_median_final_distance_m"]
    final = doc["series"]["final_distances"]
    assert len(final) == doc["evaluation_targets"] and all(np.isfinite(final))
    assert 0.0 <= doc["metrics"]["fraction_final_under_5cm"] <= 1.0


def test_arm_hardware_geometry_moves_the_arm_consistently():
    """The two link lengths set every length-dependent scene parameter: at
    the defaults they are the scene's; at other lengths the boxes' ends meet
    the joints' anchors and the masses keep the default linear density."""
    from symphys.experiments import arm_hardware as hw
    from symphys.experiments.arm_random import arm_scene
    scene = arm_scene()
    geo = hw.ArmGeometry.from_scene(scene)
    defaults = scene.parameters()
    for name, value in geo.parameters(geo.lengths0).items():
        np.testing.assert_allclose(value, defaults[name], err_msg=name)
    p = geo.parameters([0.7, 0.3])
    top = lambda link: p[f"{link}.position"][2] + p[f"{link}.size"][2] / 2
    assert p["upper_arm.size"][2] == pytest.approx(0.7) and p["forearm.size"][2] == pytest.approx(0.3)
    assert top("upper_arm") == pytest.approx(p["elbow_pitch.anchor"][2])
    assert p["forearm.position"][2] - 0.15 == pytest.approx(p["elbow_pitch.anchor"][2])
    assert top("forearm") == pytest.approx(p["gripper.position"][2])
    np.testing.assert_allclose(p["wrist.anchor"], p["gripper.position"])
    np.testing.assert_allclose(p["elbow_yaw.anchor"], p["elbow.position"])
    assert p["upper_arm.mass"] == pytest.approx(0.7) and p["forearm.mass"] == pytest.approx(0.3)
    assert geo.reach([0.5, 0.5]) == pytest.approx((0.5 ** 0.5, 1.0))


def test_arm_hardware_quick(tmp_path):
    """A7 proposal at test size: both arms train on the same targets; the
    optimised lengths stay in their bounds and their loss falls; the length
    gradient (chain rule through the geometry) matches finite differences."""
    doc, text = _run_quick("arm-hardware", tmp_path)
    m, s = doc["metrics"], doc["series"]
    assert "not shown in the paper" in text
    for key in ("error_fixed_lengths", "error_optimised_lengths"):
        assert np.isfinite(m[key]) and 0 < m[key] < 2.0
    lo, hi = doc["bounds_m"]
    path = np.asarray(s["lengths_optimised_lengths"])
    assert path.shape == (doc["updates"] + 1, 2) and np.isfinite(path).all()
    assert (path >= np.asarray(lo) - 1e-12).all() and (path <= np.asarray(hi) + 1e-12).all()
    assert m["lengths_within_bounds"] and m["lengths_fixed_lengths"] == doc["default_lengths"]
    assert not np.allclose(path[-1], path[0])          # the lengths moved
    for arm in ("fixed_lengths", "optimised_lengths"):
        curve = s[f"loss_{arm}"]
        assert len(curve) == doc["updates"] + 1 and np.isfinite(curve).all()
        assert len(s[f"final_distance_{arm}"]) == doc["targets"]
    # Same start: same controller initialisation and lengths in both arms.
    assert s["loss_fixed_lengths"][0] == s["loss_optimised_lengths"][0]
    assert m["optimised_loss_fell"] and m["loss_optimised_lengths"] < s["loss_optimised_lengths"][0]
    assert m["loss_optimised_lengths"] == min(s["loss_optimised_lengths"])      # best iterate
    lengths = np.asarray(m["lengths_optimised_lengths"])
    assert (lengths >= np.asarray(lo) - 1e-12).all() and (lengths <= np.asarray(hi) + 1e-12).all()
    assert isinstance(m["rejected_steps_optimised_lengths"], int)

    from symphys.experiments import arm_hardware as hw
    _, geo, ctrl, fn = hw.compiled(hw.QUICK)        # the run's function (cached)
    targets = np.asarray(s["targets"])
    weights = ctrl.init(3)
    lengths = np.array([0.55, 0.6])
    _, _, grad, _ = hw.evaluate(fn, geo, weights, lengths, targets)
    h = 1e-5
    for i in range(2):
        e = np.eye(2)[i] * h
        fd = (hw.evaluate(fn, geo, weights, lengths + e, targets)[0]
              - hw.evaluate(fn, geo, weights, lengths - e, targets)[0]) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-3, abs=1e-6)


def test_checkpoint_of_another_run_is_refused(tmp_path):
    """A checkpoint written with other settings names the file and the field."""
    from symphys.experiments.common import CheckpointError, load_checkpoint, save_checkpoint
    path = tmp_path / "run.pkl"
    assert load_checkpoint(path, {"steps": 100}) is None
    save_checkpoint(path, {"steps": 100, "seed": 0}, {"speeds": [0.1, 0.2]})
    assert load_checkpoint(path, {"steps": 100, "seed": 0}) == {"speeds": [0.1, 0.2]}
    with pytest.raises(CheckpointError, match=r"run\.pkl: field 'steps' is 100 .* 200"):
        load_checkpoint(path, {"steps": 200, "seed": 0})
    path.write_bytes(b"not a pickle")
    with pytest.raises(CheckpointError, match="not a readable symphys checkpoint"):
        load_checkpoint(path, {"steps": 100})


def test_quadruped_speed_quick(tmp_path):
    """A2 / Table 1 at test size (0.2 s, batches 1 and 2, loops interpreted):
    the paper's two controllers by weight count, ms per robot-step beside
    Table 1, and the forward and gradient functions agreeing on the loss."""
    from symphys.compiler.loops import Loops

    doc, text = _run_quick("quadruped-speed", tmp_path, seconds=0.2, batches=(1, 2),
                           loops_kind=Loops.INTERPRETED)
    cases = doc["cases"]
    assert {(c["controller"], c["parameters"]) for c in cases} == {
        ("linear", 1_296), ("deep", 1_147_904)}
    for c in cases:
        assert c["forward_speed_m_s"] == pytest.approx(c["gradient_speed_m_s"], abs=1e-12)
        assert c["gradient_ms_per_robot_step"] == pytest.approx(
            c["gradient_s"] / 20 / c["batch"] * 1e3)
    assert doc["metrics"]["target_batch"] == 2 and doc["loops"] == "interpreted"
    assert "8.17 / 69.6" in text and "1.06 / 9.69" in text
