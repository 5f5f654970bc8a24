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

from symphys.sensors import time_features


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


def _matmul(x, w):
    """x (B, n) times w: (n, m) shared by all worlds, or (B, n, m), one
    matrix per world (a population evaluated in one batched rollout)."""
    if w.ndim == 3:
        return pt.matmul(x[:, None, :], w)[:, 0, :]
    return pt.dot(x, w)


def _glorot(rng, shape, gain: float = 1.0) -> np.ndarray:
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
                out[name] = _glorot(rng, shape, gain)
        return out

    def carry_sizes(self) -> tuple[int, ...]:
        return ()

    def _bias(self, params: dict, name: str):
        return params[f"{self.prefix}.{name}"] if self.bias else 0.0

    def apply(self, params: dict, observation, carry: list, time):
        x = observation
        n_layers = len(self._sizes()) - 1
        for k in range(n_layers):
            x = _matmul(x, params[f"{self.prefix}.w{k}"]) + self._bias(params, f"b{k}")
            if k < n_layers - 1:
                x = self.activation(x)
        if self.skip:
            x = x + _matmul(observation, params[f"{self.prefix}.skip_w"]) \
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
        return {f"{p}.wx": _glorot(rng, (self.n_in, h)),
                f"{p}.wh": np.linalg.qr(rng.normal(size=(h, h)))[0] * 0.9,
                f"{p}.b": np.zeros(h), f"{p}.wo": _glorot(rng, (h, self.n_out), 0.1),
                f"{p}.bo": np.zeros(self.n_out)}

    def carry_sizes(self):
        return (self.n_hidden,)

    def apply(self, params, observation, carry, time):
        p = self.prefix
        h = pt.tanh(_matmul(observation, params[f"{p}.wx"])
                    + _matmul(carry[0], params[f"{p}.wh"]) + params[f"{p}.b"])
        return (_matmul(h, params[f"{p}.wo"]) + params[f"{p}.bo"]) * self.output_scale, [h]


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
                out[name] = _glorot(rng, shape, 0.1 if name.endswith(".wo") else 1.0)
        return out

    def carry_sizes(self):
        return (self.n_hidden,)

    def apply(self, params, observation, carry, time):
        p, h = self.prefix, carry[0]

        def gate(g, hidden):
            return (_matmul(observation, params[f"{p}.wx_{g}"])
                    + _matmul(hidden, params[f"{p}.wh_{g}"]) + params[f"{p}.b_{g}"])

        z = pt.sigmoid(gate("z", h))
        r = pt.sigmoid(gate("r", h))
        candidate = pt.tanh(gate("c", r * h))
        h_new = (1.0 - z) * h + z * candidate
        return (_matmul(h_new, params[f"{p}.wo"]) + params[f"{p}.bo"]) * self.output_scale, [h_new]


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
        return (_matmul(x, params[f"{self.prefix}.w"]) + params[f"{self.prefix}.b"]) \
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
    return _matmul(pick, table)


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


# -- images: convolution, pooling and the vision controller ---------------------------
class ConvMethod(enum.Enum):
    """How `conv2d` is built.

    SLICES: the k x k shifted views of the zero-padded image stacked on the
    channel axis, then one matrix product (im2col) with the (k k C_in,
    C_out) weights. Core ops only: compiles natively on numba, jax and the
    C VM, and its gradient is the same kind of graph.
    PYTENSOR: PyTensor's own `pytensor.tensor.signal.convolve2d`, one 2-D
    convolution per (input, output) channel pair, summed over input
    channels. PyTensor 3.0.7 implements that Op with SciPy in Python
    (`perform`): the C VM runs it, JAX has no dispatch for it
    (compiling raises), and numba falls back to object mode. A reference
    for SLICES, not a fast path."""

    SLICES = "slices"
    PYTENSOR = "pytensor"


def _zero_border(x, r: int):
    """x (B, H, W, C) inside a border of r zeros: (B, H + 2r, W + 2r, C).
    Concatenation rather than `pt.pad`, whose gradient slices at computed
    offsets that JAX cannot trace."""
    rows = pt.zeros_like(x[:, :r])
    x = pt.concatenate([rows, x, rows], axis=1)
    columns = pt.zeros_like(x[:, :, :r])
    return pt.concatenate([columns, x, columns], axis=2)


