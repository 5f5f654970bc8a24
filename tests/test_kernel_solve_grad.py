"""The hand-written pullbacks of the Numba solve and integrate kernels
(`pgs_grad`, `integrate_grad`) against central finite differences of the
forward kernels (`pgs_numba`, `integrate_numba`), as directional derivatives <g_out, J dx>."""

import numpy as np
import pytest

from symphys.physics.kernels.integrate import integrate_grad, integrate_numba
from symphys.physics.kernels.layout import N_OPTIONS, ROW, Bound, Option
from symphys.physics.kernels.solve import pgs_grad as sg
from symphys.physics.kernels.solve import pgs_numba as sn

H = 1e-6
RTOL = 1e-6
ROW_FIELDS = ROW.names
N_BODIES = 4


def _table():
    """(R, 4) rows of every kind: a ground contact (normal + 2 friction), a
    two-sided contact with rolling rows (normal + 4 friction), a joint
    (3 equality rows, 2 limit rows), bearing losses (FREE, BOX), a servo."""
    rows = []

    def contact(a, b, friction):
        first = len(rows)
        rows.append((a, b, int(Bound.LOWER), -1))
        rows.extend([(a, b, int(Bound.FRICTION), first)] * friction)

    contact(0, -1, 2)
    contact(1, 2, 4)
    rows += [(2, 3, int(Bound.FREE), -1)] * 3 + [(2, 3, int(Bound.LOWER), -1)] * 2
    rows += [(3, -1, int(Bound.FREE), -1), (3, -1, int(Bound.BOX), -1)]
    rows += [(1, 0, int(Bound.BOX), -1)]
    return np.asarray(rows, dtype=np.int64)


def _inputs(seed, nw=2):
    """Random but physical inputs: dir = M^-1 J^T, mass the (soft) effective
    mass, bounds that bind for some rows and not others. Lower bounds are
    small nonzero values so that no FRICTION row sits at c = 0 exactly."""
    rng = np.random.default_rng(seed)
    table = _table()
    nr = len(table)
    inv_mass = rng.uniform(0.5, 2.0, (nw, N_BODIES))
    q = rng.normal(size=(nw, N_BODIES, 3, 3))
    inv_inertia = q @ np.swapaxes(q, -1, -2) + np.eye(3)
    rows = np.zeros((nw, nr, ROW.width))
    for w in range(nw):
        for r, (a, b, bound, _) in enumerate(table):
            ja = rng.normal(size=6)
            da = np.concatenate([inv_mass[w, a] * ja[:3], inv_inertia[w, a] @ ja[3:]])
            k = ja @ da
            rows[w, r, ROW.jac_a], rows[w, r, ROW.dir_a] = ja, da
            if b >= 0:
                jb = -rng.normal(size=6)
                db = np.concatenate([inv_mass[w, b] * jb[:3], inv_inertia[w, b] @ jb[3:]])
                k += jb @ db
                rows[w, r, ROW.jac_b], rows[w, r, ROW.dir_b] = jb, db
            gamma = rng.uniform(0.0, 0.3)
            rows[w, r, ROW.at("gamma")] = gamma
            rows[w, r, ROW.at("mass")] = 1.0 / (k + gamma)
            rows[w, r, ROW.at("keep")] = rng.uniform(0.8, 1.0)
            rows[w, r, ROW.at("target")] = rng.normal()
            rows[w, r, ROW.at("lower")] = rng.choice([-1, 1]) * rng.uniform(0.01, 0.05)
            if bound == Bound.BOX:
                rows[w, r, ROW.at("lower")] = -rng.uniform(0.05, 0.3)
                rows[w, r, ROW.at("upper")] = rng.uniform(0.05, 0.3)
            else:
                rows[w, r, ROW.at("upper")] = rng.normal()   # read by no clamp
            rows[w, r, ROW.at("mu")] = rng.uniform(0.1, 0.6)
    v_free = rng.normal(size=(nw, N_BODIES, 6))
    return v_free, rows, table


