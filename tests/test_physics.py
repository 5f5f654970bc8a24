"""The engine against analytic answers (float64, JAX backend; test_backends
holds Numba and the C VM to JAX)."""

import numpy as np
import pytest
from scenes import BACKEND, box, drop, knock, pair

import symphys as sp

G = 9.81


@pytest.fixture(scope="module")
def drop_scene():
    return drop()


@pytest.fixture(scope="module")
def box_scene():
    return box()


def test_projectile_matches_semi_implicit_euler(drop_scene):
    """No contact (ground far below): v_n = v0 + n g dt, x_n = x0 + dt sum v_k."""
    v0, x0, n = np.array([1.5, -0.7, 4.0]), np.array([0.0, 0.0, 1.1]), 300
    tr = sp.simulate(drop_scene, n, params={"ball.velocity": v0, "ground.height": -1e3},
                     backend=BACKEND)
    dt, g = drop_scene.dt, np.array([0, 0, -G])
    k = np.arange(n + 1)[:, None]
    expect_v = v0 + k * dt * g
    expect_x = x0 + k * dt * v0 + g * dt * dt * k * (k + 1) / 2
    np.testing.assert_allclose(tr.velocity["ball"], expect_v, rtol=0, atol=1e-12)
    np.testing.assert_allclose(tr.position["ball"], expect_x, rtol=0, atol=1e-12)
    assert tr.time[-1] == pytest.approx(n * dt)


def _apexes(z):
    """Local maxima of a height series (after the first sample)."""
    inner = (z[1:-1] > z[:-2]) & (z[1:-1] >= z[2:])
    return z[1:-1][inner]


@pytest.mark.parametrize("e", [0.5, 0.8])
def test_bounce_apex_ratio_is_e_squared(drop_scene, e):
    tr = sp.simulate(drop_scene, 1500, params={"ground.restitution": e}, backend=BACKEND)
    r = 0.1
    h0 = 1.1 - r
    apex = _apexes(tr.position["ball"][:, 2]) - r
    assert len(apex) >= 2
    assert apex[0] / h0 == pytest.approx(e ** 2, rel=0.03)
    # The ball turns round up to one step (v dt, 3 mm here) before touching
    # the ground, a discretisation error relative to the lower second apex.
    assert apex[1] / apex[0] == pytest.approx(e ** 2, rel=0.08)


def test_sphere_sliding_ends_rolling_at_five_sevenths(drop_scene):
    v0 = 2.0
    tr = sp.simulate(drop_scene, 400, params={"ball.position": [0, 0, 0.1],
                                              "ball.velocity": [v0, 0, 0]}, backend=BACKEND)
    v, w = tr.velocity["ball"][-1], tr.angular_velocity["ball"][-1]
    assert v[0] == pytest.approx(5.0 / 7.0 * v0, rel=1e-6)
    assert w[1] * 0.1 == pytest.approx(v[0], rel=1e-6)
    assert abs(tr.position["ball"][-1, 2] - 0.1) < 1e-6


def test_box_sliding_stops_after_v0_squared_over_2_mu_g(box_scene):
    v0 = 2.0
    mu = np.sqrt(0.5 * 1.0)    # geometric mean of ground 0.5 and box 1.0
    tr = sp.simulate(box_scene, 500, params={"crate.velocity": [v0, 0, 0]}, backend=BACKEND)
    x = tr.position["crate"][:, 0]
    assert np.abs(tr.velocity["crate"][-1]).max() < 1e-5
    assert x[-1] == pytest.approx(v0 ** 2 / (2 * mu * G), rel=0.02)


def test_box_resting_on_ground_stays_put(box_scene):
    tr = sp.simulate(box_scene, 5000, backend=BACKEND)      # 10 s
    drift = np.abs(tr.position["crate"] - tr.position["crate"][0]).max()
    assert drift < 1e-3
    # Gauss-Seidel over the corners leaves a tiny yaw creep (about 1e-4 rad in 10 s).
    assert np.abs(tr.rotation["crate"][-1] - np.eye(3)).max() < 5e-4


def test_spinning_box_stays_orthonormal(box_scene):
    tr = sp.simulate(box_scene, 10_000, params={
        "ground.height": -1e3, "world.gravity": [0, 0, 0],
        "crate.angular_velocity": [0.5, 2.0, 0.2]}, backend=BACKEND)
    r = tr.rotation["crate"]
    err = np.abs(np.einsum("tji,tjk->tik", r, r) - np.eye(3)).max()
    assert err < 1e-9
    # A free box keeps its angular momentum (gyroscopic term on).
    inertia = 2.0 / 12.0 * (0.2 ** 2 + 0.2 ** 2)   # a cube: isotropic
    np.testing.assert_allclose(tr.angular_velocity["crate"][-1] * inertia,
                               np.array([0.5, 2.0, 0.2]) * inertia, rtol=1e-9)


