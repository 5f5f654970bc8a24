"""Capsule-box and box-box contacts on the default backend (the Numba
kernels), checked against their analytic resting poses and motions: a box
resting turned on a box (face corners), two planks crossed (only the edge
crossings hold), a box over a step's edge (held while its centre is over
the step, tipped off past it), a box balanced edge on edge (the edge-edge
axis), a capsule across a box's edges and along its face; a gradient
through box-box friction against central differences; no two candidate
points of a pair at one place."""

import dataclasses

import numpy as np
import pytest

import symphys as sp
from symphys.physics.algebra import quat_to_mat_array
from symphys.physics.contacts import POINTS
from symphys.physics.kernels.rows import contacts_numba
from symphys.physics.kernels.layout import BODY, CONTACT_CODES, STATE
from symphys.physics.shapes import FAR
from symphys.scene.elements import ContactKind

BASE = 0.5            # the fixed lower box's centre height
DT, SWEEPS = 0.004, 20


def _quat(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return [np.cos(angle / 2), *(np.sin(angle / 2) * axis)]


def _on_base(base_size, top, **kwargs):
    """A box `base` welded to the world at height BASE, and body `top`
    (a (shape, fields) pair) free above it."""
    shape, fields = top
    return (sp.SceneBuilder("stack", dt=DT, iterations=SWEEPS, **kwargs)
            .box("base", size=base_size, mass=10.0, position=[0, 0, BASE])
            .body("top", shape, **fields)
            .joint("hold", "fixed", "world", "base", anchor=[0, 0, BASE])
            .contacts([("top", "base")])
            .build())


def _tilt(rotation):
    """Angle (rad) between a body's z axis and the world's."""
    return float(np.arccos(np.clip(np.asarray(rotation).reshape(3, 3)[2, 2], -1, 1)))


def _candidates(kind, pose_a, size_a, pose_b, size_b):
    """The existing candidate contact points of a pair (a then b) on the
    Numba kernel: (P, 7), the point on a's surface, the one on b's and the
    gap. A pose is (position,
    quaternion or rotation matrix); a size is a box's half sizes or a capsule's (radius, half
    length)."""
    state, body = np.zeros((2, STATE.width)), np.zeros((2, BODY.width))
    for i, ((x, q), size) in enumerate(((pose_a, size_a), (pose_b, size_b))):
        state[i, STATE.at("position"):][:3] = x
        q = np.asarray(q, float).ravel()
        state[i, STATE.at("rotation"):][:9] = q if q.size == 9 else quat_to_mat_array(q).ravel()
        if len(size) == 3:
            body[i, BODY.at("half_size"):][:3] = size
        else:
            body[i, BODY.at("radius")], body[i, BODY.at("half_length")] = size
    points = []
    for point in range(POINTS[kind]):
        gap, _, ra, rb = contacts_numba.geometry(CONTACT_CODES[kind], point, 0, 1, state, body,
                                                 0.0)
        if gap < FAR / 2:
            points.append(np.r_[np.add(pose_a[0], ra), np.add(pose_b[0], rb), gap])
    return np.array(points)


UPRIGHT = [1.0, 0.0, 0.0, 0.0]
ALONG_X = _quat([0, 1, 0], np.pi / 2)


def test_a_box_rests_turned_on_a_box():
    """Turned 30 degrees about z, dropped 2 cm: it settles on its four
    corners at the top face's height plus its half height, keeping its
    place and its turn."""
    q = _quat([0, 0, 1], np.pi / 6)
    scene = _on_base([1.0, 0.8, 0.2], ("box", dict(size=[0.3, 0.2, 0.1], mass=2.0,
                                                   position=[0.1, -0.05, BASE + 0.17],
                                                   quaternion=q)))
    traj = sp.simulate(scene, 250)
    assert traj.position["top"][-1, 2] == pytest.approx(BASE + 0.1 + 0.05, abs=1e-3)
    assert np.abs(traj.position["top"][-1, :2] - [0.1, -0.05]).max() < 1e-3
    assert np.abs(np.reshape(traj.rotation["top"][-1], (3, 3))
                  - quat_to_mat_array(np.asarray(q))).max() < 1e-3
    assert np.abs(traj.velocity["top"][-1]).max() < 1e-3


def test_crossed_planks_rest_on_their_edge_crossings():
    """A plank dropped across another, turned 90 degrees: no corner of
    either lies over the other, so the four crossings of their edges carry
    it. It comes to rest level at the lower plank's top plus its half
    thickness."""
    scene = _on_base([0.1, 1.0, 0.05], ("box", dict(size=[1.0, 0.1, 0.05], mass=1.0,
                                                    position=[0.02, 0.03, BASE + 0.06])))
    traj = sp.simulate(scene, 250)
    assert traj.position["top"][-1, 2] == pytest.approx(BASE + 0.05, abs=1e-3)
    assert _tilt(traj.rotation["top"][-1]) < 1e-3
    assert np.abs(traj.velocity["top"][-1]).max() < 1e-3


@pytest.mark.parametrize("over, falls", [(0.3, False), (0.7, True)])
def test_a_box_over_a_step_edge_stays_or_tips(over, falls):
    """A 0.2-m box set down with `over` of its length beyond the step's
    edge: held by its two corners on the step and the crossings at the
    edge while its centre is over the step, tipped off once it is not."""
    x = 0.5 - 0.2 * (0.5 - over)          # the step's edge is at x = 0.5
    scene = _on_base([1.0, 1.0, 0.2], ("box", dict(size=[0.2, 0.2, 0.2], mass=1.0,
                                                   position=[x, 0, BASE + 0.2 + 1e-3])))
    traj = sp.simulate(scene, 300)
    z, tilt = traj.position["top"][-1, 2], _tilt(traj.rotation["top"][-1])
    if falls:
        assert z < BASE and tilt > 0.5
    else:
        assert z == pytest.approx(BASE + 0.2, abs=1e-3) and tilt < 1e-3
        assert traj.position["top"][-1, 0] == pytest.approx(x, abs=1e-3)


def test_a_box_balances_edge_on_edge():
    """A cube turned 45 degrees about x set with its lower edge across the
    upper edge of a fixed cube turned 45 degrees about y: one contact, on
    the edge-edge axis, holds its centre at the two half diagonals above
    the lower cube's for a while (the balance is unstable)."""
    h = 0.1
    diag = h * np.sqrt(2.0)
    scene = (sp.SceneBuilder("edges", dt=DT, iterations=SWEEPS, gravity=[0, 0, -9.81])
             .box("base", size=[2 * h] * 3, mass=10.0, position=[0, 0, BASE],
                  quaternion=_quat([0, 1, 0], np.pi / 4))
             .box("top", size=[2 * h] * 3, mass=1.0, position=[0, 0, BASE + 2 * diag + 2e-3],
                  quaternion=_quat([1, 0, 0], np.pi / 4))
             .joint("hold", "fixed", "world", "base", anchor=[0, 0, BASE])
             .contacts([("top", "base")])
             .build())
    traj = sp.simulate(scene, 50)
    assert traj.position["top"][-1, 2] == pytest.approx(BASE + 2 * diag, abs=1e-3)
    assert np.abs(traj.velocity["top"][-1]).max() < 1e-2


@pytest.mark.parametrize("length, expect", [(0.3, "ends"), (1.2, "edges")])
def test_a_capsule_rests_on_a_box(length, expect):
    """A capsule lying along x, dropped on a 0.6-m box: a short one rests
    on its end balls, a long one (both ends beyond the box) on the box's
    two edges beneath it; either way its axis ends r above the top face."""
    r = 0.04
    scene = _on_base([0.6, 0.6, 0.2], ("capsule", dict(
        radius=r, length=length, mass=1.0, position=[0.0, 0.05, BASE + 0.1 + r + 0.02],
        quaternion=_quat([0, 1, 0], np.pi / 2))))
    traj = sp.simulate(scene, 250)
    assert traj.position["top"][-1, 2] == pytest.approx(BASE + 0.1 + r, abs=1e-3)
    assert np.abs(traj.velocity["top"][-1]).max() < 1e-3
    points = _candidates(ContactKind.CAPSULE_BOX,
                         (traj.position["top"][-1], traj.rotation["top"][-1]), (r, length / 2),
                         ([0, 0, BASE], UPRIGHT), [0.3, 0.3, 0.1])
    held = points[points[:, 6] < 1e-3]
    assert len(held) == 2
    # where the capsule touches along its axis: its end balls' bottoms or the edges
    assert np.sort(held[:, 0]) == pytest.approx(
        np.array([-1, 1]) * (length / 2 if expect == "ends" else 0.3), abs=2e-3)


def test_a_capsule_tips_off_a_box_edge():
    """The same capsule with its centre 5 cm beyond the edge pivots on the
    edge and falls."""
    scene = _on_base([0.6, 0.6, 0.2], ("capsule", dict(
        radius=0.04, length=0.5, mass=1.0, position=[0.35, 0.0, BASE + 0.1 + 0.04 + 1e-3],
        quaternion=_quat([0, 1, 0], np.pi / 2))))
    traj = sp.simulate(scene, 300)
    assert traj.position["top"][-1, 2] < BASE


def test_box_sliding_on_a_box_gradient_matches_central_differences():
    """A box pushed across a box, turned 20 degrees about z, slides on its
    four corners for 0.24 s (it stops after 0.25 s), set 1.3 mm into it
    (exactly touching, the loss has a kink in the lower box's height: its
    one-sided derivatives differ); the gradient of where
    it is with respect to friction, its start velocity and the lower box's
    size matches central differences (float64)."""
    scene = _on_base([1.0, 1.0, 0.2], ("box", dict(size=[0.2, 0.16, 0.1], mass=1.0,
                                                   position=[-0.2, 0.0, BASE + 0.1487],
                                                   quaternion=_quat([0, 0, 1], 0.35),
                                                   velocity=[1.2, 0.0, 0.0], friction=0.5)))
    steps = 60

    def loss(tr):
        return (tr.position["top"][-1] * np.array([1.0, 0.7, 2.0])).sum()

    wrt = ["top.friction", "top.velocity", "base.size"]
    value, grads = sp.value_and_grad(scene, steps, loss, wrt)
    assert np.isfinite(value)
    for name in wrt:
        base = np.asarray(scene.parameters()[name], float)
        fd = np.zeros_like(base)
        for k in np.ndindex(base.shape):
            step = np.zeros_like(base)
            step[k] = 1e-6
            up = sp.value_and_grad(scene, steps, loss, [], params={name: base + step})[0]
            down = sp.value_and_grad(scene, steps, loss, [], params={name: base - step})[0]
            fd[k] = (up - down) / 2e-6
        np.testing.assert_allclose(grads[name], fd, rtol=1e-5, atol=1e-7, err_msg=name)


STACK = """<mujoco><option timestep="0.004"/><worldbody>
  <geom type="plane" size="5 5 .1"/>
  <body name="base" pos="0 0 .1"><geom type="box" size=".5 .4 .1" mass="10"/></body>
  <body name="block" pos=".1 -.1 .27" euler="0 0 30"><freejoint/>
    <geom type="box" size=".15 .1 .05" mass="2"/></body>
  <body name="rod" pos="0 .28 .26" euler="0 90 0"><freejoint/>
    <geom type="capsule" size=".04 .5" mass="1"/></body>
</worldbody></mujoco>"""


def test_a_box_and_a_capsule_dropped_on_a_box_settle_where_mujocos_do():
    """One MJCF file, both engines (MuJoCo at its defaults, symphys with 30
    sweeps), dt = 4 ms: a box turned 30 degrees dropped 2 cm onto a fixed
    box, and a capsule longer than that box dropped across it (it comes to
    rest on two of the box's edges). After 1 s both engines hold both still
    at the analytic heights (0.25 m and 0.24 m) within 1 mm of each other,
    the box keeping its turn."""
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_string(STACK)
    data = mujoco.MjData(model)
    steps = 250
    for _ in range(steps):
        mujoco.mj_step(model, data)
    scene = sp.load_mjcf(STACK)
    assert {frozenset((c.a, c.b)) for c in scene.contacts} >= {
        frozenset(("block", "base")), frozenset(("rod", "base"))}
    scene = dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, iterations=30))
    traj = sp.simulate(scene, steps)
    for name, height in (("block", 0.25), ("rod", 0.24)):
        theirs = data.xipos[model.body(name).id]
        mine = traj.position[name][-1]
        assert mine[2] == pytest.approx(height, abs=1e-3), name
        assert np.abs(mine - theirs).max() < 1e-3, (name, mine, theirs)
        assert np.abs(traj.velocity[name][-1]).max() < 1e-3
    turned = np.reshape(traj.rotation["block"][-1], (3, 3))
    assert np.abs(turned - np.reshape(data.xmat[model.body("block").id], (3, 3))).max() < 1e-3


