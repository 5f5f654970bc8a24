"""Joints and motors against analytic answers and equations of motion."""

import numpy as np
import pytest
import sympy
from scenes import (BACKEND, FLAP_LIMITS, ROD_LENGTH, SLIDE_ANGLE, chain, double_pendulum, gadgets,
                    pendulum, wrist)
from scipy.integrate import solve_ivp

import symphys as sp
from symphys.physics.algebra import Vec3
from symphys.physics.model import principal_inertia
from symphys.scene.elements import Shape

G = 9.81
# Multi-body articulated scenes run on JAX here: their cold Numba compile
# takes 5-10 minutes each on CI's 2 cores (one LLVM function per fused loop;
# see docs/kernels.md, "Compile times"); JAX compiles them in about a minute. The
# pendulum (with its motor) runs on Numba.
ARTICULATED = "jax"


@pytest.fixture(scope="module")
def pendulum_scene():
    return pendulum()


def _crossings(t, x):
    """Times where x crosses 0 upwards (linear interpolation)."""
    i = np.where((x[:-1] < 0) & (x[1:] >= 0))[0]
    return t[i] + (t[i + 1] - t[i]) * (-x[i]) / (x[i + 1] - x[i])


def _rod_inertia_about_pivot():
    lateral = float(principal_inertia(Shape.CAPSULE, 1.0, 0.02, Vec3(0, 0, 0), ROD_LENGTH).x)
    return lateral + 1.0 * (ROD_LENGTH / 2) ** 2


def test_pendulum_period_matches_physical_pendulum(pendulum_scene):
    """Small swings of a capsule about its end: T = 2 pi sqrt(I_p / (m g d))."""
    tr = sp.simulate(pendulum_scene, 4000, backend=BACKEND,
                     params={"rod.angular_velocity": [0, 0.3, 0], "servo.max_torque": 0.0})
    period = np.diff(_crossings(tr.time, tr.position["rod"][:, 0]))
    expected = 2 * np.pi * np.sqrt(_rod_inertia_about_pivot() / (G * ROD_LENGTH / 2))
    assert len(period) >= 1
    np.testing.assert_allclose(period, expected, rtol=0.01)
    # The hinge holds the rod's top at the pivot.
    top = tr.position["rod"] + tr.rotation["rod"] @ np.array([0, 0, ROD_LENGTH / 2])
    assert np.abs(top).max() < 1e-4


def _hinge_angle(tr):
    """Rod angle about +y from straight down, from its centre's position."""
    x, z = tr.position["rod"][:, 0], tr.position["rod"][:, 2]
    return np.arctan2(-x, -z)


def test_position_servo_reaches_target_within_torque_limit(pendulum_scene):
    target, max_torque, dt = 0.5, 3.0, pendulum_scene.dt
    tr = sp.simulate(pendulum_scene, 3000, backend=BACKEND, action=[target])
    q = _hinge_angle(tr)
    # Gravity's torque at 0.5 rad (m g d sin q = 2.35 N m) is within the limit,
    # so the servo settles on its target (the remaining error: gain 10/s
    # against the position drift each step).
    assert q[-1] == pytest.approx(target, abs=2e-3)
    # Torque about the pivot: I_p dw/dt = -m g d sin(q) + motor. The motor's
    # share never exceeds max_torque. (The joint rows exert no torque about
    # the pivot once converged. Servo rows are swept last, so with 4 sweeps
    # the joint rows' residue showed up here as one step at 1.21 x the limit
    # when the servo switched from its torque to its rate limit; with 8, none.)
    w = tr.angular_velocity["rod"][:, 1]
    motor = _rod_inertia_about_pivot() * np.diff(w) / dt + G * (ROD_LENGTH / 2) * np.sin(q[:-1])
    assert np.abs(motor).max() <= max_torque * 1.005
    assert np.abs(motor).max() >= max_torque * 0.95    # it saturated on the way
    # The servo's target rate is capped at max_velocity (2 rad/s).
    assert np.abs(w).max() <= 2.0 + 1e-3


