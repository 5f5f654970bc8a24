"""Gradient estimators (symphys.learn.estimators) against analytic answers."""

import math

import numpy as np
import pytest

from symphys.errors import ParameterError
from symphys.experiments.suh_heaviside import heaviside, smoothed_slope
from symphys.experiments.suh_pivot import pivot
from symphys.learn.estimators import (AlphaCase, EstimatorOptions, PolicyObjective, alpha_rule,
                                      bernstein_epsilon, estimate, in_chunks, reparameterised,
                                      sample_spread, values_at)

A = np.array([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]])
B = np.array([0.5, -1.0, 2.0])


def quadratic(thetas):
    """V = ½ θᵀAθ + bᵀθ at each row; ∇V = Aθ + b (so ∇F = Aθ + b too)."""
    values = 0.5 * np.einsum("si,ij,sj->s", thetas, A, thetas) + thetas @ B
    return values, thetas @ A + B


@pytest.mark.parametrize("estimator", ["first", "zeroth", "alpha"])
def test_estimators_agree_with_the_quadratics_gradient(estimator):
    theta = np.array([0.3, -0.2, 0.1])
    options = EstimatorOptions(sigma=0.1, samples=2000, gamma=0.5)
    est = estimate(quadratic, theta, estimator, options, np.random.default_rng(1))
    exact = A @ theta + B
    n = options.samples
    if estimator == "first":
        se = math.sqrt(est.variance_first / n)
    elif estimator == "zeroth":
        se = math.sqrt(est.variance_zeroth / n)
    else:
        a = est.alpha.alpha
        se = math.sqrt((a ** 2 * est.variance_first + (1 - a) ** 2 * est.variance_zeroth) / n)
    assert se > 0
    assert np.linalg.norm(est.gradient - exact) < 3 * se
    assert est.value == pytest.approx(quadratic(theta[None])[0][0])
    assert not est.biased


def linear_policy_objective(samples: int, steps: int = 5, target: float = 0.7):
    """A policy objective with a known expected gradient: the action
    u_h = θᵀx0 + w_h at each of `steps` steps, x0 ~ N(m, I) (3,),
    V = Σ_h (u_h − c)². ∇θ V = 2 Σ_h (u_h − c) x0; the score is Σ_h w_h x0;
    ∇ E[V] = 2 H (E[x0 x0ᵀ] θ − c m) with E[x0 x0ᵀ] = I + m mᵀ."""
    mean = np.array([1.0, -0.5, 0.25])

    def actions(theta, noise, starts):
        return (starts @ theta)[:, None] + noise[:, :, 0]                # (S, H)

    def gradients(theta, noise, starts):
        u = actions(theta, noise, starts)
        return np.sum((u - target) ** 2, axis=1), 2.0 * np.sum(u - target, axis=1)[:, None] * starts

    def values(theta, noise, starts):
        u = actions(theta, noise, starts)
        scores = np.sum(noise[:, :, 0], axis=1)[:, None] * starts
        return np.sum((u - target) ** 2, axis=1), scores

    def sample_starts(rng, n):
        return mean + rng.normal(size=(n, 3))

    def exact(theta):
        return 2.0 * steps * ((np.eye(3) + np.outer(mean, mean)) @ theta - target * mean)

    return PolicyObjective(gradients, values, sample_starts, (steps, 1), 3), exact


@pytest.mark.parametrize("estimator", ["first", "zeroth", "alpha"])
def test_policy_estimators_agree_with_the_expected_gradient(estimator):
    """Action noise and drawn initial states (`PolicyObjective`): every
    estimator's mean lies within 3 standard errors of ∇ E[V]."""
    n = 4000
    objective, exact = linear_policy_objective(n)
    theta = np.array([0.2, 0.1, -0.3])
    options = EstimatorOptions(sigma=0.3, samples=n, gamma=1e3, bound=10.0)
    est = estimate(objective, theta, estimator, options, np.random.default_rng(3))
    a = {"first": 1.0, "zeroth": 0.0}.get(estimator, est.alpha.alpha)
    se = math.sqrt((a ** 2 * est.variance_first + (1 - a) ** 2 * est.variance_zeroth) / n)
    assert se > 0
    assert np.linalg.norm(est.gradient - exact(theta)) < 3 * se
    # `value` is the mean noise-free V over the zeroth-order rows' starts.
    assert est.value > 0


