"""A6 at test size: the cart-and-bar scene seen only through its camera, a
vision controller trained through renderer, network and physics."""

import json

import numpy as np
import pytest

from symphys.experiments import pendulum_camera as a6
from symphys.scene_io import load_scene


def test_scene_is_the_papers_setup():
    scene = load_scene(a6.SCENE)
    (cam,) = scene.cameras
    assert cam.resolution == (288, 96) and cam.focal_length == 0.018
    assert cam.sensor_size == (0.036, 0.012) and cam.position == (0, 2, 0.3)
    assert [s.kind.value for s in scene.sensors] == ["camera"]
    assert [j.type.value for j in scene.joints] == ["slider", "hinge"]
    assert scene.motors[0].mode.value == "position"
    bar = scene.bodies[scene.body_names.index("bar")]
    assert bar.size[2] == 0.6 and scene.ground is None
    # Hanging down, the tip is 1.2 m below the goal.
    tip = np.asarray(bar.position) + a6.TIP
    assert np.linalg.norm(tip - a6.GOAL) == pytest.approx(1.2)


def test_with_camera_resizes_the_camera_sensor():
    scene = a6.camera_scene((32, 16))
    assert scene.cameras[0].resolution == (32, 16) and scene.n_observations == 32 * 16 * 3
    assert scene.cameras[0].soft_edge == a6.SOFT_EDGE


def test_quick_run_records_frames_and_tip_distance(tmp_path):
    result = a6.run(quick=True, show_progress=False)
    m, s = result.metrics, result.series
    steps = result.extra["steps"]
    assert m["updates"] == a6.EVALUATIONS_QUICK == len(s["loss"])
    assert np.isfinite(s["loss"]).all()
    # Gradients reach the pixels' filters: image -> network -> servo ->
    # physics -> next image, all one graph.
    for key in ("gradient_norm", "conv_gradient_norm"):
        assert len(s[key]) == m["updates"] and np.isfinite(s[key]).all() and min(s[key]) > 0
    # The first rollout starts hanging at rest: 1.2 m from the goal.
    assert s["tip_distance_first"][0] == pytest.approx(1.2, abs=1e-12)
    assert len(s["tip_distance_best"]) == steps + 1
    # The loss is the recorded tip distance's mean.
    assert np.mean(s["tip_distance_first"]) == pytest.approx(s["loss"][0], abs=1e-12)
    w, h = a6.RESOLUTION_QUICK
    frames = np.asarray(s["frames"])
    assert frames.shape == (a6.FRAMES, h, w, 3) and 0 <= frames.min() and frames.max() <= 1
    assert frames[0].std() > 0.02                      # cart, bar and wall in view
    assert m["final_tip_distance"] == pytest.approx(np.mean(s["tip_distance_best"][-steps:]),
                                                    abs=1e-12)
    path = tmp_path / "a6.json"
    result.save(path)
    doc = json.loads(path.read_text())
    assert doc["metrics"]["updates"] == a6.EVALUATIONS_QUICK
    a6.plot(result, str(tmp_path / "a6.png"))
    assert (tmp_path / "a6.png").stat().st_size > 1000
    text = a6.report(result)
    assert "(paper)" in text and "last-second tip distance" in text
