"""MJCF bodies with several joints (a chain of light links,
`symphys.mjcf.joints.chain`) and armature heavier than Gauss-Seidel holds,
under the Newton solve the conversion picks for them, against MuJoCo on
the same files."""

import dataclasses
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest

import symphys as sp
from symphys.mjcf.joints import LINK_SHARE
from symphys.scene.elements import SolverMethod

gymnasium_assets = Path(pytest.importorskip("gymnasium").__file__).parent / "envs/mujoco/assets"

# An arm on two hinges through two anchors (the second with armature), and
# a hand on a slide with a spring and a limited hinge; gravity tilted so
# that the initial pose swings.
ARM = """<mujoco><option timestep="0.001" integrator="Euler" gravity="2 1 -9.81"/><worldbody>
<body name="arm" pos="0 0 1"><joint name="a1" type="hinge" axis="0 1 0" damping="0.01"/>
<joint name="a2" type="hinge" axis="1 0 0" pos="0 0 0.05" armature="0.01"/>
<geom type="capsule" fromto="0 0 0 0.3 0 -0.3" size="0.03" mass="1"/>
<body name="hand" pos="0.3 0 -0.3"><joint name="a3" type="slide" axis="1 0 0" stiffness="30"/>
<joint name="a4" type="hinge" axis="0 0 1" range="-30 30" limited="true"/>
<geom type="box" size="0.05 0.02 0.04" pos="0.05 0.01 0" mass="0.3"/></body>
</body></worldbody></mujoco>"""


def _mujoco_path(model, bodies, steps):
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    ids = [model.body(b).id for b in bodies]
    out = [data.xipos[ids].copy()]
    for _ in range(steps):
        mujoco.mj_step(model, data)
        out.append(data.xipos[ids].copy())
    return np.array(out)


def test_a_body_with_several_joints_moves_as_in_mujoco():
    """Each of a body's k joints keeps its name, coordinate, limits, spring
    and armature, through k - 1 links of LINK_SHARE (1%) of the body's
    mass; the masses add up to MuJoCo's. Swinging 0.5 s under tilted
    gravity at dt = 1 ms (semi-implicit Euler in both), the centres of mass
    stay within 1 mm (arm; measured 0.60) and 4 mm (hand; 2.45) of MuJoCo's
    over 0.20 and 0.39 m of travel. (At 1 s: 1.5 and 2.7 mm, halving with
    dt; links of 0.1% do no better, 3.1 mm at every dt.)"""
    model = mujoco.MjModel.from_xml_string(ARM)
    scene = sp.load_mjcf(ARM)
    assert scene.solver.method is SolverMethod.NEWTON
    assert [(j.name, j.parent, j.child) for j in scene.joints] == [
        ("a1", "world", "arm_a1_link"), ("a2", "arm_a1_link", "arm"),
        ("a3", "arm", "hand_a3_link"), ("a4", "hand_a3_link", "hand")]
    a2, a3, a4 = scene.joints[1:]
    assert (a2.armature, a3.spring_stiffness) == (0.01, 30.0)
    assert a4.limits == pytest.approx((-np.pi / 6, np.pi / 6), abs=1e-12)
    mass = {b.name: b.mass for b in scene.bodies}
    assert mass["arm_a1_link"] == pytest.approx(LINK_SHARE * model.body("arm").mass, rel=1e-12)
    assert mass["arm"] + mass["arm_a1_link"] == pytest.approx(model.body("arm").mass, rel=1e-12)
    steps = 500
    theirs = _mujoco_path(model, ["arm", "hand"], steps)
    traj = sp.simulate(scene, steps)
    for k, (body, bound) in enumerate((("arm", 1e-3), ("hand", 4e-3))):
        assert np.abs(theirs[:, k] - theirs[0, k]).max() > 0.15
        gap = np.abs(traj.position[body] - theirs[:, k]).max()
        assert gap < bound, (body, gap)