def test_policy_objective_refuses_finite_differences_and_non_finite_rollouts():
    objective, _ = linear_policy_objective(10)
    with pytest.raises(ParameterError, match="deterministic"):
        estimate(objective, np.zeros(3), "finite", EstimatorOptions(samples=10))
    with pytest.raises(ParameterError, match="non-finite values in 10 of 10"), \
            np.errstate(over="ignore", invalid="ignore"):
        estimate(objective, np.full(3, 1e200), "zeroth", EstimatorOptions(samples=10),
                 np.random.default_rng(0))


def test_in_chunks_pads_the_last_chunk():
    seen = []

    def call(a, b):
        seen.append(len(a))
        return a * 2, b.sum(axis=1)

    a, b = np.arange(7.0), np.ones((7, 3))
    out_a, out_b = in_chunks(call, 3, a, b)
    assert seen == [3, 3, 3]
    np.testing.assert_array_equal(out_a, a * 2)
    np.testing.assert_array_equal(out_b, np.full(7, 3.0))


def test_finite_differences_match_the_quadratic():
    theta = np.array([0.3, -0.2, 0.1])
    est = estimate(quadratic, theta, "finite", EstimatorOptions(step=1e-5))
    np.testing.assert_allclose(est.gradient, A @ theta + B, atol=1e-8)


@pytest.mark.parametrize("theta", [-0.2, -0.05, 0.0, 0.05, 0.2])
def test_heaviside_first_order_is_zero_zeroth_order_is_the_smoothed_slope(theta):
    sigma, n = 0.1, 4000
    options = EstimatorOptions(sigma=sigma, samples=n)
    est = estimate(heaviside, [theta], "zeroth", options, np.random.default_rng(7))
    assert est.first[0] == 0.0 and est.variance_first == 0.0      # biased, no spread
    slope = smoothed_slope(theta, sigma)
    assert abs(est.gradient[0] - slope) < 3 * math.sqrt(est.variance_zeroth / n)
    # Within two σ of the step, the exact gradient (0) is flagged as biased.
    assert est.biased and "biased" in est.message


def test_heaviside_far_from_the_step_is_not_flagged():
    est = estimate(heaviside, [0.8], "first", EstimatorOptions(sigma=0.1, samples=500),
                   np.random.default_rng(3))
    assert est.gradient[0] == 0.0 and not est.biased and est.message == ""


def _samples(mean, spread_scale, n, rng, d=2):
    return np.asarray(mean) + spread_scale * rng.standard_normal((n, d))


def test_alpha_rule_infeasible_branch():
    rng = np.random.default_rng(0)
    options = EstimatorOptions(gamma=0.01)
    first, zeroth = _samples([1, 0], 0.01, 50, rng), _samples([1, 0], 5.0, 50, rng)
    choice = alpha_rule(first, zeroth, options)
    assert choice.epsilon > options.gamma
    assert choice.case is AlphaCase.INFEASIBLE and choice.alpha == 0.0
    assert "alpha = 0" in choice.reason


def test_alpha_rule_feasible_branch_is_the_variance_optimal_mix():
    rng = np.random.default_rng(0)
    options = EstimatorOptions(gamma=1.0, bound=0.1)
    first = _samples([1, 0], 0.02, 400, rng)
    zeroth = _samples([0, 0], 0.05, 400, rng)
    zeroth += first.mean(axis=0) - zeroth.mean(axis=0)          # equal means: gap 0
    choice = alpha_rule(first, zeroth, options)
    s1, s0 = sample_spread(first), sample_spread(zeroth)
    assert choice.case is AlphaCase.FEASIBLE
    assert choice.alpha == pytest.approx(s0 / (s0 + s1))
    assert choice.gap == pytest.approx(0.0, abs=1e-12)


