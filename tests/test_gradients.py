"""Exact gradients against central finite differences (float64).

Each scene compiles one value-and-gradient function on numba, the default
backend: the fused step kernels and their hand-written pullbacks (the
reference graph is checked against them in test_kernels_reference.py, the
backends against each other in test_backends.py). The same function
supplies the finite-difference values. Parameters are chosen away from
contact events (smooth regions).
"""

import numpy as np
import pytest
from scenes import drop, knock, mixed, pair, rod

import symphys as sp
from symphys.api import parameter_values, value_and_grad_function

BACKEND = "numba"


def _weights(n):
    return np.linspace(0.3, 1.1, n)


_LOSSES = {}


def _final_state_loss(names):
    """A smooth loss on every body's final position and velocity (one object
    per body list, so compiled functions are shared between tests)."""
    names = tuple(names)
    if names in _LOSSES:
        return _LOSSES[names]

    def loss(tr):
        total = 0.0
        for i, name in enumerate(names):
            w = _weights(3) * (i + 1)
            total = total + (tr.position[name][-1] * w).sum() \
                + 0.5 * (tr.velocity[name][-1] * w[::-1]).sum() \
                + 0.1 * (tr.angular_velocity[name][-1] * w).sum()
        return total
    _LOSSES[names] = loss
    return loss


def check_gradient(scene, steps, wrt, params, rel=1e-5, h=1e-6):
    loss = _final_state_loss(scene.body_names)
    args, batched = parameter_values(scene, params)
    fn = value_and_grad_function(scene, steps, loss, wrt, batched, BACKEND)
    names = list(scene.parameters())
    value, *grads = fn(*args)
    assert np.isfinite(value)
    out = {}
    for name, grad in zip(wrt, grads):
        assert np.all(np.isfinite(grad)), name
        index = names.index(name)
        base = np.asarray(args[index], dtype=float)
        fd = np.zeros_like(base)
        for k in np.ndindex(base.shape):
            step = h * max(1.0, abs(base[k]))
            plus, minus = base.copy(), base.copy()
            plus[k] += step
            minus[k] -= step
            f_plus = fn(*args[:index], plus, *args[index + 1:])[0]
            f_minus = fn(*args[:index], minus, *args[index + 1:])[0]
            fd[k] = (f_plus - f_minus) / (2 * step)
        scale = max(np.abs(fd).max(), 1e-3)
        np.testing.assert_allclose(grad, fd, rtol=rel, atol=rel * scale,
                                   err_msg=f"gradient of {name}")
        out[name] = grad
    return out


def test_drop_bounce_and_roll():
    """Sphere thrown onto the ground: bounce (restitution), slide, roll."""
    scene = drop()
    params = {"ball.velocity": [1.3, 0.4, 0.7], "ball.angular_velocity": [0.5, -20.0, 0.2],
              "ground.restitution": 0.55, "ground.friction": 0.01}
    grads = check_gradient(scene, 400, ["ball.velocity", "ball.angular_velocity",
                                             "ball.radius", "ground.friction",
                                             "ground.restitution", "world.gravity"], params)
    # Friction and restitution do change this trajectory.
    assert abs(grads["ground.friction"]) > 1e-3
    assert abs(grads["ground.restitution"]) > 1e-3


def test_capsule_sliding_and_spinning():
    """A capsule sliding and spinning on its two end spheres (friction, length).

    Not the radius: the capsule rests exactly on the ground (gap 0), where the
    contact target switches from speculative (gap > 0) to position feedback
    (gap < 0), so the loss has a kink in the radius there."""
    scene = rod()
    params = {"rod.velocity": [1.2, 0.4, 0.0], "rod.angular_velocity": [0.0, 0.0, 3.0]}
    grads = check_gradient(scene, 150, ["rod.velocity", "rod.angular_velocity",
                                        "rod.length", "rod.mass",
                                        "rod.friction"], params)
    assert abs(grads["rod.friction"]) > 1e-3 and abs(grads["rod.length"]) > 1e-4


def test_two_spheres_collide():
    scene = pair()
    params = {"a.velocity": [2.0, 0.1, 0.0], "a.restitution": 0.7, "b.restitution": 0.3}
    grads = check_gradient(scene, 400, ["a.velocity", "a.mass", "b.mass",
                                        "a.restitution", "b.radius"], params)
    assert abs(grads["a.mass"]) > 1e-3 and abs(grads["a.restitution"]) > 1e-3


def test_mixed_contacts():
    """Every contact kind at once. The crate starts 1.3 mm into the ground:
    in `mixed()` it rests exactly on it (gap 0 at its four bottom corners),
    where the loss has a kink in crate.size[2] (one-sided differences 2.676
    and 2.709) and no gradient to check; 1.3 mm off the tie, above or
    below, every gradient matches central differences to 1e-9."""
    scene = mixed()
    check_gradient(scene, 60, ["ball.velocity", "rod.velocity", "pebble.mass",
                               "rod.length", "rod.radius", "crate.size"],
                   {"crate.position": [0.0, 0.0, 0.0987]})


