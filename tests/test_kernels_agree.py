"""The Numba kernels with their hand-made pullbacks against the JAX kernels
differentiated by JAX's own autodiff, on 1,000 hypothesis scenes.

One step, state -> next state, both ways:

- Numba: `rows_numba.rows`, `pgs_numba.solve`, `integrate_numba.integrate`;
  the cotangents of (state, body, world, joint, motor, action) by chaining
  the hand-written pullbacks integrate_vjp -> solve_vjp -> rows_vjp;
- JAX: integrate(solve(rows(...))) of `rows_jax` / `pgs_jax` / `integrate_jax`, one
  `jax.jit` function for the value and one for `jax.vjp` of it, the tables
  traced arguments, compiled once for fixed padded sizes
  (`kernel_padding.pad`, bounds of the scene generator) and serving every
  scene (the jit caches are checked to hold one entry).

Per scene (random state and action, random output cotangent): next states
agree to 1e-10 (relative to 1 + |value|), every cotangent to 1e-8 relative
to the largest magnitude of that cotangent array, and nothing is NaN or
inf, at resting contacts (gap 0.0) and zero velocities included. Padded
entries are inert: the padded part of the JAX cotangents is exactly zero
and the Numba kernels on padded bodies, parameters and rows give the
unpadded results bit for bit.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

from kernel_padding import NAMES, generator_sizes, numeric_inputs, pad, scene_sizes, trim_items  # noqa: E402
from kernel_scenes import (  # noqa: E402
    ITERATIONS,
    SMALL_SCENES,
    random_action,
    random_state,
    scene_features,
    scenes,
)

import symphys  # noqa: E402
from symphys.compiler import reference_step as reference  # noqa: E402
from symphys.physics.kernels.integrate import integrate_grad, integrate_jax, integrate_numba  # noqa: E402
from symphys.physics.kernels.layout import Option, build_layout  # noqa: E402
from symphys.physics.kernels.rows import rows_grad, rows_jax, rows_numba  # noqa: E402
from symphys.physics.kernels.solve import pgs_grad, pgs_jax, pgs_numba  # noqa: E402

MAX_BODIES = 4
SIZES = generator_sizes(MAX_BODIES)
RENORMALISE = 1          # the generator's scenes: the default Bjorck steps
VALUE_TOL = 1e-10
GRAD_TOL = 1e-8
GRAD_FLOOR = 1e-6        # scale floor of an all-(near-)zero cotangent array
EXAMPLES = 1000
# which axis of each input the padding extends (None: not padded)
PADDED_AXIS = {"state": 1, "body": 1, "world": None, "joint": 1, "motor": 1, "geom": 1,
               "action": 1}


# -- the two backends ------------------------------------------------------------
def _jax_step(state, body, world, joint, motor, geom, action, *tables):
    v_free, rows, tau = rows_jax.rows(state, body, world, joint, motor, geom, action, *tables)
    v = pgs_jax.solve(v_free, rows, tables[7], ITERATIONS)
    return integrate_jax.integrate(state, v, v_free, tau, tables[9], RENORMALISE)


def _jax_step_vjp(x, tables, g):
    out, pullback = jax.vjp(lambda *xs: _jax_step(*xs, *tables), *x)
    return out, pullback(g)


jax_step = jax.jit(_jax_step)
jax_step_vjp = jax.jit(_jax_step_vjp)


def numba_step(x, tables):
    state, options, rows_table = x[0], tables[9], tables[7]
    v_free, rows, tau = rows_numba.rows(*x, *tables)
    v = pgs_numba.solve(v_free, rows, rows_table, ITERATIONS)
    return integrate_numba.integrate(state, v, v_free, tau, options, RENORMALISE)


def numba_step_vjp(x, tables, g):
    """(next state, cotangents of x): the hand-written pullbacks chained."""
    state, options, rows_table = x[0], tables[9], tables[7]
    v_free, rows, tau = rows_numba.rows(*x, *tables)
    v = pgs_numba.solve(v_free, rows, rows_table, ITERATIONS)
    out = integrate_numba.integrate(state, v, v_free, tau, options, RENORMALISE)
    g_state, g_v, g_vf, g_tau = integrate_grad.integrate_vjp(state, v, v_free, tau, options,
                                                               g, RENORMALISE)
    g_vf_solve, g_rows = pgs_grad.solve_vjp(v_free, rows, rows_table, g_v, ITERATIONS)
    grads = list(rows_grad.rows_vjp(*x, *tables, g_vf + g_vf_solve, g_rows, g_tau))
    grads[0] = grads[0] + g_state
    return out, grads


NUMBA_FUNCTIONS = (rows_numba.rows, pgs_numba.solve, integrate_numba.integrate,
                   integrate_grad.integrate_vjp, pgs_grad.solve_vjp,
                   rows_grad.rows_vjp)


# -- one scene ------------------------------------------------------------------
class Case:
    """A scene at a random state and action, its inputs padded, and a random
    output cotangent (zero on padded bodies)."""

    def __init__(self, scene, seed: int, params: dict | None = None):
        rng = np.random.default_rng(seed)
        self.scene = scene
        layout = build_layout(scene)
        assert layout.options[Option.ITERATIONS] == ITERATIONS
        assert layout.options[Option.RENORMALISE] == RENORMALISE
        params = random_state(scene, rng) if params is None else params
        self.inputs = numeric_inputs(scene, params, random_action(scene, rng))
        self.tables = layout.arrays()
        self.sizes = scene_sizes(self.inputs, self.tables)
        assert all(s <= m for s, m in zip(self.sizes, SIZES)), (self.sizes, SIZES)
        self.padded, self.padded_tables = pad(self.inputs, self.tables, SIZES)
        self.x = [self.inputs[k] for k in NAMES]
        self.xp = [self.padded[k] for k in NAMES]
        n = self.sizes.bodies
        self.g = rng.normal(size=self.inputs["state"].shape)
        self.gp = np.zeros(self.padded["state"].shape)
        self.gp[:, :n] = self.g

    def own(self, name: str, array):
        """The scene's own part of a padded input (or its cotangent)."""
        array = np.asarray(array)
        axis = PADDED_AXIS[name]
        if axis is None:
            return array
        size = self.inputs[name].shape[axis]
        index = [slice(None)] * array.ndim
        index[axis] = slice(0, size)
        return array[tuple(index)]

    def padding(self, name: str, array):
        """The padded part of a padded input's cotangent."""
        array = np.asarray(array)
        axis = PADDED_AXIS[name]
        if axis is None:
            return array[..., :0]
        index = [slice(None)] * array.ndim
        index[axis] = slice(self.inputs[name].shape[axis], None)
        return array[tuple(index)]


