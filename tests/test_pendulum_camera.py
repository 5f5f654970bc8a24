"""A6 at test size: the cart-and-bar scene seen only through its camera, a
vision controller trained through renderer, network and physics."""

import dataclasses
import json

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from symphys.experiments import pendulum_camera as a6
from symphys.learn import teachers as teaching
from symphys.learn.closed_loop import closed_loop_function
from symphys.scene.reader import load_scene


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


@pytest.fixture(scope="module")
def teacher():
    return teaching.Teacher.of(a6.camera_scene(a6.RESOLUTION_QUICK))


def test_linearised_step_is_the_bar_on_a_velocity_servo(teacher):
    scene = load_scene(a6.SCENE)
    a, b = teaching.linearise(scene)
    m = teaching.BarModel.of(scene)
    dt = scene.dt
    # The servo sets the cart's velocity to gain x (command - x) within the step.
    assert b[1, 0] == pytest.approx(m.servo_gain, rel=1e-3)
    assert b[0, 0] == pytest.approx(m.servo_gain * dt, rel=1e-3)
    # The cart's velocity change tips the bar by m c / I per m/s (c: pivot
    # to centre of mass, I: inertia about the pivot), and gravity tips the
    # upright bar at m g c / I per radian.
    assert b[3, 0] / b[1, 0] == pytest.approx(-m.mass * m.com / m.inertia, rel=5e-3)
    assert a[3, 2] == pytest.approx(dt * m.mass * m.gravity * m.com / m.inertia, rel=5e-3)
    closed = a - b @ np.array(teacher.gain)[None]
    assert np.abs(np.linalg.eigvals(closed)).max() < 0.99


def test_teacher_swings_up_and_balances_from_joint_states(teacher):
    scene = teaching.state_scene(a6.camera_scene(a6.RESOLUTION_QUICK))
    worlds, steps = 4, int(round(a6.SECONDS / scene.dt))
    fn = closed_loop_function(scene, steps, teacher.controller, a6._per_world, worlds=worlds,
                              world_params=teaching.WORLD_STATE, gradient=False,
                              aux=a6._joint_states)
    init = a6.starts(teacher.model, np.random.default_rng(0), worlds)
    tip, states = fn(np.zeros((worlds, 0)), *(init[k] for k in teaching.WORLD_STATE))
    assert tip[0, 0] == pytest.approx(1.2, abs=1e-12)          # hanging at rest
    # The joint states read off the trajectory are the world's starts.
    assert np.allclose(states[:, 0, 3], init["bar.angular_velocity"][:, 1])
    assert np.allclose(states[:, 0, 1], init["cart.velocity"][:, 0])
    assert (a6.last_second(tip, scene.dt) < 0.01).all()
    # The kick off the hanging bar is one smooth push, not a command that
    # flips sign every step (+0.40, -0.45, +0.87, -0.45, ...
    # before the swing law read the decoupled rate).
    first = teacher.command(states[0, :20])
    assert first[0] == pytest.approx(teacher.kick) and (first > 0.2).all()
    assert np.abs(np.diff(first)).max() < 0.5


def test_noisy_teacher_keeps_the_bar_up_and_labels_recoveries(teacher):
    """DART: the distillation's teacher rollouts run with smooth command
    noise (one noise table per world); world 0's is zero, the clean law's
    rollout. The noise pushes the bar about the upright and the teacher
    brings it back, so the data holds recoveries."""
    scene = a6.camera_scene(a6.RESOLUTION_QUICK)
    worlds, steps = 4, int(round(a6.SECONDS / scene.dt))
    fn = a6.teacher_rollout_function(scene, teacher, steps, worlds)
    rng = np.random.default_rng(0)
    noise = a6._teacher_noise(rng, worlds, steps, scene.dt)
    assert not noise[0].any() and noise[1:].std() > 0.5 * a6.TEACHER_NOISE[0]
    init = a6.starts(teacher.model, rng, worlds)
    init = [np.repeat(init[k][:1], worlds, axis=0) for k in teaching.WORLD_STATE]
    tip, states = fn(np.zeros((worlds, 0)), noise, *init)
    # All start hanging at rest; world 0 is the clean teacher's rollout.
    assert (a6.last_second(tip[:1], scene.dt) < 0.01).all()
    assert np.abs(tip[1:] - tip[0]).max() > 0.1
    # The noisy ones still end near the upright, the bar pushed off it and
    # brought back.
    assert (a6.last_second(tip[1:], scene.dt) < 0.15).all()
    late = states[1:, -300:]
    phi = np.abs(np.angle(-np.exp(1j * late[..., 2])))
    assert teacher.balancing(late).all() and phi.max() > 0.05


def test_swing_law_ignores_the_bars_reaction_to_a_cart_jump(teacher):
    """A jump dv of the cart's velocity (the servo's within one step) turns
    the bar by beta cos(theta) dv; the swing law reads the rate without it,
    so its command does not answer its own push within the step."""
    m = teacher.model
    assert m.coupling == pytest.approx(m.mass * m.com / m.inertia)
    rng = np.random.default_rng(3)
    states = np.column_stack([rng.uniform(-1, 1, 50), rng.uniform(-2, 2, 50),
                              rng.uniform(-1.5, 1.5, 50), rng.uniform(-5, 5, 50)])
    jump = rng.uniform(-3, 3, 50)
    pushed = states + np.column_stack([0 * jump, jump, 0 * jump,
                                       m.coupling * np.cos(states[:, 2]) * jump])
    assert np.allclose(teacher.command(pushed), teacher.command(states), atol=1e-12)
    coupled = dataclasses.replace(teacher, decouple=False)
    assert not np.allclose(coupled.command(pushed), coupled.command(states), atol=1e-3)


