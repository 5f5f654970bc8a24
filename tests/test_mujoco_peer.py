"""The MuJoCo speed peer: MJCF of the shipped scenes, physics checks, timers."""

import sys
from dataclasses import replace

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from symphys.bench.mujoco_peer import time_mj_step, time_rollout  # noqa: E402
from symphys.errors import SceneError  # noqa: E402
from symphys.mjcf.write import (MjcfOptions, MujocoUnavailable, import_mujoco,  # noqa: E402
                                load_model, to_mjcf)
from symphys.scene.builder import SceneBuilder  # noqa: E402
from symphys.scene.elements import JointType  # noqa: E402
from symphys.scene.reader import load_scene  # noqa: E402


def _model(scene, options=MjcfOptions()):
    return mujoco.MjModel.from_xml_string(to_mjcf(scene, options))


def _body(model, data, name):
    i = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    return data.xpos[i].copy(), data.xmat[i].reshape(3, 3).copy()


def _rot(axis, angle):
    """(3, 3) rotation by `angle` about unit `axis` (Rodrigues)."""
    k = np.asarray(axis, float)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


@pytest.mark.parametrize("name", ["ball", "arm", "quadruped"])
def test_mjcf_loads_with_same_bodies_and_mass(name):
    scene = load_scene(name)
    model = _model(scene)
    assert model.nbody - 1 == len(scene.bodies)
    total = sum(b.mass for b in scene.bodies)
    assert abs(model.body_mass[1:].sum() - total) <= 1e-9 * total
    assert model.npair == len(scene.contacts)
    assert model.nu == len(scene.motors)


def test_quadruped_actuators_and_hinges():
    scene = load_scene("quadruped")
    model = _model(scene)
    hinges = [j for j in scene.joints if j.type is JointType.HINGE]
    universals = [j for j in scene.joints if j.type is JointType.UNIVERSAL]
    mj_hinges = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
                 for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    assert model.nu == len(scene.motors) == 16
    # Each universal joint is two MuJoCo hinges, <name>:0 and <name>:1.
    assert len(mj_hinges) == len(hinges) + 2 * len(universals)
    assert {j.name for j in hinges} <= set(mj_hinges)
    assert {f"{j.name}:{k}" for j in universals for k in (0, 1)} <= set(mj_hinges)
    assert mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, 0) == scene.motors[0].name
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    assert [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in free] == ["spine"]


def test_ball_falls_freely_then_rests_on_the_ground():
    scene = load_scene("ball")
    ball = scene.bodies[0]
    v0 = np.array([0.3, 0.0, 2.0])
    scene = replace(scene, bodies=(replace(ball, velocity=tuple(v0)),))
    model, data = load_model(scene)
    dt, g = scene.dt, -scene.gravity[2]
    z0, r = ball.position[2], ball.radius
    assert np.allclose(data.qvel[:3], v0)
    for n in range(1, 401):
        mujoco.mj_step(model, data)
        if data.ncon:
            break
        t = n * dt
        z = data.qpos[2]
        # Semi-implicit Euler, exactly: z0 + v0 t - g dt^2 n (n + 1) / 2 ...
        assert abs(z - (z0 + v0[2] * t - 0.5 * g * dt * dt * n * (n + 1))) < 1e-9
        # ... which is the free fall z0 + v0 t - g t^2 / 2 to within g t dt / 2.
        assert abs(z - (z0 + v0[2] * t - 0.5 * g * t * t)) <= 0.5 * g * t * dt + 1e-9
        assert abs(data.qpos[0] - (ball.position[0] + v0[0] * t)) < 1e-9
    assert n > 50 and data.qpos[2] < r + 0.05       # fell for a while, then touched
    for _ in range(600):
        mujoco.mj_step(model, data)
    assert abs(data.qpos[2] - r) < 5e-3
    assert np.abs(data.qvel).max() < 1e-2


@pytest.mark.parametrize("name", ["arm", "quadruped"])
def test_initial_poses_match_symphys(name):
    scene = load_scene(name)
    model, data = load_model(scene)              # mj_forward done
    for b in scene.bodies:
        pos, mat = _body(model, data, b.name)
        assert np.abs(pos - np.asarray(b.position)).max() < 1e-9, b.name
        q = data.xquat[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, b.name)]
        assert min(np.abs(q - b.quaternion).max(), np.abs(q + b.quaternion).max()) < 1e-9
    for j in scene.joints:
        if j.type is JointType.FIXED:
            continue
        k = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT,
                              j.name + (":0" if j.type is JointType.UNIVERSAL else ""))
        assert np.abs(data.xanchor[k] - np.asarray(j.anchor)).max() < 1e-9, j.name
        assert np.abs(data.xaxis[k] - np.asarray(j.axis)).max() < 1e-9, j.name
        if j.limits is not None:
            assert np.allclose(model.jnt_range[k], j.limits) and model.jnt_limited[k]


