"""The converged solve on JAX (`solve.newton_jax`, the NewtonSolve stage Op
compiled for JAX) against the Numba kernel (`solve.newton_numba`,
`solve.newton_grad`) on the scene with every kind of row
(`test_newton_solve.make_problem`): the answer over two worlds sharing a
body table, the implicit pullback of every input group, a gradient against
central differences, and the fused step with method newton on JAX against
Numba."""

import dataclasses

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import pytensor  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from test_newton_solve import SOFT, STIFF, TOLERANCE, _scene, make_problem  # noqa: E402

from symphys.errors import BackendError  # noqa: E402
from symphys.compiler.reference_step import numeric_inputs  # noqa: E402
from symphys.physics.kernels.layout import ROW, build_layout  # noqa: E402
from symphys.physics.kernels.solve import newton_grad as ng  # noqa: E402
from symphys.physics.kernels.solve import newton_jax as nj  # noqa: E402
from symphys.physics.kernels.solve import newton_numba as nw  # noqa: E402
from symphys.physics.kernels.stages import NewtonSolve, fused_step  # noqa: E402
from symphys.scene.elements import SolverMethod  # noqa: E402

ITERATIONS = 200
INPUTS = ("state", "body", "world", "joint", "motor", "geom", "action")
GROUPS = ("v_free", "rows", "state", "body")


@pytest.fixture(scope="module")
def case():
    """(problem, inputs of two worlds sharing one body table (Bp = 1): the
    problem's, and one with other free velocities and targets)."""
    prob = make_problem()
    _, x, v_free, rows, _ = prob
    rng = np.random.default_rng(3)
    v2 = v_free[0] + 0.05 * rng.normal(size=v_free[0].shape)
    r2 = rows[0].copy()
    r2[:, ROW.at("target")] *= 1.0 + 0.2 * rng.normal(size=len(r2))
    return prob, (np.stack([v_free[0], v2]), np.stack([rows[0], r2]),
                  np.concatenate([x["state"]] * 2), x["body"])


@pytest.fixture(scope="module")
def jax_op(case):
    """f(v_free, rows, state, body, g_v) -> (v, and the cotangents of
    <g_v, v> for the four inputs): the NewtonSolve Op and its pullback
    compiled for JAX."""
    (layout, _, _, _, tree), _ = case
    ins = [pt.tensor(k, shape=(None,) * 3, dtype="float64") for k in (*GROUPS, "g_v")]
    v = NewtonSolve(iterations=ITERATIONS, stiff=STIFF, soft=SOFT, tolerance=TOLERANCE)(
        ins[0], ins[1], pt.as_tensor_variable(layout.rows), ins[2], ins[3],
        pt.as_tensor_variable(layout.options), *map(pt.as_tensor_variable, tree.arrays()))
    grads = pytensor.grad((ins[4] * v).sum(), ins[:4])
    f = pytensor.function(ins, [v, *grads], mode="JAX")
    return lambda *args: [np.asarray(a) for a in f(*args)]


def _numba(case):
    (layout, _, _, _, tree), args = case
    v = nw.solve(*args[:2], layout.rows, *args[2:], layout.options, *tree.arrays(),
                 ITERATIONS, STIFF, SOFT, TOLERANCE)
    return layout, tree, args, v


def test_the_answer_equals_numba(case, jax_op):
    _, _, args, numba = _numba(case)
    mine = jax_op(*args, np.zeros_like(args[0]))[0]
    assert np.abs(numba[1] - numba[0]).max() > 1e-3        # the worlds differ
    np.testing.assert_allclose(mine, numba, rtol=1e-9, atol=1e-12 * np.abs(numba).max())


def test_the_pullback_equals_numba(case, jax_op):
    """Every input group's cotangent (the body table's summed over the two
    worlds) against `newton_grad.solve_vjp`."""
    layout, tree, args, v = _numba(case)
    g_v = np.random.default_rng(4).normal(size=v.shape)
    numba = ng.solve_vjp(*args[:2], layout.rows, *args[2:], layout.options, *tree.arrays(),
                         v, g_v, ITERATIONS, STIFF, SOFT, TOLERANCE)
    mine = jax_op(*args, g_v)[1:]
    for name, a, b in zip(GROUPS, numba, mine):
        assert b.shape == a.shape, name
        scale = np.abs(a).max()
        assert scale > 1e-3, name
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-9 * scale, err_msg=name)


