"""The hand-written sphere kernel (`symphys.bench.sphere_kernel`) against the engine.

The engine runs on JAX (float64): its cold compile of the 16-sphere scene
takes about 20 s, Numba's far longer, and Numba's compiled graphs use
fastmath, so they may differ from the kernel in the last bits.
"""

import numpy as np
import pytest

import symphys as sp
from symphys.api import simulate
from symphys.bench import sphere_kernel as sk
from symphys.bench.runner import _batched_params

BACKEND = "jax"
STEPS = 200
BATCH = 4
ATOL = 1e-9


def _final(traj, scene, field):
    """Engine's final `field` of every body: (B, N, 3) or (B, N, 3, 3)."""
    return np.stack([getattr(traj, field)[n][:, -1] for n in scene.body_names], axis=1)


def _stacked(traj, scene, field):
    """(B, T+1, N, 3) time series of `field`."""
    return np.stack([getattr(traj, field)[n] for n in scene.body_names], axis=2)


def _assert_agree(traj, scene, state):
    for field in ("position", "velocity", "angular_velocity", "rotation"):
        engine, kernel = _final(traj, scene, field), getattr(state, field)
        assert kernel.shape == engine.shape
        diff = np.abs(engine - kernel).max()
        assert diff <= ATOL, f"{field}: max |engine - kernel| = {diff:.3g}"


def _slip(v, w, r):
    """Speed of the contact point (lowest point) over the ground: (...)."""
    return np.hypot(v[..., 0] - r * w[..., 1], v[..., 1] + r * w[..., 0])


@pytest.fixture(scope="module")
def spheres16():
    """The benchmark scene, B worlds with jittered positions (as bench).
    Worlds 0 and 1 drop the spheres (world 1 spinning them); worlds 2 and 3
    start them on the ground spinning at up to 40 rad/s, so that they slide
    with friction at its bound before they roll."""
    scene = sp.load_scene("spheres16")
    rng = np.random.default_rng(0)
    params = _batched_params(scene, BATCH, rng)
    for body in scene.bodies:
        spin = rng.uniform(-40.0, 40.0, size=(BATCH, 3))
        spin[0] = 0.0
        params[f"{body.name}.angular_velocity"] = spin
        params[f"{body.name}.position"][2:, 2] = body.radius
    traj = simulate(scene, STEPS, params, backend=BACKEND)
    return scene, params, traj


def test_spheres16_agrees_with_engine(spheres16):
    scene, params, traj = spheres16
    state = sk.run(scene, params, BATCH, STEPS)
    _assert_agree(traj, scene, state)


def test_spheres16_contacts_bounce_and_slide(spheres16):
    """The comparison covers the contact paths: dropped spheres land and
    bounce, friction spins up those released without spin, and spinning
    spheres on the ground slide (slip persists while they touch: friction at
    its bound) until they roll."""
    scene, _, traj = spheres16
    r = np.array([b.radius for b in scene.bodies])
    z = _stacked(traj, scene, "position")[..., 2]
    v = _stacked(traj, scene, "velocity")
    w = _stacked(traj, scene, "angular_velocity")
    touching = z - r <= 1e-6
    bounces = ((v[:2, :-1, :, 2] < -0.5) & (v[:2, 1:, :, 2] > 0.2)).sum(axis=1)
    assert (bounces >= 1).all(), bounces
    assert (np.linalg.norm(w[0, -1], axis=-1) > 0.1).all()
    slip = _slip(v, w, r)
    sliding = (touching & (slip > 1e-3))[2:].sum(axis=1)          # (2, N) steps
    assert (sliding >= 1).all() and sliding.mean() > 10, sliding
    assert (slip[2:, -1] < 1e-9).all()                            # rolling at the end


def test_kernel_is_sensitive_to_the_physics(spheres16):
    """A 1% change of the ground friction moves the result far beyond ATOL,
    so the agreement above is not trivially met."""
    scene, params, _ = spheres16
    base = sk.run(scene, params, BATCH, STEPS)
    other = sk.run(scene, dict(params, **{"ground.friction": 0.505}), BATCH, STEPS)
    assert np.abs(other.position - base.position).max() > 1e3 * ATOL


def _variant():
    """Cone friction, soft contacts, 3 sweeps, 2 renormalisations, no
    restitution threshold, a raised ground, mixed materials: a drops and
    bounces, b starts sunk into the ground, c has no ground contact pair (it
    falls through), d starts on the ground and slides."""
    return (sp.SceneBuilder("soft-cone", dt=0.004, iterations=3, friction_model="cone",
                            constraint_frequency=30.0, constraint_damping=0.7,
                            restitution_threshold=0.0, renormalisation_iterations=2)
            .ground(height=0.05, friction=0.8, restitution=0.1)
            .sphere("a", radius=0.1, mass=1.0, position=[0, 0, 0.4], velocity=[1.0, 0.5, 0],
                    restitution=0.6, angular_velocity=[0, 0, 3.0])
            .sphere("b", radius=0.15, mass=2.5, position=[1, 0, 0.195],
                    velocity=[-0.5, 1.5, 0], friction=0.3)
            .sphere("c", radius=0.05, mass=0.3, position=[2, 0, 0.04], velocity=[2, 0, 0])
            .sphere("d", radius=0.08, mass=0.5, position=[0, 2, 0.13], velocity=[2.5, -1, 0],
                    friction=0.4, restitution=0.2)
            .contacts([("a", "ground"), ("b", "ground"), ("d", "ground")])
            .build())


