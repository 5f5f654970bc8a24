"""The real double pendulum's closed-form start (`regression_start`) on
synthetic markers: a rigid double pendulum of uniform boxes hung from their
hinges, integrated with RK4 from its Lagrangian equations of motion, filmed
by a camera turned by an arbitrary angle with an arbitrary scale and
offset. Pure NumPy: no compiled function."""

import numpy as np
import pytest

from symphys.errors import DataError
from symphys.experiments import double_pendulum_sysid as dp

TRUTH = {"length1": 0.15, "com1": 0.7, "com2": 0.55, "mass2": 0.2, "gravity_angle": 1.2,
         "viscous1": 0.5, "viscous2": 0.2, "dry1": 0.0, "dry2": 0.0}


def _coefficients(v):
    """A, B, C, D, E of the equations of motion (upper mass 1 kg)."""
    w2 = dp.WIDTH ** 2 / 12
    l1 = v["length1"]
    d1, d2, m2 = v["com1"] * l1, v["com2"] * l1, v["mass2"]
    own = lambda m, d: m * (d * d + (4 * d * d + w2) / 12)   # a box about its hinge
    g = dp.GRAVITY
    return (own(1.0, d1) + m2 * l1 ** 2, m2 * l1 * d2, own(m2, d2), g * (d1 + m2 * l1),
            g * m2 * d2)


def _markers(v, seconds=20.0, scale=2500.0, offset=(640.0, 360.0)):
    """(frames, 6) pixel positions of pivot, elbow and tip."""
    A, B, C, D, E = _coefficients(v)
    phi = v["gravity_angle"]
    c1, c2 = v["viscous1"] * dp.LOSS_UNIT, v["viscous2"] * dp.LOSS_UNIT

    def f(s):
        t1, t2, w1, w2 = s
        d, rel = t1 - t2, w2 - w1
        r1 = -c1 * w1 + c2 * rel - B * np.sin(d) * w2 ** 2 - D * np.sin(t1 - phi)
        r2 = -c2 * rel + B * np.sin(d) * w1 ** 2 - E * np.sin(t2 - phi)
        m12 = B * np.cos(d)
        det = A * C - m12 ** 2
        return np.array([w1, w2, (C * r1 - m12 * r2) / det, (A * r2 - m12 * r1) / det])

    sub = 8
    h = dp.FRAME / sub
    s = np.array([phi + 2.5, phi - 1.0, 0.0, 0.0])       # released high: chaotic
    out = []
    for _ in range(int(seconds * dp.FPS)):
        out.append(s[:2].copy())
        for _ in range(sub):
            k1 = f(s)
            k2 = f(s + h / 2 * k1)
            k3 = f(s + h / 2 * k2)
            k4 = f(s + h * k3)
            s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    t = np.array(out)
    l2 = 0.11                                           # marker on the tip (any length)
    pivot = np.zeros((len(t), 2))
    elbow = v["length1"] * np.stack([np.sin(t[:, 0]), np.cos(t[:, 0])], axis=1)
    tip = elbow + l2 * np.stack([np.sin(t[:, 1]), np.cos(t[:, 1])], axis=1)
    px = np.concatenate([pivot, elbow, tip], axis=1) * scale + np.tile(offset, 3)
    return px


@pytest.fixture(scope="module")
def synthetic():
    return _markers(TRUTH)


def test_regression_start_recovers_a_synthetic_pendulum(synthetic):
    """The linear equation-error solve plus the box realisation give back
    the ratios, the camera's gravity direction and the losses: a start,
    not the fit. Savitzky-Golay accelerations over 21 frames (what the
    real data's marker noise needs) lag at these rates (up to 43 rad/s):
    the ratios come within 5%, the weak upper damping within 3x."""
    angles = dp.marker_angles(synthetic)
    start = dp.regression_start([angles], losses=True)
    assert start["gravity_angle"] == pytest.approx(TRUTH["gravity_angle"], abs=0.005)
    for name in ("length1", "com1", "com2", "mass2"):
        assert start[name] == pytest.approx(TRUTH[name], rel=0.05), name
    assert start["viscous2"] == pytest.approx(TRUTH["viscous2"], rel=0.1)
    assert TRUTH["viscous1"] / 3 < start["viscous1"] < 3 * TRUTH["viscous1"]
    assert start["dry1"] < 0.1 and start["dry2"] < 0.1       # none in the truth
    without = dp.regression_start([angles], losses=False)
    assert without["viscous1"] == 0.0 and without["dry2"] == 0.0
    assert without["gravity_angle"] == pytest.approx(TRUTH["gravity_angle"], rel=0.01)


def test_regression_start_refuses_markers_that_are_no_pendulum(synthetic):
    """Markers swapped (tip and elbow) describe no rigid double pendulum: a
    named error, not a fit from nonsense."""
    swapped = synthetic[:, [0, 1, 4, 5, 2, 3]]
    with pytest.raises(DataError, match="no physical double pendulum"):
        dp.regression_start([dp.marker_angles(swapped)], losses=False)
