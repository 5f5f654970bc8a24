"""Optimisers on dictionaries of NumPy parameter arrays.

`Adam` with optional piecewise-constant learning-rate schedules (the
paper's ball-throw schedule is `PiecewiseSchedule({1: 2.0, 5: 1.0, ...})`).
Gradients come from `symphys.value_and_grad` or any compiled function.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class PiecewiseSchedule:
    """Learning rate that switches value at given (1-based) iterations."""

    values: dict[int, float]

    def __call__(self, iteration: int) -> float:
        rate = None
        for start in sorted(self.values):
            if iteration >= start:
                rate = self.values[start]
        if rate is None:
            raise ValueError(f"schedule starts at iteration {min(self.values)}, "
                             f"asked for {iteration}")
        return rate


@dataclass
class Adam:
    """Adam (Kingma & Ba) on {name: array} parameters.

    learning_rate: a float or a callable iteration -> rate.
    """

    learning_rate: float | object = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    iteration: int = 0
    _m: dict = field(default_factory=dict)
    _v: dict = field(default_factory=dict)

    def rate(self) -> float:
        lr = self.learning_rate
        return float(lr(self.iteration) if callable(lr) else lr)

    def step(self, params: dict, grads: dict) -> dict:
        """Return the updated parameters (inputs are not modified)."""
        self.iteration += 1
        lr = self.rate()
        out = {}
        for name, value in params.items():
            g = np.asarray(grads[name], dtype=np.float64)
            if not np.all(np.isfinite(g)):
                raise FloatingPointError(f"gradient of {name!r} is not finite at "
                                         f"iteration {self.iteration}: {g}")
            m = self._m.get(name, np.zeros_like(g))
            v = self._v.get(name, np.zeros_like(g))
            m = self.beta1 * m + (1 - self.beta1) * g
            v = self.beta2 * v + (1 - self.beta2) * g * g
            self._m[name], self._v[name] = m, v
            m_hat = m / (1 - self.beta1 ** self.iteration)
            v_hat = v / (1 - self.beta2 ** self.iteration)
            out[name] = np.asarray(value, dtype=np.float64) - lr * m_hat / (np.sqrt(v_hat) + self.eps)
        return out