def _ant_bent(deg: int = 50) -> str:
    """gymnasium's ant with its ankles posed mid-range: each ankle body turned
    `deg` about its axis, the joint's ref the same angle (the same robot
    with qpos0 inside the ankles' ranges, which as shipped it starts 30
    degrees outside)."""
    text = (gymnasium_assets / "ant.xml").read_text()

    def turn(match):
        pos, gap, axis, k = match.groups()
        angle = deg if k in "14" else -deg
        return (f'<body pos="{pos}" axisangle="{axis} {angle}">{gap}'
                f'<joint axis="{axis}" name="ankle_{k}" ref="{angle}"')

    out, n = re.subn(r'<body pos="([^"]+)">(\s*)<joint axis="([^"]+)" name="ankle_(\d)"',
                     turn, text)
    assert n == 4
    return out


def test_the_ant_with_its_armature_drops_as_in_mujoco():
    """gymnasium's ant loads as shipped (armature 1 on 40-g legs, kept: the
    Newton solve); posed with its ankles inside their ranges and dropped
    from 0.75 m at dt = 5 ms, its torso's height stays within 2.5 cm of
    MuJoCo's (the file's RK4) through the landing (measured 1.57 cm; 2.19
    cm for the ant without armature, `test_mjcf_import`) and within 3 mm
    at 1 s, where both stand on bent legs at 0.525 m (measured 0.1 mm)."""
    text = _ant_bent()
    model = mujoco.MjModel.from_xml_string(text)
    model.opt.timestep = 0.005
    steps = 200
    theirs = _mujoco_path(model, ["torso"], steps)[:, 0, 2]
    scene = sp.load_mjcf(text)
    assert {j.armature for j in scene.joints} == {0.0, 1.0}
    traj = sp.simulate(dataclasses.replace(scene, dt=0.005), steps)
    mine = traj.position["torso"][:, 2]
    assert theirs[-1] < 0.55 and theirs.min() < 0.55
    gap = np.abs(mine - theirs).max()
    assert gap < 2.5e-2 and abs(mine[-1] - theirs[-1]) < 3e-3, (gap, mine[-1], theirs[-1])


def test_gymnasium_robots_load_as_shipped(tmp_path, capsys):
    """ant, hopper, half_cheetah, walker2d and reacher load with no options:
    the Newton solve where armature is heavy for Gauss-Seidel or a body has
    several joints (reacher's target: two slides through one link), the
    default solve otherwise; `symphys convert` writes the method and the
    links into the scene file, and `--solver-method pgs` refuses the heavy
    armature as before."""
    from symphys.cli.main import main as cli

    methods = {name: sp.load_mjcf(gymnasium_assets / f"{name}.xml").solver.method
               for name in ("ant", "hopper", "half_cheetah", "walker2d", "reacher")}
    assert methods == {"ant": SolverMethod.NEWTON, "hopper": SolverMethod.NEWTON,
                       "half_cheetah": SolverMethod.NEWTON, "walker2d": SolverMethod.PGS,
                       "reacher": SolverMethod.NEWTON}
    out = tmp_path / "reacher.json"
    assert cli(["convert", str(gymnasium_assets / "reacher.xml"), "-o", str(out)]) == 0
    scene = sp.load_scene(out)
    assert scene.solver.method is SolverMethod.NEWTON
    joints = {j.name: (j.parent, j.child) for j in scene.joints}
    assert joints["target_x"] == ("world", "target_target_x_link")
    assert joints["target_y"] == ("target_target_x_link", "target")
    assert {j.name: j.armature for j in scene.joints}["joint0"] == 1.0
    capsys.readouterr()
    assert cli(["convert", str(gymnasium_assets / "reacher.xml"), "-o", str(out),
                "--solver-method", "pgs"]) != 0
    assert re.search(r"joint 'joint0': attribute 'armature' 1", capsys.readouterr().err)


def _period(signal, dt):
    """Mean time between downward zero crossings of a sampled signal."""
    k = np.where((signal[:-1] > 0) & (signal[1:] <= 0))[0]
    times = (k + signal[k] / (signal[k] - signal[k + 1])) * dt
    return np.diff(times).mean()


