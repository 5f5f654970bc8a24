"""Bodies with several geoms, geoms off the centre of mass and geoms of the
world, read from MJCF and checked against MuJoCo on the same file: the
geoms' places at the initial pose, where a dumbbell (a capsule bar, a ball
and a box off its centre) and a ball dropped on a fixed step come to rest,
and a gradient with respect to an imported geom's size."""

import dataclasses

import mujoco
import numpy as np
import pytest

import symphys as sp

XML = """
<mujoco model="dumbbells">
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <geom name="step" type="box" size="0.3 0.3 0.05" pos="0.6 0 0.05" euler="0 0 10"/>
    <body name="bell" pos="0 0 0.4" euler="0 0 20">
      <freejoint/>
      <geom name="bar" type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.02" density="2000"/>
      <geom name="left" type="sphere" pos="-0.2 0 0" size="0.06" density="1000"/>
      <geom name="right" type="box" pos="0.2 0 0" size="0.05 0.05 0.05" density="500"/>
    </body>
    <body name="ball" pos="0.6 0.1 0.4">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.05"/>
    </body>
  </worldbody>
</mujoco>
"""


def _mujoco(steps: int):
    m = mujoco.MjModel.from_xml_string(XML)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    start = (d.geom_xpos.copy(), d.geom_xmat.copy())
    for _ in range(steps):
        mujoco.mj_step(m, d)
    return m, d, start


def _scene(dt: float):
    scene = sp.load_mjcf(XML)
    return dataclasses.replace(scene, dt=dt,
                               solver=dataclasses.replace(scene.solver, iterations=20))


def test_geoms_sit_where_mujoco_puts_them():
    """The bell's three geoms become geoms of the body at MuJoCo's places
    (its own shape is its inertia's box, which touches nothing); the step is
    a geom of the world; the ball, one geom at its centre, keeps it as its
    shape. Contact pairs name the geoms, each fixed geom second."""
    scene = sp.load_mjcf(XML)
    m, d, (xpos, xmat) = _mujoco(0)
    assert [g.name for g in scene.geoms] == ["step", "bar", "left", "right"]
    for g in scene.geoms:
        k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, g.name)
        assert np.allclose(g.position, xpos[k], atol=1e-12)
        turn = sp.physics.algebra.quat_to_mat_array(np.asarray(g.quaternion))
        assert np.allclose(turn.ravel(), xmat[k], atol=1e-12)
    assert scene.geoms[0].body == "world" and {g.body for g in scene.geoms[1:]} == {"bell"}
    assert scene.bodies[1].shape is sp.Shape.SPHERE and scene.bodies[1].radius == 0.05
    pairs = {(p.a, p.b) for p in scene.contacts}
    assert {("left", "ground"), ("right", "step"), ("ball", "step"), ("bar", "ball")} <= pairs
    assert all(p.a != "step" for p in scene.contacts)


def test_a_dumbbell_and_a_ball_rest_where_mujocos_do():
    """Dropped from 0.4 m, the dumbbell rests on its ball and its box (the
    bar tilted by asin(1 cm / 40 cm)), the ball on the step; after 3 s both
    engines agree within 0.5 mm (MuJoCo's soft contacts sink about that
    far) and on the bell's rotation within 0.005."""
    m, d, _ = _mujoco(1500)
    traj = sp.simulate(_scene(0.004), 750)
    bell, ball = (m.body("bell").id, m.body("ball").id)
    assert traj.position["bell"][-1][2] == pytest.approx(d.xipos[bell][2], abs=5e-4)
    assert traj.position["ball"][-1][2] == pytest.approx(d.xipos[ball][2], abs=5e-4)
    assert traj.position["ball"][-1][2] == pytest.approx(0.15, abs=1e-6)    # on the step
    # turned since the start, whatever body frame each engine keeps
    start = mujoco.MjData(m)
    mujoco.mj_forward(m, start)
    mine = np.reshape(traj.rotation["bell"][-1], (3, 3)) @ np.reshape(
        traj.rotation["bell"][0], (3, 3)).T
    theirs = d.xmat[bell].reshape(3, 3) @ start.xmat[bell].reshape(3, 3).T
    assert np.abs(mine - theirs).max() < 5e-3, (mine, theirs)
    assert np.abs(traj.velocity["bell"][-1]).max() < 1e-3


