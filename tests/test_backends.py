"""numba, jax and cvm compile the same graph and agree to 1e-10.

Numba's gradient is checked on a contact-free scene: its cold compile of the
ball-drop gradient (contact solver included) takes about 10 minutes on
CI's CPU, against under one for JAX; JAX and the C VM agree on that one."""

import numpy as np
import pytest
from scenes import drop, flight

import symphys as sp
from symphys.api import parameter_values, value_and_grad_function

BACKENDS = ["numba", "jax", "cvm"]
PARAMS = {"ball.velocity": [1.2, -0.3, 1.0], "ball.angular_velocity": [0.3, 0.8, -0.5],
          "ground.restitution": 0.6, "ground.friction": 0.1}
WRT = ["ball.velocity", "ball.angular_velocity", "ground.friction", "ball.radius"]


def loss(tr):
    return (tr.position["ball"][-1] * np.array([1.0, 2.0, 3.0])).sum() \
        + (tr.velocity["ball"][-1] ** 2).sum() + tr.angular_velocity["ball"][-1].sum()


@pytest.fixture(scope="module")
def scene():
    return drop()


def test_trajectories_agree(scene):
    runs = {b: sp.simulate(scene, 500, params=PARAMS, backend=b) for b in BACKENDS}
    ref = runs["numba"]
    for b in BACKENDS[1:]:
        for field in ("position", "rotation", "velocity", "angular_velocity"):
            np.testing.assert_allclose(getattr(runs[b], field)["ball"],
                                       getattr(ref, field)["ball"], rtol=0, atol=1e-10,
                                       err_msg=f"{b} {field}")


def _gradients(scene, backends, params=PARAMS, wrt=WRT):
    args, batched = parameter_values(scene, params)
    outs = {b: value_and_grad_function(scene, 300, loss, wrt, batched, b)(*args)
            for b in backends}
    for b in backends[1:]:
        for got, ref in zip(outs[b], outs[backends[0]]):
            np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10, err_msg=b)
    return outs[backends[0]]


def test_contact_gradients_agree(scene):
    """The ball bounces and slides within the 300 steps."""
    value, *grads = _gradients(scene, ["jax", "cvm"],
                               params={**PARAMS, "ball.position": [0.0, 0.0, 0.3],
                                       "ball.velocity": [4.0, -0.3, 1.0], "ball.friction": 0.1})
    assert np.abs(grads[0]).max() > 0.1 and abs(grads[2]) > 1e-3   # velocity, friction


def test_numba_gradient_agrees_in_free_flight():
    value, *grads = _gradients(flight(), ["numba", "jax"], wrt=WRT[:2] + ["world.gravity"],
                               params={k: PARAMS[k] for k in WRT[:2]})
    assert np.abs(grads[0]).max() > 0.1 and np.abs(grads[1]).max() > 0.1


def test_batched_worlds_match_single_runs(scene):
    """One compiled function for many worlds: row b equals world b alone."""
    vel = np.array([[1.0, 0.0, 2.0], [0.0, -1.0, 0.5], [2.0, 1.0, 0.0]])
    batched = sp.simulate(scene, 200, params={"ball.velocity": vel, "ground.friction": 0.1},
                          backend="jax")
    assert batched.position["ball"].shape == (3, 201, 3)
    assert batched.rotation["ball"].shape == (3, 201, 3, 3)
    for i in range(3):
        single = sp.simulate(scene, 200, params={"ball.velocity": vel[i],
                                                 "ground.friction": 0.1}, backend="jax")
        np.testing.assert_allclose(batched.position["ball"][i], single.position["ball"],
                                   rtol=0, atol=1e-12)


def test_static_batch_fixes_jax_batches_only():
    from symphys.compiler.backends import static_batch
    from symphys.errors import BackendError
    assert static_batch("numba", True, None) is None
    assert static_batch("cvm", True, 8) is None
    assert static_batch("jax", False, None) is None
    assert static_batch("jax", True, 8) == 8
    with pytest.raises(BackendError, match="pass batch=B"):
        static_batch("jax", True, None)