def test_alpha_rule_constrained_branch_caps_the_bias():
    rng = np.random.default_rng(0)
    options = EstimatorOptions(gamma=0.5, bound=0.1)
    first = _samples([1, 0], 0.02, 400, rng)
    zeroth = _samples([0, 0], 0.05, 400, rng)                   # gap ≈ 1
    choice = alpha_rule(first, zeroth, options)
    s0 = sample_spread(zeroth)
    eps = bernstein_epsilon(s0, 400, 2, options)
    assert choice.case is AlphaCase.CONSTRAINED
    assert choice.epsilon == pytest.approx(eps)
    assert choice.alpha * choice.gap == pytest.approx(options.gamma - eps)
    assert choice.alpha < s0 / (s0 + sample_spread(first))


def test_bernstein_epsilon_formula():
    options = EstimatorOptions(delta=0.95, bound=2.0)
    ell = math.log(4 / 0.95)
    assert bernstein_epsilon(0.3, 50, 3, options) == pytest.approx(
        math.sqrt(2 * 0.3 * ell / 50) + 2 * 2.0 * ell / 150)


def test_samples_run_in_one_batched_call():
    calls = []

    def counted(thetas):
        calls.append(thetas.shape)
        return quadratic(thetas)

    estimate(counted, np.zeros(3), "alpha", EstimatorOptions(samples=10),
             np.random.default_rng(0))
    estimate(counted, np.zeros(3), "first",
             EstimatorOptions(samples=10, diagnose=False), np.random.default_rng(0))
    estimate(counted, np.zeros(3), "finite")
    assert calls == [(21, 3), (11, 3), (6, 3)]


def test_bad_options_and_objectives_are_named():
    with pytest.raises(ParameterError, match="EstimatorOptions.sigma"):
        EstimatorOptions(sigma=0.0)
    with pytest.raises(ParameterError, match="EstimatorOptions.samples"):
        EstimatorOptions(samples=1)
    with pytest.raises(ParameterError, match="unknown estimator 'second'"):
        estimate(quadratic, np.zeros(3), "second")
    with pytest.raises(ParameterError, match="returned None"):
        estimate(lambda t: (t[:, 0], None), np.zeros(3), "first")
    with pytest.raises(ParameterError, match="non-finite values"):
        estimate(lambda t: (np.full(len(t), np.nan), None), np.zeros(3), "zeroth")
    with pytest.raises(ParameterError, match="one each"):
        estimate(lambda t: (np.zeros(2), None), np.zeros(3), "zeroth")


def test_reparameterised_objective_chains_the_gradient():
    """θ = (φ0², sin φ1, φ0 φ1): the chained gradient equals central
    differences of V(θ(φ)), and values pass through unchanged."""
    def params_of(phis):
        return np.stack([phis[:, 0] ** 2, np.sin(phis[:, 1]), phis[:, 0] * phis[:, 1]], 1)

    def jacobian_of(phis):
        zero = np.zeros(len(phis))
        return np.stack([np.stack([2 * phis[:, 0], zero], 1),
                         np.stack([zero, np.cos(phis[:, 1])], 1),
                         np.stack([phis[:, 1], phis[:, 0]], 1)], 1)

    wrapped = reparameterised(quadratic, params_of, jacobian_of, 2)
    phis = np.array([[0.3, -0.7], [1.2, 0.4]])
    values, grads = wrapped(phis)
    np.testing.assert_array_equal(values, quadratic(params_of(phis))[0])
    fd = np.stack([estimate(wrapped, phi, "finite", EstimatorOptions(step=1e-6)).gradient
                   for phi in phis])
    np.testing.assert_allclose(grads, fd, rtol=1e-7, atol=1e-9)
    with pytest.raises(ParameterError, match=r"shape \(S, 2\)"):
        wrapped(np.zeros((2, 3)))


