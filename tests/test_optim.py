"""Optimisers, schedules, clipping, NaN reports and the CMA-ES baseline."""

import numpy as np
import pytest

from symphys.learn.optim import (SGD, Adam, CosineSchedule, NonFiniteGradient, PiecewiseSchedule,
                                 StepGuard, clip_by_global_norm, cmaes_minimise)

TARGET = {"a": np.array([1.0, -2.0]), "b": np.array(3.0)}


def _quadratic_grad(params):
    return {k: 2 * (params[k] - TARGET[k]) for k in params}


@pytest.mark.parametrize("opt", [Adam(learning_rate=0.1), SGD(learning_rate=0.05, momentum=0.9),
                                 SGD(learning_rate=0.05, momentum=0.9, nesterov=True),
                                 Adam(learning_rate=CosineSchedule(0.2, 0.01, 300))])
def test_optimisers_reach_the_minimum_of_a_quadratic(opt):
    params = {"a": np.zeros(2), "b": np.array(0.0)}
    for _ in range(300):
        params = opt.step(params, _quadratic_grad(params))
    for k in params:
        np.testing.assert_allclose(params[k], TARGET[k], atol=1e-3)


def test_sgd_without_momentum_is_one_gradient_step():
    params = {"a": np.array([1.0, 1.0])}
    out = SGD(learning_rate=0.1).step(params, {"a": np.array([2.0, -4.0])})
    np.testing.assert_allclose(out["a"], [0.8, 1.4])


def test_global_norm_clipping():
    grads = {"a": np.array([3.0, 0.0]), "b": np.array(4.0)}
    clipped, norm = clip_by_global_norm(grads, 1.0)
    assert norm == pytest.approx(5.0)
    total = np.sqrt(sum(np.sum(np.square(g)) for g in clipped.values()))
    assert total == pytest.approx(1.0)
    np.testing.assert_allclose(clipped["a"], [0.6, 0.0])
    same, _ = clip_by_global_norm(grads, 10.0)
    assert same is grads


def test_non_finite_gradient_names_parameter_and_entry():
    opt = Adam()
    params = {"w": np.zeros((2, 2)), "b": np.zeros(2)}
    grads = {"w": np.array([[0.0, np.nan], [0.0, 0.0]]), "b": np.zeros(2)}
    with pytest.raises(NonFiniteGradient, match=r"'w': 1 of 4 entries \(first at \[\[0, 1\]\]\)"):
        opt.step(params, grads)


def _cliff(x):
    """Loss with its minimum 0.1 at 1.4 next to a cliff at 1.5 (a closed
    loop that runs away past a stability boundary); (value, gradient)."""
    return 0.1 + (x - 1.4) ** 2 + (5.0 if x > 1.5 else 0.0), 2 * (x - 1.4)


def test_step_guard_undoes_jumps_over_a_cliff():
    plain, guard = Adam(learning_rate=0.3), StepGuard(Adam(learning_rate=0.3))
    x_plain = x_guard = {"x": np.array(0.0)}
    plain_losses, seen = [], []
    for _ in range(200):
        value, grad = _cliff(float(x_plain["x"]))
        plain_losses.append(value)
        x_plain = plain.step(x_plain, {"x": np.array(grad)})
        value, grad = _cliff(float(x_guard["x"]))
        seen.append(value)
        best_before = guard.best_loss
        x_next = guard.step(x_guard, value, {"x": np.array(grad)})
        if value > 1.5 * best_before:
            assert x_next is guard.best_params      # rejected: back to the best point
        x_guard = x_next
    assert sum(v > 5.0 for v in plain_losses) > guard.rejections >= 1
    assert sum(v > 5.0 for v in seen) == guard.rejections     # never steps from a cliff
    assert guard.optimiser.rate_scale == 0.5 ** guard.rejections
    assert guard.best_loss < 0.1 + 1e-4 and max(seen[-50:]) < 0.1 + 1e-3
    # A blown-up simulation (non-finite loss or gradient) is undone too;
    # with no finite point to go back to it is an error.
    rejections = guard.rejections
    assert guard.step(x_guard, float("nan"), {"x": np.array(0.0)}) is guard.best_params
    assert guard.step(x_guard, 0.2, {"x": np.array(np.inf)}) is guard.best_params
    assert guard.rejections == rejections + 2
    with pytest.raises(FloatingPointError, match="loss is nan.*before any finite point"):
        StepGuard(Adam(learning_rate=0.3)).step(x_guard, float("nan"), {"x": np.array(0.0)})


def test_step_guard_on_a_negative_loss():
    """Minus a speed: a step that turns 0.06 m/s into -0.08 m/s is undone
    (the A5 gait's jump), a small loss of speed is not."""
    guard = StepGuard(Adam(learning_rate=0.1))
    a, b, c = {"x": np.array(0.0)}, {"x": np.array(1.0)}, {"x": np.array(2.0)}
    g = {"x": np.array(1.0)}
    guard.step(a, -0.06, g)
    assert guard.step(b, -0.055, g) is not guard.best_params     # within 50%: a step
    assert guard.rejections == 0
    assert guard.step(c, 0.08, g) is guard.best_params and guard.best_params is a
    assert guard.rejections == 1 and guard.best_loss == -0.06


def test_schedules():
    piecewise = PiecewiseSchedule({1: 2.0, 5: 1.0, 50: 0.1})
    assert [piecewise(i) for i in (1, 4, 5, 49, 50, 100)] == [2.0, 2.0, 1.0, 1.0, 0.1, 0.1]
    cosine = CosineSchedule(1.0, 0.1, 10)
    assert cosine(1) == pytest.approx(1.0) and cosine(11) == pytest.approx(0.1)
    assert cosine(6) == pytest.approx(0.55)


def test_cmaes_minimise_finds_a_shifted_sphere():
    centre = np.array([0.5, -1.0, 2.0])
    seen = []
    result = cmaes_minimise(lambda x: np.sum((x - centre) ** 2, axis=1), np.zeros(3), 1.0,
                            max_evaluations=3000, target=1e-8, seed=3,
                            callback=lambda n, best: seen.append(n))
    assert result.loss < 1e-8
    np.testing.assert_allclose(result.x, centre, atol=1e-3)
    assert seen == result.curve_evaluations and result.evaluations == seen[-1]
    assert all(b >= a for a, b in zip(result.curve[1:], result.curve[:-1]))


def test_cmaes_minimise_runs_a_recipe_in_this_process():
    """A `Recipe` and no executor: built and run here, as `estimate` and
    `Adam.minimise` do, with the built objective's result."""
    import scale_objectives

    from symphys.scale import Recipe
    here = cmaes_minimise(Recipe(scale_objectives.bowl, (None, False)), np.zeros(3), 0.5, 60,
                          seed=2)
    built = cmaes_minimise(scale_objectives.bowl(None, False), np.zeros(3), 0.5, 60, seed=2)
    assert here.evaluations == built.evaluations and here.loss == built.loss
