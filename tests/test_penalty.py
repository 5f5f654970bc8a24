"""Penalty and smooth contact models (symphys.physics.penalty) against analytic
answers; one compiled function per model serves every world (stiffness
and damping are parameters, batched here)."""

import math

import numpy as np
import pytest

import symphys as sp
from symphys.errors import SceneError

BACKEND = "jax"          # small scenes: JAX compiles them in seconds
G, MASS, RADIUS, DT = 9.81, 1.0, 0.1, 0.002
STIFFNESS = np.array([1e3, 1e4, 1e5, 1e4])


def sphere_scene(model: str, **options):
    return (sp.SceneBuilder(f"pen-{model}", dt=DT, iterations=1, model=model, **options)
            .ground(friction=0.5)
            .sphere("ball", radius=RADIUS, mass=MASS, position=[0, 0, RADIUS], friction=0.5)
            .build())


def _worlds(scene, depth):
    """Worlds 0-2 rest at stiffness 1e3, 1e4, 1e5 (critical damping); world
    3 starts sliding at 1 m/s (stiffness 1e4). All start 2 mm above their
    rest depth."""
    z = RADIUS - depth
    velocity = np.zeros((4, 3))
    velocity[3, 0] = 1.0
    return {"solver.contact_stiffness": STIFFNESS,
            "solver.contact_damping": 2 * np.sqrt(STIFFNESS * MASS),
            "ball.position": np.column_stack([np.zeros(4), np.zeros(4), z + 0.002]),
            "ball.velocity": velocity}


@pytest.mark.parametrize("model", ["penalty", "smooth"])
def test_rest_depth_and_rolling(model):
    """A sphere settles where the spring holds its weight: depth m g / k
    (penalty) or s log(exp(m g / (k s)) - 1) (smooth); one sliding at v0
    without spin ends rolling at 5/7 v0 (angular momentum about the contact
    point is conserved), whatever the friction."""
    s = 1e-3
    scene = sphere_scene(model, contact_smoothing=s)
    weight = MASS * G
    if model == "penalty":
        depth = weight / STIFFNESS
    else:
        depth = s * np.log(np.expm1(weight / (STIFFNESS * s)))
    tr = sp.simulate(scene, 1500, params=_worlds(scene, depth), backend=BACKEND)
    z = tr.position["ball"][:, -1, 2]
    np.testing.assert_allclose(RADIUS - z[:3], depth[:3], rtol=1e-6, atol=1e-9)
    assert tr.velocity["ball"][3, -1, 0] == pytest.approx(5 / 7, abs=1e-4)
    # Rolling: the contact point (a radius below the centre) does not slide.
    assert tr.angular_velocity["ball"][3, -1, 1] * RADIUS == pytest.approx(5 / 7, abs=1e-4)


def test_penalty_rest_agrees_with_the_impulse_solver():
    """The impulse solver rests the sphere on the surface (depth 0); the
    penalty model rests it m g / k lower, so the two agree as k grows."""
    impulse = sp.simulate(sphere_scene("impulse"), 500, backend=BACKEND)
    z_impulse = impulse.position["ball"][-1, 2]
    assert z_impulse == pytest.approx(RADIUS, abs=1e-6)
    scene = sphere_scene("penalty")
    tr = sp.simulate(scene, 1500, params=_worlds(scene, MASS * G / STIFFNESS), backend=BACKEND)
    gaps = np.abs(tr.position["ball"][:3, -1, 2] - z_impulse)
    np.testing.assert_allclose(gaps, MASS * G / STIFFNESS[:3], rtol=1e-5)
    assert gaps[0] > gaps[1] > gaps[2]


def test_smooth_contact_gradient_matches_central_differences():
    """d(height after a drop)/d(stiffness, damping) through the smooth
    model, against central differences in float64."""
    scene = sphere_scene("smooth", contact_stiffness=2e3, contact_damping=20.0)
    params = {"ball.position": [0.0, 0.0, 0.25], "ball.velocity": [0.3, 0.0, -0.5]}
    loss = lambda tr: tr.position["ball"][-1, 2] + 0.1 * tr.velocity["ball"][-1, 2]
    wrt = ["solver.contact_stiffness", "solver.contact_damping"]
    value, grads = sp.value_and_grad(scene, 200, loss, wrt, params=params, backend=BACKEND)
    for name, h in zip(wrt, (1.0, 0.01)):
        base = float(scene.parameters()[name])
        hi = sp.value_and_grad(scene, 200, loss, wrt, params={**params, name: base + h},
                               backend=BACKEND)[0]
        lo = sp.value_and_grad(scene, 200, loss, wrt, params={**params, name: base - h},
                               backend=BACKEND)[0]
        assert abs(float(grads[name])) > 1e-6
        assert float(grads[name]) == pytest.approx((hi - lo) / (2 * h), rel=1e-4)


def test_penalty_fields_are_checked():
    with pytest.raises(SceneError, match="contact_stiffness"):
        sphere_scene("penalty", contact_stiffness=0.0)
    with pytest.raises(SceneError, match="body 'ball'.*rolling_friction"):
        (sp.SceneBuilder("rolling", model="penalty").ground()
         .sphere("ball", radius=0.1, mass=1.0, rolling_friction=0.01).build())
    with pytest.raises(SceneError, match="model"):
        sphere_scene("springy")
    scene = sphere_scene("penalty")
    assert {"solver.contact_stiffness", "solver.contact_damping"} <= set(scene.parameters())
    assert "solver.contact_stiffness" not in sphere_scene("impulse").parameters()
    assert math.isclose(scene.parameters()["solver.contact_stiffness"], 1e4)
