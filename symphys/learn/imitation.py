"""Teaching a controller to copy another's commands from its own
observations (behaviour cloning, and DAgger's aggregated data).

A recurrent controller (a `symphys.learn.nn` controller with a carry, e.g. the
camera `VisionController`) reads observation sequences and is fitted, by
Adam on the exact gradient through its memory, to the commands a teacher
gave at the same steps:

    fit = imitation_function(controller, rows=8, length=40, burn_in=8)
    loss, *grads = fit(observations, commands, from_start, *weights.values())

observations: (rows, length, n_obs); commands: (rows, length, n_out);
from_start: (rows,), 1 where a chunk begins at its sequence's first step.
The memory starts at zero at each chunk's first step. Inside a sequence
the first `burn_in` steps only fill it (they carry no loss), so the
controller learns to act from a memory that has seen a few steps, as it
has in a rollout; a chunk that begins where the rollout began has every
step scored, since there the memory really is empty (the first steps of
a swing-up from rest, say, are learnt only from such chunks).

`supervisor_noise` gives a teacher smooth command noise for its own
rollouts (DART): its labels stay clean, and the data then shows how it
recovers from errors like a student's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytensor
import pytensor.tensor as pt
import scipy.signal

from symphys.compiler.backends import Backend, Compiled, as_backend, compile
from symphys.compiler.caches.compiled_functions import cached
from symphys.errors import ParameterError
from symphys.learn.closed_loop import _weight_inputs
from symphys.learn.optim import Adam


def imitation_function(controller, rows: int, length: int, n_obs: int, burn_in: int = 0,
                       backend: "str | Backend" = "numba") -> Compiled:
    """Compiled f(observations (rows, length, n_obs), commands (rows,
    length, n_out), from_start (rows,), *weights) -> [mean squared command
    error over the steps scored (>= burn_in, or all of a row with
    from_start 1), *d weights]."""
    backend = as_backend(backend)
    if not 0 <= burn_in < length:
        raise ParameterError(f"imitation: burn_in ({burn_in}) must lie in [0, length = {length})")
    key = ("imitation", controller, rows, length, n_obs, burn_in, backend)

    def build():
        weights = _weight_inputs(controller, None)
        obs = pt.tensor("observations", dtype="float64", shape=(rows, length, n_obs))
        target = pt.tensor("commands", dtype="float64", shape=(rows, length, controller.n_out))
        from_start = pt.tensor("from_start", dtype="float64", shape=(rows,))
        names = list(weights)
        carry0 = [pt.zeros((rows, size)) for size in controller.carry_sizes()]
        n_carry = len(carry0)

        def body(o, *state_and_weights):
            carry = list(state_and_weights[:n_carry])
            params = dict(zip(names, state_and_weights[n_carry:]))
            action, carry = controller.apply(params, o, carry, None)
            return [action, *carry]

        out = pytensor.scan(body, sequences=[obs.dimshuffle(1, 0, 2)],
                            outputs_info=[None, *carry0], non_sequences=list(weights.values()),
                            return_updates=False, name="imitation")
        actions = (out[0] if isinstance(out, (list, tuple)) else out).dimshuffle(1, 0, 2)
        scored = pt.maximum((pt.arange(length) >= burn_in)[None, :], from_start[:, None])
        error = ((actions - target) ** 2).mean(axis=-1)                  # (rows, length)
        loss = (scored * error).sum() / scored.sum()
        grads = pytensor.grad(loss, list(weights.values()))
        return compile([obs, target, from_start, *weights.values()], [loss, *grads], backend)

    return cached(key, build, backend, None)


@dataclass
class Demonstrations:
    """Sequences of observations (S, T, n_obs) (float32 to halve memory)
    and the teacher's commands (S, T, n_out) at the same steps."""

    observations: list = field(default_factory=list)
    commands: list = field(default_factory=list)
    marks: list = field(default_factory=list)      # (T,) bool per sequence: steps to focus on

    def add(self, observations: np.ndarray, commands: np.ndarray, min_length: int = 1,
            marks: np.ndarray | None = None) -> int:
        """Keep each sequence up to its first step with a non-finite
        observation or command (a rollout whose physics diverged teaches
        only what came before); a kept part shorter than `min_length` steps
        is left out. marks (S, T) bool: steps that `chunks(focus_share=)`
        draws chunks to end on (default none). Returns how many sequences
        were cut or left out."""
        observations = np.asarray(observations, np.float32)
        commands = np.asarray(commands, float)
        if commands.ndim == 2:
            commands = commands[..., None]
        if observations.shape[:2] != commands.shape[:2]:
            raise ParameterError(f"demonstrations: observations {observations.shape} and "
                                 f"commands {commands.shape} differ in sequences or steps")
        marks = (np.zeros(commands.shape[:2], bool) if marks is None
                 else np.asarray(marks, bool))
        if marks.shape != commands.shape[:2]:
            raise ParameterError(f"demonstrations: marks {marks.shape} must be (sequences, "
                                 f"steps) = {commands.shape[:2]}")
        finite = np.isfinite(observations).all(axis=2) & np.isfinite(commands).all(axis=2)
        # Steps before the first non-finite one, per sequence (S,).
        kept = np.where(finite.all(axis=1), finite.shape[1], np.argmin(finite, axis=1))
        for obs, cmd, mark, n in zip(observations, commands, marks, kept):
            if n >= max(min_length, 1):
                self.observations.append(obs[:n])
                self.commands.append(cmd[:n])
                self.marks.append(mark[:n])
        return int(np.sum(kept < finite.shape[1]))

    def __len__(self) -> int:
        return len(self.observations)

    def chunks(self, rng: np.random.Generator, rows: int, length: int,
               start_share: float = 0.0, focus_share: float = 0.0):
        """(observations (rows, length, n_obs), commands (rows, length,
        n_out), from_start (rows,)) from random sequences at least `length`
        steps long (each drawn in proportion to its number of chunk starts)
        at random starts; the first round(start_share x rows) rows begin at
        their sequence's first step (from_start 1), the next
        round(focus_share x rows) end on a marked step (`add`), drawn
        uniformly over all such chunks (none marked: drawn as the rest)."""
        starts = np.array([max(len(o) - length + 1, 0) for o in self.observations])
        if starts.sum() == 0:
            raise ParameterError(f"demonstrations: no sequence is {length} steps long")
        seq = rng.choice(len(self), rows, p=starts / starts.sum())
        first = np.array([rng.integers(0, starts[s]) for s in seq])
        n_start = int(round(start_share * rows))
        first[:n_start] = 0
        # (sequence, start) of every chunk whose last step is marked.
        ends = [np.flatnonzero(m[length - 1:]) for m in self.marks]
        focus_seq = np.repeat(np.arange(len(self)), [len(e) for e in ends])
        focus_first = np.concatenate(ends) if ends else np.zeros(0, int)
        n_focus = min(int(round(focus_share * rows)), rows - n_start) if len(focus_seq) else 0
        pick = rng.integers(0, max(len(focus_seq), 1), n_focus)
        seq[n_start:n_start + n_focus] = focus_seq[pick]
        first[n_start:n_start + n_focus] = focus_first[pick]
        obs = np.stack([self.observations[s][t:t + length] for s, t in zip(seq, first)])
        cmd = np.stack([self.commands[s][t:t + length] for s, t in zip(seq, first)])
        return obs.astype(float), cmd, (first == 0).astype(float)


