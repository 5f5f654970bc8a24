"""Robots read from MJCF and URDF files (`sp.load_mjcf`, `sp.load_urdf`),
checked against MuJoCo on the same files: the compiled masses, inertias
and joint axes, the motion under a known force sequence, gradients with
respect to imported parameters, the refusals and `symphys convert`."""

import dataclasses
import json
import re
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pytensor.tensor as pt
import pytest

import symphys as sp
from symphys.cli.main import main as cli
from symphys.learn import nn
from symphys.loop.rollout import rollout
from symphys.mjcf.read import convert_model
from symphys.physics.algebra import quat_to_mat_array
from symphys.scene.elements import SolverMethod

gymnasium_assets = Path(pytest.importorskip("gymnasium").__file__).parent / "envs/mujoco/assets"
CART_POLE = gymnasium_assets / "inverted_pendulum.xml"
DOUBLE = gymnasium_assets / "inverted_double_pendulum.xml"


def _compiled(path, dt=None):
    m = mujoco.MjModel.from_xml_path(str(path))
    if dt is not None:
        m.opt.timestep = dt
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    return m, d


@pytest.mark.parametrize("path", [CART_POLE, DOUBLE], ids=lambda p: p.stem)
def test_masses_inertias_and_axes_are_mujocos(path):
    """Each body's mass, world inertia tensor and centre, and each joint's
    anchor and axis equal MuJoCo's compiled model to 1e-9; names carry over."""
    m, d = _compiled(path)
    scene = sp.load_mjcf(path)
    assert scene.body_names == tuple(m.body(b).name for b in range(1, m.nbody))
    for k, body in enumerate(scene.bodies, start=1):
        assert abs(body.mass - m.body_mass[k]) <= 1e-9
        R = quat_to_mat_array(np.asarray(body.quaternion))
        mine = R @ np.diag(body.inertia) @ R.T
        Ri = d.ximat[k].reshape(3, 3)
        theirs = Ri @ np.diag(m.body_inertia[k]) @ Ri.T
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-9 * np.trace(theirs))
        np.testing.assert_allclose(body.position, d.xipos[k], rtol=0, atol=1e-9)
    for j, joint in enumerate(scene.joints):
        assert joint.name == m.joint(j).name
        np.testing.assert_allclose(joint.axis, d.xaxis[j], rtol=0, atol=1e-9)
        np.testing.assert_allclose(joint.anchor, d.xanchor[j], rtol=0, atol=1e-9)
        assert joint.viscous_damping == pytest.approx(m.dof_damping[j], abs=1e-12)
    motor = scene.motors[0]
    assert (motor.name, motor.joint) == (m.actuator(0).name, m.joint(0).name)
    assert motor.gain == m.actuator_gear[0][0]
    assert motor.command_range == tuple(m.actuator_ctrlrange[0])


def _paths(path, dt: float, ctrl: np.ndarray, gravity=(0.0, 0.0, 9.81), iterations=None,
           **options):
    """Centres of mass (steps + 1, bodies, 3) of the robot in `path` in
    MuJoCo (Euler) and symphys at time step dt under the control sequence
    ctrl (steps, actuators) and `gravity` (by default reversed, so that the
    double pendulum's poles hang), both engines reading the same file."""
    ctrl = np.asarray(ctrl, dtype=float).reshape(len(ctrl), -1)
    m, d = _compiled(path, dt)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    m.opt.gravity[:] = gravity
    theirs = [d.xipos[1:].copy()]
    for u in ctrl:
        d.ctrl[:] = u
        mujoco.mj_step(m, d)
        theirs.append(d.xipos[1:].copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # what `options` drop (tested elsewhere)
        scene = dataclasses.replace(sp.load_mjcf(path, **options), dt=dt)
    if iterations:
        scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver,
                                                                      iterations=iterations))
    assert scene.body_names == tuple(m.body(b).name for b in range(1, m.nbody))
    schedule = nn.Schedule(m.nu, steps=len(ctrl), dt=dt)
    u = pt.tensor("u", shape=ctrl.shape, dtype="float64")
    tr = rollout(scene, len(ctrl), params={"world.gravity": np.asarray(gravity)},
                 controller=schedule, controller_params={"schedule.u": u})
    path = pt.stack([tr.position[n] for n in scene.body_names], axis=1)
    mine = sp.compile([u], path, "numba")(ctrl)
    return np.asarray(mine), np.array(theirs)