def _codes(v_free, rows, table, iterations):
    """Every update's branch code (B, iterations, R)."""
    nr = len(table)
    out = np.empty((len(v_free), iterations, nr), dtype=np.int8)
    for w in range(len(v_free)):
        vel, lam = v_free[w].copy(), np.zeros(nr)
        olds, news, refs = np.empty(nr), np.empty(nr), np.empty(nr)
        for s in range(iterations):
            sg.sweep_taped(rows[w], table, vel, lam, olds, news, refs, out[w, s])
    return out


def _fd(f, g_out, xs, dxs):
    """<g_out, J dx> by central differences of f, differenced output by
    output before the sum (summing first loses digits to cancellation)."""
    plus = f(*[x + H * d for x, d in zip(xs, dxs)])
    minus = f(*[x - H * d for x, d in zip(xs, dxs)])
    return np.sum(g_out * (plus - minus)) / (2 * H)


def _assert_close(analytic, numeric, what):
    assert np.isfinite(analytic), what
    err = abs(analytic - numeric)
    assert err <= RTOL * max(abs(numeric), 1e-3), \
        f"{what}: vjp {analytic:.12g} vs finite differences {numeric:.12g}"


@pytest.mark.parametrize("iterations", [1, 3, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_solve_vjp_matches_finite_differences(seed, iterations):
    v_free, rows, table = _inputs(seed)
    rng = np.random.default_rng(100 + seed)
    g_v = rng.normal(size=v_free.shape)
    gv_s, gr_s = sg.solve_vjp(v_free, rows, table, g_v, iterations)
    gv_r, gr_r = sg.solve_vjp_recompute(v_free, rows, table, g_v, iterations)
    np.testing.assert_array_equal(gv_s, gv_r)
    np.testing.assert_array_equal(gr_s, gr_r)
    codes = _codes(v_free, rows, table, iterations)

    def f(vf, rw):
        return sn.solve(vf, rw, table, iterations)

    # every input block on its own, then all together
    for field in ("v_free",) + ROW_FIELDS + ("all",):
        d_vf = rng.normal(size=v_free.shape) if field in ("v_free", "all") else 0 * v_free
        d_rows = np.zeros_like(rows)
        if field != "v_free":
            cols = ROW.sizes.keys() if field == "all" else [field]
            for c in cols:
                d_rows[..., getattr(ROW, c)] = rng.normal(size=rows[..., getattr(ROW, c)].shape)
        d_rows[:, table[:, 1] < 0, ROW.jac_b] = 0.0       # b = -1: never read
        d_rows[:, table[:, 1] < 0, ROW.dir_b] = 0.0
        for sign in (1, -1):       # no branch changes within the stencil
            assert (_codes(v_free + sign * H * d_vf, rows + sign * H * d_rows, table,
                           iterations) == codes).all(), field
        numeric = _fd(f, g_v, (v_free, rows), (d_vf, d_rows))
        analytic = np.sum(gv_s * d_vf) + np.sum(gr_s * d_rows)
        _assert_close(analytic, numeric, f"{field} (seed {seed}, {iterations} sweeps)")


def test_solve_inputs_cover_every_branch():
    """The test inputs take every clamp branch somewhere; the taped replay
    reproduces the forward bit for bit."""
    seen = set()
    for seed in (0, 1):
        v_free, rows, table = _inputs(seed)
        seen |= set(np.unique(_codes(v_free, rows, table, 8)).tolist())
        for w in range(len(v_free)):
            vel, lam = v_free[w].copy(), np.zeros(len(table))
            tape = [np.empty(len(table)) for _ in range(3)] + [np.empty(len(table), np.int8)]
            for _ in range(8):
                sg.sweep_taped(rows[w], table, vel, lam, *tape)
            np.testing.assert_array_equal(vel, sn.solve(v_free, rows, table, 8)[w])
    assert seen == {sg.TO_NEW, sg.TO_LOWER, sg.TO_UPPER, sg.TO_MINUS_C, sg.TO_PLUS_C,
                    sg.TO_NOTHING}


def test_friction_at_zero_normal_impulse_gets_no_gradient():
    """A normal row clamped at lower = 0 gives c = 0: its friction rows
    output the constant 0, so mu gets nothing (autodiff's convention)."""
    v_free, rows, table = _inputs(0, nw=1)
    rows[0, 0, ROW.at("lower")] = 0.0
    rows[0, 0, ROW.at("target")] = -50.0        # pulls: clamped at 0
    codes = _codes(v_free, rows, table, 3)
    assert (codes[0, :, 1:3] == sg.TO_NOTHING).all()
    g_vf, g_rows = sg.solve_vjp(v_free, rows, table, np.ones_like(v_free), 3)
    assert (g_rows[0, 1:3, ROW.at("mu")] == 0.0).all()
    assert np.isfinite(g_vf).all() and np.isfinite(g_rows).all()


def test_solve_vjp_zero_iterations_is_identity():
    v_free, rows, table = _inputs(0)
    g_v = np.random.default_rng(0).normal(size=v_free.shape)
    g_vf, g_rows = sg.solve_vjp(v_free, rows, table, g_v, 0)
    np.testing.assert_array_equal(g_vf, g_v)
    assert not g_rows.any()


def _rotations(rng, shape, noise):
    q, _ = np.linalg.qr(rng.normal(size=shape + (3, 3)))
    return q + noise * rng.normal(size=q.shape)


@pytest.mark.parametrize("case", ["mixed", "zero_spin", "large_angle"])
@pytest.mark.parametrize("renormalise", [0, 2])
def test_integrate_vjp_matches_finite_differences(case, renormalise):
    rng = np.random.default_rng(7)
    nw, n = 2, 5
    options = np.zeros(N_OPTIONS)
    options[Option.DT] = 0.05 if case == "large_angle" else 0.01
    state = np.zeros((nw, n, 18))
    cx, cr, cv = integrate_numba.X, integrate_numba.R, integrate_numba.V
    state[..., cx:cx + 3] = rng.normal(size=(nw, n, 3))
    state[..., cr:cr + 9] = _rotations(rng, (nw, n), 1e-3).reshape(nw, n, 9)
    state[..., cv:] = rng.normal(size=(nw, n, 6))
    v, v_free = rng.normal(size=(nw, n, 6)), rng.normal(size=(nw, n, 6))
    tau = rng.uniform(0.0, 1.0, (nw, n))
    if case == "mixed":            # some bodies on each branch of the rotation coefficients
        v[..., 3:] *= rng.choice([0.5, 20.0], size=(nw, n, 1))
        v_free[..., 3:] = v[..., 3:] * 1.01
    elif case == "zero_spin":
        v[..., 3:] = 0.0
        v_free[..., 3:] = 0.0
    else:                          # |w dt| up to a few rad
        v[..., 3:] *= 30.0
        v_free[..., 3:] = v[..., 3:] + rng.normal(size=(nw, n, 3))
    angles = options[Option.DT] * np.linalg.norm(v[..., 3:] + tau[..., None] * (
        v_free[..., 3:] - v[..., 3:]), axis=-1)
    assert not np.any(np.abs(angles ** 2 - 1e-2) < 1e-6)       # off the branch switch
    g_out = rng.normal(size=state.shape)
    grads = integrate_grad.integrate_vjp(state, v, v_free, tau, options, g_out, renormalise)
    for g in grads:
        assert np.isfinite(g).all()
    assert not grads[0][..., integrate_numba.V:].any()

    def f(st, vv, vf, t):
        return integrate_numba.integrate(st, vv, vf, t, options, renormalise)

    xs = (state, v, v_free, tau)
    for which in range(4):
        dxs = [rng.normal(size=x.shape) if k == which else np.zeros_like(x)
               for k, x in enumerate(xs)]
        numeric = _fd(f, g_out, xs, dxs)
        analytic = sum(np.sum(g * d) for g, d in zip(grads, dxs))
        _assert_close(analytic, numeric, f"{case}, input {which}, renormalise {renormalise}")