def test_batch_objective_on_a_thrown_ball():
    """A ball thrown up, no contact within 100 steps: z_T is linear in the
    launch velocity, so V = z_T² + x_T is quadratic and ∇F = ∇V(θ). All
    samples of an estimate run as the worlds of one compiled call (JAX)."""
    from scenes import drop

    from symphys.api import batch_objective

    scene, steps = drop(), 100
    loss = lambda tr: tr.position["ball"][:, -1, 2] ** 2 + tr.position["ball"][:, -1, 0]
    objective = batch_objective(scene, steps, loss, ["ball.velocity"],
                                {"ball.velocity": [1.0, 0.0, 2.0]}, backend="jax")
    theta = objective.theta()
    assert objective.dim == 3 and theta.tolist() == [1.0, 0.0, 2.0]
    dt, g = scene.dt, 9.81
    z = 1.1 + steps * dt * theta[2] - g * dt ** 2 * steps * (steps + 1) / 2
    exact = np.array([steps * dt, 0.0, 2 * z * steps * dt])
    fd = estimate(objective, theta, "finite", EstimatorOptions(step=1e-4)).gradient
    np.testing.assert_allclose(fd, exact, rtol=1e-6, atol=1e-9)
    options = EstimatorOptions(sigma=0.05, samples=200, gamma=0.5)
    est = estimate(objective, theta, "alpha", options, np.random.default_rng(2))
    assert np.linalg.norm(est.first - exact) <= 3 * math.sqrt(est.variance_first / 200) + 1e-9
    assert np.linalg.norm(est.zeroth - exact) < 3 * math.sqrt(est.variance_zeroth / 200)
    assert not est.biased


@pytest.mark.parametrize("k,c", [(10.0, 0.998), (1000.0, 0.99), (10000.0, 0.99)])
def test_pushing_scene_is_the_papers_spring_model(k, c):
    """B4 in the 3D engine (penalty contact between two spheres, velocity
    damping, a force motor on a slider, per-step commands) gives the
    paper's update v+ = c v + (h/m) F, x+ = x + h v+ to rounding; each
    world's gradient matches central differences of that NumPy model."""
    from symphys.experiments import suh_pushing as m

    objective = m.pushing_objective(k, c)
    rows = 1 + 2 * m.OPTIONS.samples
    us = 0.1 + np.random.default_rng(1).normal(0.0, 0.5, (rows, m.STEPS))
    values, grads = objective(us)
    for i in (0, 7):
        assert values[i] == pytest.approx(m.reference_cost(us[i], k, c), rel=1e-11)
    h = 1e-6
    for t in (0, 60, 199):
        step = np.zeros(m.STEPS)
        step[t] = h
        fd = (m.reference_cost(us[3] + step, k, c)
              - m.reference_cost(us[3] - step, k, c)) / (2 * h)
        assert grads[3, t] == pytest.approx(fd, rel=1e-5, abs=1e-6 * abs(grads[3]).max())


def test_friction_scene_is_the_papers_model_while_the_block_is_on_the_cart():
    """B5 in the 3D engine (penalty contact with regularised friction, the
    block on a rail at the depth where k d = m g): while the block is on
    the cart the positions equal the paper's update to 1e-12; it slides off
    within two steps of the paper's model and keeps its speed."""
    from symphys.experiments import suh_friction as m

    positions = m.positions_function()
    us = np.zeros((1 + 2 * m.OPTIONS.samples, m.STEPS))
    us[0], us[1] = 0.1, 1.0                  # a gentle push (stays on), a hard one (slides off)
    us[2] = np.linspace(1.0, -1.0, m.STEPS)
    x = positions(us)
    np.testing.assert_allclose(x[0], m.reference_positions(us[0]), atol=1e-12)
    for i in (1, 2):
        ref = m.reference_positions(us[i])
        ours_off = np.argmax(np.abs(x[i, :, 1] - x[i, :, 0]) >= m.CART_HALF_LENGTH)
        ref_off = np.argmax(np.abs(ref[:, 1] - ref[:, 0]) >= m.CART_HALF_LENGTH)
        assert ref_off > 0 and abs(ours_off - ref_off) <= 2
        np.testing.assert_allclose(x[i, :ref_off - 1], ref[:ref_off - 1], atol=1e-12)
        np.testing.assert_allclose(x[i, -1], ref[-1], atol=0.02)
        speed = np.diff(x[i, -50:, 1]) / m.H          # off the cart: constant speed
        assert np.ptp(speed) < 1e-9


