"""Controllers as PyTensor graphs: observation (B, n_obs) -> action (B, M).

Every controller is frozen data with named, shaped parameters:

    controller.parameter_shapes()  {name: shape}
    controller.init(seed)          {name: NumPy array}, sensible scales
    controller.carry_sizes()       widths of its recurrent state (per world)
    controller.apply(params, observation, carry, time) -> (action, carry)

`apply` runs inside the rollout's time loop (closed loop): params are
symbolic tensors, observation (B, n_obs), carry a list of (B, h) tensors,
time (B, 1) seconds. Actions go to the motors in `scene.motors` order.
A parameter with an extra leading axis (B, ...) gives each world its own
controller (a CMA-ES population in one batched rollout).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from symphys.physics.sensors import time_features


class Activation(enum.Enum):
    RELU = "relu"
    TANH = "tanh"
    LINEAR = "linear"

    def __call__(self, x):
        if self is Activation.RELU:
            return pt.maximum(x, 0.0)
        if self is Activation.TANH:
            return pt.tanh(x)
        return x


def matmul(x, w):
    """x (B, n) times w: (n, m) shared by all worlds, or (B, n, m), one
    matrix per world (a population evaluated in one batched rollout)."""
    if w.ndim == 3:
        return pt.matmul(x[:, None, :], w)[:, 0, :]
    return pt.dot(x, w)


def glorot(rng, shape, gain: float = 1.0) -> np.ndarray:
    """Uniform Glorot initialisation for a (fan_in, fan_out) matrix."""
    limit = gain * np.sqrt(6.0 / (shape[0] + shape[1]))
    return rng.uniform(-limit, limit, size=shape)


@dataclass(frozen=True)
class MLP:
    """Dense network n_in -> hidden... -> n_out. With no hidden layers it is
    the linear controller. The output layer's activation (linear by
    default) is scaled by `output_scale`; its weights start at
    `output_init` times the Glorot scale (small: the robot starts near its
    rest pose). `skip` adds a linear map from the input to the output
    layer's pre-activation (`<prefix>.skip_w`, `<prefix>.skip_b`);
    `bias=False` leaves out every bias vector."""

    n_in: int
    n_out: int
    hidden: tuple[int, ...] = ()
    activation: Activation = Activation.TANH
    output: Activation = Activation.LINEAR
    output_scale: float = 1.0
    output_init: float = 0.1
    prefix: str = "ctrl"
    skip: bool = False
    bias: bool = True

    def _sizes(self):
        return (self.n_in, *self.hidden, self.n_out)

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        sizes = self._sizes()
        shapes = {}
        for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            shapes[f"{self.prefix}.w{k}"] = (a, b)
            if self.bias:
                shapes[f"{self.prefix}.b{k}"] = (b,)
        if self.skip:
            shapes[f"{self.prefix}.skip_w"] = (self.n_in, self.n_out)
            if self.bias:
                shapes[f"{self.prefix}.skip_b"] = (self.n_out,)
        return shapes

    @property
    def n_parameters(self) -> int:
        return sum(int(np.prod(s)) for s in self.parameter_shapes().values())

    def init(self, seed: int = 0) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        out, n_layers = {}, len(self._sizes()) - 1
        for name, shape in self.parameter_shapes().items():
            if len(shape) == 1:
                out[name] = np.zeros(shape)
            else:
                last = name.endswith((f".w{n_layers - 1}", ".skip_w"))
                gain = self.output_init if last else (
                    np.sqrt(2.0) if self.activation is Activation.RELU else 1.0)
                out[name] = glorot(rng, shape, gain)
        return out

    def carry_sizes(self) -> tuple[int, ...]:
        return ()

    def _bias(self, params: dict, name: str):
        return params[f"{self.prefix}.{name}"] if self.bias else 0.0

    def apply(self, params: dict, observation, carry: list, time):
        x = observation
        n_layers = len(self._sizes()) - 1
        for k in range(n_layers):
            x = matmul(x, params[f"{self.prefix}.w{k}"]) + self._bias(params, f"b{k}")
            if k < n_layers - 1:
                x = self.activation(x)
        if self.skip:
            x = x + matmul(observation, params[f"{self.prefix}.skip_w"]) \
                + self._bias(params, "skip_b")
        return self.output(x) * self.output_scale, carry


def Linear(n_in: int, n_out: int, **kwargs) -> MLP:
    """The linear controller action = W obs + b."""
    return MLP(n_in, n_out, hidden=(), **kwargs)


@dataclass(frozen=True)
class Elman:
    """Elman recurrent network: h' = tanh(x Wx + h Wh + b), action = h' Wo + bo."""

    n_in: int
    n_hidden: int
    n_out: int
    output_scale: float = 1.0
    prefix: str = "rnn"

    def parameter_shapes(self):
        p, h = self.prefix, self.n_hidden
        return {f"{p}.wx": (self.n_in, h), f"{p}.wh": (h, h), f"{p}.b": (h,),
                f"{p}.wo": (h, self.n_out), f"{p}.bo": (self.n_out,)}

    def init(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        p, h = self.prefix, self.n_hidden
        return {f"{p}.wx": glorot(rng, (self.n_in, h)),
                f"{p}.wh": np.linalg.qr(rng.normal(size=(h, h)))[0] * 0.9,
                f"{p}.b": np.zeros(h), f"{p}.wo": glorot(rng, (h, self.n_out), 0.1),
                f"{p}.bo": np.zeros(self.n_out)}

    def carry_sizes(self):
        return (self.n_hidden,)

    def apply(self, params, observation, carry, time):
        p = self.prefix
        h = pt.tanh(matmul(observation, params[f"{p}.wx"])
                    + matmul(carry[0], params[f"{p}.wh"]) + params[f"{p}.b"])
        return (matmul(h, params[f"{p}.wo"]) + params[f"{p}.bo"]) * self.output_scale, [h]


@dataclass(frozen=True)
class GRU:
    """Gated recurrent unit (Cho et al. 2014) with a linear read-out."""

    n_in: int
    n_hidden: int
    n_out: int
    output_scale: float = 1.0
    prefix: str = "gru"

    def parameter_shapes(self):
        p, h = self.prefix, self.n_hidden
        shapes = {}
        for gate in ("z", "r", "c"):
            shapes[f"{p}.wx_{gate}"] = (self.n_in, h)
            shapes[f"{p}.wh_{gate}"] = (h, h)
            shapes[f"{p}.b_{gate}"] = (h,)
        shapes[f"{p}.wo"] = (h, self.n_out)
        shapes[f"{p}.bo"] = (self.n_out,)
        return shapes

    def init(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        out = {}
        for name, shape in self.parameter_shapes().items():
            if len(shape) == 1:
                out[name] = np.zeros(shape)
            else:
                out[name] = glorot(rng, shape, 0.1 if name.endswith(".wo") else 1.0)
        return out

    def carry_sizes(self):
        return (self.n_hidden,)

    def apply(self, params, observation, carry, time):
        p, h = self.prefix, carry[0]

        def gate(g, hidden):
            return (matmul(observation, params[f"{p}.wx_{g}"])
                    + matmul(hidden, params[f"{p}.wh_{g}"]) + params[f"{p}.b_{g}"])

        z = pt.sigmoid(gate("z", h))
        r = pt.sigmoid(gate("r", h))
        candidate = pt.tanh(gate("c", r * h))
        h_new = (1.0 - z) * h + z * candidate
        return (matmul(h_new, params[f"{p}.wo"]) + params[f"{p}.bo"]) * self.output_scale, [h_new]


@dataclass(frozen=True)
class OpenLoop:
    """Open-loop controller: action = scale * (features(t) W + b), features
    sin(2 pi f t), cos(2 pi f t) for each frequency f (Hz). It ignores the
    observation: a gait as a truncated Fourier series."""

    n_out: int
    frequencies: tuple[float, ...] = (1.0, 2.0)
    output_scale: float = 1.0
    prefix: str = "open"

    def parameter_shapes(self):
        return {f"{self.prefix}.w": (2 * len(self.frequencies), self.n_out),
                f"{self.prefix}.b": (self.n_out,)}

    def init(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        return {f"{self.prefix}.w": rng.normal(scale=0.1, size=(2 * len(self.frequencies),
                                                                self.n_out)),
                f"{self.prefix}.b": np.zeros(self.n_out)}

    def carry_sizes(self):
        return ()

    def apply(self, params, observation, carry, time):
        x = pt.concatenate(time_features(time, self.frequencies), axis=1)
        return (matmul(x, params[f"{self.prefix}.w"]) + params[f"{self.prefix}.b"]) \
            * self.output_scale, carry


@dataclass(frozen=True)
class Schedule:
    """Open-loop command table: the action at step k is row k of
    `prefix.u` (steps, n_out), whatever the observation (a per-step control
    sequence, as trajectory optimisation uses). Rows are picked by the time
    (B, 1): step k runs at time k dt; past the last row the command is 0."""

    n_out: int
    steps: int
    dt: float
    prefix: str = "schedule"

    def parameter_shapes(self):
        return {f"{self.prefix}.u": (self.steps, self.n_out)}

    def init(self, seed: int = 0):
        return {f"{self.prefix}.u": np.zeros((self.steps, self.n_out))}

    def carry_sizes(self):
        return ()

    def apply(self, params, observation, carry, time):
        return _step_row(params[f"{self.prefix}.u"], time, self.steps, self.dt), carry


def _step_row(table, time, steps: int, dt: float):
    """Row k of `table` (steps, n) or (B, steps, n) at time (B, 1) = k dt,
    (B, n); 0 past the last row."""
    # One-hot of this step's row, (B, steps): differentiable in the table.
    rows = np.arange(steps) * dt
    pick = pt.cast(pt.abs(time - rows[None, :]) < 0.5 * dt, "float64")
    return matmul(pick, table)


@dataclass(frozen=True)
class ActionNoise:
    """`inner`'s action plus a per-step noise table: action at step k =
    inner(observation) + row k of `prefix.w` (steps, inner.n_out). The
    table is an input like any weight, so a population rollout gives each
    world its own draw of Gaussian action noise (a policy-gradient sample)
    and a zero table gives the noise-free rollout."""

    inner: object
    steps: int
    dt: float
    prefix: str = "noise"

    @property
    def n_out(self) -> int:
        return self.inner.n_out

    def parameter_shapes(self):
        return {**self.inner.parameter_shapes(),
                f"{self.prefix}.w": (self.steps, self.inner.n_out)}

    def init(self, seed: int = 0):
        return {**self.inner.init(seed), f"{self.prefix}.w": np.zeros((self.steps, self.n_out))}

    def carry_sizes(self):
        return self.inner.carry_sizes()

    def apply(self, params, observation, carry, time):
        action, carry = self.inner.apply(params, observation, carry, time)
        return action + _step_row(params[f"{self.prefix}.w"], time, self.steps, self.dt), carry