def conv2d(x, w, b=None, size: int = 3, method: ConvMethod = ConvMethod.SLICES):
    """'Same' 2-D cross-correlation, stride 1: x (B, H, W, C_in), w (size,
    size, C_in, C_out) with size odd, b (C_out,) or None -> (B, H, W,
    C_out)."""
    if size % 2 != 1:
        raise ValueError(f"conv2d: the kernel size must be odd, got {size}")
    w = pt.as_tensor_variable(w)
    k, r = size, size // 2
    padded = _zero_border(x, r)
    if method is ConvMethod.PYTENSOR:
        from pytensor.tensor.signal import convolve2d
        # Convolution flips the kernel: flip it back for a cross-correlation.
        # Blockwise over (B, 1, C_in, H + 2r, W + 2r) x (1, C_out, C_in, k, k)
        # (the broadcast axes are new, so statically broadcastable).
        image = padded.dimshuffle(0, "x", 3, 1, 2)
        kernel = w[::-1, ::-1].dimshuffle("x", 3, 2, 0, 1)
        y = convolve2d(image, kernel, mode="valid").sum(axis=2)      # (B, C_out, H, W)
        y = y.dimshuffle(0, 2, 3, 1)
    else:
        # View (i, j) drops i rows before and k - 1 - i after: slice bounds
        # counted from either end are static, as JAX needs.
        cut = [slice(i, i - (k - 1) if i < k - 1 else None) for i in range(k)]
        # One (B H W, C_in) x (C_in, C_out) product per kernel tap, summed:
        # no reshape with computed sizes (JAX needs concrete shapes).
        y = sum(pt.matmul(padded[:, cut[i], cut[j], :], w[i, j])
                for i in range(k) for j in range(k))
    return y if b is None else y + b


class Pool(enum.Enum):
    """2 x 2 pooling of the vision controller's blocks. MAX is the paper's;
    MEAN keeps a soft edge's sub-pixel coverage in the pooled value (a max
    keeps the brightest pixel of four), so positions stay readable to a
    fraction of a pixel after every block."""

    MAX = "max"
    MEAN = "mean"