def _value_error(a, b):
    return float(np.max(np.abs(a - b) / (1.0 + np.abs(b)), initial=0.0))


def _grad_error(a, b, state_scale=1.0):
    """max |a - b| over the larger of |a|, |b| and GRAD_FLOOR times the
    state cotangent's scale (at least 1): an input's cotangent far smaller
    than the state's is summed from terms of the state's size (a geom's
    place, R^T times its centre's cotangent), so its rounding is the state's."""
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)),
                GRAD_FLOOR * max(1.0, state_scale))
    return float(np.max(np.abs(a - b), initial=0.0)) / scale


def compare(case: Case):
    """{output: error} of Numba (with its pullbacks) against JAX (autodiff)."""
    out_n, grads_n = numba_step_vjp(case.x, case.tables, case.g)
    value_j = np.asarray(jax_step(*case.xp, *case.padded_tables))
    out_j, grads_j = jax_step_vjp(case.xp, case.padded_tables, case.gp)
    out_j, grads_j = np.asarray(out_j), [np.asarray(g) for g in grads_j]
    for name, arr in [("numba next state", out_n), ("jax next state", value_j),
                      ("jax vjp next state", out_j)] + \
            [(f"numba d{k}", g) for k, g in zip(NAMES, grads_n)]:
        assert np.all(np.isfinite(arr)), f"{name} not finite"
    np.testing.assert_allclose(out_j, value_j, rtol=1e-12, atol=1e-12)
    return _errors(case, out_n, grads_n, value_j, grads_j, padded=True)