def test_quadruped_servos_hold_the_standing_pose():
    scene = load_scene("quadruped")
    model, data = load_model(scene)
    data.ctrl[:] = 0.0
    mujoco.mj_step(model, data, 100)                 # 1 s
    spine, mat = _body(model, data, "spine")
    assert abs(spine[2] - 0.55) < 0.02 and mat[2, 2] > 0.99
    assert np.abs(data.qpos[7:]).max() < 0.05        # joint angles stay near 0


def _two_links(first_parent, first_child, kind, **fields):
    """A base welded to the world and a link, joined by `kind` written with
    the given parent/child order (the link may be the joint's parent)."""
    return (SceneBuilder("links")
            .box("base", size=[0.2, 0.2, 0.2], mass=1.0, position=[0, 0, 1])
            .capsule("link", radius=0.05, length=0.4, mass=0.5, position=[0, 0, 0.65])
            .joint("weld", "fixed", "world", "base")
            .joint("j", kind, first_parent, first_child, anchor=[0, 0, 0.9], **fields)
            .build())


def test_joint_met_from_its_child_side_is_inverted():
    axis = np.array([0.0, 1.0, 0.0])
    scene = _two_links("link", "base", "hinge", axis=axis, limits=[-1, 1])
    model = _model(scene)
    data = mujoco.MjData(model)
    data.qpos[0] = 0.3
    mujoco.mj_forward(model, data)
    pos, mat = _body(model, data, "link")
    # symphys: the child (base) turns by q about the axis relative to the
    # parent (link); with the base fixed the link turns by -q about the anchor.
    expected = _rot(axis, -0.3)
    anchor = np.array([0, 0, 0.9])
    assert np.abs(mat - expected).max() < 1e-12
    assert np.abs(pos - (anchor + expected @ np.array([0, 0, -0.25]))).max() < 1e-12
    assert np.allclose(model.jnt_range[0], [-1, 1])


def test_universal_joint_both_ways():
    a1, a2 = np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])
    q0, q1 = 0.3, -0.2
    for parent, child in (("base", "link"), ("link", "base")):
        scene = _two_links(parent, child, "universal", axis=a1, axis2=a2)
        model = _model(scene)
        data = mujoco.MjData(model)
        for k, q in ((0, q0), (1, q1)):
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"j:{k}")
            data.qpos[model.jnt_qposadr[jid]] = q
        mujoco.mj_forward(model, data)
        _, mat = _body(model, data, "link")
        relative = _rot(a1, q0) @ _rot(a2, q1)       # R_child = R(a1, q0) R(a2, q1) R_child0
        expected = relative if child == "link" else relative.T
        assert np.abs(mat - expected).max() < 1e-12, (parent, child)


def test_closed_loop_names_the_joint():
    scene = (SceneBuilder("loop")
             .sphere("a", radius=0.1, mass=1.0, position=[0, 0, 1])
             .sphere("b", radius=0.1, mass=1.0, position=[0.5, 0, 1])
             .joint("hold_a", "ball", "world", "a", anchor=[0, 0, 1.2])
             .joint("hold_b", "ball", "world", "b", anchor=[0.5, 0, 1.2])
             .joint("tie", "hinge", "a", "b", anchor=[0.25, 0, 1], axis=[0, 1, 0])
             .build())
    with pytest.raises(SceneError, match="joint 'tie'.*loop"):
        to_mjcf(scene)


def test_soft_joint_is_refused_by_name():
    scene = (SceneBuilder("soft")
             .sphere("a", radius=0.1, mass=1.0, position=[0, 0, 1])
             .joint("spring", "fixed", "world", "a", frequency=2.0)
             .build())
    with pytest.raises(SceneError, match="joint 'spring'.*soft joint"):
        to_mjcf(scene)


def test_jointed_body_with_its_own_velocity_is_refused():
    scene = (SceneBuilder("spin")
             .sphere("a", radius=0.1, mass=1.0, position=[0, 0, 1], velocity=[1, 0, 0])
             .joint("pin", "ball", "world", "a", anchor=[0, 0, 1.2])
             .build())
    with pytest.raises(SceneError, match="body 'a'.*velocity"):
        to_mjcf(scene)


def test_timers_report_ns_per_world_step():
    scene = load_scene("quadruped")
    for timer in (time_mj_step, time_rollout):
        out = timer(scene, steps=5, batch=2, repeats=1)
        assert out["ns_per_world_step"] > 0 and out["batch"] == 2 and out["steps"] == 5
        assert out["mujoco_version"] == mujoco.__version__


def test_rollout_matches_mj_step():
    scene = load_scene("quadruped")
    model, data = load_model(scene)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state0, spec)
    from mujoco import rollout
    states, _ = rollout.rollout(model, mujoco.MjData(model), state0[None],
                                np.zeros((1, 10, model.nu)))
    mujoco.mj_step(model, data, 10)
    assert np.abs(states[0, -1, 1:1 + model.nq] - data.qpos).max() < 1e-12


def test_missing_mujoco_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(MujocoUnavailable, match=r"symphys\[bench\]"):
        import_mujoco()