@pytest.mark.parametrize("estimator", ["first", "zeroth", "alpha"])
def test_optimisers_take_an_estimator(estimator):
    """B3's settings (N = 50, σ = 0.02, step 0.01, 500 iterations from 0.1,
    γ = 0.2): the exact gradient walks off the cliff at π/4, the zeroth- and
    alpha-order ones stop before it."""
    from symphys.learn.optim import SGD

    options = EstimatorOptions(sigma=0.02, samples=50, gamma=0.2)
    run = SGD(learning_rate=0.01).minimise(pivot, [0.1], 500, estimator, options, seed=0)
    assert run.thetas.shape == (501, 1) and len(run.values) == 500
    final = run.thetas[-1, 0]
    if estimator == "first":
        assert final > np.pi / 4
    else:
        assert 0.6 < final < np.pi / 4
    if estimator == "alpha":
        assert np.all((run.alphas >= 0) & (run.alphas <= 1)) and run.flagged > 0


@pytest.mark.parametrize("name", ["suh-heaviside", "suh-pivot", "suh-ball-wall",
                                  "suh-pushing", "suh-double-pendulum"])
def test_suh_experiments_quick(name, tmp_path):
    """The quick runs reach the paper's qualitative outcome, with a table,
    JSON and PNG (ball and wall: from inside the flat region, first-order
    stays there and zeroth and alpha get past the wall; pushing: 150
    iterations order the estimators as the paper's 500 do; both in the 3D
    engine on JAX)."""
    from symphys import experiments

    module = experiments.get(name)
    result = module.run(quick=True, seed=0, show_progress=False)
    assert result.metrics["targets_met"]
    assert "met" in module.report(result)
    result.save(tmp_path / "r.json")
    module.plot(result, str(tmp_path / "r.png"))
    assert (tmp_path / "r.png").stat().st_size > 10_000


def test_experiment_without_simulation_refuses_a_backend(capsys):
    from symphys.cli.main import main

    with pytest.raises(SystemExit, match="takes no --backend"):
        main(["experiment", "suh-pivot", "--quick", "--backend", "jax"])


def test_double_pendulum_state_map_jacobian():
    """B6's map from joint states to body parameters and its Jacobian
    (central differences), at s0 and perturbed states."""
    from symphys.experiments import suh_double_pendulum as m

    states = m.S0 + np.random.default_rng(0).normal(0.0, 0.5, (5, 4))
    h = 1e-6
    fd = np.stack([(m.initial_state(states + h * e) - m.initial_state(states - h * e)) / (2 * h)
                   for e in np.eye(4)], axis=-1)
    np.testing.assert_allclose(m.initial_state_jacobian(states), fd, atol=1e-8)
    p = m.initial_state(m.S0[None])[0]
    np.testing.assert_allclose(p[3:6], [-2.0, 0.0, 0.0], atol=1e-12)      # both links level
    np.testing.assert_allclose(p[9:12], [0.0, 0.0, 5.0], atol=1e-12)      # v1 = q̇1 l, upwards


def test_double_pendulum_follows_its_equations_of_motion():
    """B6's hinged bobs in the 3D engine: bob 2's height after 50 ms from
    s0 and perturbed states matches the double pendulum's equations (RK4);
    the gradient with respect to the joint state matches central
    differences of the engine itself (rows of the same batched call)."""
    from symphys.experiments import suh_double_pendulum as m

    horizons, samples = m.HORIZONS_QUICK, m.SAMPLES_QUICK
    evaluate = m.horizon_function(horizons, samples)
    rows = len(horizons) * (1 + samples)
    assert 1 + samples >= 13          # the rows below all read the first horizon
    states = np.repeat(m.S0[None], rows, axis=0)
    states[1:5] += np.random.default_rng(3).normal(0.0, 0.5, (4, 4))
    h = 1e-5
    states[5:13] = m.S0 + h * np.vstack([np.eye(4), -np.eye(4)])
    values, grads = evaluate(states)
    seconds = horizons[0] * m.DT
    for i in range(5):
        assert values[i] == pytest.approx(m.reference_height(states[i], seconds), abs=2e-3)
    fd = (values[5:9] - values[9:13]) / (2 * h)
    np.testing.assert_allclose(grads[0], fd, rtol=1e-5, atol=1e-7)


