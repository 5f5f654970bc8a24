"""Convolution, pooling and the vision controller (`symphys.learn.nn`), against
SciPy's correlation, NumPy pooling and central differences (float64).
Tiny images; JAX and the C VM (numba compiles of these graphs take minutes
here)."""

import numpy as np
import pytensor.tensor as pt
import pytest
from scipy.signal import correlate

from symphys.compiler.backends import compile as sp_compile
from symphys.learn import vision

SHAPE = (2, 8, 6, 3)          # B, H, W, C_in
C_OUT = 4


def _reference(x, w, b):
    out = np.zeros(x.shape[:3] + (w.shape[3],))
    for n in range(x.shape[0]):
        for o in range(w.shape[3]):
            out[n, :, :, o] = b[o] + sum(correlate(x[n, :, :, c], w[:, :, c, o], mode="same")
                                         for c in range(x.shape[3]))
    return out


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return (rng.normal(size=SHAPE), rng.normal(size=(3, 3, SHAPE[3], C_OUT)),
            rng.normal(size=C_OUT), rng.normal(size=SHAPE[:3] + (C_OUT,)))


def _conv_function(method, backend):
    """(x, w, b, probe) -> (conv, loss, dloss/dx, dloss/dw) with loss = sum(probe * conv^2)."""
    x = pt.tensor("x", shape=(None,) + SHAPE[1:])
    w = pt.tensor("w", shape=(3, 3, SHAPE[3], C_OUT))
    b, probe = pt.vector("b"), pt.tensor4("probe")
    y = vision.conv2d(x, w, b, method=method)
    loss = (probe * y ** 2).sum()
    return sp_compile([x, w, b, probe], [y, loss, *pt.grad(loss, [x, w])], backend=backend)


@pytest.fixture(scope="module")
def slices_jax():
    return _conv_function(vision.ConvMethod.SLICES, "jax")


def test_conv2d_is_scipy_correlation_with_zero_padding(slices_jax, data):
    x, w, b, probe = data
    np.testing.assert_allclose(slices_jax(x, w, b, probe)[0], _reference(x, w, b), atol=1e-12)


def test_conv2d_gradients_match_central_differences(slices_jax, data):
    x, w, b, probe = data
    _, _, gx, gw = slices_jax(x, w, b, probe)
    rng = np.random.default_rng(1)
    h = 1e-6
    for _ in range(4):
        i = tuple(rng.integers(0, n) for n in x.shape)
        step = np.zeros_like(x)
        step[i] = h
        fd = (slices_jax(x + step, w, b, probe)[1] - slices_jax(x - step, w, b, probe)[1]) / (2 * h)
        assert gx[i] == pytest.approx(fd, rel=1e-6, abs=1e-8)
        j = tuple(rng.integers(0, n) for n in w.shape)
        step = np.zeros_like(w)
        step[j] = h
        fd = (slices_jax(x, w + step, b, probe)[1] - slices_jax(x, w - step, b, probe)[1]) / (2 * h)
        assert gw[j] == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_pytensor_convolution_agrees_on_the_c_vm_and_jax_refuses_it(slices_jax, data):
    """PyTensor's own convolve2d (SciPy inside) gives the same values and
    gradients on the C VM; JAX has no dispatch for it."""
    x, w, b, probe = data
    own = _conv_function(vision.ConvMethod.PYTENSOR, "cvm")(x, w, b, probe)
    for a, e in zip(own, slices_jax(x, w, b, probe)):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10)
    with pytest.raises(NotImplementedError, match="Convolve2d"):
        _conv_function(vision.ConvMethod.PYTENSOR, "jax")


def test_max_pool_and_its_errors(data):
    x = data[0]
    xs = pt.tensor("x", shape=(None,) + SHAPE[1:])
    f = sp_compile([xs], [vision.max_pool2d(xs, SHAPE[1:]),
                          vision.max_pool2d(xs, SHAPE[1:], vision.Pool.MEAN)], backend="jax")
    blocks = x.reshape(2, 4, 2, 3, 2, 3)
    most, mean = f(x)
    np.testing.assert_array_equal(most, blocks.max(axis=(2, 4)))
    np.testing.assert_allclose(mean, blocks.mean(axis=(2, 4)), rtol=1e-14)
    with pytest.raises(ValueError, match="even"):
        vision.max_pool2d(xs, (7, 6, 3))
    with pytest.raises(ValueError, match="odd"):
        vision.conv2d(xs, np.zeros((2, 2, 3, 1)), size=2)


def test_paper_vision_controller_shapes():
    """Degrave et al.'s controller on a 288 x 96 image: four pools leave
    18 x 6 x 16 features; 3 x 3 kernels 3->32->32, 32->64->64, 64->32->32,
    32->16->16; dense 128, memory 128, head 128, 128."""
    ctrl = vision.VisionController((96, 288, 3), n_out=1)
    shapes = ctrl.parameter_shapes()
    assert ctrl.n_features == 18 * 6 * 16
    assert shapes["vision.conv0_0_w"] == (3, 3, 3, 32)
    assert shapes["vision.conv1_1_w"] == (3, 3, 64, 64)
    assert shapes["vision.conv3_1_w"] == (3, 3, 16, 16)
    assert shapes["vision.feat_w"] == (1728, 128) and shapes["vision.mem_wh"] == (128, 128)
    assert shapes["vision.d2_w"] == (128, 1) and ctrl.carry_sizes() == (128,)
    weights = ctrl.init(0)
    assert set(weights) == set(shapes)
    assert all(weights[k].shape == s for k, s in shapes.items())
    with pytest.raises(ValueError, match="divisible"):
        vision.VisionController((90, 288, 3), n_out=1)


