"""The converged solve (`newton_numba`, solver method "newton"): its
block-tree factorization, its optimality at the answer, its implicit
pullback against central differences, and the reference graph's Newton
solve (`symphys.physics.newton`) against the kernels'."""

import dataclasses

import numpy as np
import pytest

from kernel_scenes import FEATURES
from test_kernels_reference import check_scene, kernel_step

import symphys as sp
from symphys.compiler.reference_step import numeric_inputs, reference_step_function
from symphys.physics.kernels.layout import ROW, Bound, build_layout
from symphys.physics.kernels.rows import rows_numba
from symphys.physics.kernels.solve import newton_grad as ng
from symphys.physics.kernels.solve import newton_numba as nw
from symphys.scene.elements import SolverMethod

# A test-friendly stiffness: joints held to 1e-6 of a step's impulse keep
# the Hessian well conditioned enough for differences at h = 1e-6.
STIFF, SOFT, TOLERANCE = 1e-6, 1e-2, 1e-14


def test_the_tree_factorization_solves_the_hessian():
    """Blocks joined as a tree with one loop: the pattern fills the loop's
    blocks, and factor + solve_factored equal a dense solve."""
    rng = np.random.default_rng(1)
    n = 7
    table = np.array([[1, 0, 0, -1], [2, 1, 0, -1], [3, 1, 0, -1], [4, 0, 0, -1],
                      [5, 4, 0, -1], [6, 5, 0, -1], [6, 2, 0, -1], [3, -1, 0, -1]])
    tree = nw.pattern(table, n)
    assert len(tree.later) > 6          # the loop 0-1-2-6-5-4 filled in
    dense = np.zeros((6 * n, 6 * n))
    diag, off = np.zeros((n, 6, 6)), np.zeros((len(tree.later), 6, 6))
    for i in range(n):
        a = rng.normal(size=(6, 6))
        diag[i] = a @ a.T + 6 * np.eye(6)
        dense[6 * i:6 * i + 6, 6 * i:6 * i + 6] = diag[i]
    for a, b in table[:, :2]:
        if b < 0:
            continue
        x = 0.3 * rng.normal(size=(6, 6))
        p = tree.pair[a, b]
        late = tree.later[p]
        early = a if late == b else b
        off[p] += x
        dense[6 * early:6 * early + 6, 6 * late:6 * late + 6] += x
        dense[6 * late:6 * late + 6, 6 * early:6 * early + 6] += x.T
    rhs = rng.normal(size=(n, 6))
    out = rhs.copy()
    nw.factor(diag, off, tree.order, tree.pair, tree.later, tree.nb_ptr, tree.nb)
    nw.solve_factored(diag, off, tree.order, tree.later, tree.nb_ptr, tree.nb, out)
    np.testing.assert_allclose(out.ravel(), np.linalg.solve(dense, rhs.ravel()), atol=1e-13)


def _scene():
    """A sliding box on soft ground carrying a soft-jointed arm at its limit,
    with armature, bearing losses and a saturated servo: every kind of row."""
    return (sp.SceneBuilder("newton-rows", dt=0.01, constraint_frequency=30.0,
                            constraint_damping=1.0)
            .ground(friction=0.8)
            .box("base", size=[0.4, 0.3, 0.1], mass=3.0, position=[0, 0, 0.0495],
                 velocity=[0.4, 0.1, -0.05])
            .box("arm", size=[0.05, 0.05, 0.3], mass=0.4, position=[0.1, 0, 0.25])
            .joint("hinge", "hinge", "base", "arm", anchor=[0.1, 0, 0.1], axis=[0, 1, 0],
                   limits=[-0.02, 0.5], frequency=20.0, damping=0.5, armature=0.05,
                   viscous_damping=0.1, dry_friction=0.05)
            .motor("servo", "hinge", gain=20.0, max_velocity=3.0, max_torque=0.5)
            .build())


def make_problem():
    """(layout, numeric inputs, v_free (1, N, 6), rows (1, R, ROW.width), tree
    pattern) of `_scene` with its servo saturated."""
    scene = _scene()
    layout = build_layout(scene)
    x = numeric_inputs(scene, action=np.array([[-1.0]]))
    v_free, rows, _ = rows_numba.rows(*(x[k] for k in ("state", "body", "world", "joint",
                                                        "motor", "geom", "action")),
                                      *layout.arrays())
    tree = nw.pattern(layout.rows, len(scene.bodies))
    return layout, x, v_free, rows, tree


@pytest.fixture(scope="module")
def problem():
    return make_problem()