def max_pool2d(x, shape: tuple[int, int, int], kind: Pool = Pool.MAX):
    """2 x 2 pooling (max, or mean with `kind`), stride 2: x (B, H, W, C)
    with (H, W, C) = `shape` (static; H and W even) -> (B, H / 2, W / 2, C)."""
    h, w, c = shape
    if h % 2 or w % 2:
        raise ValueError(f"max_pool2d: height and width must be even, got {h} x {w}")
    blocks = x.reshape((x.shape[0], h // 2, 2, w // 2, 2, c))
    return blocks.mean(axis=(2, 4)) if kind is Pool.MEAN else blocks.max(axis=(2, 4))


class Readout(enum.Enum):
    """How the vision controller turns its last feature maps into a vector.

    FLATTEN: the paper's: the last block's pooled maps flattened -> dense.
    KEYPOINTS: ours: a spatial softmax per channel of the last block's
    maps (not pooled), read out as that channel's expected image
    coordinates (x, y) in [-1, 1] (Levine et al. 2016's feature points):
    2 C numbers that move continuously, to a fraction of a pixel, with
    what the channel detects. With `keypoint_rates` > 0 the controller
    also keeps the previous step's points in its carry and feeds their
    change times `keypoint_rates` (image velocities, which one still
    image does not hold)."""

    FLATTEN = "flatten"
    KEYPOINTS = "keypoints"


def spatial_softmax(x, shape: tuple[int, int, int]):
    """x (B, H, W, C) with static (H, W, C) = `shape` -> (B, 2 C): per
    channel the softmax-weighted mean column and row coordinate, both
    scaled to [-1, 1] (x across, y down), laid out [x_0..x_C-1,
    y_0..y_C-1]."""
    h, w, c = shape
    flat = x.reshape((x.shape[0], h * w, c))
    weights = pt.special.softmax(flat, axis=1)                        # (B, H W, C)
    rows, cols = np.meshgrid(np.linspace(-1.0, 1.0, h), np.linspace(-1.0, 1.0, w),
                             indexing="ij")
    # Broadcast products and sums, not tensordot: its gradient reshapes to
    # computed sizes, which JAX cannot trace.
    across = (weights * cols.reshape(1, h * w, 1)).sum(axis=1)         # (B, C)
    down = (weights * rows.reshape(1, h * w, 1)).sum(axis=1)
    return pt.concatenate([across, down], axis=1)


@dataclass(frozen=True)
class VisionController:
    """The camera controller of Degrave et al. (2016): blocks of two 3 x 3
    convolutions (ReLU) and a 2 x 2 max-pool (`channels` per block), the
    flattened features (plus any other observation columns) -> dense
    `dense` (ReLU) -> a recurrent memory of `memory` units (Elman,
    tanh) -> `head` dense ReLU layers -> tanh action x `output_scale`.

    The image is `image_shape` (H, W, 3) flattened row-major at columns
    [image_offset, image_offset + H W 3) of the observation (a camera
    sensor's columns); H and W must divide by 2 ** len(channels). Weights
    are shared by all worlds (no per-world population axis)."""

    image_shape: tuple[int, int, int]
    n_out: int
    n_extra: int = 0                     # other observation columns
    image_offset: int = 0
    channels: tuple[int, ...] = (32, 64, 32, 16)
    convs_per_block: int = 2
    dense: int = 128
    memory: int = 128
    head: tuple[int, ...] = (128, 128)
    output_scale: float = 1.0
    output_init: float = 0.1
    method: ConvMethod = ConvMethod.SLICES
    pool: Pool = Pool.MAX
    readout: Readout = Readout.FLATTEN
    keypoint_rates: float = 0.0          # KEYPOINTS only: > 0 adds the points' changes
    prefix: str = "vision"

    def __post_init__(self):
        h, w, c = self.image_shape
        scale = 2 ** self._pools
        if h % scale or w % scale or c < 1:
            raise ValueError(f"VisionController: image {self.image_shape} must have H and W "
                             f"divisible by 2 ** {self._pools} = {scale}")
        if self.keypoint_rates and self.readout is not Readout.KEYPOINTS:
            raise ValueError("VisionController: keypoint_rates needs readout=Readout.KEYPOINTS")

    @property
    def _pools(self) -> int:
        """2 x 2 pools: one per block (the keypoint readout replaces the last)."""
        return len(self.channels) - (self.readout is Readout.KEYPOINTS)

    @property
    def _n_points(self) -> int:
        """Keypoint readout numbers: 2 C, twice that with their rates."""
        return 2 * self.channels[-1] * (2 if self.keypoint_rates else 1)

    @property
    def n_features(self) -> int:
        if self.readout is Readout.KEYPOINTS:
            return self._n_points + self.n_extra
        h, w, _ = self.image_shape
        scale = 2 ** len(self.channels)
        return (h // scale) * (w // scale) * self.channels[-1] + self.n_extra

    def _convs(self):
        """(name, c_in, c_out) of every convolution, in order."""
        out, c_in = [], self.image_shape[2]
        for block, c in enumerate(self.channels):
            for j in range(self.convs_per_block):
                out.append((f"conv{block}_{j}", c_in, c))
                c_in = c
        return out

    def _dense(self):
        """(name, n_in, n_out) of the dense layers after the memory."""
        sizes = (self.memory, *self.head, self.n_out)
        return [(f"d{k}", a, b) for k, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]

    def parameter_shapes(self):
        p, shapes = self.prefix, {}
        for name, c_in, c_out in self._convs():
            shapes[f"{p}.{name}_w"] = (3, 3, c_in, c_out)
            shapes[f"{p}.{name}_b"] = (c_out,)
        shapes[f"{p}.feat_w"] = (self.n_features, self.dense)
        shapes[f"{p}.feat_b"] = (self.dense,)
        shapes[f"{p}.mem_wx"] = (self.dense, self.memory)
        shapes[f"{p}.mem_wh"] = (self.memory, self.memory)
        shapes[f"{p}.mem_b"] = (self.memory,)
        for name, a, b in self._dense():
            shapes[f"{p}.{name}_w"] = (a, b)
            shapes[f"{p}.{name}_b"] = (b,)
        return shapes

    @property
    def n_parameters(self) -> int:
        return sum(int(np.prod(s)) for s in self.parameter_shapes().values())

    def init(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        p, out = self.prefix, {}
        last = f"{p}.{self._dense()[-1][0]}_w"
        for name, shape in self.parameter_shapes().items():
            if len(shape) == 1:
                out[name] = np.zeros(shape)
            elif len(shape) == 4:                                    # He, fan-in 9 c_in
                out[name] = rng.normal(size=shape) * np.sqrt(2.0 / (9 * shape[2]))
            elif name == f"{p}.mem_wh":
                out[name] = np.linalg.qr(rng.normal(size=shape))[0] * 0.9
            else:
                out[name] = _glorot(rng, shape, self.output_init if name == last else 1.0)
        return out

    def carry_sizes(self):
        if self.keypoint_rates:
            return (self.memory, 2 * self.channels[-1])
        return (self.memory,)

    def features(self, params, image):
        """image (B, H, W, C) -> conv features (B, F): flattened (FLATTEN,
        F = n_features - n_extra) or keypoints (KEYPOINTS, F = 2 C)."""
        p, x = self.prefix, image
        h, w, _ = self.image_shape
        last = len(self.channels) - 1
        for block, c in enumerate(self.channels):
            keypoints = self.readout is Readout.KEYPOINTS and block == last
            for j in range(self.convs_per_block):
                name = f"{p}.conv{block}_{j}"
                y = conv2d(x, params[f"{name}_w"], params[f"{name}_b"], method=self.method)
                # Keypoints read the last convolution's maps before the ReLU:
                # the softmax wants their full range.
                x = y if keypoints and j == self.convs_per_block - 1 else pt.maximum(y, 0.0)
            if keypoints:
                return spatial_softmax(x, (h, w, c))
            x = max_pool2d(x, (h, w, c), self.pool)
            h, w = h // 2, w // 2
        return x.reshape((x.shape[0], h * w * self.channels[-1]))

    def apply(self, params, observation, carry, time):
        p = self.prefix
        h, w, c = self.image_shape
        start, stop = self.image_offset, self.image_offset + h * w * c
        n_obs = h * w * c + self.n_extra
        # Static widths and the batch read from the input keep every shape
        # concrete under JAX.
        obs = pt.specify_shape(observation, (None, n_obs))
        image = obs[:, start:stop].reshape((obs.shape[0], h, w, c))
        x = self.features(params, image)
        carry_out = []
        if self.keypoint_rates:
            carry_out = [x]
            # The carry starts at zeros: no previous points, no rate yet
            # (points are softmax means, never all exactly 0 once seen).
            seen = pt.gt(pt.abs(carry[1]).sum(axis=1, keepdims=True), 0.0)
            x = pt.concatenate([x, (x - carry[1]) * self.keypoint_rates * seen], axis=1)
        if self.n_extra:
            # The other columns by a constant selection matrix (its gradient
            # needs no computed split positions).
            others = [k for k in range(n_obs) if not start <= k < stop]
            pick = np.zeros((n_obs, self.n_extra))
            pick[others, np.arange(self.n_extra)] = 1.0
            x = pt.concatenate([x, pt.dot(obs, pick)], axis=1)
        x = pt.maximum(pt.dot(x, params[f"{p}.feat_w"]) + params[f"{p}.feat_b"], 0.0)
        memory = pt.tanh(pt.dot(x, params[f"{p}.mem_wx"]) + pt.dot(carry[0], params[f"{p}.mem_wh"])
                         + params[f"{p}.mem_b"])
        x = memory
        layers = self._dense()
        for k, (name, _, _) in enumerate(layers):
            x = pt.dot(x, params[f"{p}.{name}_w"]) + params[f"{p}.{name}_b"]
            x = pt.tanh(x) if k == len(layers) - 1 else pt.maximum(x, 0.0)
        return x * self.output_scale, [memory, *carry_out]