def test_numpy_law_is_the_controllers(teacher):
    """The students' labels (NumPy) are the commands the teacher gives in a
    rollout (symbolic), in both modes (swing and balance)."""
    obs = pt.matrix("obs", dtype="float64")
    command, _ = teacher.controller.apply({}, obs, [], None)
    fn = pytensor.function([obs], command[:, 0])
    rng = np.random.default_rng(2)
    states = np.column_stack([rng.uniform(-1, 1, 200), rng.uniform(-3, 3, 200),
                              rng.uniform(-np.pi, np.pi, 200), rng.uniform(-8, 8, 200)])
    states[:50, 2] = np.pi + rng.uniform(-0.5, 0.5, 50)              # near the upright
    expected = teacher.command(states)
    assert np.allclose(fn(states), expected, rtol=1e-12, atol=1e-12)
    assert np.all(np.abs(expected) <= teacher.limit) and np.ptp(expected) > 1
    # The balance cone (the LQR's steps, which A6's chunks can focus on).
    cone = teacher.balancing(states)
    assert cone[:50].all() and not cone.all()
    upright = np.abs(np.angle(np.exp(1j * (states[:, 2] - np.pi)))) < teacher.switch
    assert np.array_equal(cone, upright)


def test_quick_run_records_frames_and_tip_distance(tmp_path):
    result = a6.run(quick=True, show_progress=False)
    m, s = result.metrics, result.series
    steps = result.extra["steps"]
    # Distillation: every round's updates, then fine-tuning on the A6 loss.
    assert m["imitation_updates"] == a6.ROUNDS_QUICK * a6.IMITATION_UPDATES_QUICK
    assert len(s["imitation_loss"]) == m["imitation_updates"]
    assert np.isfinite(s["imitation_loss"]).all()
    assert m["fine_tune_updates"] == a6.EVALUATIONS_QUICK == len(s["loss"])
    assert m["updates"] == m["imitation_updates"] + m["fine_tune_updates"]
    assert np.isfinite(s["loss"]).all()
    # Gradients reach the pixels' filters: image -> network -> servo ->
    # physics -> next image, all one graph.
    for key in ("gradient_norm", "conv_gradient_norm"):
        assert len(s[key]) == m["fine_tune_updates"] and np.isfinite(s[key]).all()
        assert min(s[key]) > 0
    # Every rollout starts hanging at rest: 1.2 m from the goal.
    for key in ("tip_distance_first", "tip_distance_teacher", "tip_distance_best"):
        assert s[key][0] == pytest.approx(1.2, abs=1e-12) and len(s[key]) == steps + 1
    # One student rollout per round after the first (the teacher's), and the final one.
    assert len(s["tip_distance_rounds"]) == a6.ROUNDS_QUICK
    # Fine-tuning starts from the best round's controller: its first loss
    # is that student's hanging-start rollout.
    assert 1 <= m["best_round"] <= a6.ROUNDS_QUICK
    assert np.allclose(s["tip_distance_first"], s["tip_distance_rounds"][m["best_round"] - 1],
                       atol=1e-9)
    assert m["distilled_tip_distance"] == pytest.approx(
        a6.last_second(np.asarray(s["tip_distance_first"]), result.extra["dt"]), abs=1e-9)
    assert np.mean(s["tip_distance_first"]) == pytest.approx(s["loss"][0], abs=1e-12)
    w, h = a6.RESOLUTION_QUICK
    frames = np.asarray(s["frames"])
    assert frames.shape == (a6.FRAMES, h, w, 3) and 0 <= frames.min() and frames.max() <= 1
    assert frames[0].std() > 0.02                      # cart, bar and wall in view
    assert m["final_tip_distance"] == pytest.approx(
        a6.last_second(np.asarray(s["tip_distance_best"]), result.extra["dt"]), abs=1e-12)
    path = tmp_path / "a6.json"
    result.save(path)
    doc = json.loads(path.read_text())
    assert doc["metrics"]["fine_tune_updates"] == a6.EVALUATIONS_QUICK
    a6.plot(result, str(tmp_path / "a6.png"))
    assert (tmp_path / "a6.png").stat().st_size > 1000
    text = a6.report(result)
    assert "(paper)" in text and "last-second tip distance" in text and "distilled" in text


def test_student_rollouts_are_imitated_up_to_a_spinning_bar():
    states = np.zeros((3, 5, 4))
    states[1, 2, 3] = a6.SPIN_LIMIT + 1          # spins past the limit at step 2
    states[2, 3, 0] = np.nan                     # diverged at step 3
    cut = a6.imitable(states)
    assert np.isfinite(cut[0]).all()
    assert np.isfinite(cut[1, :2]).all() and np.isnan(cut[1, 2:]).all()
    assert np.isfinite(cut[2, :3]).all() and np.isnan(cut[2, 3:]).all()


def test_rounds_rank_the_hanging_start_first():
    balanced_hanging = np.array([0.01, 0.9, 0.9, 0.9])
    many_balanced = np.array([0.5, 0.01, 0.01, 0.01])
    assert a6.score(balanced_hanging) > a6.score(many_balanced)
    assert a6.score(many_balanced) > a6.score(np.array([0.4, 0.01, 0.01, 0.9]))
    assert a6.score(np.array([0.4, 0.9, 0.9, 0.9])) > a6.score(np.array([0.5, 0.9, 0.9, 0.9]))


def test_a_quarter_of_the_starts_are_near_rest(teacher):
    init = a6.starts(teacher.model, np.random.default_rng(0), 16)
    w = init["bar.angular_velocity"][:, 1]
    assert w[0] == 0 and np.abs(w[1:5]).max() < 0.1 * 4 * a6.START_SPREAD[1]
    assert np.abs(w[5:]).max() > 0.5 * a6.START_SPREAD[1]
