"""The fused step's Numba kernels and hand-made pullbacks against the
reference graph (`symphys.physics.step.step` and PyTensor's gradient of it), one
step at a time from many states: every shipped scene, two built scenes
with every feature, and the small generated scenes of `kernel_scenes`."""

import numpy as np
import pytest
from kernel_scenes import FEATURES, SMALL_SCENES, random_action, random_state

import symphys as sp
from symphys.compiler.reference_step import numeric_inputs, reference_step_function
from symphys.physics.kernels.integrate import integrate_grad, integrate_numba
from symphys.physics.kernels.layout import Option, build_layout
from symphys.physics.kernels.rows import rows_grad, rows_numba
from symphys.physics.kernels.solve import newton_grad, newton_numba, pgs_grad, pgs_numba

SHIPPED = ["ball", "arm", "quadruped_revisited", "quadruped", "pendulum_camera", "spheres16"]
INPUTS = ("state", "body", "world", "joint", "motor", "geom", "action")


def kernel_step(x: dict, layout, g=None):
    """The next state from the three Numba kernels (the solve Gauss-Seidel's
    or Newton's, as the layout's options say); with an output cotangent g,
    also the seven input cotangents from their pullbacks."""
    tables = layout.arrays()
    iterations = int(layout.options[Option.ITERATIONS])
    renormalise = int(layout.options[Option.RENORMALISE])
    args = [x[k] for k in INPUTS]
    v_free, rows, tau = rows_numba.rows(*args, *tables)
    newton = None
    if layout.options[Option.NEWTON]:
        tree = newton_numba.pattern(layout.rows, len(layout.articulated)).arrays()
        newton = (int(layout.options[Option.NEWTON_ITERATIONS]), newton_numba.STIFF,
                  float(layout.options[Option.BOUND_SOFTNESS]),
                  float(layout.options[Option.TOLERANCE]))
        v = newton_numba.solve(v_free, rows, layout.rows, x["state"], x["body"], layout.options,
                               *tree, *newton)
    else:
        v = pgs_numba.solve(v_free, rows, layout.rows, iterations)
    out = integrate_numba.integrate(x["state"], v, v_free, tau, layout.options, renormalise)
    if g is None:
        return out
    g_state, g_v, g_vf, g_tau = integrate_grad.integrate_vjp(
        x["state"], v, v_free, tau, layout.options, g, renormalise)
    if newton is None:
        g_vf2, g_rows = pgs_grad.solve_vjp(v_free, rows, layout.rows, g_v, iterations)
    else:
        g_vf2, g_rows, g_state2, g_body = newton_grad.solve_vjp(
            v_free, rows, layout.rows, x["state"], x["body"], layout.options, *tree, v, g_v,
            *newton)
        g_state = g_state + g_state2
    grads = rows_grad.rows_vjp(*args, *tables, g_vf + g_vf2, g_rows, g_tau)
    grads[0][...] += g_state
    if newton is not None:
        grads[1][...] += g_body
    return out, list(grads)


def _close(a, b, tol):
    """max |a - b| / (1 + |b|)."""
    return float(np.max(np.abs(a - b) / (1.0 + np.abs(b)), initial=0.0))


def _states(scene, seed: int, count: int):
    """The scene's default inputs, then `count` random states and actions."""
    rng = np.random.default_rng(seed)
    yield numeric_inputs(scene, action=random_action(scene, rng) if scene.motors else None)
    for _ in range(count):
        params = random_state(scene, rng)
        action = random_action(scene, rng) if scene.motors else None
        yield numeric_inputs(scene, params=params, action=action)


def check_scene(scene, seed: int, count: int, steps: int, functions=None,
                gradient_tolerance: float = 1e-8):
    """Values along `steps` reference steps from each state, and one
    pullback per state (to `gradient_tolerance` of its largest entry),
    against the reference (`functions`: the scene's
    `reference_step_function(scene, gradient=True)`, built when None)."""
    layout = build_layout(scene)
    ref, ref_vjp = functions or reference_step_function(scene, gradient=True)
    rng = np.random.default_rng(seed)
    for x in _states(scene, seed, count):
        for _ in range(steps):
            args = [x[k] for k in INPUTS]
            expected = ref(*args)
            got = kernel_step(x, layout)
            assert np.all(np.isfinite(got))
            assert _close(got, expected, 1e-10) < 1e-10, scene.name
            x = dict(x, state=expected)
        g = rng.normal(size=x["state"].shape)
        _, grads = kernel_step(x, layout, g)
        expected = ref_vjp(*[x[k] for k in INPUTS], g)
        for name, got, want in zip(INPUTS, grads, expected):
            assert np.all(np.isfinite(got)), (scene.name, name)
            scale = max(np.abs(want).max(initial=0.0), 1e-8)
            assert np.abs(got - want).max(initial=0.0) / scale < gradient_tolerance, \
                (scene.name, name)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scene_kernels_match_the_reference(name):
    check_scene(sp.load_scene(name), seed=1, count=2, steps=10)


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_feature_scene_kernels_match_the_reference(name):
    check_scene(FEATURES[name](), seed=2, count=2, steps=10)


@pytest.mark.parametrize("index", range(len(SMALL_SCENES)))
def test_small_generated_scene_kernels_match_the_reference(index):
    check_scene(SMALL_SCENES[index], seed=index, count=2, steps=3)


def test_there_are_at_least_thirty_small_scenes():
    assert len(SMALL_SCENES) >= 30