def test_small_vision_controller_runs_with_memory():
    """A small instance: actions within +-output_scale, the memory carried
    and used (the same image gives another action with another memory),
    the extra observation columns read, gradients finite."""
    ctrl = vision.VisionController((8, 8, 3), n_out=2, n_extra=1, image_offset=1,
                               channels=(4, 4), dense=6, memory=5, head=(6,),
                               output_scale=2.0, output_init=1.0)
    weights = ctrl.init(3)
    names = sorted(weights)
    syms = {k: pt.tensor(k, shape=weights[k].shape) for k in names}
    obs, carry = pt.matrix("obs"), pt.matrix("carry")
    action, (memory,) = ctrl.apply(syms, obs, [carry], None)
    g = pt.grad(action.sum(), syms["vision.conv0_0_w"])
    f = sp_compile([obs, carry, *syms.values()], [action, memory, g], backend="jax")
    rng = np.random.default_rng(0)
    o = rng.uniform(size=(3, 1 + 8 * 8 * 3))
    h0 = np.zeros((3, 5))
    a, h1, grad = f(o, h0, *[weights[k] for k in names])
    assert a.shape == (3, 2) and np.all(np.abs(a) < 2.0) and h1.shape == (3, 5)
    assert np.all(np.isfinite(grad)) and np.abs(grad).max() > 0
    a2, _, _ = f(o, h1, *[weights[k] for k in names])
    assert np.abs(a2 - a).max() > 1e-6                       # memory acts
    o2 = o.copy()
    o2[:, 0] += 1.0                                          # the extra column acts
    a3, _, _ = f(o2, h0, *[weights[k] for k in names])
    assert np.abs(a3 - a).max() > 1e-6


def test_spatial_softmax_finds_a_peak_between_pixels():
    """A Gaussian bump (log-map, 1 px wide) centred between pixel centres:
    the softmax mean is its centre in [-1, 1] coordinates to a small
    fraction of a pixel; a flat map reads the image centre."""
    h, w = 10, 16
    rows, cols = np.mgrid[0:h, 0:w]
    centre = (4.3, 7.6)                                  # (row, column) in pixels
    bump = -((rows - centre[0]) ** 2 + (cols - centre[1]) ** 2) / 2.0
    x = np.stack([bump, np.zeros((h, w))], axis=-1)[None]           # (1, H, W, 2)
    xs = pt.tensor("x", shape=(None, h, w, 2))
    (points,) = [sp_compile([xs], vision.spatial_softmax(xs, (h, w, 2)), backend="jax")(x)]
    expect_x = centre[1] / (w - 1) * 2 - 1
    expect_y = centre[0] / (h - 1) * 2 - 1
    pixel = 2 / (w - 1)
    assert abs(points[0, 0] - expect_x) < 0.01 * pixel
    assert abs(points[0, 2] - expect_y) < 0.01 * 2 / (h - 1)
    np.testing.assert_allclose(points[0, [1, 3]], 0.0, atol=1e-12)


def test_keypoint_controller_feeds_point_rates_from_its_carry():
    """KEYPOINTS with rates: features 2 C points + 2 C rates, the points
    carried; the first step (zero carry) has no rate, a second look at a
    moved image has one; the last block is not pooled."""
    ctrl = vision.VisionController((8, 12, 3), n_out=1, channels=(4, 3), dense=6, memory=5,
                               head=(6,), readout=vision.Readout.KEYPOINTS, keypoint_rates=50.0,
                               output_init=1.0)
    assert ctrl.n_features == 2 * 3 * 2 and ctrl.carry_sizes() == (5, 6)
    weights = ctrl.init(1)
    names = sorted(weights)
    syms = {k: pt.tensor(k, shape=weights[k].shape) for k in names}
    obs, mem, prev = pt.matrix("obs"), pt.matrix("mem"), pt.matrix("prev")
    action, (memory, points) = ctrl.apply(syms, obs, [mem, prev], None)
    g = pt.grad(action.sum(), syms["vision.conv1_1_w"])
    f = sp_compile([obs, mem, prev, *syms.values()], [action, memory, points, g], backend="jax")
    rng = np.random.default_rng(0)
    o = rng.uniform(size=(2, 8 * 12 * 3))
    w = [weights[k] for k in names]
    a0, _, p0, grad = f(o, np.zeros((2, 5)), np.zeros((2, 6)), *w)
    assert p0.shape == (2, 6) and np.all(np.abs(p0) <= 1.0) and np.abs(grad).max() > 0
    # Same image, same memory, its own points as the previous ones: the
    # rate is zero, as on the first step.
    a1, _, _, _ = f(o, np.zeros((2, 5)), p0, *w)
    np.testing.assert_allclose(a1, a0, atol=1e-12)
    a2, _, _, _ = f(o, np.zeros((2, 5)), p0 + 0.01, *w)
    assert np.abs(a2 - a0).max() > 1e-6
    with pytest.raises(ValueError, match="keypoint_rates"):
        vision.VisionController((8, 8, 3), n_out=1, channels=(4,), keypoint_rates=1.0)