# -- double pendulum against Lagrange's equations (SymPy) ----------------------
def _double_pendulum_reference(theta0, times):
    """Absolute link angles of two uniform boxes (0.5 m, masses 1 and 0.6)
    from Lagrange's equations derived with SymPy, integrated by SciPy."""
    t = sympy.symbols("t")
    th1, th2 = sympy.Function("th1")(t), sympy.Function("th2")(t)
    length, width, m1, m2 = 0.5, 0.05, 1.0, 0.6
    i1, i2 = (m * (length ** 2 + width ** 2) / 12 for m in (m1, m2))
    d = length / 2
    c1 = sympy.Matrix([d * sympy.sin(th1), -d * sympy.cos(th1)])
    c2 = sympy.Matrix([length * sympy.sin(th1) + d * sympy.sin(th2),
                       -length * sympy.cos(th1) - d * sympy.cos(th2)])
    v1, v2 = c1.diff(t), c2.diff(t)
    kinetic = (m1 * v1.dot(v1) + m2 * v2.dot(v2) + i1 * th1.diff(t) ** 2
               + i2 * th2.diff(t) ** 2) / 2
    potential = G * (m1 * c1[1] + m2 * c2[1])
    lagrangian = kinetic - potential
    eqs = [sympy.diff(lagrangian.diff(q.diff(t)), t) - lagrangian.diff(q) for q in (th1, th2)]
    acc = sympy.symbols("a1 a2")
    subs = {th1.diff(t, 2): acc[0], th2.diff(t, 2): acc[1]}
    solution = sympy.solve([e.subs(subs) for e in eqs], acc, dict=True)[0]
    q1, q2, w1, w2 = sympy.symbols("q1 q2 w1 w2")
    state = {th1.diff(t): w1, th2.diff(t): w2}
    names = {th1: q1, th2: q2}
    accel = [solution[a].subs(state).subs(names) for a in acc]
    f = sympy.lambdify((q1, q2, w1, w2), accel, "numpy")

    def rhs(_, y):
        a1, a2 = f(*y)
        return [y[2], y[3], a1, a2]

    sol = solve_ivp(rhs, (0, times[-1]), [theta0[0], theta0[1], 0.0, 0.0], t_eval=times,
                    rtol=1e-11, atol=1e-12)
    return sol.y[0], sol.y[1]


def test_double_pendulum_matches_lagrange_equations():
    theta0 = (0.6, -0.4)
    scene = double_pendulum(*theta0)
    steps = int(round(1.0 / scene.dt))
    tr = sp.simulate(scene, steps, backend=ARTICULATED)
    upper, lower = tr.position["upper"], tr.position["lower"]
    elbow = 2 * upper          # the upper link's centre is halfway to the elbow
    th1 = np.arctan2(upper[:, 0], -upper[:, 2])
    th2 = np.arctan2(lower[:, 0] - elbow[:, 0], -(lower[:, 2] - elbow[:, 2]))
    ref1, ref2 = _double_pendulum_reference(theta0, tr.time)
    assert np.abs(th1 - ref1).max() < 1e-3
    assert np.abs(th2 - ref2).max() < 1e-3
    # The motion is large (not a trivial check): the lower link swings by > 1 rad.
    assert np.ptp(ref2) > 1.0


def test_chain_joints_do_not_drift():
    """A 5-link chain released from horizontal swings for 10 s; every joint's
    anchor points stay within 1 mm of each other."""
    scene = chain()
    steps = int(round(10.0 / scene.dt))
    tr = sp.simulate(scene, steps, backend=ARTICULATED)
    half = np.array([0.0, 0.0, 0.15])
    worst = 0.0
    for i in range(len(scene.bodies)):
        pos, rot = tr.position[f"link{i}"], tr.rotation[f"link{i}"]
        top = pos - rot @ half
        if i == 0:
            worst = max(worst, np.linalg.norm(top, axis=-1).max())
        else:
            prev = tr.position[f"link{i - 1}"] + tr.rotation[f"link{i - 1}"] @ half
            worst = max(worst, np.linalg.norm(top - prev, axis=-1).max())
    assert worst < 1e-3
    # It swung: the last link fell well below the pivot.
    assert tr.position["link4"][:, 2].min() < -1.0


# -- slider, fixed, hinge limits and ball joints (one scene) -------------------
@pytest.fixture(scope="module")
def gadgets_run():
    scene = gadgets()
    return scene, sp.simulate(scene, 1500, backend=ARTICULATED)


def test_slider_slides_like_a_frictionless_incline(gadgets_run):
    """Along the axis the box accelerates at g sin(30 deg); semi-implicit
    Euler: v_n = n dt a, q_n = dt^2 a n (n + 1) / 2. It does not turn."""
    scene, tr = gadgets_run
    axis = np.array([np.cos(SLIDE_ANGLE), 0.0, -np.sin(SLIDE_ANGLE)])
    n = np.arange(len(tr.time))
    a, dt = G * np.sin(SLIDE_ANGLE), scene.dt
    q = tr.position["slide"] @ axis
    np.testing.assert_allclose(q, dt * dt * a * n * (n + 1) / 2, rtol=1e-6, atol=1e-9)
    off_axis = tr.position["slide"] - q[:, None] * axis
    assert np.abs(off_axis).max() < 1e-6
    assert np.abs(tr.rotation["slide"] - np.eye(3)).max() < 1e-6