def test_soft_cone_variant_agrees_with_engine():
    scene = _variant()
    batch, steps = 3, 150
    rng = np.random.default_rng(1)
    quat = rng.normal(size=(batch, 4))
    params = {"a.position": np.array([0, 0, 0.4]) + rng.uniform(-0.05, 0.05, (batch, 3)),
              "a.angular_velocity": rng.uniform(-30, 30, (batch, 3)),
              "b.velocity": [-0.5, 1.5, 0] + rng.uniform(-0.5, 0.5, (batch, 3)) * [1, 1, 0],
              "b.quaternion": quat / np.linalg.norm(quat, axis=1, keepdims=True),
              "c.angular_velocity": rng.uniform(-3, 3, (batch, 3)),
              "d.angular_velocity": rng.uniform(-10, 10, (batch, 3)),
              "b.mass": 2.0, "ground.friction": 0.7,
              "world.gravity": np.array([0.3, -0.2, -9.0])}
    traj = simulate(scene, steps, params, backend=BACKEND)
    _assert_agree(traj, scene, sk.run(scene, params, batch, steps))
    z = _stacked(traj, scene, "position")[..., 2]
    r = np.array([b.radius for b in scene.bodies])
    gap = z - r - 0.05
    assert (gap[:, 0, 1] < 0).all()                 # b starts penetrating (soft rows)
    slip = _slip(_stacked(traj, scene, "velocity"), _stacked(traj, scene, "angular_velocity"), r)
    sliding = ((gap[:, 1:, 3] < 1e-3) & (slip[:, 1:, 3] > 1e-3)).sum(axis=1)
    assert (sliding >= 10).all(), sliding           # d slides (friction cone at its bound)
    vz = _stacked(traj, scene, "velocity")[..., 2]
    assert ((vz[:, :-1, 0] < -1.0) & (vz[:, 1:, 0] > 0.5)).any(axis=1).all()  # a bounces
    assert (gap[:, -1, 2] < -1.0).all()             # c has no contact: falls through


def test_initial_state_and_shapes():
    scene = _variant()
    state = sk.initial_state(scene, {"b.quaternion": [0.0, 0.0, 0.0, 1.0]}, batch=2)
    assert state.position.shape == (2, 4, 3) and state.rotation.shape == (2, 4, 3, 3)
    for world in state.rotation:
        np.testing.assert_allclose(world[1], np.diag([-1.0, -1.0, 1.0]))
        np.testing.assert_allclose(world[0], np.eye(3))
    with pytest.raises(sp.ParameterError, match="batch=2"):
        sk.initial_state(scene, {"a.velocity": np.zeros((3, 3))}, batch=2)


@pytest.mark.parametrize("build, where", [
    (lambda: sp.SceneBuilder("s").ground()
     .sphere("ball", radius=0.1, mass=1.0).box("crate", size=[0.2, 0.2, 0.2], mass=1.0,
                                             position=[1, 0, 0.1]),
     ["body 'crate'", "field 'shape'", "box"]),
    (lambda: sp.SceneBuilder("s").ground()
     .sphere("p", radius=0.1, mass=1.0).sphere("q", radius=0.1, mass=1.0, position=[1, 0, 0])
     .contacts([("p", "ground"), ("p", "q")]),
     ["contacts[1]", "p-q"]),
    (lambda: sp.SceneBuilder("s").ground()
     .sphere("ball", radius=0.1, mass=1.0, position=[0, 0, 1])
     .joint("pin", "ball", "world", "ball", anchor=[0, 0, 1.5]),
     ["joint 'pin'"]),
    (lambda: sp.SceneBuilder("s").ground(rolling_friction=0.01)
     .sphere("ball", radius=0.1, mass=1.0),
     ["ground", "rolling_friction"]),
    (lambda: sp.SceneBuilder("s", model="smooth").ground().sphere("ball", radius=0.1, mass=1.0),
     ["solver", "field 'model'", "smooth"]),
])
def test_unsupported_scene_is_named(build, where):
    scene = build().build()
    with pytest.raises(sp.SceneError, match="sphere kernel") as info:
        sk.prepare(scene)
    for text in where:
        assert text in str(info.value)


def test_per_world_material_is_rejected():
    scene = sp.load_scene("spheres16")
    with pytest.raises(sp.ParameterError, match="s3.mass"):
        sk.run(scene, {"s3.mass": np.ones(2)}, steps=1)