@pytest.mark.parametrize("case, kind, pose_a, size_a, pose_b, size_b, expect", [
    # equal boxes stacked square: every corner of one is a corner of the other
    ("stacked twins", "box-box", ([0, 0, 0.39], UPRIGHT), [0.2, 0.3, 0.2],
     ([0, 0, 0], UPRIGHT), [0.2, 0.3, 0.2], 4),
    # same width, one shorter: its corners lie on the other's long edges
    ("shared sides", "box-box", ([0.1, 0, 0.39], UPRIGHT), [0.1, 0.3, 0.2],
     ([0, 0, 0], UPRIGHT), [0.4, 0.3, 0.2], 4),
    # a corner of the upper box exactly over an edge crossing of the lower
    ("corner on an edge", "box-box", ([0.1, 0.1, 0.39], UPRIGHT), [0.1, 0.2, 0.2],
     ([0, 0, 0], UPRIGHT), [0.2, 0.3, 0.2], 4),
    # a short capsule along x on a box's top face: its two end balls only
    ("on its ends", "capsule-box", ([0, 0, 0.24], ALONG_X), (0.05, 0.1),
     ([0, 0, 0], UPRIGHT), [0.3, 0.3, 0.2], 2),
    # an end ball against a top edge, the axis square to it: not the edge again
    ("end on an edge", "capsule-box", ([0.42, 0, 0.23], ALONG_X), (0.05, 0.1),
     ([0, 0, 0], UPRIGHT), [0.3, 0.3, 0.2], 1),
    # a long capsule across the top: the two top edges under it
    ("across", "capsule-box", ([0, 0.1, 0.24], ALONG_X), (0.05, 0.5),
     ([0, 0, 0], UPRIGHT), [0.3, 0.3, 0.2], 2),
    # along the top's diagonal, over a corner: an end ball and one edge point at the corner
    ("by a corner", "capsule-box", ([0.3, 0.3, 0.26], _quat([1, -1, 0], np.pi / 2)),
     (0.05, 0.5), ([0, 0, 0], UPRIGHT), [0.3, 0.3, 0.2], 2),
])
def test_no_two_candidate_points_of_a_pair_coincide(case, kind, pose_a, size_a, pose_b,
                                                    size_b, expect):
    """Two rows at one point leave the solver a tie that rounding breaks,
    and the gradient with it: whatever the pose, a pair's existing
    candidates are distinct points, and as many as the pose has corners of
    contact (within 5 cm)."""
    points = _candidates(ContactKind(kind), pose_a, size_a, pose_b, size_b)
    apart = np.linalg.norm(points[:, None, :6] - points[None, :, :6], axis=-1)
    assert (apart + np.eye(len(points))).min() > 1e-6, (case, points)
    assert (points[:, 6] < 0.05).sum() == expect, (case, points)
