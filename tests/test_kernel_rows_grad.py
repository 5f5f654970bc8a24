"""The hand-written pullback of the Numba rows kernel (`rows_grad`)
against central finite differences of the forward kernel (`rows_numba`),
as directional derivatives <g_out, d rows(x; dx)> = <rows_vjp(g_out), dx>,
one input (state, body, world, joint, motor, action) at a time.

Directions that cross a kink of the forward (a contact that starts to
penetrate, a clamp that starts to bind, a resting contact at gap 0.0 where
every z perturbation switches a branch, atan2's cut) are detected by
comparing the one-sided differences (f(h) - f(0)) / h and (f(0) - f(-h)) / h;
there the pullback (which follows the branch the forward took) must match
one of them (loosely), or the direction is counted as skipped.
"""

import numpy as np
import pytest
from kernel_scenes import FEATURES, SMALL_SCENES, random_action, random_state

import symphys
from symphys.physics.kernels.rows import rows_numba as rn
from symphys.physics.kernels.rows import rows_grad as rg
from symphys.physics.kernels.layout import build_layout
from symphys.compiler.reference_step import numeric_inputs

H = 1e-6
RTOL = 1e-6
EPS = 1e-10         # where the pullback is probed beside x
ONE_SIDED = 1e-3     # at a kink, the pullback matches a one-sided slope this well
NAMES = ("state", "body", "world", "joint", "motor", "geom", "action")
SHIPPED = ("ball", "arm", "quadruped_revisited", "quadruped", "pendulum_camera", "spheres16")
WORST: dict = {}     # (case, input) -> worst relative error (smooth directions)


def _loss(x, tables, gs):
    outs = rn.rows(*x, *tables)
    return sum(float(np.sum(g * o)) for g, o in zip(gs, outs)), \
        sum(float(np.sum(np.abs(g * o))) for g, o in zip(gs, outs))