def test_armature_is_a_rotor_on_the_joint_coordinate():
    """MuJoCo's armature is the energy 1/2 I_a q'^2 of the joint coordinate:
    a hinge pendulum (1 kg at 0.5 m) with armature 1 (1,000 times its own
    inertia: the Newton solve) swings with period 2 pi sqrt((I + I_a) /
    (m g l)) = 3.1731 s (at 0.1 rad, 3.1751 s). Measured at dt 5 ms:
    3.1751 s; MuJoCo 3.1752 s."""
    xml = """<mujoco><option timestep="0.005" integrator="Euler"/><worldbody>
    <body name="p" pos="0 0 1"><joint name="h" axis="0 1 0" armature="1"/>
    <geom type="sphere" size="0.05" pos="0 0 -0.5" mass="1"/></body></worldbody></mujoco>"""
    scene = sp.load_mjcf(xml)
    assert scene.solver.method is SolverMethod.NEWTON
    inertia = 0.25 + 0.4 * 0.05 ** 2
    analytic = 2 * np.pi * np.sqrt((inertia + 1.0) / (9.81 * 0.5))
    rate = 0.2                       # rad/s at the bottom: an amplitude of 0.1 rad
    steps = 1300
    traj = sp.simulate(scene, steps, params={
        "p.angular_velocity": np.array([0.0, rate, 0.0]),
        "p.velocity": np.cross([0.0, rate, 0.0], [0.0, 0.0, -0.5])})
    mine = _period(traj.position["p"][1:, 0], 0.005)
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    data.qvel[0] = rate
    angles = []
    for _ in range(steps):
        mujoco.mj_step(model, data)
        angles.append(data.qpos[0])
    theirs = _period(np.array(angles), 0.005)
    assert mine == pytest.approx(theirs, rel=2e-4), (mine, theirs)
    assert mine == pytest.approx(analytic * (1 + 0.1 ** 2 / 16), rel=1e-3), (mine, analytic)


def test_gradients_through_a_body_s_several_joints_match_central_differences():
    """On the arm and hand above, 100 steps: the gradient of the hand's final
    position and spin with respect to the first chain's damping (world to
    link), its armature (link to body) and the second chain's spring (body
    to link) matches central differences to 1e-3 (measured 4e-4, 2e-5 and
    1e-5: the Newton solve stops at a residual of 1e-7)."""
    scene = sp.load_mjcf(ARM)
    names = ["a1.viscous_damping", "a2.armature", "a3.spring_stiffness"]
    steps = 100

    def loss(traj):
        return ((traj.position["hand"][-1] ** 2).sum()
                + (traj.angular_velocity["hand"][-1] ** 2).sum())

    _, grads = sp.value_and_grad(scene, steps, loss, wrt=names)
    for name in names:
        value = float(np.asarray(scene.parameters()[name]))
        h = 1e-5 * value

        def f(x):
            traj = sp.simulate(scene, steps, params={name: x})
            return float((traj.position["hand"][-1] ** 2).sum()
                         + (traj.angular_velocity["hand"][-1] ** 2).sum())

        numeric = (f(value + h) - f(value - h)) / (2 * h)
        assert abs(numeric) > 1e-3, name
        assert float(grads[name]) == pytest.approx(numeric, rel=1e-3), name


@pytest.mark.parametrize("armature", [0.0, 1.0])
def test_a_strong_motor_on_a_light_link_turns_it_as_in_mujoco(armature):
    """A 60 N m motor on a 36-g link (the reacher's arm under command): one
    step's spin as MuJoCo's. The joint's drift correction reads the
    velocities before the motor's impulse; read after it, the free spin
    (about 15,000 rad/s) broke the hinge."""
    xml = f"""<mujoco><option timestep="0.01" gravity="0 0 0"/><worldbody>
<body name="arm" pos="0 0 .01"><joint name="j" type="hinge" axis="0 0 1" armature="{armature}"/>
<geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.01"/></body></worldbody>
<actuator><motor joint="j" gear="200" ctrllimited="true" ctrlrange="-1 1"/></actuator></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.ctrl[:] = 0.3
    mujoco.mj_step(m, d)
    scene = sp.load_mjcf(xml, solver_method="newton")
    spin = sp.simulate(scene, 1, action=np.array([0.3])).angular_velocity["arm"][1]
    np.testing.assert_allclose(spin, [0.0, 0.0, d.qvel[0]], rtol=1e-3, atol=1e-6)