def test_combined_figure_from_the_committed_results(tmp_path, capsys):
    """`symphys figure suh` draws a panel per experiment JSON in docs/ and
    names those without one; an empty folder is a clear error."""
    from pathlib import Path

    from symphys.cli.main import main

    docs = Path(__file__).resolve().parents[1] / "docs"
    out = tmp_path / "suh.png"
    assert main(["figure", "suh", "--dir", str(docs), "--out", str(out)]) == 0
    assert out.stat().st_size > 20_000 and "panels" in capsys.readouterr().out
    assert main(["figure", "suh", "--dir", str(tmp_path), "--out", str(out)]) == 2
    assert "no suh-*.json results" in capsys.readouterr().err


def test_values_at_pads_a_fixed_batch():
    """values_at evaluates K vectors in one call of an objective compiled
    for `rows` worlds, padding with the last; too many vectors is an error."""
    calls = []

    def objective(thetas):
        calls.append(len(thetas))
        return quadratic(thetas)

    objective.rows = 5
    thetas = np.array([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]])
    np.testing.assert_array_equal(values_at(objective, thetas), quadratic(thetas)[0])
    assert calls == [5]
    with pytest.raises(ParameterError, match="6 vectors for a function of 5 rows"):
        values_at(objective, np.zeros((6, 3)))


@pytest.fixture(scope="module")
def tennis():
    """B7's compiled functions at the quick experiment's sizes (shared with it)."""
    from symphys.experiments import suh_tennis as m
    n = m.QUICK_SAMPLES
    return m, n, m.gradient_function(n), m.forward_function(2 * n)


def test_tennis_scene_bounces_servos_and_differentiates(tennis):
    """B7's scene: a ball on a still paddle tilted 0.3 rad leaves with its
    normal velocity reversed × 0.8 and its tangential kept, all × 0.999 per
    step; the servos move the paddle at u = K x + w exactly, with x the
    features returned for the score (so Σ_h w_h x_hᵀ pairs each noise row
    with the state the policy read); and the gradient through a bounce
    matches central differences."""
    m, n, with_gradient, forward = tennis
    rng = np.random.default_rng(0)
    starts = m.sample_starts(rng, 2 * n)
    gains, noise = np.zeros((2 * n, 3, 7)), np.zeros((2 * n, m.STEPS, 3))
    starts[0] = [0.5, 2.0, 0.0, -0.4, 0.0, 0.0, 0.3]
    gains[1], noise[1] = rng.normal(0, 0.05, (3, 7)), rng.normal(0, 0.01, (m.STEPS, 3))
    _, feats = forward(gains, noise, starts)
    # Initial states are per world.
    np.testing.assert_allclose(feats[:, 0], starts, atol=1e-12)
    # Reflection off the tilted paddle.
    normal, tangent = np.array([-np.sin(0.3), np.cos(0.3)]), np.array([np.cos(0.3), np.sin(0.3)])
    v0 = np.array([0.0, -0.4])
    expected = (-0.8 * (v0 @ normal) * normal + (v0 @ tangent) * tangent) * 0.999 ** m.STEPS
    np.testing.assert_allclose(feats[0, -1, 2:4], expected, rtol=2e-4)
    assert feats[0, -1, 6] == pytest.approx(0.3, abs=1e-6)     # the servo held the paddle
    # Paddle rates = the policy's action on the features it read, plus noise.
    action = feats[1, :-1] @ gains[1].T + noise[1]
    rates = np.diff(feats[1, :, 4:7], axis=0) / m.H
    np.testing.assert_allclose(rates, action, atol=1e-5)
    # Central differences through a bounce, one perturbed policy per world.
    base, h = rng.normal(0, 0.02, (3, 7)), 1e-6
    starts, gains = starts[:n].copy(), np.repeat(base[None], n, axis=0)
    starts[:] = [0.8, 2.0, -0.16, -0.4, 0.0, 0.0, 0.0]
    for i in range(21):
        gains[1 + i].flat[i] += h
        gains[22 + i].flat[i] -= h
    values, grads = with_gradient(gains, noise[:n] * 0, starts)
    _, feats = forward(np.concatenate([gains, gains]), noise * 0, np.concatenate([starts, starts]))
    assert feats[0, -1, 1] > 1.0 and feats[0, -1, 3] > 0.1     # it bounced back up
    central = (values[1:22] - values[22:43]) / (2 * h)
    np.testing.assert_allclose(grads[0].ravel(), central, rtol=1e-6,
                               atol=1e-6 * np.abs(central).max())