@pytest.mark.parametrize("e", [0.0, 0.6, 1.0])
def test_head_on_collision_conserves_momentum_and_loses_energy_per_e(e):
    scene = pair()
    ma, mb = 1.0, 3.0
    tr = sp.simulate(scene, 500, params={"a.restitution": e, "b.restitution": e},
                     backend=BACKEND)
    va, vb = tr.velocity["a"], tr.velocity["b"]
    p = ma * va + mb * vb
    np.testing.assert_allclose(p - p[0], 0.0, atol=1e-12)
    before, after = vb[0, 0] - va[0, 0], vb[-1, 0] - va[-1, 0]
    assert after == pytest.approx(-e * before, abs=1e-9)
    mu = ma * mb / (ma + mb)
    energy = lambda i: 0.5 * ma * va[i, 0] ** 2 + 0.5 * mb * vb[i, 0] ** 2
    assert energy(0) - energy(-1) == pytest.approx(0.5 * mu * before ** 2 * (1 - e ** 2),
                                                   abs=1e-9)


def test_off_centre_strike_conserves_momentum():
    """A sphere strikes a free box off-centre (no gravity): linear momentum
    is conserved exactly, angular momentum about the origin up to the
    explicit gyroscopic update, the time-of-impact blend and the friction
    impulse acting across the speculative gap (all O(dt): 1.1e-3 of |L|
    here), and the box starts to spin."""
    scene = knock()
    tr = sp.simulate(scene, 200, backend=BACKEND)
    m = {"ball": 0.5, "crate": 2.0}
    p = sum(m[n] * tr.velocity[n] for n in m)
    np.testing.assert_allclose(p - p[0], 0.0, atol=1e-12)
    size = np.array([0.4, 0.3, 0.2])
    box_inertia = 2.0 / 12.0 * np.diag([size[1] ** 2 + size[2] ** 2, size[0] ** 2 + size[2] ** 2,
                                       size[0] ** 2 + size[1] ** 2])
    ball_inertia = 0.4 * 0.5 * 0.1 ** 2 * np.eye(3)

    def angular_momentum(i):
        total = np.zeros(3)
        for name, inertia in (("ball", ball_inertia), ("crate", box_inertia)):
            rot = tr.rotation[name][i]
            total += np.cross(tr.position[name][i], m[name] * tr.velocity[name][i])
            total += rot @ inertia @ rot.T @ tr.angular_velocity[name][i]
        return total

    l0, l1 = angular_momentum(0), angular_momentum(-1)
    assert np.abs(l1 - l0).max() < 3e-3 * np.abs(l0).max()
    assert np.abs(tr.angular_velocity["crate"][-1]).max() > 0.1
    assert tr.velocity["crate"][-1, 0] > 0.1


@pytest.mark.parametrize("mu_roll", [0.0, 0.1])
def test_rolling_friction_stops_a_rolling_ball(mu_roll):
    """A sphere rolling without slipping under a resisting torque mu_roll*N
    decelerates at a = (5/7) mu_roll g / r and stops after v0^2 / (2 a);
    with mu_roll = 0 it rolls on at v0. (The ball scene: r = 0.5 m.)"""
    scene = sp.load_scene("ball")
    v0, r = 2.0, 0.5
    tr = sp.simulate(scene, 300, params={
        "ball.position": [0, 0, r], "ball.velocity": [v0, 0, 0],
        "ball.angular_velocity": [0, v0 / r, 0],
        "ground.rolling_friction": mu_roll, "ball.rolling_friction": 0.0}, backend=BACKEND)
    x, v = tr.position["ball"], tr.velocity["ball"]
    if mu_roll == 0.0:
        np.testing.assert_allclose(v[:, 0], v0, rtol=1e-9)
        return
    a = 5.0 / 7.0 * mu_roll * G / r
    assert x[-1, 0] == pytest.approx(v0 ** 2 / (2 * a), rel=0.01)
    assert np.abs(v[-1]).max() < 1e-9
    assert np.abs(x[:, 2] - r).max() < 1e-9


def test_a_capsule_rests_crosswise_on_a_capsule():
    """A capsule dropped across a fixed one (axes along y and x), its centre
    over the other's axis, comes to rest on it: its axis r_a + r_b above
    the other's, where it fell. Dropped 0.1 m off its centre, it tips about
    the point of contact and slides off."""
    r1, r2, base = 0.05, 0.08, 0.5
    scene = (sp.SceneBuilder("crossed", dt=0.005, iterations=20)
             .capsule("beam", radius=r1, length=1.0, mass=5.0, position=[0, 0, base],
                      quaternion=[np.cos(np.pi / 4), 0, np.sin(np.pi / 4), 0])
             .capsule("rod", radius=r2, length=0.6, mass=1.0,
                      position=[0.05, 0.0, base + r1 + r2 + 0.1],
                      quaternion=[np.cos(np.pi / 4), np.sin(np.pi / 4), 0, 0])
             .joint("hold", "fixed", "world", "beam", anchor=[0, 0, base])
             .build())
    assert [(c.a, c.b) for c in scene.contacts] == [("beam", "rod")]
    traj = sp.simulate(scene, 400)
    rod = traj.position["rod"][-1]
    assert rod[2] == pytest.approx(base + r1 + r2, abs=1e-3)
    assert np.abs(traj.velocity["rod"][-1]).max() < 1e-3
    assert rod[0] == pytest.approx(0.05, abs=1e-3) and abs(rod[1]) < 1e-6
    off = sp.simulate(scene, 400, params={"rod.position": [0.05, 0.1, base + r1 + r2 + 0.1]})
    assert off.position["rod"][-1, 2] < base - 0.5                        # it fell off
