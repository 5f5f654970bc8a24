"""Bearing losses at hinges: viscous damping and dry (Coulomb) friction;
and armature, the inertia of a rotor geared to the joint.

A capsule hinged at its top end (the rod of `scenes.pendulum`, without the
servo), started at angle theta with swing rate w. One step of dt changes
the swing rate by the gravity torque plus the bearing torque over the rod's
inertia about the pivot I_p (`_rod_inertia_about_pivot`):

- viscous c: the implicit damper, w1 = (w + gravity part) / (1 + c dt / I_p);
- dry f: a rod at rest, horizontal, slips with (m g d - f) dt / I_p when
  f < m g d and stays still when f > m g d;
- armature I_a: the pivot's inertia becomes I_p + I_a (MuJoCo's armature:
  added to the joint's diagonal of the mass matrix), implicit with c:
  w1 = ((I_p + I_a) w + torque dt) / (I_p + I_a + c dt);
- a spring k (rest angle 0), implicit: from rest at theta,
  w1 = -dt (m g d sin theta + k theta) / (I_p + k dt^2).
"""

import numpy as np
import pytest
from scenes import BACKEND, ROD_LENGTH
from test_joints import ARTICULATED, _rod_inertia_about_pivot

import symphys as sp

G, DT, MASS = 9.81, 0.001, 1.0
D = ROD_LENGTH / 2          # pivot to centre of mass
I_P = _rod_inertia_about_pivot()


def _rod(iterations: int = 8, spring: float = 0.0):
    """The rod hanging straight down; losses are set per call."""
    return (sp.SceneBuilder("lossy-rod" if not spring else "springy-rod", dt=DT,
                            iterations=iterations)
            .capsule("rod", radius=0.02, length=ROD_LENGTH, mass=MASS, position=[0, 0, -D])
            .joint("pivot", "hinge", "world", "rod", anchor=[0, 0, 0], axis=[0, 1, 0],
                   viscous_damping=0.1, dry_friction=0.1, armature=0.1,
                   **({"spring_stiffness": spring} if spring else {}))
            .build())


@pytest.fixture(scope="module")
def rod():
    return _rod()


def _state(theta: float, rate: float) -> dict:
    """The rod at angle theta from straight down (x = d sin theta), turning
    at `rate` (theta' > 0 swings towards +x, a turn about -y)."""
    return {"rod.position": [D * np.sin(theta), 0.0, -D * np.cos(theta)],
            "rod.quaternion": [np.cos(theta / 2), 0.0, -np.sin(theta / 2), 0.0],
            "rod.velocity": [D * rate * np.cos(theta), 0.0, D * rate * np.sin(theta)],
            "rod.angular_velocity": [0.0, -rate, 0.0],
            "pivot.anchor": [0.0, 0.0, 0.0]}


def _rate_after(scene, steps: int, theta: float, rate: float, viscous: float, dry: float,
                armature: float = 0.0):
    params = dict(_state(theta, rate), **{"pivot.viscous_damping": viscous,
                                          "pivot.dry_friction": dry, "pivot.armature": armature})
    traj = sp.simulate(scene, steps, params=params, backend=BACKEND)
    return -traj.angular_velocity["rod"][-1, 1]


def test_scene_parameters_and_errors(rod):
    assert rod.parameters()["pivot.viscous_damping"] == 0.1
    assert rod.parameters()["pivot.dry_friction"] == 0.1
    plain = sp.SceneBuilder("plain", dt=DT).sphere("a", radius=0.1, mass=1.0).joint(
        "pin", "hinge", "world", "a", anchor=[0, 0, 1], axis=[0, 1, 0]).build()
    assert "pin.viscous_damping" not in plain.parameters()
    assert plain.structure_key() != rod.structure_key()
    with pytest.raises(sp.ParameterError, match="no joint of this scene has bearing losses"):
        sp.simulate(plain, 1, params={"pin.viscous_damping": 0.1})
    with pytest.raises(sp.SceneError, match=r"joint 'pin'.*dry_friction"):
        sp.SceneBuilder("bad", dt=DT).sphere("a", radius=0.1, mass=1.0).joint(
            "pin", "hinge", "world", "a", anchor=[0, 0, 1], axis=[0, 1, 0],
            dry_friction=-1.0).build()
    with pytest.raises(sp.SceneError, match="only hinges and sliders have bearing losses"):
        sp.SceneBuilder("bad", dt=DT).sphere("a", radius=0.1, mass=1.0).joint(
            "pin", "ball", "world", "a", anchor=[0, 0, 1], viscous_damping=1.0).build()


