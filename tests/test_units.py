"""Fast unit tests: optimiser, schedules, contact blocks, algebra (no compile)."""

import numpy as np
import pytest
from scenes import mixed

import symphys as sp
from symphys.learn.optim import Adam, PiecewiseSchedule
from symphys.physics.contacts import STATIC, contact_blocks


def test_piecewise_schedule_follows_the_paper():
    s = PiecewiseSchedule({1: 2.0, 5: 1.0, 50: 0.1, 75: 0.05, 100: 0.01})
    assert [s(i) for i in (1, 4, 5, 49, 50, 75, 100, 1000)] == \
        [2.0, 2.0, 1.0, 1.0, 0.1, 0.05, 0.01, 0.01]
    with pytest.raises(ValueError):
        PiecewiseSchedule({5: 1.0})(1)


def test_adam_minimises_a_quadratic():
    target = np.array([1.0, -2.0, 0.5])
    opt = Adam(learning_rate=0.1)
    p = {"x": np.zeros(3)}
    for _ in range(500):
        p = opt.step(p, {"x": 2 * (p["x"] - target)})
    np.testing.assert_allclose(p["x"], target, atol=1e-3)


def test_adam_reports_non_finite_gradients():
    with pytest.raises(FloatingPointError, match="'x'"):
        Adam().step({"x": np.zeros(2)}, {"x": np.array([0.0, np.nan])})


def test_contact_blocks_never_repeat_a_body():
    scene = mixed()
    blocks = contact_blocks(scene)
    covered = set()
    for block in blocks:
        bodies = [i for pair in zip(block.a, block.b) for i in pair if i != STATIC]
        assert len(bodies) == len(set(bodies))
        covered.update((a, b, block.kind, block.point) for a, b in zip(block.a, block.b))
    # every pair appears once per contact point of its kind
    assert len(covered) == sum(len(b.a) for b in blocks)
    assert len({(a, b) for a, b, _, _ in covered}) == len(scene.contacts)


def test_renormalise_pulls_towards_a_rotation():
    from symphys.physics.algebra import Mat3, renormalise
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    a = q + 1e-3 * rng.normal(size=(3, 3))
    out = np.array(renormalise(Mat3(*a.ravel()), 3)).reshape(3, 3)
    assert np.abs(out.T @ out - np.eye(3)).max() < 1e-12


def test_parameters_and_defaults():
    scene = sp.load_scene("ball")
    params = scene.parameters()
    assert params["ball.mass"] == pytest.approx(1000 * 4 / 3 * np.pi * 0.5 ** 3)
    np.testing.assert_array_equal(params["ball.position"], [0, 0, 1.5])
    assert "solver.constraint_frequency" in params


def test_gram_is_a_times_a_transpose():
    from symphys.physics.algebra import Mat3, gram
    a = np.random.default_rng(1).normal(size=(3, 3))
    np.testing.assert_allclose(np.array(gram(Mat3(*a.ravel()))).reshape(3, 3), a @ a.T,
                               rtol=1e-14, atol=1e-14)


def test_isotropic_shortcut_equals_rotated_inverse_inertia():
    """For spheres R diag(s) R^T a = s a: the shortcut the solver takes when
    every body is a sphere gives the same rows as the world inverse inertia;
    the latter matches R diag(1/I) R^T computed by NumPy."""
    from symphys.physics.algebra import Mat3, Vec3
    from symphys.physics.contacts import Gather
    from symphys.physics.model import BodyArrays
    from symphys.physics.solver import RowKind, _point_row, angular_row, mobility
    rng = np.random.default_rng(2)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    rot = Mat3(*(np.full((1, 2), c) for c in q.ravel()))
    s = np.array([[0.7, 1.3]])
    axis = Vec3(*(rng.normal(size=(1, 1)) for _ in range(3)))
    lever = Vec3(*(rng.normal(size=(1, 1)) for _ in range(3)))

    def bodies(isotropic, inv_inertia=Vec3(s, s, s)):
        return BodyArrays(inv_mass=s, inv_inertia=inv_inertia, inertia=Vec3(s, s, s),
                          radius=s, half_size=Vec3(s, s, s), half_length=s, friction=s,
                          restitution=s, isotropic=isotropic)

    fast, full = mobility(bodies((True, True)), rot), mobility(bodies((True, False)), rot)
    assert fast.isotropic and not full.isotropic
    ga, gb = Gather((0,), 2), Gather((1,), 2)
    for make in (lambda m: angular_row(RowKind.JOINT, axis, ga, gb, m, 0.0),
                 lambda m: _point_row(RowKind.JOINT, axis, lever, lever, ga, gb, m, 0.0)):
        a, b = make(fast), make(full)
        np.testing.assert_allclose(a.dirs.eval(), b.dirs.eval(), rtol=1e-12)
        np.testing.assert_allclose(a.m_eff.eval(), b.m_eff.eval(), rtol=1e-12)
    inv = np.array([[0.5, 2.0], [1.5, 0.25], [3.0, 1.0]])
    world = mobility(bodies((False, False), Vec3(*(row[None] for row in inv))), rot)
    got = world.inv_inertia.eval()
    for n in range(2):
        np.testing.assert_allclose(got[0, n], q @ np.diag(inv[:, n]) @ q.T, rtol=1e-12)


def test_rotate_by_is_the_exponential_map():
    """exp([u]x) R against SciPy's matrix exponential, on both sides of the
    Taylor branch (|u|^2 = 1e-2) and at u = 0, where the gradient is finite."""
    import pytensor
    import pytensor.tensor as pt
    from scipy.linalg import expm

    from symphys.physics.algebra import Mat3, Vec3, rotate_by

    u = pt.dvector("u")
    r = pt.dmatrix("r")
    out = pt.stack(list(rotate_by(Vec3(u[0], u[1], u[2]), Mat3(*[r[i, j] for i in range(3)
                                                                 for j in range(3)]))))
    fn = pytensor.function([u, r], [out, pytensor.grad(out.sum(), u)], mode="FAST_COMPILE")
    rng = np.random.default_rng(3)
    start, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    for size in (0.0, 1e-4, 0.0999, 0.1001, 0.6, 2.5):
        v = rng.normal(size=3)
        v *= size / np.linalg.norm(v)
        skew = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
        value, grad = fn(v, start)
        np.testing.assert_allclose(value.reshape(3, 3), expm(skew) @ start, atol=1e-12)
        assert np.isfinite(grad).all()
