"""The JAX stage kernels (`symphys.physics.kernels`: `rows.rows_jax`,
`solve.pgs_jax`, `integrate.integrate_jax`)
against the reference step (`symphys.physics.step.step` on packed arrays,
`reference.reference_step_function`): one step from the
default state and from perturbed states (random velocities and rotations,
bodies pressed into the ground or about to land, nonzero motor commands),
to 1e-10, on every shipped scene; a batch of worlds with shared (Bp = 1)
parameters; stage properties (v_free, tau, M^-1 J^T and effective masses).

Two built scenes (`kernel_scenes.FEATURES`) add what the shipped ones
lack: every contact kind, soft contacts, rolling friction, velocity
damping, slider / fixed / ball / universal joints, soft joints, limits,
bearing losses, torque and velocity motors, an implicit (unbounded) PD torque
motor folded into its joint's drag row.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from kernel_scenes import FEATURES  # noqa: E402

import symphys as sp  # noqa: E402
from symphys.compiler.reference_step import numeric_inputs, reference_step_function  # noqa: E402
from symphys.physics.kernels.geometry.geometry_jax import contact_geometry  # noqa: E402
from symphys.physics.kernels.integrate.integrate_jax import integrate  # noqa: E402
from symphys.physics.kernels.layout import (  # noqa: E402
    BODY,
    ROW,
    STATE,
    WORLD,
    Bound,
    Item,
    Option,
    build_layout,
)
from symphys.physics.kernels.rows.rows_jax import rows  # noqa: E402
from symphys.physics.kernels.solve.pgs_jax import solve  # noqa: E402

SHIPPED = ["ball", "spheres16", "pendulum_camera", "arm", "quadruped_revisited", "quadruped"]
TOL = 1e-10
INPUTS = ("state", "body", "world", "joint", "motor", "geom", "action")


SCENES = SHIPPED + list(FEATURES)


class Case:
    """A scene, its tables, default inputs and compiled reference step."""

    def __init__(self, name):
        self.scene = FEATURES[name]() if name in FEATURES else sp.load_scene(name)
        self.layout = build_layout(self.scene)
        self.inputs = numeric_inputs(self.scene)
        self.reference = reference_step_function(self.scene)
        self.iterations = int(self.layout.options[Option.ITERATIONS])
        self.renormalise = int(self.layout.options[Option.RENORMALISE])

    def ref(self, state, action):
        i = self.inputs
        return np.asarray(self.reference(state, i["body"], i["world"], i["joint"], i["motor"],
                                         i["geom"], action))

    def kernels(self, state, action, body=None):
        i = self.inputs
        return _step(jnp.asarray(state), i["body"] if body is None else body, i["world"],
                     i["joint"], i["motor"], i["geom"], jnp.asarray(action),
                     *self.layout.arrays(),
                     iterations=self.iterations, renormalise=self.renormalise)


def _step_impl(state, body, world, joint, motor, geom, action, *tables, iterations,
               renormalise):
    v_free, row_arr, tau = rows(state, body, world, joint, motor, geom, action, *tables)
    v = solve(v_free, row_arr, tables[7], iterations)
    return integrate(state, v, v_free, tau, tables[9], renormalise), v_free, row_arr, tau


_step = jax.jit(_step_impl, static_argnames=("iterations", "renormalise"))


@pytest.fixture(scope="module")
def cases():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = Case(name)
        return cache[name]

    return get


def _rotate(rot, u):
    """exp([u]_x) rot for (N, 3, 3) rot and (N, 3) u (Rodrigues)."""
    out = []
    for r, w in zip(rot, u):
        t = np.linalg.norm(w)
        k = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
        e = np.eye(3) + np.sin(t) / t * k + (1 - np.cos(t)) / t ** 2 * k @ k
        out.append(e @ r)
    return np.array(out)


def _min_gap(case, state):
    """The smallest contact gap at `state` (None without contacts)."""
    c = case.layout.contacts
    if not len(c):
        return None
    n = state.shape[1]
    gap = contact_geometry(jnp.asarray(c[:, Item.KIND]), jnp.asarray(c[:, Item.SUB]),
                           jnp.asarray(c[:, Item.A]), jnp.asarray(c[:, Item.B]),
                           jnp.asarray(c[:, Item.GA]), jnp.asarray(c[:, Item.GB]),
                           jnp.asarray(c[:, Item.FLIP]),
                           jnp.asarray(state[0, :, STATE.position]),
                           jnp.asarray(state[0, :, STATE.rotation].reshape(n, 3, 3)),
                           jnp.asarray(case.inputs["body"][0]),
                           jnp.asarray(case.inputs["geom"][0]),
                           jnp.asarray(case.inputs["world"][0]))[0]
    return float(np.min(gap))


def perturbed(case, seed=0):
    """[(label, state (1, N, 18), action (1, M))]: the default state, and
    perturbed ones."""
    rng = np.random.default_rng(seed)
    s0 = case.inputs["state"]
    n, m = s0.shape[1], case.inputs["action"].shape[1]
    out = [("default", s0, np.zeros((1, m)))]

    s = s0.copy()
    s[0, :, STATE.velocity] += rng.normal(0, 0.5, (n, 3))
    s[0, :, STATE.angular_velocity] += rng.normal(0, 1.0, (n, 3))
    out.append(("moving", s, rng.uniform(-1.0, 1.0, (1, m))))

    s = s0.copy()
    rot = _rotate(s0[0, :, STATE.rotation].reshape(n, 3, 3), rng.normal(0, 0.08, (n, 3)))
    s[0, :, STATE.rotation] = rot.reshape(n, 9)
    s[0, :, STATE.position] += rng.normal(0, 0.005, (n, 3))
    s[0, :, STATE.velocity] += rng.normal(0, 0.3, (n, 3))
    s[0, :, STATE.angular_velocity] += rng.normal(0, 0.5, (n, 3))
    gap = _min_gap(case, s)
    landing = s.copy()
    if gap is not None:
        s[0, :, 2] -= gap + 0.004                        # the lowest contact 4 mm deep
        landing[0, :, 2] -= gap - 0.002                  # 2 mm above the ground ...
        landing[0, :, 14] -= 1.0                         # ... landing within the step
    out.append(("pressed", s, rng.uniform(-2.0, 2.0, (1, m))))
    if gap is not None:
        out.append(("landing", landing, rng.uniform(-0.5, 0.5, (1, m))))
    return out


def _deviation(got, ref):
    """Max |got - ref| / (1 + |ref|)."""
    return float(np.max(np.abs(np.asarray(got) - ref) / (1.0 + np.abs(ref))))


@pytest.mark.parametrize("name", SCENES)
def test_step_matches_reference(cases, name):
    case = cases(name)
    worst = {}
    for label, state, action in perturbed(case):
        ref = case.ref(state, action)
        got, v_free, row_arr, tau = case.kernels(state, action)
        assert np.all(np.isfinite(np.asarray(got)))
        worst[label] = _deviation(got, ref)
        _check_stages(case, state, np.asarray(v_free), np.asarray(row_arr), np.asarray(tau))
    print(f"\n{name}: max deviation per state {worst}")
    assert max(worst.values()) < TOL, worst


def test_contacts_active(cases):
    """The pressed and landing states of a contact scene do engage contacts:
    penetrating contacts give a body tau 0, landing ones tau in (0, 1)."""
    case = cases("spheres16")
    states = dict((label, (s, a)) for label, s, a in perturbed(case))
    _, _, _, tau = case.kernels(*states["pressed"])
    assert np.min(np.asarray(tau)) == 0.0
    _, _, _, tau = case.kernels(*states["landing"])
    tau = np.asarray(tau)
    assert np.any((tau > 0) & (tau < 1))


def _check_stages(case, state, v_free, row_arr, tau):
    """Stage outputs: v_free after gravity (and the gyroscopic torque);
    tau; every row's M^-1 J^T and (stiff rows') effective mass."""
    opts, lay = case.layout.options, case.layout
    body, world = case.inputs["body"][0], case.inputs["world"][0]
    dt, n = opts[Option.DT], state.shape[1]
    rot = state[0, :, STATE.rotation].reshape(n, 3, 3)
    if not len(lay.torques):
        v = state[0, :, STATE.velocity].copy()
        w = state[0, :, STATE.angular_velocity].copy()
        if opts[Option.DAMPING]:
            keep = 1.0 - world[WORLD.at("solver.velocity_damping")] * dt
            v, w = v * keep, w * keep
        v = v + dt * world[WORLD.span("world.gravity")]
        if opts[Option.GYROSCOPIC]:
            wb = np.einsum("nji,nj->ni", rot, w)
            dwb = -dt * np.cross(wb, body[:, BODY.inertia] * wb) * body[:, BODY.inv_inertia]
            w = w + np.einsum("nij,nj->ni", rot, dwb)
        expect = np.concatenate([v, w], -1)
        np.testing.assert_allclose(v_free[0], expect, rtol=1e-12,
                                   atol=1e-12 * (1.0 + np.abs(expect).max()))
    assert np.all((tau >= 0) & (tau <= 1))
    if not len(lay.contacts):
        assert np.all(tau == 0)
    assert np.all(tau[0, lay.articulated > 0] == 0)
    inv_i = body[:, BODY.inv_inertia]
    if opts[Option.ISOTROPIC]:
        world_inv = np.eye(3)[None] * inv_i[:, :1, None]
    else:
        world_inv = np.einsum("nik,nk,njk->nij", rot, inv_i, rot)
    r = row_arr[0]
    for k, (a, b, bound, ref) in enumerate(lay.rows):
        for side, idx in (("a", a), ("b", b)):
            jac, d = r[k, getattr(ROW, "jac_" + side)], r[k, getattr(ROW, "dir_" + side)]
            if idx < 0:
                assert np.all(jac == 0) and np.all(d == 0)
                continue
            expect = np.concatenate([body[idx, BODY.at("inv_mass")] * jac[:3],
                                     world_inv[idx] @ jac[3:]])
            np.testing.assert_allclose(d, expect, rtol=1e-12,
                                       atol=1e-12 * (1.0 + np.abs(expect).max()))
        inv_eff = r[k, ROW.jac_a] @ r[k, ROW.dir_a] + r[k, ROW.jac_b] @ r[k, ROW.dir_b]
        if r[k, ROW.at("gamma")] == 0 and r[k, ROW.at("mass")] != 0:
            np.testing.assert_allclose(r[k, ROW.at("mass")] * inv_eff, 1.0, rtol=1e-12)
        if bound == Bound.FRICTION:
            assert lay.rows[ref, 2] == Bound.LOWER and r[k, ROW.at("mu")] >= 0


def test_batch_of_worlds_shared_parameters(cases):
    """3 worlds, one set of parameters (Bp = 1): each world's next state is
    the reference's one-world step."""
    for name in ("quadruped_revisited", "pendulum_camera"):
        case = cases(name)
        states = perturbed(case, seed=3)[1:4]
        state = np.concatenate([s for _, s, _ in states])
        action = np.concatenate([a for _, _, a in states])
        got, v_free, _, tau = case.kernels(state, action)
        assert got.shape == state.shape and v_free.shape == state.shape[:2] + (6,)
        for k, (_, s, a) in enumerate(states):
            dev = _deviation(np.asarray(got)[k:k + 1], case.ref(s, a))
            assert dev < TOL, (name, k, dev)


def test_solve_without_sweeps_and_integrate(cases):
    """0 sweeps leave v_free; tau = 1 moves every body with v_free."""
    case = cases("quadruped_revisited")
    _, state, action = perturbed(case)[1]
    v_free, row_arr, _ = jax.jit(rows)(state, *(case.inputs[k] for k in INPUTS[1:6]), action,
                              *case.layout.arrays())
    assert np.array_equal(np.asarray(solve(v_free, row_arr, case.layout.rows, 0)),
                          np.asarray(v_free))
    v = jnp.zeros_like(v_free)
    nxt = np.asarray(integrate(state, v, v_free, jnp.ones(state.shape[:2]),
                               case.layout.options, 1))
    dt = case.layout.options[Option.DT]
    np.testing.assert_allclose(nxt[..., :3], state[..., :3] + dt * np.asarray(v_free)[..., :3],
                               rtol=1e-14, atol=1e-14)
    assert np.all(nxt[..., 12:] == 0)