def test_welded_pair_moves_as_one_body(gadgets_run):
    """Internal weld impulses cancel: total momentum changes by M g t exactly;
    the knob keeps its place in the frame's coordinates."""
    scene, tr = gadgets_run
    masses = {"frame": 2.0, "knob": 0.7}
    momentum = sum(m * tr.velocity[b] for b, m in masses.items())
    expected = momentum[0] + np.outer(tr.time, [0, 0, -G * sum(masses.values())])
    np.testing.assert_allclose(momentum, expected, rtol=0, atol=1e-9)
    local = np.einsum("tji,tj->ti", tr.rotation["frame"],
                      tr.position["knob"] - tr.position["frame"])
    assert np.abs(local - [0.25, 0, 0.05]).max() < 1e-4
    relative = np.einsum("tji,tjk->tik", tr.rotation["frame"], tr.rotation["knob"])
    assert np.abs(relative - np.eye(3)).max() < 1e-4
    # It spins (the check is not of a body at rest).
    assert np.abs(tr.rotation["frame"][-1] - np.eye(3)).max() > 0.5


def test_hinge_limit_stops_the_flap(gadgets_run):
    scene, tr = gadgets_run
    centre = tr.position["flap"] - [10.0, 0.0, 0.0]
    q = np.arctan2(-centre[:, 2], centre[:, 0])   # rotation about +y
    assert q.max() <= FLAP_LIMITS[1] + 2e-3
    assert q.max() >= FLAP_LIMITS[1] - 2e-3       # it reached the limit
    assert q[-1] == pytest.approx(FLAP_LIMITS[1], abs=2e-3)   # and rests on it
    assert np.abs(centre[:, 1]).max() < 1e-6      # in its plane


def test_ball_joint_keeps_vertical_angular_momentum(gadgets_run):
    """A spherical pendulum: gravity and the socket exert no torque about the
    vertical through the socket, so L_z about it is constant."""
    scene, tr = gadgets_run
    pivot, mass = np.array([15.0, 0.0, 0.0]), 0.8
    inertia = np.asarray(principal_inertia(Shape.CAPSULE, mass, 0.03, Vec3(0, 0, 0), 0.6),
                         dtype=float)
    rot, w = tr.rotation["top"], tr.angular_velocity["top"]
    spin = np.einsum("tij,j,tkj,tk->ti", rot, inertia, rot, w)   # R I R^T w
    orbit = mass * np.cross(tr.position["top"] - pivot, tr.velocity["top"])
    lz = (spin + orbit)[:, 2]
    # The first step's socket impulse (the capsule starts with w but no v)
    # acts at the pivot too, so L_z holds from the start, up to the
    # first-order integration of the gyroscopic term and the rotation
    # (1% over these 3 s at dt = 2 ms).
    np.testing.assert_allclose(lz, lz[0], rtol=3e-2)
    assert abs(lz[0]) > 0.01
    distance = np.linalg.norm(tr.position["top"] - pivot, axis=-1)
    np.testing.assert_allclose(distance, 0.3, atol=1e-3)