MOTOR = '<motor ctrllimited="true" ctrlrange="-1 1" gear="500" joint="slider" name="slide"/>'
VARIANTS = {   # the double pendulum's file, edited: (old text, new text)
    "as shipped": ("", ""),
    "armature 0.3": ('<joint damping="0.05"/>', '<joint damping="0.05" armature="0.3"/>'),
    "position actuator": (MOTOR, '<position ctrllimited="true" ctrlrange="-1 1" kp="300" '
                                 'kv="40" joint="slider" name="slide"/>'),
    "velocity actuator": (MOTOR, '<velocity ctrllimited="true" ctrlrange="-1 1" kv="150" '
                                 'joint="slider" name="slide"/>'),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_motion_under_a_control_sequence_agrees_with_mujoco(variant, tmp_path):
    """1 s of the double pendulum on its cart under a smooth random control
    sequence: the file's force motor (up to 150 N), with armature 0.3 on
    its three joints, or the cart driven by a position (kp 300, kv 40) or
    velocity (kv 150) actuator instead (one file, read by both engines).
    Both integrate with semi-implicit Euler steps (symphys: constraint
    impulses on every body; MuJoCo: generalised coordinates), so they differ
    by O(dt). Measured at dt = 1 ms, the centres of mass stay within 2.1,
    2.2, 0.93 and 0.24 mm of MuJoCo's (of 0.80, 0.76, 0.15 and 0.06 m
    travelled), and each gap halves at 0.5 ms (first order: both converge to
    the same motion)."""
    old, new = VARIANTS[variant]
    text = DOUBLE.read_text()
    assert old in text
    path = tmp_path / "double.xml"
    path.write_text(text.replace(old, new) if old else text)
    knots = np.random.default_rng(0).uniform(-0.3, 0.3, size=11)    # ctrl at 0, 0.1, ... 1 s
    gaps = []
    for dt in (1e-3, 5e-4):
        ctrl = np.interp(np.arange(int(round(1.0 / dt))) * dt, np.linspace(0, 1, 11), knots)
        mine, theirs = _paths(path, dt, ctrl)
        assert np.abs(theirs - theirs[0]).max() > 0.05         # it moves
        gaps.append(np.abs(mine - theirs).max())
    assert gaps[0] < 3e-3, gaps
    assert 1.7 < gaps[0] / gaps[1] < 2.3, gaps                  # first order in dt


def test_gradients_of_an_imported_link_length_and_gain_match_central_differences():
    """d(final cart-and-pole state)/d(the second hinge's anchor height, i.e.
    the first pole's length between joints) and d/d(the motor's gear), on
    the imported double pendulum, against central differences in float64."""
    scene = sp.load_mjcf(DOUBLE)
    steps = 40
    anchor0 = np.array(scene.joints[2].anchor)

    def loss(tr):
        return sum((tr.position[n][-1] ** 2).sum() for n in scene.body_names) + (
            tr.velocity["pole2"][-1] ** 2).sum()

    value, grads = sp.value_and_grad(scene, steps, loss, wrt=["hinge2.anchor", "slide.gain"],
                                     action=np.array([0.2]))

    def f(anchor=anchor0, gain=scene.motors[0].gain):
        traj = sp.simulate(scene, steps, params={"hinge2.anchor": anchor, "slide.gain": gain},
                           action=np.array([0.2]))
        return sum((traj.position[n][-1] ** 2).sum() for n in scene.body_names) + (
            traj.velocity["pole2"][-1] ** 2).sum()

    assert value == pytest.approx(f(), rel=1e-12)
    h = 1e-6
    e = np.array([0.0, 0.0, 1.0])
    fd_anchor = (f(anchor=anchor0 + h * e) - f(anchor=anchor0 - h * e)) / (2 * h)
    fd_gain = (f(gain=500 + 1e-3) - f(gain=500 - 1e-3)) / 2e-3
    assert grads["hinge2.anchor"][2] == pytest.approx(fd_anchor, rel=1e-6)
    assert grads["slide.gain"] == pytest.approx(fd_gain, rel=1e-6)
    assert abs(fd_anchor) > 1e-3 and abs(fd_gain) > 1e-6


@pytest.mark.parametrize("xml, where, why", [
    ("<mujoco><worldbody><body name='a'><joint name='j' type='ball' armature='1'/>"
     "<geom type='sphere' size='.1'/></body></worldbody></mujoco>", "joint 'j'", "armature"),
    ("<mujoco><worldbody><body name='a'><joint name='j' type='ball' stiffness='3'/>"
     "<geom type='sphere' size='.1'/></body></worldbody></mujoco>", "joint 'j'", "stiffness"),
    ("<mujoco><worldbody><body name='a'><freejoint/><geom name='c' type='cylinder' "
     "size='.1 .2'/></body></worldbody></mujoco>", "geom 'c'", "cylinders_as_capsules"),
    ("<mujoco><worldbody><body name='a'><freejoint/><geom name='e' type='ellipsoid' "
     "size='.1 .2 .3'/></body></worldbody></mujoco>", "geom 'e'", "ellipsoid"),
    ("<mujoco><worldbody><body name='a'><joint name='h' type='hinge'/><geom type='sphere' "
     "size='.1'/></body></worldbody><actuator><cylinder name='p' joint='h'/>"
     "</actuator></mujoco>", "actuator 'p'", "dynamics"),
    ("<mujoco><option density='1.2'/><worldbody><body name='a'><freejoint/>"
     "<geom type='sphere' size='.1'/></body></worldbody></mujoco>", "option", "fluid"),
])
def test_unsupported_elements_are_refused_naming_them(xml, where, why):
    with pytest.raises(sp.SymphysError) as err:
        sp.load_mjcf(xml)
    assert where in str(err.value) and why in str(err.value), str(err.value)


MANY_REFUSALS = (
    "<mujoco><option density='1.2'/><worldbody><geom type='plane' size='5 5 1'/>"
    "<body name='a' pos='0 0 1'><freejoint/><geom name='c' type='cylinder' size='.1 .2'/>"
    "</body><body name='b' pos='1 0 1'><joint name='s' type='slide'/><joint name='h'/>"
    "<geom name='e' type='ellipsoid' size='.1 .2 .3'/></body>"
    "<body name='t1' pos='3 0 1'><joint name='j1' armature='50'/><geom size='.1'/></body>"
    "<body name='t2' pos='4 0 1'><joint name='j2'/><geom size='.1'/></body></worldbody>"
    "<tendon><fixed name='tt' stiffness='2'><joint joint='j1' coef='1'/>"
    "<joint joint='j2' coef='-1'/></fixed><fixed name='td'><joint joint='j1' coef='1'/></fixed>"
    "</tendon><actuator><motor name='mt' tendon='td'/><cylinder name='p' joint='j1'/>"
    "</actuator></mujoco>")


def test_every_refusal_of_a_file_is_listed_at_once():
    """One error names every element refused; each reason, with the keyword
    and flag that leave its elements out, is said once."""
    with pytest.raises(sp.SceneError) as err:
        sp.load_mjcf(MANY_REFUSALS, solver_method="pgs")
    msg = str(err.value)
    assert msg.startswith("<MJCF text>: symphys cannot convert 8 elements of this file:"), msg
    for item in ("tendon 'tt': passive, with stiffness 2", "tendon 'td': driven by 'mt'",
                 "option: attribute 'density'", "cylinder geom 'c'", "ellipsoid geom 'e'",
                 "joint 'j1': attribute 'armature' 50",
                 "actuator 'mt'", "actuator 'p'"):
        assert f"    - {item}" in msg, (item, msg)
    for way_out in ("passive_tendons='drop' (symphys convert --drop-passive-tendons)",
                    "heavy_armature='drop' (symphys convert --drop-heavy-armature)"):
        assert msg.count(way_out) == 1, (way_out, msg)
    assert msg.count("on_unsupported='drop' (symphys convert --drop-unsupported)") == 2
    assert msg.count("symphys has no tendons (a passive one") == 1


def test_passive_tendons_are_left_out_on_request(tmp_path, capsys):
    """passive_tendons='drop' (--drop-passive-tendons) leaves out a tendon no
    actuator drives, listed with the forces it made; one driven stays refused."""
    passive = ("<mujoco><worldbody><body name='a'><joint name='j1'/><geom size='.1'/>"
               "<body name='b' pos='0 0 -.5'><joint name='j2'/><geom size='.1'/></body></body>"
               "</worldbody><tendon><fixed name='tt' damping='3'><joint joint='j1' coef='1'/>"
               "<joint joint='j2' coef='1'/></fixed></tendon></mujoco>")
    with pytest.raises(sp.SceneError, match=r"tendon 'tt': passive, with damping 3; symphys "
                                            r"has no tendons.*passive_tendons='drop'"):
        sp.load_mjcf(passive)
    with pytest.warns(UserWarning, match=r"tendon 'tt': passive, with damping 3.*left out"):
        assert len(sp.load_mjcf(passive, passive_tendons="drop").joints) == 2
    path = tmp_path / "tendon.xml"
    path.write_text(passive)
    assert cli(["convert", str(path), "-o", str(tmp_path / "t.json"),
                "--drop-passive-tendons"]) == 0
    assert "tendon 'tt'" in capsys.readouterr().out
    with pytest.raises(sp.SceneError, match="driven by 'mt'"):
        sp.load_mjcf(MANY_REFUSALS, passive_tendons="drop", on_unsupported="drop",
                     heavy_armature="drop")


def test_armature_heavier_than_gauss_seidel_holds_is_kept_for_newton():
    """gymnasium's ant: armature 1 on 40-g legs, 2,000-3,500 times what its
    joints turn, loads as shipped with the Newton solve; with Gauss-Seidel
    it is refused naming the joint and the ratio, or dropped and listed on
    request (which keeps the default solve). The double pendulum's 0.3
    (4 times) carries over with the default solve."""
    ant = gymnasium_assets / "ant.xml"
    scene = sp.load_mjcf(ant)
    assert scene.solver.method is SolverMethod.NEWTON
    assert sorted({j.armature for j in scene.joints}) == [0.0, 1.0]
    with pytest.raises(sp.SceneError, match=r"(?s)8 elements.*heavy_armature='drop' \(symphys "
                       r"convert --drop-heavy-armature\).*joint 'hip_1'.*3521 times"):
        sp.load_mjcf(ant, solver_method="pgs")
    with pytest.raises(sp.SceneError, match="solver_method"):
        sp.load_mjcf(ant, solver_method="sweeps")
    model = mujoco.MjModel.from_xml_path(str(ant))
    out = convert_model(model, heavy_armature="drop")
    assert len(out.dropped) == 8 and all("armature" in line for line in out.dropped)
    assert all(j.armature == 0.0 for j in out.scene.joints)
    assert out.scene.solver.method is SolverMethod.PGS
    light = DOUBLE.read_text().replace('<joint damping="0.05"/>',
                                       '<joint damping="0.05" armature="0.3"/>')
    assert [j.armature for j in sp.load_mjcf(light).joints] == [0.3, 0.3, 0.3]


def test_an_ant_dropped_on_the_ground_settles_where_mujocos_does(tmp_path):
    """gymnasium's ant without its armature (one file, both engines; MuJoCo
    at its defaults, symphys with the Newton solve), dropped from 0.75 m at
    dt = 5 ms: after 2 s both stand still on their four feet, the torso's
    centre within 5 mm of MuJoCo's 0.380 m (measured: 0.3816 m; with
    Gauss-Seidel 0.377 m at 100 sweeps, 0.382 m at 300, and at 8 sweeps the
    light legs fold and the torso sits on the ground at 0.27 m). The 2 cm
    of geom margins MuJoCo keeps between feet and floor are in it (the
    shapes grow by their margins)."""
    path = tmp_path / "ant.xml"
    path.write_text((gymnasium_assets / "ant.xml").read_text().replace('armature="1"',
                                                                      'armature="0"'))
    dt, steps = 0.005, 400
    m, d = _compiled(path, dt)
    for _ in range(steps):
        mujoco.mj_step(m, d)
    scene = sp.load_mjcf(path)
    scene = dataclasses.replace(scene, dt=dt, solver=dataclasses.replace(
        scene.solver, method=SolverMethod.NEWTON, newton_iterations=50))
    traj = sp.simulate(scene, steps)
    mine = traj.position["torso"]
    assert abs(mine[-1, 2] - d.xipos[1][2]) < 5e-3, (mine[-1], d.xipos[1])
    assert np.abs(mine[-1, :2]).max() < 1e-3 and np.abs(d.xipos[1][:2]).max() < 1e-3
    assert np.abs(traj.velocity["torso"][-1]).max() < 1e-2 and np.abs(d.qvel[:3]).max() < 1e-2
    feet = [n for n in scene.body_names if n.startswith("body")]
    assert len(feet) == 4 and all(traj.position[f][-1, 2] < 0.3 for f in feet)


def test_dropping_unsupported_geoms_lists_them():
    """on_unsupported="drop": a geom symphys has no shape for is left out
    and listed; the body keeps MuJoCo's mass and inertia and its other geom
    as its shape. A geom the dropped one's mass pulls off the centre of mass
    stays, as a geom of the body at its place (the body is then drawn as its
    inertia's box)."""
    xml = ("<mujoco><worldbody><geom type='plane' size='5 5 1'/>"
           "<body name='a' pos='0 0 1'><freejoint/><geom name='s' type='sphere' size='.1'/>"
           "<geom name='m' type='ellipsoid' size='.1 .05 .05' pos='0 0 .3' contype='0' "
           "conaffinity='0' mass='{mass}'/></body></worldbody></mujoco>")
    heavy = convert_model(mujoco.MjModel.from_xml_string(xml.format(mass=1)),
                          on_unsupported="drop")
    assert [line.split(":")[0] for line in heavy.dropped] == ["ellipsoid geom 'm' of body 'a'"]
    assert heavy.scene.bodies[0].shape is sp.Shape.BOX
    (geom,) = heavy.scene.geoms
    assert (geom.name, geom.body, geom.shape, geom.radius) == ("s", "a", sp.Shape.SPHERE, 0.1)
    assert geom.position == pytest.approx((0.0, 0.0, 1.0), abs=1e-12)
    assert {(p.a, p.b) for p in heavy.scene.contacts} == {("s", "ground")}
    xml = xml.format(mass=0)
    model = mujoco.MjModel.from_xml_string(xml)
    out = convert_model(model, source="<xml>", on_unsupported="drop")
    assert len(out.dropped) == 1 and "geom 'm'" in out.dropped[0], out.dropped
    body = out.scene.bodies[0]
    assert body.mass == pytest.approx(model.body_mass[1], abs=1e-12)
    assert body.shape is sp.Shape.SPHERE and body.radius == 0.1
    with pytest.warns(UserWarning, match="geom 'm'"):
        sp.load_mjcf(xml, on_unsupported="drop")
    with pytest.raises(sp.SceneError, match="on_unsupported='drop'"):
        sp.load_mjcf(xml)


def test_contact_pairs_follow_mujocos_filters():
    """contype/conaffinity, the parent filter and <exclude> decide the pairs;
    a plane of the world facing up is the ground."""
    xml = ("<mujoco><worldbody><geom name='floor' type='plane' size='5 5 1' pos='0 0 -.5'/>"
           "<body name='a' pos='0 0 1'><freejoint/><geom type='sphere' size='.1'/>"
           "<body name='b' pos='0 0 .3'><joint type='hinge'/><geom type='sphere' size='.1'/>"
           "</body></body>"
           "<body name='c' pos='1 0 1'><freejoint/><geom type='box' size='.1 .1 .1'/></body>"
           "<body name='d' pos='2 0 1'><freejoint/><geom type='sphere' size='.1' "
           "contype='2' conaffinity='2'/></body></worldbody>"
           "<contact><exclude body1='b' body2='c'/></contact></mujoco>")
    scene = sp.load_mjcf(xml)
    pairs = {frozenset((p.a, p.b)) for p in scene.contacts}
    assert pairs == {frozenset(p) for p in [("a", "ground"), ("b", "ground"), ("c", "ground"),
                                            ("a", "c")]}
    assert scene.ground.height == -0.5


def test_urdf_reads_through_mujoco(tmp_path):
    """A two-link URDF arm: MuJoCo's URDF compiler, then the same conversion."""
    link = ("<link name='{n}'><inertial><origin xyz='0 0 0.25'/><mass value='{m}'/>"
            "<inertia ixx='0.02' iyy='0.02' izz='0.001' ixy='0' ixz='0' iyz='0'/></inertial>"
            "<collision><origin xyz='0 0 0.25'/><geometry><box size='0.05 0.05 0.5'/>"
            "</geometry></collision></link>")
    urdf = ("<robot name='arm'>" + "<link name='base'/>" + link.format(n="upper", m=1.0)
            + link.format(n="lower", m=0.5)
            + "<joint name='shoulder' type='revolute'><parent link='base'/><child link='upper'/>"
              "<axis xyz='0 1 0'/><limit lower='-1' upper='1' effort='5' velocity='2'/></joint>"
              "<joint name='elbow' type='continuous'><parent link='upper'/><child link='lower'/>"
              "<origin xyz='0 0 0.5'/><axis xyz='0 1 0'/></joint></robot>")
    path = tmp_path / "arm.urdf"
    path.write_text(urdf)
    scene = sp.load_urdf(path)
    assert scene.body_names == ("upper", "lower")
    assert [j.name for j in scene.joints] == ["shoulder", "elbow"]
    assert scene.joints[0].limits == (-1.0, 1.0) and scene.joints[1].limits is None
    assert scene.bodies[1].mass == 0.5
    np.testing.assert_allclose(scene.joints[1].anchor, [0, 0, 0.5], atol=1e-12)


def test_convert_writes_a_scene_file_that_loads_back(tmp_path, capsys):
    out = tmp_path / "idp.json"
    assert cli(["convert", str(DOUBLE), "-o", str(out)]) == 0
    assert "3 bodies, 3 joints, 1 motor, 0 contact pairs" in capsys.readouterr().out
    assert sp.load_scene(out) == dataclasses.replace(sp.load_mjcf(DOUBLE), source=str(out),
                                                     raw=out.read_text())
    assert json.loads(out.read_text())["bodies"][0]["name"] == "cart"
    assert cli(["convert", str(tmp_path / "missing.xml")]) == 2
    with pytest.raises(sp.SceneError, match="sp.load_mjcf"):
        sp.load_scene(DOUBLE)


def test_the_command_line_simulates_a_robot_file(capsys):
    assert cli(["simulate", str(CART_POLE), "--steps", "5"]) == 0
    assert "pole" in capsys.readouterr().out



def test_the_bench_ant_is_gymnasiums_file_on_both_engines():
    """`symphys bench --scenes ant`: symphys reads gymnasium's ant.xml and
    MuJoCo's peer times that very file."""
    from symphys.bench.cases import bench_scene, robot_file
    from symphys.bench.runner import measure_peer

    path = robot_file("ant")
    assert path == gymnasium_assets / "ant.xml"
    scene = bench_scene("ant")
    assert len(scene.bodies) == 13 and len(scene.motors) == 8
    assert {j.armature for j in scene.joints} == {0.0}        # too heavy: left out
    rows = measure_peer("mujoco", "ant", 2)
    assert [r["method"] for r in rows] == ["mj_step", "rollout"]
    assert all(r["scene"] == "ant" and r["ns_per_world_step"] > 0 for r in rows)


def test_gradients_of_imported_servo_gains_match_central_differences(tmp_path):
    """A position actuator's kp and kv become the torque motor's stiffness
    and damping: parameters with gradients, checked against central
    differences on the double pendulum with its cart on a PD servo."""
    old, new = VARIANTS["position actuator"]
    path = tmp_path / "double.xml"
    path.write_text(DOUBLE.read_text().replace(old, new))
    scene = sp.load_mjcf(path)
    motor = scene.motors[0]
    assert (motor.gain, motor.stiffness, motor.damping) == (300.0, 300.0, 40.0)
    # Feedback gains are inputs of their own: a graph of the plain motor's
    # scene (or of one without explicit inertias) is not reused for it.
    plain = sp.load_mjcf(DOUBLE)
    assert scene.structure_key() != plain.structure_key()
    assert plain.structure_key() != dataclasses.replace(plain, bodies=tuple(
        dataclasses.replace(b, inertia=None) for b in plain.bodies)).structure_key()
    names = ["slide.stiffness", "slide.damping", "slide.gain"]

    def loss(tr):
        return (tr.position["pole2"][-1] ** 2).sum() + (tr.velocity["cart"][-1] ** 2).sum()

    action = np.array([0.5])
    _, grads = sp.value_and_grad(scene, 60, loss, wrt=names, action=action)
    for name in names:
        value = float(scene.parameters()[name])

        def f(x):
            tr = sp.simulate(scene, 60, params={name: x}, action=action)
            return (tr.position["pole2"][-1] ** 2).sum() + (tr.velocity["cart"][-1] ** 2).sum()

        h = 1e-4 * value
        numeric = (f(value + h) - f(value - h)) / (2 * h)
        assert float(grads[name]) == pytest.approx(numeric, rel=1e-5), name
        assert abs(numeric) > 1e-6, name


def test_a_planar_walker_floating_under_joint_torques_moves_as_in_mujoco(tmp_path):
    """gymnasium's walker2d: its root's two slides and hinge become one
    planar joint; its six hinges keep their damping and armature. Without
    gravity, joint limits or the floor (MuJoCo's soft limits and contacts
    differ from symphys' stiff ones), driven 1 s by smooth random torques
    on its six motors: the centres of mass stay within 3.7 mm of MuJoCo's
    at dt = 1 ms (of 0.33 m travelled), 1.9 mm at 0.5 ms (first order)."""
    text = (gymnasium_assets / "walker2d.xml").read_text()
    for old, new in (('<joint armature="0.01" damping=".1" limited="true"/>',
                      '<joint armature="0.01" damping=".1" limited="false"/>'),
                     ('<geom conaffinity="1" condim="3" name="floor"',
                      '<geom conaffinity="0" contype="0" condim="3" name="floor"')):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "walker.xml"
    path.write_text(text)
    scene = sp.load_mjcf(path)
    assert [j.type for j in scene.joints].count(sp.JointType.PLANAR) == 1
    assert scene.joints[0].name == "rooty" and scene.joints[0].parent == "world"
    knots = np.random.default_rng(1).uniform(-0.05, 0.05, size=(11, 6))
    gaps = []
    for dt in (1e-3, 5e-4):
        t = np.arange(int(round(1.0 / dt))) * dt
        ctrl = np.stack([np.interp(t, np.linspace(0, 1, 11), knots[:, i]) for i in range(6)], 1)
        mine, theirs = _paths(path, dt, ctrl, gravity=(0.0, 0.0, 0.0))
        assert np.abs(theirs - theirs[0]).max() > 0.2
        gaps.append(np.abs(mine - theirs).max())
    assert gaps[0] < 5e-3, gaps
    assert 1.7 < gaps[0] / gaps[1] < 2.3, gaps


def test_hopper_loads_with_its_self_contacts():
    """gymnasium's hopper: a planar root, MuJoCo's pairs (every body on the
    floor; torso-leg, torso-foot and thigh-foot, capsule-capsule, the
    parent filter taking the rest); its armature (25 times what the thigh
    turns) kept for the Newton solve, too heavy for Gauss-Seidel."""
    hopper = gymnasium_assets / "hopper.xml"
    assert [j.armature for j in sp.load_mjcf(hopper).joints] == [0.0, 1.0, 1.0, 1.0]
    with pytest.raises(sp.SceneError, match="thigh_joint.*armature"):
        sp.load_mjcf(hopper, solver_method="pgs")
    out = convert_model(mujoco.MjModel.from_xml_path(str(hopper)), heavy_armature="drop")
    assert len(out.dropped) == 3 and all("armature" in line for line in out.dropped)
    assert [j.type for j in out.scene.joints] == [sp.JointType.PLANAR] + [
        sp.JointType.HINGE] * 3
    assert {frozenset((p.a, p.b)) for p in out.scene.contacts} == {frozenset(p) for p in [
        *((b, "ground") for b in ("torso", "thigh", "leg", "foot")), ("torso", "leg"),
        ("torso", "foot"), ("thigh", "foot")]}


def test_half_cheetah_joint_springs_move_as_in_mujoco(tmp_path):
    """gymnasium's half-cheetah: stiff joint springs (120-240 N m/rad) and
    damping on its six hinges, a planar root; its torso's two geoms (neither
    at the centre of mass) kept as geoms of the torso. Without gravity,
    limits or the floor, armature 0.02 (the file's 0.1 outweighs its light
    shins), driven 1 s by
    smooth random torques, 60 sweeps (the springs on light links need more
    than 8): within 2.9 mm of MuJoCo at dt = 1 ms (of 0.13 m travelled),
    1.5 mm at 0.5 ms. Springs are implicit in symphys, explicit under
    MuJoCo's Euler: both first order."""
    text = (gymnasium_assets / "half_cheetah.xml").read_text()
    for old, new in (('<joint armature=".1" damping=".01" limited="true"',
                      '<joint armature=".02" damping=".01" limited="false"'),
                     ('<geom conaffinity="1" condim="3" material="MatPlane" name="floor"',
                      '<geom conaffinity="0" contype="0" condim="3" material="MatPlane" '
                      'name="floor"')):
        assert old in text
        text = text.replace(old, new)
    text = re.sub(r' range="[^"]*"', "", text)
    path = tmp_path / "cheetah.xml"
    path.write_text(text)
    scene = sp.load_mjcf(path)
    assert [(g.name, g.body) for g in scene.geoms] == [("torso_geom", "torso"), ("head", "torso")]
    springs = {j.name: j.spring_stiffness for j in scene.joints if j.spring_stiffness}
    assert springs == {"bthigh": 240, "bshin": 180, "bfoot": 120, "fthigh": 180, "fshin": 120,
                       "ffoot": 60}
    knots = np.random.default_rng(1).uniform(-0.3, 0.3, size=(11, 6))
    gaps = []
    for dt in (1e-3, 5e-4):
        t = np.arange(int(round(1.0 / dt))) * dt
        ctrl = np.stack([np.interp(t, np.linspace(0, 1, 11), knots[:, i]) for i in range(6)], 1)
        mine, theirs = _paths(path, dt, ctrl, gravity=(0.0, 0.0, 0.0), iterations=60,
                              on_unsupported="drop")
        assert np.abs(theirs - theirs[0]).max() > 0.1
        gaps.append(np.abs(mine - theirs).max())
    assert gaps[0] < 4e-3, gaps
    assert 1.7 < gaps[0] / gaps[1] < 2.3, gaps


def test_without_mujoco_the_loaders_say_how_to_install_it(monkeypatch):
    """`mujoco` is an extra: without it, one error line says what to install."""
    import sys

    import symphys.mjcf
    monkeypatch.delitem(sys.modules, "symphys.mjcf.read")
    monkeypatch.delattr(symphys.mjcf, "read")
    monkeypatch.setitem(sys.modules, "mujoco", None)      # import mujoco fails
    with pytest.raises(sp.SymphysError, match=r"pip install 'symphys\[mjcf\]'"):
        sp.load_mjcf(DOUBLE)


CONE = """
<mujoco><option timestep="0.001" gravity="6.9367 6.9367 -9.81"/>
<worldbody>
  <body name="bob" pos="0 0 1">
    <joint name="swivel" type="ball" range="0 30"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03" contype="0" conaffinity="0"/>
  </body>
</worldbody></mujoco>"""


def test_a_ball_joint_cone_holds_a_pendulum_as_mujocos_does():
    """A ball joint's range (30 degrees, the cone on its turn's angle)
    becomes limits [0, pi/6]. Gravity tilted 45 degrees across x and y
    swings the pendulum from rest: both engines follow the same swing until
    the cone (within 3% of the angle at 0.1 s), then symphys holds it at
    30 degrees to 1e-6 (stiff limit rows) where MuJoCo's soft limit lets it
    overshoot and settle 0.7 degrees beyond."""
    scene = sp.load_mjcf(CONE)
    assert scene.joints[0].limits == pytest.approx((0.0, np.pi / 6), abs=1e-12)
    m = mujoco.MjModel.from_xml_string(CONE)
    d = mujoco.MjData(m)
    theirs = [0.0]
    for k in range(2000):
        mujoco.mj_step(m, d)
        if (k + 1) % 4 == 0:
            theirs.append(2 * np.arccos(min(1.0, abs(d.qpos[0]))))
    scene = dataclasses.replace(scene, dt=0.004,
                                solver=dataclasses.replace(scene.solver, iterations=20))
    rot = np.reshape(sp.simulate(scene, 500).rotation["bob"], (-1, 3, 3))
    mine = np.arccos(np.clip((np.trace(rot, axis1=1, axis2=2) - 1) / 2, -1, 1))
    assert mine[25] == pytest.approx(theirs[25], rel=0.03)        # 0.1 s, on the way
    assert mine.max() == pytest.approx(np.pi / 6, abs=1e-6)
    assert mine[-1] == pytest.approx(np.pi / 6, abs=1e-6)
    assert np.pi / 6 < theirs[-1] < np.pi / 6 + np.radians(1.0)
    # on the cone where gravity pulls: the bob's axis leans towards +x +y
    tip = rot[-1] @ [0.0, 0.0, -1.0]
    assert tip[0] == pytest.approx(tip[1], abs=1e-6) and tip[0] > 0


def test_shipped_robot_files_load_by_name(capsys):
    """The example robots shipped with symphys (symphys/robots/) load by file
    name alone, and `symphys list` shows them."""
    pendulum = sp.load_mjcf("cart_double_pendulum.xml")
    assert pendulum.body_names == ("cart", "pole1", "pole2")
    assert [m.name for m in pendulum.motors] == ["slide"]
    arm = sp.load_urdf("two_link_arm.urdf")
    assert [j.name for j in arm.joints] == ["shoulder", "elbow"]
    assert cli(["list"]) == 0
    out = capsys.readouterr().out
    assert "cart_double_pendulum.xml" in out and "two_link_arm.urdf" in out