def test_soft_ground_ball():
    """The paper's ball scene: soft contact with constraint frequency f.

    The ball starts 5 cm into the ground, so the soft spring pushes it out
    (an approaching ball never penetrates: contacts are speculative)."""
    scene = sp.load_scene("ball")
    params = {"ball.velocity": [2.0, 0.0, 0.0], "ball.angular_velocity": [0.0, -1.0, 0.0],
              "ball.position": [0.0, 0.0, 0.45]}
    grads = check_gradient(scene, 20, ["ball.velocity", "ball.mass",
                                        "solver.constraint_frequency",
                                        "solver.constraint_damping", "world.gravity"], params)
    assert abs(grads["solver.constraint_frequency"]) > 1e-4


def test_no_nan_gradient_at_rest():
    """Resting contact and zero relative velocity give finite gradients."""
    scene = drop()
    loss = _final_state_loss(scene.body_names)
    args, batched = parameter_values(scene, {"ball.position": [0.0, 0.0, 0.1]})
    wrt = ["ball.velocity", "ball.angular_velocity", "ground.friction", "ball.radius",
           "ground.restitution", "world.gravity"]
    fn = value_and_grad_function(scene, 150, loss, wrt, batched, BACKEND)
    _, *grads = fn(*args)
    for name, g in zip(wrt, grads):
        assert np.all(np.isfinite(g)), name


def test_landing_time_moves_the_final_position_continuously():
    """Time-of-impact correction. A ball dropped from height h with forward
    speed vx slides on landing and rolls on at 5/7 vx, so its final x grows
    with the fall time t: dx/dh = (2/7) vx dt/dh. The semi-implicit fall
    h - r = g t (t + dt) / 2 gives dt/dh = 1 / (g (t + dt/2)). Were landings
    rounded to whole steps, this derivative would be 0."""
    scene = drop()
    h, vx, r, dt = 0.6, 1.0, 0.1, scene.dt
    params = {"ball.position": [0.0, 0.0, h], "ball.velocity": [vx, 0.0, 0.0],
              "ground.restitution": 0.0}
    grads = check_gradient(scene, 400, ["ball.position"], params)
    t = (-dt + np.sqrt(dt * dt + 8 * (h - r) / 9.81)) / 2
    x_weight = _weights(3)[0]          # the shared loss weighs final x by 0.3
    expect = x_weight * 2.0 / 7.0 * vx / (9.81 * (t + dt / 2))
    assert grads["ball.position"][2] == pytest.approx(expect, rel=0.02)


def test_sphere_strikes_box():
    """Box size, masses and friction through the sphere-box contact."""
    scene = knock()
    # vx = 1.97 keeps the impact away from a step boundary (see docs/physics.md, "One step").
    params = {"ball.velocity": [1.97, 0.3, -0.1], "ball.angular_velocity": [0.0, 0.0, 4.0]}
    grads = check_gradient(scene, 150, ["ball.velocity", "crate.size", "crate.mass",
                                        "ball.radius", "crate.friction",
                                        "crate.restitution"], params)
    assert np.abs(grads["crate.size"]).max() > 1e-3
    # The contact sticks (friction inside its bound), so mu has no effect here.
    assert grads["crate.friction"] == 0.0 and abs(grads["crate.restitution"]) > 1e-3


def test_checkpointed_rollout_gives_the_same_gradient():
    """The drop scene (bounce, slide, roll) with every 50th state kept and
    segments recomputed in the reverse pass (each step recomputed, or its
    residuals stored by the segment's forward): the same loss and
    gradients as the full rollout to 1e-12."""
    from symphys.errors import ParameterError
    from symphys.adjoint import LoopOptions, Reverse
    scene = drop()
    params = {"ball.velocity": [1.3, 0.4, 0.7], "ball.angular_velocity": [0.5, -20.0, 0.2],
              "ground.restitution": 0.55, "ground.friction": 0.01}
    wrt = ["ball.velocity", "ball.angular_velocity", "ball.radius", "ground.friction",
           "ground.restitution", "world.gravity"]      # as above: its function is reused
    loss = _final_state_loss(scene.body_names)
    args, batched = parameter_values(scene, params)
    full = value_and_grad_function(scene, 400, loss, wrt, batched, BACKEND)(*args)
    kept = value_and_grad_function(scene, 400, loss, wrt, batched, BACKEND,
                                   options=LoopOptions(checkpoint=50))(*args)
    # Each segment's step residuals stored by its forward, not recomputed.
    stored = value_and_grad_function(scene, 400, loss, wrt, batched, BACKEND,
                                     options=LoopOptions(checkpoint=50,
                                                         reverse=Reverse.STORE))(*args)
    for f, k, s in zip(full, kept, stored):
        np.testing.assert_allclose(k, f, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(s, f, rtol=1e-12, atol=1e-12)
    assert abs(full[4]) > 1e-3                     # friction acts
    with pytest.raises(ParameterError, match="multiple of checkpoint"):
        value_and_grad_function(scene, 401, loss, wrt, batched, BACKEND,
                                options=LoopOptions(checkpoint=50))