def test_gradient_with_respect_to_an_imported_geom_size_matches_central_differences():
    """d(the bell's height after it lands)/d(the left ball's radius) and
    d/d(the step's height): one ball end resting, the height rises by about
    half what the radius grows; against central differences in float64."""
    scene = _scene(0.005)
    steps = 120
    r0 = scene.geoms[2].radius

    def loss(tr):
        return tr.position["bell"][-1, 2] + 0.5 * tr.position["ball"][-1, 2]

    value, grads = sp.value_and_grad(scene, steps, loss, wrt=["left.radius", "step.position"])

    def f(radius=r0, step=np.array(scene.geoms[0].position)):
        traj = sp.simulate(scene, steps, params={"left.radius": radius, "step.position": step})
        return traj.position["bell"][-1, 2] + 0.5 * traj.position["ball"][-1, 2]

    assert value == pytest.approx(f(), rel=1e-12)
    h = 1e-6
    fd_radius = (f(radius=r0 + h) - f(radius=r0 - h)) / (2 * h)
    up = np.array([0.0, 0.0, h])
    step0 = np.array(scene.geoms[0].position)
    fd_step = (f(step=step0 + up) - f(step=step0 - up)) / (2 * h)
    assert grads["left.radius"] == pytest.approx(fd_radius, rel=1e-5, abs=1e-8)
    assert grads["step.position"][2] == pytest.approx(fd_step, rel=1e-5, abs=1e-8)
    assert 0.2 < fd_radius < 0.8 and fd_step == pytest.approx(0.5, abs=0.05)


def test_a_tilted_plane_of_the_world_holds_a_box_as_mujocos_does():
    """A plane of the world that is not the ground (turned 20 degrees here)
    becomes a fixed box under it, as thick as `PLANE_DEPTH`: a box put on it
    (friction 1 > tan 20) stays where it is in both engines (MuJoCo's soft
    friction lets it creep 2 mm down the slope in 1 s), its centre one half
    height above the plane (within MuJoCo's sink)."""
    xml = """
    <mujoco><option timestep="0.002"/><worldbody>
      <geom name="slope" type="plane" size="1 1 .1" euler="20 0 0"/>
      <body name="crate" pos="0 -0.0342 0.094" euler="20 0 0"><freejoint/>
        <geom type="box" size=".1 .1 .1" friction="1"/></body>
    </worldbody></mujoco>"""
    scene = sp.load_mjcf(xml)
    (slope,) = scene.geoms
    assert (slope.body, slope.shape) == ("world", sp.Shape.BOX)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    normal = d.geom_xmat[0].reshape(3, 3)[:, 2]
    start = d.xipos[1].copy()
    for _ in range(500):
        mujoco.mj_step(m, d)
    traj = sp.simulate(dataclasses.replace(scene, dt=0.004), 250)
    mine = traj.position["crate"][-1]
    assert np.abs(mine - start).max() < 1e-4 and np.abs(d.xipos[1] - start).max() < 5e-3
    assert float(mine @ normal) == pytest.approx(0.1, abs=1e-4)
    assert float(d.xipos[1] @ normal) == pytest.approx(0.1, abs=1e-3)