def _solve(problem, v_free, rows, state, body):
    layout, _, _, _, tree = problem
    return nw.solve(v_free, rows, layout.rows, state, body, layout.options, *tree.arrays(), 200,
                    STIFF, SOFT, TOLERANCE)


def test_every_kind_of_row_is_present(problem):
    """The scene exercises what the pullback must handle: soft rows (gamma),
    soft joint rows (keep < 1), acting contacts, bounded rows."""
    layout, _, _, rows, _ = problem
    r = rows[0]
    bounds = layout.rows[:, 2]
    assert (r[:, ROW.at("gamma")] > 0).sum() >= 2
    assert (r[:, ROW.at("keep")] < 1).sum() >= 5
    assert (r[bounds == Bound.LOWER, ROW.at("upper")] > 0).sum() >= 4
    assert (bounds == Bound.BOX).sum() == 2


def test_the_answer_is_optimal(problem):
    """At the answer the velocity residual M^-1 (M (v - v_free) - J^T lam)
    is below the tolerance, every impulse within its bound, and each clamped
    edge pulls away from its target (complementarity)."""
    layout, x, v_free, rows, tree = problem
    v = np.empty_like(v_free[0])
    inv_i = np.empty((v.shape[0], 9))
    rows_numba.inverse_inertia(x["state"][0], x["body"][0], layout.options, inv_i)
    its, residual = nw.newton_world(v_free[0], rows[0], layout.rows, x["body"][0][:, 0].copy(),
                                    inv_i, *tree.arrays(), STIFF, SOFT, 1e-12, 50, v)
    assert residual <= 1e-12 and its <= 12, (its, residual)
    n = 2 * len(layout.rows)
    con, kind = np.empty((n, nw.C_WIDTH)), np.empty((n, 4), dtype=np.int64)
    n_con = nw.constraints(rows[0], layout.rows, STIFF, SOFT, con, kind)
    y, lam, act = np.empty(n_con), np.empty(n_con), np.zeros(n_con, dtype=bool)
    nw._impulses(con, kind, n_con, v, y, lam, act)
    lower = kind[:n_con, nw.K_BOUND] == Bound.LOWER
    assert lower.sum() >= 8 and act[lower].any() and not act[lower].all()
    assert (lam[lower] >= 0).all()
    slack = y + con[:n_con, nw.C_COMPLIANCE] * lam - con[:n_con, nw.C_TARGET]
    assert (slack[lower & ~act] >= 0).all()


@pytest.mark.parametrize("group", ["v_free", "jacobians", "gamma", "keep", "mass", "target",
                                   "mu", "bounds", "rotation", "inverse_mass"])
def test_the_pullback_matches_central_differences(problem, group):
    """<g_v, dv> along a random direction of each input group, by the
    implicit pullback and by central differences (h = 1e-6)."""
    layout, x, v_free, rows, _ = problem
    state, body = x["state"], x["body"].copy()
    args = [v_free, rows, state, body]
    rng = np.random.default_rng(sum(map(ord, group)))
    g_v = rng.normal(size=v_free.shape)
    v = _solve(problem, *args)
    grads = ng.solve_vjp(v_free, rows, layout.rows, state, body, layout.options,
                         *problem[4].arrays(), v, g_v, 200, STIFF, SOFT, TOLERANCE)
    which = {"v_free": 0, "rotation": 2, "inverse_mass": 3}.get(group, 1)
    d = np.zeros_like(args[which])
    if group == "v_free":
        d[:] = rng.normal(size=d.shape)
    elif group == "jacobians":
        d[..., :24] = rng.normal(size=d[..., :24].shape)
    elif group == "bounds":
        box = layout.rows[:, 2] == Bound.BOX
        d[0, box, ROW.at("lower")] = rng.normal(size=box.sum())
        d[0, box, ROW.at("upper")] = rng.normal(size=box.sum())
    elif group == "rotation":
        d[..., 3:12] = rng.normal(size=d[..., 3:12].shape)
    elif group == "inverse_mass":
        d[..., :4] = rng.normal(size=d[..., :4].shape) * body[..., :4]
    else:      # a row column, relative to its value where that is not 0
        col = ROW.at(group)
        values = rows[..., col]
        d[..., col] = rng.normal(size=values.shape) * np.where(values != 0, values, 1.0)
        if group in ("gamma", "mass"):      # rows where the column enters the compliance
            d[..., col] *= (rows[..., ROW.at("gamma")] > 0) | (rows[..., ROW.at("keep")] < 1)
        if group == "keep":                 # keep 1 is the edge of its range
            d[..., col] *= rows[..., ROW.at("keep")] < 1
    analytic = (grads[which] * d).sum()
    h = 1e-6
    plus, minus = list(args), list(args)
    plus[which], minus[which] = args[which] + h * d, args[which] - h * d
    numeric = ((_solve(problem, *plus) - _solve(problem, *minus)) * g_v).sum() / (2 * h)
    assert abs(analytic) > 1e-6, analytic
    assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def _newton(scene):
    """The scene solved by Newton's method to the end: the reference graph
    takes all 15 steps, the kernels stop at a residual of 1e-14."""
    return dataclasses.replace(scene, solver=dataclasses.replace(
        scene.solver, method=SolverMethod.NEWTON, newton_iterations=15, tolerance=1e-14))