def _rot(axis: int, angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    m = np.eye(3)
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def test_universal_joint_servos_reach_both_angles_without_twist():
    """Two servos on a universal joint (axis x on the world, axis2 y on the
    hand) turn the hand to R = Rx(q0) Ry(q1); the hand's own y axis stays
    perpendicular to x (no twist) and its anchor stays at the pivot."""
    scene = wrist()
    q0, q1 = 0.4, -0.3
    tr = sp.simulate(scene, 400, backend=ARTICULATED, action=[q0, q1])
    rot = tr.rotation["hand"]
    np.testing.assert_allclose(rot[-1], _rot(0, q0) @ _rot(1, q1), atol=2e-3)
    twist = np.einsum("tij,j,i->t", rot, [0.0, 1.0, 0.0], [1.0, 0.0, 0.0])
    assert np.abs(twist).max() < 1e-3
    anchor = tr.position["hand"] + rot @ np.array([0.0, 0.0, 0.2])
    assert np.abs(anchor).max() < 1e-3
    # It got there by turning (the check is not of a hand at rest): after
    # 0.1 s it was still far from its final pose.
    assert np.abs(rot[20] - rot[-1]).max() > 0.05


def _relative_angle(parent, child, axis: int):
    """Angle (T,) of `child` about its parent's x/y/z `axis`, from their
    relative rotation (both start at the identity)."""
    rel = np.einsum("tji,tjk->tik", parent, child)
    i, j = {2: (1, 0), 1: (0, 2)}[axis]
    return np.arctan2(rel[:, i, j], rel[:, i, i] if axis == 2 else rel[:, 2, 2])


def test_servos_along_a_chain_keep_their_rate_limit():
    """The A3 arm (5 bodies, 4 servos at 45 deg/s, the paper's 20 sweeps)
    driven to fixed targets: every servo turns at most at its rate limit and
    reaches its target. With servo rows swept before the joint rows, the
    elbow turned at 2.1 rad/s here."""
    scene = sp.load_scene("arm")
    target = np.array([0.785, 0.42, 0.3, 1.22])
    tr = sp.simulate(scene, 220, backend=ARTICULATED, action=target)
    rot = tr.rotation
    world = np.broadcast_to(np.eye(3), rot["base"].shape)
    q = np.stack([_relative_angle(world, rot["base"], 2),
                  _relative_angle(rot["base"], rot["upper_arm"], 1),
                  _relative_angle(rot["upper_arm"], rot["elbow"], 2),
                  _relative_angle(rot["elbow"], rot["forearm"], 1)], axis=1)
    rate = np.abs(np.diff(q, axis=0)) / scene.dt
    limit = np.array([m.max_velocity for m in scene.motors])
    assert (rate.max(axis=0) <= limit * 1.01).all(), rate.max(axis=0)
    # The elbow pitch (1.22 rad) needs 1.55 s at the limit: it ran at the
    # limit on the way, and every joint is on target at the end.
    assert rate[:, 3].max() >= limit[3] * 0.99
    np.testing.assert_allclose(q[-1], target, atol=5e-3)


def test_soft_welds_are_springs_of_their_frequency():
    """Two spheres welded to the world at their centres by soft joints of
    2 Hz, under gravity, released at the anchor: the undamped one (zeta 0)
    swings about the static sag g / omega^2 with period 1/f, its amplitude
    shrinking by 1/sqrt(1 + h^2) per step, h = omega dt (a soft row is an
    implicit-Euler spring: 3.9% per period here); the critically damped one
    (zeta 1) settles at the sag."""
    f = 2.0
    omega = 2 * np.pi * f
    sag = G / omega ** 2                                   # 6.21 cm
    scene = (sp.SceneBuilder("soft-welds", dt=0.001, iterations=4)
             .sphere("free", radius=0.05, mass=2.0, position=[0, 0, 0])
             .sphere("damped", radius=0.05, mass=0.5, position=[1, 0, 0])
             .joint("spring", "fixed", "world", "free", frequency=f)
             .joint("damper", "fixed", "world", "damped", frequency=f, damping=1.0)
             .contacts([])
             .build())
    steps = 1500
    tr = sp.simulate(scene, steps, backend=ARTICULATED)
    t = tr.time
    z = tr.position["free"][:, 2]
    n = np.arange(steps + 1)
    h = omega * scene.dt
    expected = -sag + sag * (1 + h * h) ** (-n / 2) * np.cos(omega * t)
    assert np.abs(z - expected).max() < 0.01 * sag
    # Its period: upward crossings of the mean height, 1/f apart.
    periods = np.diff(_crossings(t, z + sag))
    assert len(periods) >= 2 and np.allclose(periods, 1 / f, rtol=0.01)
    # The damped sphere sits at the sag after 1.5 s (six time constants).
    assert tr.position["damped"][-1, 2] == pytest.approx(-sag, rel=1e-3)
    # Nothing else moved: x, y and the rotation stay put.
    for name in ("free", "damped"):
        assert np.abs(tr.position[name][:, :2] - tr.position[name][0, :2]).max() < 1e-9
        assert np.abs(tr.rotation[name] - np.eye(3)).max() < 1e-9


def test_soft_joint_fields_are_checked():
    base = {"format": "symphys-scene/1", "name": "s", "dt": 0.01,
            "bodies": [{"name": "ball", "shape": "sphere", "radius": 0.1, "mass": 1.0,
                        "position": [0, 0, 0]}],
            "contacts": []}
    for fields, message in (({"frequency": -1.0}, "field 'frequency': must be > 0"),
                            ({"damping": 0.5}, "field 'damping': only a soft joint")):
        doc = dict(base, joints=[dict({"name": "weld", "type": "fixed", "parent": "world",
                                       "child": "ball"}, **fields)])
        with pytest.raises(sp.SceneError, match=message):
            sp.scene_from_dict(doc)


def test_fast_spinning_hinge_keeps_its_energy():
    """A bar hinged at one end and spinning at 40 rad/s (0.4 rad per step at
    dt = 10 ms) turns over and over without gaining energy, and its end
    stays on the pivot. The first step moves the centre of mass to the
    step's chord velocity (sin t / t) w x r, t = w dt, which conserves the
    angular momentum about the pivot and so raises the rate by about
    (m d^2 / I_p) t^2 / 6 = 2%, the energy twice that; from then on it
    holds. The first-order rotation update R + dt [w] R fed it energy until
    it went NaN within a second."""
    rate, length, width, mass = 40.0, 0.6, 0.04, 0.1
    d = length / 2
    inertia = mass * (width ** 2 + length ** 2) / 12 + mass * d ** 2
    scene = (sp.SceneBuilder("spinner", dt=0.01, iterations=8)
             .box("bar", size=[width, width, length], mass=mass, position=[0, 0, -d])
             .joint("pivot", "hinge", "world", "bar", anchor=[0, 0, 0], axis=[0, 1, 0])
             .build())
    tr = sp.simulate(scene, 300, backend="jax",
                     params={"bar.angular_velocity": [0, rate, 0],
                             "bar.velocity": [-rate * d, 0, 0]})
    spin = tr.angular_velocity["bar"][:, 1]
    assert np.isfinite(spin).all()
    rot = tr.rotation["bar"]
    theta = np.arctan2(rot[:, 0, 2], rot[:, 0, 0])            # 0 hanging
    energy = 0.5 * inertia * spin ** 2 + mass * G * d * (1 - np.cos(theta))
    t = rate * scene.dt
    first = 2 * (mass * d ** 2 / inertia) * t ** 2 / 6
    assert energy[1] == pytest.approx(energy[0] * (1 + first), rel=0.01)
    # 3 s, 19 turns: within 2% of the first step's, and no gain from the
    # first second to the last (it loses 0.5%).
    np.testing.assert_allclose(energy[1:], energy[1], rtol=0.02)
    assert energy[-100:].mean() < energy[1:101].mean()
    assert np.sum(np.abs(np.diff(np.unwrap(theta)))) > 2 * np.pi * 15
    top = tr.position["bar"] + tr.rotation["bar"] @ np.array([0, 0, d])
    assert np.abs(top).max() < 0.01


def test_ball_joint_cone_gradient_matches_central_differences():
    """A spherical pendulum (ball joint, cone 0.4 rad) set swinging under
    gravity tilted 0.54 rad runs into its cone and stays on it: the turn's
    angle passes the cone by at most 1e-5 rad, and the gradient of the
    bob's final place with respect to its initial angular velocity,
    through the cone's rows, matches central differences in float64."""
    scene = (sp.SceneBuilder("cone", dt=0.005, iterations=10, gravity=[5.0, 3.0, -9.81])
             .body("bob", "capsule", mass=0.5, radius=0.03, length=0.4, position=[0, 0, 0.8],
                   angular_velocity=[1.0, -2.0, 0.0])
             .joint("socket", "ball", "world", "bob", anchor=[0, 0, 1.0], limits=[0.0, 0.4])
             .build())
    steps = 100

    def tip(tr):
        return tr.position["bob"][-1, 0] + 2.0 * tr.position["bob"][-1, 1]

    traj = sp.simulate(scene, steps)
    rot = np.asarray(traj.rotation["bob"]).reshape(-1, 3, 3)
    angle = np.arccos(np.clip((np.trace(rot, axis1=1, axis2=2) - 1) / 2, -1, 1))
    assert angle.max() <= 0.4 + 1e-5 and (angle > 0.4 - 1e-4).sum() > 50
    value, grads = sp.value_and_grad(scene, steps, tip, wrt=["bob.angular_velocity"])
    w0, h = np.array(scene.bodies[0].angular_velocity), 1e-6
    assert value == pytest.approx(tip(traj), rel=1e-12)
    for k in range(3):
        dw = np.eye(3)[k] * h
        fd = (tip(sp.simulate(scene, steps, params={"bob.angular_velocity": w0 + dw}))
              - tip(sp.simulate(scene, steps, params={"bob.angular_velocity": w0 - dw}))) / (2 * h)
        assert grads["bob.angular_velocity"][k] == pytest.approx(fd, rel=1e-5, abs=1e-8), k