FIXED_ROUND = """
<mujoco><option timestep="0.002"/><worldbody>
  <geom name="rail1" type="capsule" fromto="-0.3 -0.06 0.5 0.3 -0.06 0.5" size="0.02"/>
  <geom name="rail2" type="capsule" fromto="-0.3 0.06 0.5 0.3 0.06 0.5" size="0.02"/>
  <geom name="trough1" type="capsule" fromto="-0.2 0.95 0.5 0.2 0.95 0.5" size="0.02"/>
  <geom name="trough2" type="capsule" fromto="-0.2 1.05 0.5 0.2 1.05 0.5" size="0.02"/>
  <geom name="foot1" type="sphere" pos="1 0.08 0.5" size="0.03"/>
  <geom name="foot2" type="sphere" pos="0.92 -0.06 0.5" size="0.03"/>
  <geom name="foot3" type="sphere" pos="1.08 -0.06 0.5" size="0.03"/>
  <body name="cart" pos="0.02 0.01 0.6" euler="0 0 15"><freejoint/>
    <geom name="cart" type="box" size="0.1 0.1 0.05"/></body>
  <body name="ball" pos="0.03 1.0 0.6"><freejoint/>
    <geom name="ball" type="sphere" size="0.05"/></body>
  <body name="tile" pos="1 0 0.6" euler="0 0 30"><freejoint/>
    <geom name="tile" type="box" size="0.12 0.12 0.05"/></body>
</worldbody></mujoco>"""


def test_boxes_and_a_ball_rest_on_fixed_capsules_and_spheres_as_mujocos_do():
    """A moving box against a fixed capsule or sphere, and a moving sphere
    against a fixed capsule, keep the moving one as a (their routines take
    the two swapped): a cart on two capsule rails rests at rail height +
    radius + half height, a ball in a trough of two capsules at
    sqrt((r + r_ball)^2 - (gap / 2)^2) above their axes, a tile on three
    fixed balls at ball top + half height; MuJoCo (soft contacts, 1 s)
    within its sink of 1 mm."""
    scene = sp.load_mjcf(FIXED_ROUND)
    pairs = {(p.a, p.b) for p in scene.contacts}
    assert {("cart", "rail1"), ("cart", "rail2"), ("ball", "trough1"), ("ball", "trough2"),
            ("tile", "foot1"), ("tile", "foot2"), ("tile", "foot3")} <= pairs
    assert all(a in ("cart", "ball", "tile") for a, _ in pairs)
    traj = sp.simulate(dataclasses.replace(scene, dt=0.004), 250)
    m = mujoco.MjModel.from_xml_string(FIXED_ROUND)
    d = mujoco.MjData(m)
    for _ in range(500):
        mujoco.mj_step(m, d)
    want = {"cart": 0.5 + 0.02 + 0.05, "ball": 0.5 + np.sqrt(0.07 ** 2 - 0.05 ** 2),
            "tile": 0.5 + 0.03 + 0.05}
    for name, height in want.items():
        assert traj.position[name][-1][2] == pytest.approx(height, abs=1e-5), name
        assert d.xipos[m.body(name).id][2] == pytest.approx(height, abs=1e-3), name
        assert np.abs(traj.velocity[name][-1]).max() < 1e-3, name


def test_gradient_through_a_box_on_fixed_capsules_matches_central_differences():
    """d(the cart's height after it lands)/d(one rail's radius): the cart
    tilts onto the thicker rail, its centre rising by half the growth;
    against central differences in float64."""
    scene = dataclasses.replace(sp.load_mjcf(FIXED_ROUND), dt=0.005)
    steps = 80

    def f(radius):
        traj = sp.simulate(scene, steps, params={"rail1.radius": radius})
        return traj.position["cart"][-1, 2]

    value, grads = sp.value_and_grad(scene, steps, lambda tr: tr.position["cart"][-1, 2],
                                     wrt=["rail1.radius"])
    r0, h = scene.geoms[0].radius, 1e-6
    assert value == pytest.approx(f(r0), rel=1e-12)
    fd = (f(r0 + h) - f(r0 - h)) / (2 * h)
    assert grads["rail1.radius"] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    assert fd == pytest.approx(0.5, abs=0.1)
