"""Behaviour cloning of recurrent controllers (`symphys.learn.imitation`)."""

import numpy as np
import pytest

from symphys.errors import ParameterError
from symphys.learn import nn
from symphys.learn.imitation import (Demonstrations, fit_demonstrations, imitation_function,
                                     supervisor_noise)

ROWS, LENGTH, BURN_IN = 4, 12, 3


@pytest.fixture(scope="module")
def elman():
    ctrl = nn.Elman(1, 8, 1)
    return ctrl, imitation_function(ctrl, ROWS, LENGTH, 1, BURN_IN, backend="jax")


def _rate_task(rng, sequences=8, steps=60):
    """Observations: a random walk; command: its last step (x_t - x_{t-1}),
    which needs the memory."""
    x = np.cumsum(rng.normal(0, 0.3, (sequences, steps)), axis=1)
    rate = np.diff(x, axis=1, prepend=0.0)
    return x[..., None], rate


def test_loss_and_gradient_match_central_differences(elman):
    ctrl, fn = elman
    rng = np.random.default_rng(0)
    obs, cmd = _rate_task(rng, ROWS, LENGTH)
    weights = ctrl.init(1)
    # Row 1 begins where its rollout began: all its steps are scored.
    from_start = np.array([0.0, 1.0, 0.0, 0.0])
    value, *grads = fn(obs, cmd[..., None], from_start, *weights.values())
    # The loss by hand: run the memory, skip the burn-in steps.
    p = weights
    h = np.zeros((ROWS, 8))
    out = []
    for t in range(LENGTH):
        h = np.tanh(obs[:, t] @ p["rnn.wx"] + h @ p["rnn.wh"] + p["rnn.b"])
        out.append(h @ p["rnn.wo"] + p["rnn.bo"])
    out = np.stack(out, 1)[..., 0]
    scored = np.ones((ROWS, LENGTH), bool)
    scored[[0, 2, 3], :BURN_IN] = False
    assert value == pytest.approx(np.mean((out - cmd)[scored] ** 2), rel=1e-12)
    name, k = "rnn.wh", (2, 5)
    eps = 1e-6
    up, down = {**weights}, {**weights}
    up[name] = weights[name].copy()
    up[name][k] += eps
    down[name] = weights[name].copy()
    down[name][k] -= eps
    fd = (fn(obs, cmd[..., None], from_start, *up.values())[0]
          - fn(obs, cmd[..., None], from_start, *down.values())[0]) / (2 * eps)
    assert grads[list(weights).index(name)][k] == pytest.approx(fd, rel=1e-6, abs=1e-12)


def test_fitting_learns_a_rate_from_positions(elman):
    ctrl, fn = elman
    rng = np.random.default_rng(1)
    data = Demonstrations()
    data.add(*_rate_task(rng))
    start = ctrl.init(0)
    obs, cmd, first = data.chunks(np.random.default_rng(5), ROWS, LENGTH)
    before = fn(obs, cmd, first, *start.values())[0]
    weights, losses = fit_demonstrations(fn, data, start, rows=ROWS, length=LENGTH,
                                         updates=300, learning_rate=1e-2, rng=rng)
    after = fn(obs, cmd, first, *weights.values())[0]
    # The command variance is 0.09: a memoryless guess cannot go below it.
    assert before > 0.05 and after < 0.2 * before and len(losses) == 300


def test_bad_demonstrations_are_refused():
    data = Demonstrations()
    with pytest.raises(ParameterError, match="differ"):
        data.add(np.zeros((2, 10, 3)), np.zeros((2, 9)))
    with pytest.raises(ParameterError, match="burn_in"):
        imitation_function(nn.Elman(1, 2, 1), 2, 5, 1, burn_in=5)


def test_diverged_sequences_keep_their_finite_part():
    """A sequence with a non-finite observation or command (a rollout whose
    physics diverged) is kept up to that step, or left out when what is
    left is shorter than min_length; the count of those cut is returned;
    chunks come only from sequences long enough."""
    data = Demonstrations()
    obs, cmd = np.ones((4, 6, 3)), np.zeros((4, 6))
    obs[1, 3, 0] = np.nan
    cmd[2, 1] = np.inf
    obs[3, 0, 2] = np.nan
    assert data.add(obs, cmd, min_length=2) == 3
    assert [len(o) for o in data.observations] == [6, 3]
    assert all(np.isfinite(o).all() for o in data.observations)
    assert data.add(np.ones((1, 6, 3)), np.zeros((1, 6))) == 0 and len(data) == 3
    o, c, first = data.chunks(np.random.default_rng(0), 50, 4, start_share=0.1)
    assert o.shape == (50, 4, 3) and c.shape == (50, 4, 1) and first.shape == (50,)
    # Five rows (a share of 0.1) begin at their sequence's first step.
    assert first[:5].all() and first.sum() < 50
    with pytest.raises(ParameterError, match="7 steps long"):
        data.chunks(np.random.default_rng(0), 2, 7)


def test_focus_chunks_end_on_marked_steps():
    rng = np.random.default_rng(4)
    data = Demonstrations()
    obs = np.arange(2 * 30, dtype=float).reshape(2, 30, 1)       # the step, per sequence
    marks = np.zeros((2, 30), bool)
    marks[1, 20:23] = True                                       # only sequence 1, steps 20-22
    data.add(obs, np.zeros((2, 30)), marks=marks)
    o, _, from_start = data.chunks(rng, 40, 10, start_share=0.25, focus_share=0.5)
    assert (o[:10, 0, 0] % 30 == 0).all() and (from_start[:10] == 1).all()
    last = o[10:30, -1, 0]
    assert set(last) == {50.0, 51.0, 52.0}                       # 30 + 20..22: marked ends
    # The other rows are drawn as before: from both sequences, anywhere.
    rest = o[30:, 0, 0]
    assert (rest < 30).any() and (rest >= 30).any()
    # Nothing marked: focus rows are drawn like the rest; a bad shape is refused.
    plain = Demonstrations()
    plain.add(obs, np.zeros((2, 30)))
    assert plain.chunks(rng, 8, 10, focus_share=0.5)[0].shape == (8, 10, 1)
    with pytest.raises(ParameterError, match="marks"):
        plain.add(obs, np.zeros((2, 30)), marks=np.zeros((2, 29), bool))


def test_supervisor_noise_is_stationary_with_its_correlation_time():
    """DART's command noise: standard deviation sigma at every step (the
    first included) and correlation exp(-lag dt / tau) between steps."""
    dt, sigma, tau = 0.01, 0.1, 0.2
    noise = supervisor_noise(np.random.default_rng(0), 4000, 200, 2, dt, sigma, tau)
    assert noise.shape == (4000, 200, 2)
    for step in (0, 1, 199):
        assert noise[:, step].std() == pytest.approx(sigma, rel=0.03)
    x = noise[..., 0]
    for lag in (1, 10, 40):
        corr = np.mean(x[:, lag:] * x[:, :-lag]) / np.mean(x * x)
        assert corr == pytest.approx(np.exp(-lag * dt / tau), abs=0.02)
    # The columns are independent draws.
    assert abs(np.mean(noise[..., 0] * noise[..., 1])) / sigma ** 2 < 0.02
    with pytest.raises(ParameterError, match="tau"):
        supervisor_noise(np.random.default_rng(0), 1, 10, 1, dt, sigma, 0.0)
