"""Sensors, controllers in the loop, and back-propagation options."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scenes import ROD_LENGTH, drop, servo_pendulum

import symphys as sp
from symphys.compiler.backends import compile
from symphys.learn import nn
from symphys.loop.rollout import full_parameters, rollout, split_batched
from symphys.loop.timeloop import LoopOptions
from symphys.physics.joints import build_joint_arrays
from symphys.physics.model import build_model
from symphys.physics.sensors import observe

BACKEND = "numba"
TASK = np.array([[0.2], [0.4]])


def test_observation_layout_and_values():
    """Each sensor block at its documented place, for a pose rotated by 0.3
    rad about the hinge and spinning at 1.5 rad/s."""
    scene = servo_pendulum()
    angle, rate, half = 0.3, 1.5, ROD_LENGTH / 2
    centre = half * np.array([-np.sin(angle), 0.0, -np.cos(angle)])
    params = {"rod.position": centre,
              "rod.quaternion": [np.cos(angle / 2), 0, np.sin(angle / 2), 0],
              "rod.angular_velocity": [0, rate, 0],
              "rod.velocity": np.cross([0, rate, 0], centre),
              "pivot.anchor": [0, 0, 0]}
    p = full_parameters(scene, {k: np.asarray(v, float) for k, v in params.items()})
    bodies, world, state = build_model(scene, p, split_batched(scene, p))
    frames, _ = build_joint_arrays(scene, p)
    time = pt.constant(np.array([[0.25]]))
    obs = observe(scene, state, time, pt.constant(np.array([[0.7]])), bodies, world, frames)
    value = pytensor.function([], obs, mode="FAST_COMPILE")()
    assert value.shape == (1, scene.n_observations) == (1, 8)
    # The joint frames come from the initial pose, so the coordinate there is 0.
    expected = [0.0, rate, *centre, np.sin(np.pi / 2), np.cos(np.pi / 2), 0.7]
    np.testing.assert_allclose(value[0], expected, atol=1e-12)


def test_target_distance_observation():
    """|rod centre - task point| for two worlds with different task points."""
    import dataclasses
    scene = dataclasses.replace(servo_pendulum(), sensors=(
        sp.Sensor("gap", sp.SensorKind.TARGET_DISTANCE, "rod"),))
    p = full_parameters(scene, {})
    bodies, world, state = build_model(scene, p, split_batched(scene, p))
    frames, _ = build_joint_arrays(scene, p)
    points = np.array([[0.3, 0.0, 0.1], [-1.0, 2.0, 0.5]])
    obs = observe(scene, state, pt.constant(np.zeros((2, 1))), pt.constant(points), bodies,
                  world, frames)
    centre = scene.bodies[0].position
    value = pytensor.function([], obs, mode="FAST_COMPILE")()
    np.testing.assert_allclose(value[:, 0], np.linalg.norm(points - centre, axis=1), rtol=1e-12)


def test_per_world_weights_match_one_controller_each():
    """Weights with a leading population axis: row p uses controller p."""
    mlp = nn.MLP(3, 2, hidden=(4,))
    members = [mlp.init(seed) for seed in range(3)]
    stacked = {k: pt.constant(np.stack([m[k] for m in members])) for k in members[0]}
    x = np.random.default_rng(1).normal(size=(3, 3))
    out, _ = mlp.apply(stacked, pt.constant(x), [], None)
    for p, member in enumerate(members):
        one, _ = mlp.apply({k: pt.constant(v) for k, v in member.items()},
                           pt.constant(x[p:p + 1]), [], None)
        np.testing.assert_allclose(out.eval()[p], one.eval()[0], rtol=1e-12)


def test_nn_forward_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4))
    mlp = nn.MLP(4, 2, hidden=(5,), activation=nn.Activation.RELU, output_scale=2.0)
    params = mlp.init(1)
    assert set(params) == set(mlp.parameter_shapes()) and mlp.n_parameters == 4 * 5 + 5 + 5 * 2 + 2
    sym = {k: pt.constant(v) for k, v in params.items()}
    out, carry = mlp.apply(sym, pt.constant(x), [], None)
    hidden = np.maximum(x @ params["ctrl.w0"] + params["ctrl.b0"], 0)
    np.testing.assert_allclose(out.eval(), 2.0 * (hidden @ params["ctrl.w1"] + params["ctrl.b1"]))
    assert carry == []
    for cls in (nn.Elman, nn.GRU):
        rnn = cls(4, 6, 2)
        p = {k: pt.constant(v) for k, v in rnn.init(0).items()}
        out, (h,) = rnn.apply(p, pt.constant(x), [pt.constant(np.zeros((3, 6)))], None)
        assert out.eval().shape == (3, 2) and h.eval().shape == (3, 6)
        assert np.abs(h.eval()).max() > 0
    open_loop = nn.OpenLoop(2, frequencies=(1.0,))
    p = {k: pt.constant(v) for k, v in open_loop.init(0).items()}
    out, _ = open_loop.apply(p, None, [], pt.constant(np.array([[0.25]])))
    np.testing.assert_allclose(out.eval(), np.array([[1.0, 0.0]]) @ p["open.w"].data)


def test_schedule_picks_each_steps_row():
    """nn.Schedule: the command at time k dt is row k of the table, per
    world with a (P, T, M) table; past the table it is 0."""
    schedule = nn.Schedule(2, steps=4, dt=0.01)
    table = np.arange(8.0).reshape(4, 2)
    time = pt.constant(np.array([[0.0], [0.02], [0.03], [0.05]]))
    out, carry = schedule.apply({"schedule.u": pt.constant(table)}, None, [], time)
    np.testing.assert_array_equal(out.eval(), np.vstack([table[[0, 2, 3]], [0.0, 0.0]]))
    tables = np.stack([table, -table])
    out, _ = schedule.apply({"schedule.u": pt.constant(tables)}, None, [],
                            pt.constant(np.array([[0.01], [0.01]])))
    np.testing.assert_array_equal(out.eval(), [table[1], -table[1]])
    assert carry == [] and schedule.init()["schedule.u"].shape == (4, 2)


@pytest.fixture(scope="module")
def closed_loop():
    """Compiled (task, anchor, *weights) -> [loss, d anchor, *d weights] of
    a 1-s closed-loop swing towards the target angle."""
    scene = servo_pendulum()
    controller = nn.MLP(scene.n_observations, 1, hidden=(8,), output_scale=1.0)
    weights = controller.init(0)
    sym = {k: pt.tensor(name=k, dtype="float64", shape=v.shape) for k, v in weights.items()}
    task = pt.tensor("task", dtype="float64", shape=TASK.shape)
    anchor = pt.tensor("pivot.anchor", dtype="float64", shape=(3,))
    tr = rollout(scene, 100, params={"pivot.anchor": anchor}, controller=controller,
                 controller_params=sym, task=task)
    x = tr.position["rod"][:, 50:, 0]
    loss = ((x + 0.5 * np.sin(task)) ** 2).mean()
    grads = pytensor.grad(loss, [anchor, *sym.values()])
    fn = compile([task, anchor, *sym.values()], [loss, *grads], BACKEND)
    return fn, weights


def test_closed_loop_gradients_match_finite_differences(closed_loop):
    fn, weights = closed_loop
    anchor = np.array([0.0, 0.0, 0.0])
    out = fn(TASK, anchor, *weights.values())
    grads = dict(zip(["pivot.anchor", *weights], out[1:]))
    eps = 1e-6

    def loss(a, w):
        return fn(TASK, a, *w.values())[0]

    checks = [("ctrl.w0", (0, 3)), ("ctrl.w0", (4, 1)), ("ctrl.w1", (2, 0)), ("ctrl.b1", (0,))]
    for name, index in checks:
        up = {k: v.copy() for k, v in weights.items()}
        down = {k: v.copy() for k, v in weights.items()}
        up[name][index] += eps
        down[name][index] -= eps
        fd = (loss(anchor, up) - loss(anchor, down)) / (2 * eps)
        assert grads[name][index] == pytest.approx(fd, rel=1e-5, abs=1e-10)
    # A hardware parameter: the pivot's height (a link-length change).
    shift = np.array([0.0, 0.0, eps])
    fd = (loss(anchor + shift, weights) - loss(anchor - shift, weights)) / (2 * eps)
    assert grads["pivot.anchor"][2] == pytest.approx(fd, rel=1e-5, abs=1e-10)
    assert abs(fd) > 1e-6


def test_gradient_decay_and_truncation_on_a_projectile():
    """Free flight for T steps: dx_T/dv0 = T dt exactly; with a decay gamma
    per step the reverse pass gives T dt gamma^T; truncated every K < T
    steps it gives 0."""
    scene, steps = drop(), 10
    v0 = pt.tensor("v0", dtype="float64", shape=(3,))
    results = {}
    for label, options in (("exact", LoopOptions()), ("decay", LoopOptions(gradient_decay=0.9)),
                           ("truncate", LoopOptions(truncate=4))):
        tr = rollout(scene, steps, params={"ball.velocity": v0, "ground.height": -1e3},
                     options=options)
        g = pytensor.grad(tr.position["ball"][-1, 0], v0)
        results[label] = compile([v0], g, "cvm")(np.array([1.0, 0.0, 0.0]))
    dt = scene.dt
    assert results["exact"][0] == pytest.approx(steps * dt, rel=1e-12)
    assert results["decay"][0] == pytest.approx(steps * dt * 0.9 ** steps, rel=1e-12)
    assert results["truncate"][0] == 0.0


def test_controller_input_errors():
    scene = servo_pendulum()
    with pytest.raises(sp.ParameterError, match="reads 3 inputs but the scene's sensors give 8"):
        rollout(scene, 2, controller=nn.Linear(3, 1), controller_params=nn.Linear(3, 1).init())
    ctl = nn.Linear(8, 1)
    with pytest.raises(sp.ParameterError, match="controller parameters missing"):
        rollout(scene, 2, controller=ctl, controller_params={}, task=TASK)
    with pytest.raises(sp.ParameterError, match="pass task="):
        rollout(scene, 2, controller=ctl, controller_params=ctl.init())
    with pytest.raises(sp.ParameterError, match="needs motors"):
        rollout(drop(), 2, controller=ctl, controller_params=ctl.init())


def test_arm_gradients_match_finite_differences():
    """A 0.5-s closed-loop reach of the A3 arm (4 servos, 20 solver sweeps,
    the gripper-distance sensor): the gradient of the loss with respect to
    controller weights, the elbow pivot's height on the upper arm (a link
    length) and the elbow servo's gain matches central differences."""
    from symphys.experiments.arm_fixed import arm_scene
    from symphys.learn.closed_loop import closed_loop_function

    scene = arm_scene()
    ctrl = nn.MLP(1, 4, hidden=(8,), output_init=1.0)

    def loss(traj, task):
        gap = traj.position["gripper"][:, 10:, :] - task[:, None, :]
        return (gap ** 2).sum(axis=-1).mean()

    hardware = ("elbow_pitch.anchor", "elbow_pitch.gain")
    fn = closed_loop_function(scene, 50, ctrl, loss, backend=BACKEND, wrt_params=hardware)
    task = np.array([[0.5, 0.5, 0.5]])
    weights = ctrl.init(3)
    params = {"elbow_pitch.anchor": np.array([0.0, 0.0, 0.6]), "elbow_pitch.gain": 30.0}

    def value(w, p):
        return float(fn(task, *w.values(), *p.values())[0])

    out = fn(task, *weights.values(), *params.values())
    grads = dict(zip([*weights, *hardware], out[1:]))
    eps = 1e-6
    checks = [("ctrl.w0", (0, 2)), ("ctrl.w1", (5, 1)), ("ctrl.b1", (3,)),
              ("elbow_pitch.anchor", (2,)), ("elbow_pitch.gain", ())]
    for name, index in checks:
        bumped = []
        for sign in (1, -1):
            w = {k: np.array(v, copy=True) for k, v in weights.items()}
            p = {k: np.array(v, dtype=float, copy=True) for k, v in params.items()}
            target = w if name in w else p
            target[name][index] += sign * eps
            bumped.append(value(w, p))
        fd = (bumped[0] - bumped[1]) / (2 * eps)
        assert np.asarray(grads[name])[index] == pytest.approx(fd, rel=1e-4, abs=1e-9), name
        assert abs(fd) > 1e-7, name


def test_open_loop_controller_needs_no_sensors():
    """A scene without sensors gives a (B, 0) observation, so an open-loop
    controller can drive it: the wrist's servos turn the hand while its
    anchor stays at the pivot."""
    from scenes import wrist

    from symphys.learn.closed_loop import closed_loop_trajectory

    scene = wrist()
    assert scene.n_observations == 0
    ctrl = nn.OpenLoop(n_out=2)
    tr = closed_loop_trajectory(scene, 100, ctrl, ctrl.init(0), backend=BACKEND)
    rot = tr.rotation["hand"]
    assert rot.shape == (101, 3, 3) and np.abs(rot[-1] - np.eye(3)).max() > 0.01
    anchor = tr.position["hand"] + rot @ np.array([0.0, 0.0, 0.2])
    assert np.abs(anchor).max() < 1e-3
