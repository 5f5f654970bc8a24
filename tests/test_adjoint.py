"""The loop wrapper with its own reverse pass, against PyTensor's scan
gradient and finite differences, on a small nonlinear recurrence."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from symphys.compiler.backends import compile
from symphys.adjoint import LoopOptions, Reverse, close_over, inline_loops, loop_with_adjoint


def _recurrence(x, y, a, b):
    """One step of a coupled nonlinear map reading the outer a (3,) and b."""
    return [x + 0.1 * pt.sin(y * a) - 0.05 * x * b, y + 0.1 * pt.cos(x) * a - 0.02 * y ** 2]


def _inputs():
    a = pt.vector("a", shape=(3,))
    b = pt.scalar("b")
    x0 = pt.vector("x0", shape=(3,))
    y0 = pt.vector("y0", shape=(3,))
    return a, b, x0, y0


VALUES = [np.array([0.3, -0.7, 1.1]), np.array(0.4), np.array([0.2, 0.5, -0.1]),
          np.array([1.0, -0.3, 0.6])]


def _loss(xs, ys):
    return (xs[-1] ** 2).sum() + (ys[::3] * xs[::3]).sum()


@pytest.mark.parametrize("reverse", list(Reverse))
def test_loop_gradient_matches_scan_gradient_and_finite_differences(reverse):
    a, b, x0, y0 = _inputs()
    # Reference: PyTensor's own scan and its gradient.
    xs, ys = pytensor.scan(lambda x, y: _recurrence(x, y, a, b), outputs_info=[x0, y0],
                           n_steps=12, return_updates=False)
    ref = _loss(xs, ys)
    ref_fn = compile([a, b, x0, y0], [ref, *pytensor.grad(ref, [a, b, x0, y0])], "cvm")
    # The wrapper: the body reads a and b from outside; close_over makes them leaves.
    run, leaves = close_over(lambda c: _recurrence(c[0], c[1], a, b), [x0, y0])
    # The frontier: a itself and b as broadcast (the nearest carry-free values).
    assert len(leaves) == 2 and a in leaves
    xs2, ys2 = loop_with_adjoint(run, [x0, y0], leaves, 12, LoopOptions(reverse=reverse))
    ours = _loss(xs2, ys2)
    fn = compile([a, b, x0, y0], [ours, *pytensor.grad(ours, [a, b, x0, y0])], "cvm")
    expected, got = ref_fn(*VALUES), fn(*VALUES)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)
    # Central differences on b and one entry of a.
    eps = 1e-6
    for index in (1, 3):
        up = [v.copy() for v in VALUES]
        down = [v.copy() for v in VALUES]
        if index == 1:
            up[1], down[1] = up[1] + eps, down[1] - eps
            analytic = got[2]
        else:
            up[0][2] += eps
            down[0][2] -= eps
            analytic = got[1][2]
        fd = (fn(*up)[0] - fn(*down)[0]) / (2 * eps)
        assert analytic == pytest.approx(fd, rel=1e-6)


def test_gradient_decay_scales_the_carried_cotangent():
    """With decay g, a linear loop x <- 2x gives d x_T / d x_0 = (2 g)^T."""
    x0 = pt.scalar("x0")
    (xs,) = loop_with_adjoint(lambda s, lv: [2.0 * s[0]], [x0], [], 5,
                              LoopOptions(gradient_decay=0.5))
    grad = compile([x0], pytensor.grad(xs[-1], x0), "cvm")(np.array(1.0))
    assert float(grad) == pytest.approx(1.0)      # (2 * 0.5) ** 5


def test_inline_loops_leaves_no_wrapper():
    x0 = pt.scalar("x0")
    (xs,) = loop_with_adjoint(lambda s, lv: [s[0] * 0.9], [x0], [], 3)
    (out,) = inline_loops([xs[-1]])
    from pytensor.compile.builders import OpFromGraph
    from pytensor.graph.traversal import ancestors
    assert not any(v.owner is not None and isinstance(v.owner.op, OpFromGraph)
                   for v in ancestors([out]))
    assert float(compile([x0], out, "cvm")(np.array(2.0))) == pytest.approx(2.0 * 0.9 ** 3)


@pytest.mark.parametrize("decay, reverse", [(1.0, Reverse.RECOMPUTE), (0.9, Reverse.RECOMPUTE),
                                            (0.9, Reverse.STORE)])
def test_checkpointed_loop_gives_the_same_gradient(decay, reverse):
    """Keeping every 4th state of 12 and recomputing segments in the reverse
    pass: the kept states and every gradient equal the full loop's to 1e-12
    (also with gradient decay, which crosses segment boundaries)."""
    a, b, x0, y0 = _inputs()
    run, leaves = close_over(lambda c: _recurrence(c[0], c[1], a, b), [x0, y0])

    def loss(xs, ys):         # reads every kept state
        return (xs[-1] ** 2).sum() + (ys * xs).sum()

    xs, ys = loop_with_adjoint(run, [x0, y0], leaves, 12, LoopOptions(gradient_decay=decay))
    full = loss(xs[3::4], ys[3::4])
    xk, yk = loop_with_adjoint(run, [x0, y0], leaves, 12,
                               LoopOptions(gradient_decay=decay, checkpoint=4, reverse=reverse))
    kept = loss(xk, yk)
    wrt = [a, b, x0, y0]
    fn = compile(wrt, [xs[3::4], xk, full, kept, *pytensor.grad(full, wrt),
                       *pytensor.grad(kept, wrt)], "cvm")
    out = fn(*VALUES)
    np.testing.assert_allclose(out[1], out[0], rtol=0, atol=1e-14)     # s_4, s_8, s_12
    assert out[1].shape == (3, 3)
    for g_full, g_kept in zip(out[4:8], out[8:12]):
        np.testing.assert_allclose(g_kept, g_full, rtol=1e-12, atol=1e-14)
    assert np.abs(out[4]).max() > 1e-3


def _adjoint_ops(outputs) -> set:
    """Names of the scalar ops computed inside the reverse scans of a graph."""
    from pytensor.graph.traversal import apply_ancestors
    from pytensor.scan.op import Scan
    from pytensor.tensor.elemwise import Elemwise
    names = set()
    for node in apply_ancestors(inline_loops(outputs)):
        if isinstance(node.op, Scan) and node.op.name.endswith("_adjoint"):
            names |= {type(n.op.scalar_op).__name__ for n in apply_ancestors(node.op.inner_outputs)
                      if isinstance(n.op, Elemwise)}
    return names


def test_stored_residuals_replace_the_recomputed_step():
    """With Reverse.STORE the reverse scan reads the forward's residuals
    (here sin and cos of the state and their derivatives) instead of running
    the step again: no trigonometric op is left in it; recomputing keeps
    them. The forward loop returns the residuals as extra sequences."""
    a, b, x0, y0 = _inputs()
    run, leaves = close_over(lambda c: _recurrence(c[0], c[1], a, b), [x0, y0])
    found = {}
    for reverse in Reverse:
        xs, ys = loop_with_adjoint(run, [x0, y0], leaves, 12, LoopOptions(reverse=reverse))
        found[reverse] = _adjoint_ops(pytensor.grad(_loss(xs, ys), [a, b, x0, y0]))
        n_outputs = len(xs.owner.outputs)
        assert n_outputs > 2 if reverse is Reverse.STORE else n_outputs == 2
    assert {"Sin", "Cos"} <= found[Reverse.RECOMPUTE]
    assert not {"Sin", "Cos"} & found[Reverse.STORE]
    assert "Mul" in found[Reverse.STORE]


@pytest.mark.parametrize("reverse", list(Reverse))
def test_nested_loop_stores_when_its_outer_loop_does(reverse):
    """A loop built inside a storing loop's step (the solver's sweeps in a
    time step) stores its residuals too, and otherwise recomputes; the
    gradient is the same either way (against the scan gradient of the
    same nested recurrence)."""
    a = pt.vector("a", shape=(3,))
    x0 = pt.vector("x0", shape=(3,))
    inner_outputs = []

    def step(s, lv):
        def sweep(c, v):
            return [c[0] + 0.1 * pt.sin(c[0] * v[0])]
        (xs,) = loop_with_adjoint(sweep, [s[0]], [lv[0]], 4, name="inner")
        inner_outputs.append(len(xs.owner.outputs))
        return [xs[-1] * 0.9 + pt.cos(s[0])]

    (xs,) = loop_with_adjoint(step, [x0], [a], 5, LoopOptions(reverse=reverse))
    assert (inner_outputs[0] > 1) == (reverse is Reverse.STORE)

    def ref_step(x):
        ys = pytensor.scan(lambda y: y + 0.1 * pt.sin(y * a), outputs_info=[x], n_steps=4,
                           return_updates=False)
        return ys[-1] * 0.9 + pt.cos(x)

    ref = pytensor.scan(ref_step, outputs_info=[x0], n_steps=5, return_updates=False)
    losses = [(xs ** 2).sum(), (ref ** 2).sum()]
    fn = compile([a, x0], [g for loss in losses for g in pytensor.grad(loss, [a, x0])], "cvm")
    out = fn(VALUES[0], VALUES[2])
    for ours, expected in zip(out[:2], out[2:]):
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("reverse", list(Reverse))
def test_connection_pattern_is_closed_over_the_steps(reverse):
    """x <- x + y, y <- z, z <- a * z, w <- w * b: after several steps x
    reads a through y and z, and nothing but w reads b; the pattern the
    loop gives its wrapper (from one step's graph, closed over steps) is
    the one PyTensor derives from the forward scan itself."""
    from pytensor.graph.op import io_connection_pattern
    a, b = pt.scalar("a"), pt.scalar("b")
    init = [pt.scalar(n) for n in "xyzw"]

    def run(s, lv):
        x, y, z, w = s
        return [x + pt.sin(y), y * 0 + z, lv[0] * z, w * lv[1]]

    outs = loop_with_adjoint(run, init, [a, b], 4, LoopOptions(reverse=reverse))
    node = outs[0].owner
    given = node.op.connection_pattern(node)[:6]
    derived = io_connection_pattern(node.op.inner_inputs[:6], node.op.inner_outputs)
    assert given == derived
    assert given[4][0] and not given[5][0] and given[5][3] and not given[4][3]


def test_checkpoint_options_are_checked():
    from symphys.errors import ParameterError
    with pytest.raises(ParameterError, match="cannot be combined"):
        LoopOptions(checkpoint=4, truncate=2)
    with pytest.raises(ParameterError, match=">= 0"):
        LoopOptions(checkpoint=-1)
    x0 = pt.scalar("x0")
    (xs,) = loop_with_adjoint(lambda s, lv: [s[0] * 0.9], [x0], [], 10,
                              LoopOptions(checkpoint=4))
    with pytest.raises(AssertionError, match="multiple of checkpoint=4"):
        compile([x0], xs, "cvm")(np.array(1.0))