def _errors(case: Case, out_n, grads_n, out_j, grads_j, padded: bool):
    """{output: error} of Numba's step and cotangents against JAX's, on
    padded JAX inputs (their padded part zero) or unpadded ones."""
    own = case.own if padded else (lambda name, array: np.asarray(array))
    errors = {"next state": _value_error(out_n, own("state", out_j))}
    state_scale = float(np.max(np.abs(grads_n[0]), initial=0.0))
    for name, gn, gj in zip(NAMES, grads_n, grads_j):
        assert np.all(np.isfinite(np.asarray(gj))), f"jax d{name} not finite"
        errors[f"d{name}"] = _grad_error(gn, own(name, gj), state_scale)
        if padded:
            assert not np.any(case.padding(name, gj)), f"padded d{name} not zero"
    return errors


def _tail(state, v_free, rows, tau, tables):
    v = pgs_jax.solve(v_free, rows, tables[7], ITERATIONS)
    return integrate_jax.integrate(state, v, v_free, tau, tables[9], RENORMALISE)


@jax.jit
def _tail_vjp(state, v_free, rows, tau, tables, g):
    out, pullback = jax.vjp(lambda *args: _tail(*args, tables), state, v_free, rows, tau)
    return out, pullback(g)


def compare_rows_op_by_op(case: Case):
    """{output: error} of Numba against JAX with its rows stage run op by op
    (`jax.disable_jit`: a joint coordinate or a gap that is exactly 0.0 is
    computed as Numba computes it) and the solve and integration compiled,
    on the padded inputs; JAX's autodiff of each part, chained."""
    out_n, grads_n = numba_step_vjp(case.x, case.tables, case.g)
    x, tables = case.xp, case.padded_tables
    with jax.disable_jit():
        (v_free, rows, tau), pullback = jax.vjp(lambda *xs: rows_jax.rows(*xs, *tables), *x)
    out_j, (g_state, g_vf, g_rows, g_tau) = _tail_vjp(x[0], v_free, rows, tau, tables, case.gp)
    with jax.disable_jit():
        grads_j = list(pullback((g_vf, g_rows, g_tau)))
    grads_j[0] = grads_j[0] + g_state
    return _errors(case, out_n, grads_n, np.asarray(out_j), grads_j, padded=True)


def compare_op_by_op(case: Case):
    """{output: error} of Numba against JAX run wholly op by op on the
    unpadded inputs (minutes: the solve's sweeps run in Python)."""
    out_n, grads_n = numba_step_vjp(case.x, case.tables, case.g)
    with jax.disable_jit():
        out_u, grads_u = _jax_step_vjp(case.x, case.tables, case.g)
    return _errors(case, out_n, grads_n, np.asarray(out_u), grads_u, padded=False)


WORST: dict = {}
RAN = {"examples": 0, "seconds": 0.0}
# each Numba kernel's specialisations before the first generated scene (other
# tests in the same process may have compiled some with other array layouts)
SIGNATURES_BEFORE: dict = {}
# Examples where the compiled JAX step took the other side of a kink than
# Numba: XLA's compiled arithmetic rounds differently from op-by-op
# evaluation, and at an exact tie (a joint exactly at a limit of 0.0, a
# resting contact whose impulse is 0.0) that decides the branch. Op by op,
# JAX computes what Numba computes; such examples are compared with the
# rows stage op by op, and if that still differs, wholly op by op.
FLIPS: list = []
MOST_FLIPS = 0.05          # of the examples


