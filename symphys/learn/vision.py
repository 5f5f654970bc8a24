"""Controllers that see: 2-D convolution, pooling, a spatial-softmax
readout, and the camera controller of Degrave et al. (2016)
(`VisionController`), on images (B, H, W, C) flattened in the observation.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from symphys.learn.nn import glorot


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
                out[name] = glorot(rng, shape, self.output_init if name == last else 1.0)
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