# The every-row scene has contacts of each kind that acts; kf-joints adds
# every joint type, drive and servo (kf-contacts' reference graph with its
# gradient takes minutes to build and checks no Newton row these two lack).
NEWTON_SCENES = {"newton-rows": _scene, "kf-joints": FEATURES["kf-joints"]}


@pytest.fixture(scope="module")
def reference():
    """name -> (the scene solved by Newton, its reference step and VJP),
    each built once."""
    built = {}

    def get(name):
        if name not in built:
            scene = _newton(NEWTON_SCENES[name]())
            built[name] = scene, reference_step_function(scene, gradient=True)
        return built[name]

    return get


@pytest.mark.parametrize("name", sorted(NEWTON_SCENES))
def test_the_reference_graph_solves_as_the_kernels(reference, name):
    """The reference graph's Newton solve (`symphys.physics.newton`) against
    the Numba kernels', three steps from two states: the states to 1e-10,
    its unrolled gradient against their implicit pullback to 1e-7 (joints
    as stiff as `STIFF` = 1e-8 make the Hessian's condition about 1e8, and
    the two differ by that times the rounding: measured up to 1.2e-8)."""
    scene, functions = reference(name)
    check_scene(scene, seed=3, count=1, steps=3, functions=functions, gradient_tolerance=1e-7)


def test_the_unrolled_gradient_over_three_steps_is_the_implicit_one(reference):
    """d loss / d (initial state, parameters) over three steps,
    through the reference graph's unrolled Newton steps and through the
    kernels' implicit pullbacks, agree to 1e-7 of their largest entry (as
    in the test above)."""
    scene, (ref, ref_vjp) = reference("newton-rows")
    layout = build_layout(scene)
    names = ("state", "body", "world", "joint", "motor", "geom", "action")
    xs = [numeric_inputs(scene, action=np.array([[0.2]]))]
    for _ in range(3):
        xs.append(dict(xs[-1], state=ref(*(xs[-1][k] for k in names))))
    g = np.random.default_rng(4).normal(size=xs[0]["state"].shape)
    mine, theirs = None, None
    g_mine, g_theirs = g, g
    for x in xs[-2::-1]:
        want = ref_vjp(*(x[k] for k in names), g_theirs)
        _, got = kernel_step(x, layout, g_mine)
        theirs = want if theirs is None else [want[0]] + [a + b for a, b in
                                                          zip(theirs[1:], want[1:])]
        mine = got if mine is None else [got[0]] + [a + b for a, b in zip(mine[1:], got[1:])]
        g_theirs, g_mine = want[0], got[0]
    for name, got, want in zip(names, mine, theirs):
        scale = np.abs(want).max(initial=0.0)
        # The servo holds the arm at its torque limit: no gradient to its command.
        assert scale > 1e-6 or name in ("geom", "action"), name
        assert np.abs(got - want).max(initial=0.0) <= 1e-7 * scale, name


def test_a_heavy_load_on_light_links_follows_mujoco():
    """Three 50-g links carrying a 20-kg load (400 times heavier) swing from
    level for 1 s: with the Newton solve the load's centre stays within
    1 cm of MuJoCo's on the same file (measured: 0.54 cm; 8 Gauss-Seidel
    sweeps leave it 35 cm away, 100 sweeps 4.2 cm)."""
    mujoco = pytest.importorskip("mujoco")
    from symphys.bench.solver import CHAIN

    model = mujoco.MjModel.from_xml_string(CHAIN)
    data = mujoco.MjData(model)
    load = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "load")
    theirs = []
    for _ in range(500):
        mujoco.mj_step(model, data)
        theirs.append(data.xipos[load].copy())
    scene = sp.load_mjcf(CHAIN)
    scene = dataclasses.replace(scene, solver=dataclasses.replace(
        scene.solver, method=SolverMethod.NEWTON, newton_iterations=50))
    mine = sp.simulate(scene, 500).position["load"][1:]
    assert np.abs(mine - np.array(theirs)).max() < 0.01