def _bad(errors: dict) -> dict:
    return {k: e for k, e in errors.items() if e > (VALUE_TOL if k == "next state" else GRAD_TOL)}


def _check(case: Case, what: str):
    errors = compare(case)
    if _bad(errors):
        FLIPS.append((what, errors))
        errors = compare_rows_op_by_op(case)
    if _bad(errors):
        errors = compare_op_by_op(case)
    for k, e in errors.items():
        if e > WORST.get(k, (-1.0,))[0]:
            WORST[k] = (e, what)
    bad = _bad(errors)
    assert not bad, f"{what}: Numba and JAX disagree: {bad}"


# -- the checks -------------------------------------------------------------------
def test_numpy_packer_matches_graph():
    """`kernel_padding.numeric_inputs` gives `reference.numeric_inputs`' values."""
    for k, scene in enumerate([SMALL_SCENES[11], SMALL_SCENES[5]]):
        rng = np.random.default_rng(k)
        params, action = random_state(scene, rng), random_action(scene, rng)
        ref = reference.numeric_inputs(scene, params, action)
        mine = numeric_inputs(scene, params, action)
        for name in NAMES:
            assert mine[name].shape == ref[name].shape, name
            np.testing.assert_allclose(mine[name], ref[name], rtol=1e-14, atol=1e-15,
                                       err_msg=name)


@pytest.mark.parametrize("index", [30])
def test_padding_is_inert(index):
    """Padded vs unpadded: JAX's next state and cotangents on the scene's own
    part agree to round-off (the unpadded run compiled by its own `jax.jit`,
    so that the padded functions keep their one executable); the Numba
    kernels on padded bodies, parameters and rows give the unpadded results
    bit for bit; the padded part of every cotangent is zero."""
    scene = SMALL_SCENES[index]
    case = Case(scene, 1000 + index)
    # A function of its own: JAX shares one executable cache among the
    # jit wrappers of one function, and the padded one must keep one entry.
    out_u, grads_u = jax.jit(lambda *args: _jax_step_vjp(*args))(case.x, case.tables, case.g)
    out_p, grads_p = jax_step_vjp(case.xp, case.padded_tables, case.gp)
    np.testing.assert_allclose(case.own("state", out_p), out_u, rtol=1e-13, atol=1e-13)
    for name, gu, gp in zip(NAMES, grads_u, grads_p):
        scale = max(1.0, float(np.max(np.abs(gu), initial=0.0)))
        np.testing.assert_allclose(case.own(name, gp), gu, rtol=0, atol=1e-12 * scale,
                                   err_msg=name)
        assert not np.any(case.padding(name, gp)), name
    # Numba: padded bodies / parameters / rows (the scene's own items)
    tables = trim_items(case.padded_tables, case.tables)
    out_n, grads_n = numba_step_vjp(case.x, case.tables, case.g)
    out_np, grads_np = numba_step_vjp(case.xp, tables, case.gp)
    np.testing.assert_array_equal(case.own("state", out_np), out_n)
    for name, gn, gnp in zip(NAMES, grads_n, grads_np):
        np.testing.assert_array_equal(case.own(name, gnp), gn, err_msg=name)
        assert not np.any(case.padding(name, gnp)), name