def test_a_jax_gradient_matches_central_differences(case, jax_op):
    """<g_v, dv> along random Jacobians, targets and rotations (h = 1e-6)."""
    _, (v_free, rows, state, body) = case
    rng = np.random.default_rng(5)
    g_v = rng.normal(size=v_free.shape)
    d_rows = np.zeros_like(rows)
    d_rows[..., :24] = rng.normal(size=rows[..., :24].shape)
    d_rows[..., ROW.at("target")] = rng.normal(size=rows.shape[:2])
    d_state = np.zeros_like(state)
    d_state[..., 3:12] = rng.normal(size=d_state[..., 3:12].shape)
    grads = jax_op(v_free, rows, state, body, g_v)
    analytic = (grads[2] * d_rows).sum() + (grads[3] * d_state).sum()
    h = 1e-6

    def at(s):
        return jax_op(v_free, rows + s * h * d_rows, state + s * h * d_state, body, g_v)[0]
    numeric = ((at(1) - at(-1)) * g_v).sum() / (2 * h)
    assert abs(analytic) > 1e-3
    assert analytic == pytest.approx(numeric, rel=1e-6)


def test_a_traced_rows_table_is_refused(case):
    (layout, _, _, _, tree), (v_free, rows, state, body) = case
    with pytest.raises(BackendError, match="rows table as a constant"):
        jax.jit(lambda table: nj.solve(v_free, rows, table, state, body, layout.options,
                                       *tree.arrays(), 5, STIFF, SOFT, TOLERANCE))(layout.rows)


def _fused_function(scene, mode):
    """One fused step compiled for `mode`."""
    layout = build_layout(scene)
    x = numeric_inputs(scene, action=np.array([[-1.0]]))
    syms = [pt.tensor(k, shape=(None,) * x[k].ndim, dtype="float64") for k in INPUTS]
    return x, pytensor.function(syms, fused_step(*syms, layout), mode=mode)


def test_the_fused_step_on_jax_follows_numba():
    """Five fused steps with method newton of the sliding box carrying the
    arm, JAX against Numba."""
    scene = _scene()
    scene = dataclasses.replace(scene, solver=dataclasses.replace(
        scene.solver, method=SolverMethod.NEWTON, iterations=50, tolerance=1e-12))
    runs = {}
    for mode in ("NUMBA", "JAX"):
        x, f = _fused_function(scene, mode)
        states = [x["state"]]
        for _ in range(5):
            states.append(np.asarray(f(states[-1], *(x[k] for k in INPUTS[1:]))))
        runs[mode] = np.array(states[1:])
    numba, mine = runs["NUMBA"], runs["JAX"]
    assert np.abs(numba[-1, ..., 12:] - numba[0, ..., 12:]).max() > 1e-3     # it moves
    np.testing.assert_allclose(mine, numba, rtol=0, atol=1e-10 * np.abs(numba).max())


def test_the_block_factorization_equals_numba(case, monkeypatch):
    """The path for many worlds (sums over the runs' slices, the block
    Cholesky factorization), forced at two worlds: the answer and every
    input group's cotangent against Numba."""
    monkeypatch.setattr(nj, "BLOCK_WORLDS", 1)
    layout, tree, args, numba = _numba(case)
    g_v = np.random.default_rng(4).normal(size=numba.shape)
    pulled = ng.solve_vjp(*args[:2], layout.rows, *args[2:], layout.options, *tree.arrays(),
                          numba, g_v, ITERATIONS, STIFF, SOFT, TOLERANCE)

    def f(v_free, rows, state, body):
        return nj.solve(v_free, rows, layout.rows, state, body, layout.options, *tree.arrays(),
                        ITERATIONS, STIFF, SOFT, TOLERANCE)
    v, pull = jax.vjp(jax.jit(f), *args)
    np.testing.assert_allclose(v, numba, rtol=1e-9, atol=1e-12 * np.abs(numba).max())
    for name, a, b in zip(GROUPS, pulled, pull(g_v)):
        assert b.shape == a.shape, name
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-9 * np.abs(a).max(), err_msg=name)