def _directional(case, name, x, i, dx, tables, gs, grad, counts, depth, rtol):
    """Check <grad, dx> against finite differences along dx; where dx crosses
    a kink or jump, split its support in two and check each half (down to
    `depth` splits), so that only the components at a kink go unchecked."""
    f = {}
    for t in (-2, -1, 0, 1, 2):
        xt = list(x)
        xt[i] = x[i] + t * H * dx
        f[t] = _loss(xt, tables, gs)
    floor = 1e-13 * max(f[t][1] for t in f) / H + 1e-10     # round-off
    central = (f[1][0] - f[-1][0]) / (2 * H)
    plus, minus = (f[1][0] - f[0][0]) / H, (f[0][0] - f[-1][0]) / H
    plus2, minus2 = (f[2][0] - f[0][0]) / (2 * H), (f[0][0] - f[-2][0]) / (2 * H)
    # smooth: plus - minus = h f'' + O(h^3), a kink within 2h adds a jump; and
    # central differences at h and 2h agree to O(h^2) (not so at a pole)
    kink = max(abs(2 * (plus - minus) - (plus2 - minus2)), abs(central - (plus2 + minus2) / 2))
    analytic = float(np.sum(grad * dx))
    # a branch switch at x itself (a resting contact at gap 0.0, where
    # kinks of several contacts can cancel in the one-sided slopes): the
    # pullback just beside x differs from the one at x
    for t in (-EPS, EPS):
        xt = list(x)
        xt[i] = x[i] + t * dx
        beside = float(np.sum(rg.rows_vjp(*xt, *tables, *gs)[i] * dx))
        kink = max(kink, abs(beside - analytic))
    if kink <= 0.1 * RTOL * abs(central) + 4 * floor:
        err = abs(analytic - central) / (abs(central) + floor / RTOL)
        WORST[case, name] = max(WORST.get((case, name), 0.0), err)
        assert err <= rtol, (case, name, analytic, central)
        counts[0] += 1
        return
    support = np.flatnonzero(dx)
    if depth > 0 and len(support) > 1:
        rng = np.random.default_rng(len(support) + depth)
        half = rng.permutation(support)[:len(support) // 2]
        first = np.zeros(dx.size)
        first[half] = dx.ravel()[half]
        first = first.reshape(dx.shape)
        for part in (first, dx - first):
            _directional(case, name, x, i, part, tables, gs, grad, counts, depth - 1, rtol)
    elif min(abs(analytic - (2 * plus - plus2)), abs(analytic - (2 * minus - minus2))) \
            <= ONE_SIDED * abs(analytic) + 1e3 * floor:
        counts[1] += 1      # a kink: the pullback is a one-sided derivative
    else:
        counts[2] += 1      # a jump or several kinks: unchecked


def check_case(case, x, tables, seed, depth=4, rtol=RTOL):
    """Check every input of rows at x; returns counts of (smooth checks,
    one-sided checks at kinks, unchecked directions)."""
    rng = np.random.default_rng(seed)
    outs = rn.rows(*x, *tables)
    gs = [rng.normal(size=o.shape) for o in outs]
    grads = rg.rows_vjp(*x, *tables, *gs)
    for g, a in zip(grads, x):
        assert g.shape == a.shape
        assert np.all(np.isfinite(g))
    counts = np.zeros(3, int)
    for i, name in enumerate(NAMES):
        if x[i].size == 0:
            continue
        dx = rng.normal(size=x[i].shape)
        if name == "state":     # rotations: a small direction
            dx[..., 3:12] *= 0.1
        _directional(case, name, x, i, dx, tables, gs, grads[i], counts, depth, rtol)
    return counts


def _run(case, scene, params=None, action=None, seed=0):
    x = [numeric_inputs(scene, params, action)[k] for k in NAMES]
    counts = check_case(case, x, build_layout(scene).arrays(), seed)
    assert counts[0] >= counts[2], counts     # mostly checked
    return counts


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenes(name):
    scene = symphys.load_scene(name)
    rng = np.random.default_rng(len(name))
    base = numeric_inputs(scene)
    x = [base[k] for k in NAMES]
    tables = build_layout(scene).arrays()
    # The default poses rest on the ground at gap 0.0: the quadruped's box
    # feet have four corners at a kink each, whose one-sided slopes can cancel
    # in every detector; a looser tolerance there (the perturbed poses below
    # hold the strict one).
    total = check_case(f"{name}/default", x, tables, 1, rtol=1e-5)
    # perturbed: positions (bodies into and off the ground and each other),
    # velocities, rotations (a small rotation, not renormalised), actions
    for k in range(2):
        xs = [a.copy() for a in x]
        s = xs[0]
        s[..., 0:3] += rng.normal(scale=0.01, size=s[..., 0:3].shape)
        s[..., 3:12] += rng.normal(scale=0.02, size=s[..., 3:12].shape)
        s[..., 12:18] += rng.normal(scale=1.0, size=s[..., 12:18].shape)
        xs[6] = rng.normal(scale=1.0, size=xs[6].shape)
        total += check_case(f"{name}/perturbed{k}", xs, tables, 10 + k)
    assert total[0] >= total[2], total


@pytest.mark.parametrize("index", range(len(SMALL_SCENES)))
def test_small_scenes(index):
    scene = SMALL_SCENES[index]
    rng = np.random.default_rng(index)
    _run(f"{scene.name}", scene, random_state(scene, rng), random_action(scene, rng), index)


def test_implicit_servos_in_drag_rows():
    """kf-joints: an implicit PD torque motor in its joint's drag row
    (stiffness, damping, gain and command into the row) beside an explicit
    one, from perturbed states with commands inside and beyond their ranges."""
    scene = FEATURES["kf-joints"]()
    assert len(scene.implicit_motors) == 1
    rng = np.random.default_rng(5)
    tables = build_layout(scene).arrays()
    base = numeric_inputs(scene)
    total = np.zeros(3, int)
    for k in range(2):
        x = [base[n].copy() for n in NAMES]
        x[0][..., 12:18] += rng.normal(scale=1.0, size=x[0][..., 12:18].shape)
        x[6] = rng.normal(scale=1.0, size=x[6].shape)
        total += check_case(f"kf-joints/{k}", x, tables, 20 + k)
    assert total[0] >= total[2], total


def test_batched_shared_parameters():
    """B = 2 worlds, parameters shared (Bp = 1): their cotangents summed."""
    scene = symphys.load_scene("arm")
    rng = np.random.default_rng(7)
    base = numeric_inputs(scene)
    x = [base[k] for k in NAMES]
    state = np.concatenate([x[0], x[0]])
    state[1, :, 12:18] += rng.normal(size=state[1, :, 12:18].shape)
    action = rng.normal(size=(2, x[6].shape[1]))
    xb = [state, *x[1:6], action]
    tables = build_layout(scene).arrays()
    counts = check_case("arm/batched", xb, tables, 3)
    assert counts[2] == 0, counts
    # the batched pullback is the sum of the per-world pullbacks
    gs = [rng.normal(size=o.shape) for o in rn.rows(*xb, *tables)]
    whole = rg.rows_vjp(*xb, *tables, *gs)
    parts = [rg.rows_vjp(state[w:w + 1], *x[1:6], action[w:w + 1], *tables,
                         *(g[w:w + 1] for g in gs)) for w in range(2)]
    for i in range(1, 5):
        np.testing.assert_allclose(whole[i], parts[0][i] + parts[1][i], rtol=1e-12,
                                   atol=1e-12)


def test_no_nan_at_degenerate_points():
    """Zero velocities, resting contacts (gap 0.0) and coincident sphere
    centres give finite cotangents."""
    scene = symphys.load_scene("spheres16")
    base = numeric_inputs(scene)
    x = [base[k] for k in NAMES]
    s = x[0].copy()
    s[..., 12:18] = 0.0
    s[0, 1, 0:3] = s[0, 0, 0:3]       # two coincident centres
    x[0] = s
    tables = build_layout(scene).arrays()
    outs = rn.rows(*x, *tables)
    grads = rg.rows_vjp(*x, *tables, *(np.ones_like(o) for o in outs))
    for g in grads:
        assert np.all(np.isfinite(g))