@pytest.mark.parametrize("offset", [1e-8, 0.0, -1e-8])
def test_capsules_whose_axes_nearly_meet(offset):
    """Two capsules deep in each other, their axes (along x and y) passing
    `offset` apart: the contact normal is the axes' cross product, signed
    by the offset, to rounding on both backends (from the closest points'
    difference it would keep only 8 digits), and the step and its
    cotangents agree as on generated scenes."""
    b = symphys.SceneBuilder("crossing", dt=0.01, iterations=ITERATIONS, gyroscopic=False)
    b.body("a", "capsule", mass=1.0, radius=0.1, length=0.4, position=[0.0, 0.0, 0.5 + offset],
           quaternion=[np.cos(np.pi / 4), 0.0, np.sin(np.pi / 4), 0.0], velocity=[0, 0, -1.0])
    b.body("b", "capsule", mass=2.0, radius=0.05, length=0.4, position=[0.05, 0.1, 0.5],
           quaternion=[np.cos(np.pi / 4), -np.sin(np.pi / 4), 0.0, 0.0],
           angular_velocity=[0.0, 0.0, 0.3])
    scene = b.contacts([("a", "b")]).build()
    x = numeric_inputs(scene)
    tables = build_layout(scene).arrays()
    want = np.array([0.0, 0.0, 1.0 if offset >= 0.0 else -1.0])
    normal = rows_numba.rows(*(x[k] for k in NAMES), *tables)[1][0, 0, :3]
    np.testing.assert_allclose(normal, want, rtol=0, atol=1e-15)
    normal = np.asarray(rows_jax.rows(*(x[k] for k in NAMES), *tables)[1])[0, 0, :3]
    np.testing.assert_allclose(normal, want, rtol=0, atol=1e-15)
    params = {f"{body.name}.{field}": getattr(body, field) for body in scene.bodies
              for field in ("position", "quaternion", "velocity", "angular_velocity")}
    errors = compare(Case(scene, 0, params))
    for k, e in errors.items():
        assert e <= (VALUE_TOL if k == "next state" else GRAD_TOL), (k, e)


def test_a_flat_box_falling_onto_its_four_corners():
    """A box lying flat 1e-7 m above the ground, still: its four lower
    corners reach the ground together within the step, so the box's free
    fraction of the step is a maximum over four equal impact times. Its
    gradient goes to the first of them in both backends (a scatter max
    would split it four ways in JAX), and the two agree."""
    b = symphys.SceneBuilder("flat", dt=0.01, iterations=ITERATIONS, gyroscopic=False).ground(
        friction=0.5)
    b.body("box", "box", mass=2.0, size=[0.2, 0.6, 0.1], position=[0.5, 0.0, 0.05 + 1e-7])
    scene = b.contacts([("box", "ground")]).build()
    params = {f"box.{field}": getattr(scene.bodies[0], field)
              for field in ("position", "quaternion", "velocity", "angular_velocity")}
    errors = compare_rows_op_by_op(Case(scene, 0, params))
    for k, e in errors.items():
        assert e <= (VALUE_TOL if k == "next state" else GRAD_TOL), (k, e)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example])
@given(scene=scenes(max_bodies=MAX_BODIES), seed=st.integers(0, 2 ** 32 - 1))
def test_numba_pullbacks_match_jax_autodiff(scene, seed):
    start = time.perf_counter()
    if not SIGNATURES_BEFORE:
        SIGNATURES_BEFORE.update({f: set(f.signatures) for f in NUMBA_FUNCTIONS})
    _check(Case(scene, seed), f"{scene_features(scene)} seed={seed}")
    RAN["examples"] += 1
    RAN["seconds"] += time.perf_counter() - start


def test_one_compiled_kernel_per_backend():
    """After every scene: one JAX executable for the value and one for the
    VJP at the padded sizes, and the generated scenes made each Numba kernel
    compile at most one specialisation of its own."""
    if RAN["examples"] == 0:
        pytest.skip("the hypothesis test did not run")
    assert jax_step._cache_size() == 1
    assert jax_step_vjp._cache_size() == 1
    assert len(FLIPS) <= MOST_FLIPS * RAN["examples"], FLIPS
    for f in NUMBA_FUNCTIONS:
        new = set(f.signatures) - SIGNATURES_BEFORE[f]
        assert len(new) <= 1, (f, new)
    print(f"\n{RAN['examples']} examples in {RAN['seconds']:.1f} s; worst: "
          + ", ".join(f"{k} {e:.2e}" for k, (e, _) in WORST.items()))