def fit_demonstrations(fn: Compiled, data: Demonstrations, weights: dict, *, rows: int,
                       length: int, updates: int, learning_rate: float = 1e-3,
                       rng: np.random.Generator | None = None, bar=None,
                       start_share: float = 0.0, focus_share: float = 0.0):
    """Adam on random chunks for `updates` steps (`Demonstrations.chunks`:
    start_share of them from sequences' first steps, focus_share ending on
    marked steps). Returns (weights, the losses (updates,)); bar: a tqdm
    bar to advance and annotate."""
    rng = rng or np.random.default_rng(0)
    adam = Adam(learning_rate=learning_rate, clip_norm=1.0)
    losses = []
    for _ in range(updates):
        obs, cmd, from_start = data.chunks(rng, rows, length, start_share, focus_share)
        value, *grads = fn(obs, cmd, from_start, *weights.values())
        if not np.isfinite(value):
            raise ParameterError("imitation: the loss is not finite; lower the learning rate")
        weights = adam.step(weights, dict(zip(weights, grads)))
        losses.append(float(value))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(imitation=f"{value:.4f}")
    return weights, np.array(losses)


def supervisor_noise(rng: np.random.Generator, rows: int, steps: int, n_out: int, dt: float,
                     sigma: float, tau: float) -> np.ndarray:
    """(rows, steps, n_out) smooth command noise for a teacher's rollouts
    (DART, Laskey et al. 2017): the teacher acts with it added, the
    labels are its clean commands at the states it visits, so the data
    shows how to recover from errors like a student's. Each column is a
    stationary Ornstein-Uhlenbeck sequence: standard deviation `sigma`,
    correlation time `tau` (s) at step `dt` (s)."""
    if sigma < 0 or tau <= 0 or dt <= 0:
        raise ParameterError(f"supervisor_noise: sigma ({sigma}) must be >= 0, tau ({tau}) "
                             f"and dt ({dt}) > 0")
    a = np.exp(-dt / tau)
    shocks = rng.normal(0.0, sigma * np.sqrt(1.0 - a * a), (rows, steps, n_out))
    shocks[:, 0] = rng.normal(0.0, sigma, (rows, n_out))          # start in the stationary law
    return scipy.signal.lfilter([1.0], [1.0, -a], shocks, axis=1)