def test_viscous_damping_is_the_implicit_damper(rod):
    """Hanging straight down (no gravity torque), turning at 3 rad/s."""
    rate = 3.0
    # Undamped, the rate stays but for the step's own discretisation: with
    # the exact rotation update the hinge's point rows hold the centre of
    # mass to the chord velocity (sin t / t) w x r, t = w dt, so a start at
    # the tangent velocity w x r gives up about t^2 / 6 = 1.5e-6 of it.
    free = _rate_after(rod, 1, 0.0, rate, 0.0, 0.0)
    assert free == pytest.approx(rate, rel=(rate * DT) ** 2 / 6)
    # The sweeps converge to the implicit damper; at c dt / I_p = 0.6 (the
    # last) 8 sweeps leave it 0.5% short, and the step is still stable.
    for c, tol in ((0.05, 1e-6), (2.0, 1e-6), (200.0, 1e-2)):
        got = _rate_after(rod, 1, 0.0, rate, c, 0.0)
        assert got == pytest.approx(free / (1.0 + c * DT / I_P), rel=tol), c


def test_armature_adds_to_the_inertia_about_the_joint():
    """Horizontal at rest: the gravity torque turns I_p + I_a. Hanging down
    at 3 rad/s with viscous damping c: the rod alone would keep `free` (the
    step's chord velocity, see above), the rotor its 3 rad/s, and the damper
    acts on both: w1 = (I_p free + I_a 3) / (I_p + I_a + c dt).
    The sweeps converge to these: an armature of 1.5 I_p (the second) is
    within 1e-6 after 40 sweeps; 8 sweeps leave it 2.5% short."""
    rod = _rod(iterations=40)
    load = MASS * G * D
    free = _rate_after(rod, 1, 0.0, 3.0, 0.0, 0.0)
    for armature in (0.01, 0.5):
        got = _rate_after(rod, 1, np.pi / 2, 0.0, 0.0, 0.0, armature)
        assert got == pytest.approx(-load * DT / (I_P + armature), rel=1e-6), armature
        got = _rate_after(rod, 1, 0.0, 3.0, 2.0, 0.0, armature)
        want = (I_P * free + armature * 3.0) / (I_P + armature + 2.0 * DT)
        assert got == pytest.approx(want, rel=1e-7), armature


def test_a_joint_spring_is_implicit():
    """Started at rest at theta (towards +x; q = 0 at the start, so the
    hanging pose is q = theta about the pivot's +y axis: the spring's rest
    angle), the spring and gravity both turn the rod back; the step solves
    the spring implicitly: w1 = -dt (m g d sin theta + k theta) / (I_p +
    k dt^2), for a soft spring and for one too stiff for an explicit step
    (k dt^2 = 50 I_p)."""
    load = MASS * G * D
    for k in (2.0, 50 * I_P / DT ** 2):
        rod = _rod(iterations=40, spring=k)
        assert rod.parameters()["pivot.spring_stiffness"] == k
        for theta in (0.3, np.pi / 2):
            params = dict(_state(theta, 0.0), **{
                "pivot.spring_reference": theta, "pivot.viscous_damping": 0.0,
                "pivot.dry_friction": 0.0, "pivot.armature": 0.0})
            traj = sp.simulate(rod, 1, params=params, backend=BACKEND)
            got = -traj.angular_velocity["rod"][-1, 1]
            want = -DT * (load * np.sin(theta) + k * theta) / (I_P + k * DT ** 2)
            assert got == pytest.approx(want, rel=1e-6), (k, theta)


def test_dry_friction_slips_below_and_holds_above_the_gravity_torque(rod):
    """Horizontal, at rest: the gravity torque m g d about the pivot."""
    load = MASS * G * D
    free = _rate_after(rod, 1, np.pi / 2, 0.0, 0.0, 0.0)
    assert free == pytest.approx(-load * DT / I_P, rel=1e-6)
    for f in (0.1 * load, 0.7 * load):
        got = _rate_after(rod, 1, np.pi / 2, 0.0, 0.0, f)
        assert got == pytest.approx(-(load - f) * DT / I_P, rel=1e-4), f
    held = _rate_after(rod, 20, np.pi / 2, 0.0, 0.0, 1.2 * load)
    assert abs(held) < 1e-9


def test_gradients_with_respect_to_losses_match_central_differences(rod):
    """Final position after 200 steps from a swing, with both losses on.
    On JAX: the cold Numba compile of this gradient takes 12 minutes here
    (see test_joints' ARTICULATED)."""
    values = {"pivot.viscous_damping": 0.3, "pivot.dry_friction": 0.2, "pivot.armature": 0.05}
    start = _state(0.4, 1.0)

    def loss(traj):
        p = traj.position["rod"][-1]
        return p[0] * 2.0 + p[2]

    _, grads = sp.value_and_grad(rod, 200, loss, wrt=list(values),
                                 params=dict(start, **values), backend=ARTICULATED)
    for name, value in values.items():
        h = 1e-6
        up = sp.simulate(rod, 200, params={**start, **values, name: value + h},
                         backend=ARTICULATED).position["rod"][-1]
        down = sp.simulate(rod, 200, params={**start, **values, name: value - h},
                           backend=ARTICULATED).position["rod"][-1]
        numeric = ((up[0] - down[0]) * 2.0 + (up[2] - down[2])) / (2 * h)
        assert float(grads[name]) == pytest.approx(numeric, rel=1e-5, abs=1e-9), name
        assert abs(numeric) > 1e-4, name      # the losses and the armature do move the rod
