"""symphys' graph rewrites: each case rewritten as promised (`rewrite_graph`)
and numerically equal to the graph it replaces."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.rewriting.utils import rewrite_graph
from pytensor.graph.traversal import applys_between, graph_inputs
from pytensor.scan.op import Scan
from pytensor.tensor.basic import Join
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.math import Sum

from symphys.bench.array_step import cross
from symphys.compiler import backends, rewrites
from symphys.compiler.loops import outer_loops

X = pt.tensor("x", shape=(None, 4, 3), dtype="float64")
Y = pt.tensor("y", shape=(None, 4, 3), dtype="float64")
R = pt.tensor("R", shape=(None, 4, 3, 3), dtype="float64")
RNG = np.random.default_rng(0)
VALUES = {X: RNG.normal(size=(5, 4, 3)), Y: RNG.normal(size=(5, 4, 3)),
          R: RNG.normal(size=(5, 4, 3, 3))}


def components(out):
    """`out` after canonicalisation and symphys' component rewrites."""
    return rewrite_graph(out, include=("canonicalize",),
                         custom_rewrite=rewrites.component_rewriter(), clone=True)


def cancelled(out):
    return rewrite_graph(out, include=(), custom_rewrite=rewrites.cancel_rewriter(),
                         clone=True)


def ops(out):
    return [node.op for node in applys_between(list(graph_inputs([out])), [out])]


def evaluate(out):
    inputs = [v for v in VALUES if v in set(graph_inputs([out]))]
    fn = pytensor.function(inputs, out, mode="FAST_COMPILE", on_unused_input="ignore")
    return fn(*[VALUES[v] for v in inputs])


def assert_same(before, after):
    np.testing.assert_allclose(evaluate(after), evaluate(before), rtol=1e-14, atol=1e-14)


def test_sum_over_small_axis_becomes_components():
    out = (X * Y).sum(-1)
    new = components(out)
    assert not any(isinstance(op, Sum) for op in ops(new))
    # The product is taken per component, never on the (B, 4, 3) tensors.
    assert all(node.outputs[0].type.shape[-1:] != (3,) for node in
               applys_between([X, Y], [new]) if isinstance(node.op, Elemwise))
    assert_same(out, new)


def test_sum_over_large_or_unknown_axis_is_kept():
    z = pt.tensor("z", shape=(None, 8))
    assert any(isinstance(op, Sum) for op in ops(components(z.sum(-1))))
    w = pt.tensor("w", shape=(3, None))
    assert any(isinstance(op, Sum) for op in ops(components(w.sum(-1))))


def test_small_matmul_becomes_components():
    out = ((R @ X[..., None])[..., 0] * Y).sum(-1)          # (R x) . y
    new = components(out)
    assert not any(isinstance(op, Blockwise) for op in ops(new))
    assert_same(out, new)
    rtr = (R.swapaxes(-1, -2) @ R)[..., 0, 1]              # a component of RᵀR
    new = components(rtr)
    assert not any(isinstance(op, (Blockwise, Join)) for op in ops(new))
    assert_same(rtr, new)


def test_large_matmul_is_kept():
    a = pt.tensor("a", shape=(None, 8, 8))
    assert any(isinstance(op, Blockwise) for op in ops(components(a @ a)))


def test_component_of_a_stack_is_its_piece():
    out = (cross(X, Y) * X).sum(-1)
    new = components(out)
    assert not any(isinstance(op, Join) for op in ops(new))
    assert_same(out, new)
    shifted = pt.concatenate([X[..., :1], Y], axis=-1)[..., 2]    # pieces of lengths 1 and 3
    new = components(shifted)
    assert not any(isinstance(op, Join) for op in ops(new))
    assert_same(shifted, new)


def test_elemwise_read_whole_is_not_split():
    s = pt.exp(X)
    out = s[..., 0] + s.sum()          # s is also read whole: keep one exp
    new = components(out)
    exps = [op for op in ops(new) if isinstance(op, Elemwise) and "Exp" in str(op)]
    assert len(exps) == 1
    assert_same(out, new)


def test_identity_rotation_is_dropped():
    eye = pt.constant(np.eye(3))
    out = eye @ R + R @ pt.constant(np.eye(3)[None, None])
    new = cancelled(out)
    assert not any(isinstance(op, Blockwise) for op in ops(new))
    assert_same(out, new)
    # A non-identity constant stays.
    other = pt.constant(np.diag([1.0, 2.0, 3.0])) @ R
    assert any(isinstance(op, Blockwise) for op in ops(cancelled(other)))


@pytest.mark.parametrize("norm", [
    lambda v: pt.linalg.norm(v, axis=-1, keepdims=True),
    lambda v: pt.sqrt((v ** 2).sum(-1, keepdims=True)),
    lambda v: pt.sqrt((v * v).sum(-1))[..., None],
])
def test_repeated_normalisation_is_removed(norm):
    once = X / norm(X)
    out = once / norm(once)
    new = cancelled(out)
    assert new is once or pytensor.graph.basic.equal_computations([new], [once])
    np.testing.assert_allclose(evaluate(new), evaluate(out), rtol=1e-15)
    # Normalising along another axis is not a repeat.
    across = once / norm(once.swapaxes(-1, -2)).swapaxes(-1, -2)
    assert cancelled(across) is not once


def test_loop_invariants_are_hoisted_out_of_scan():
    w = pt.vector("w")
    x0 = pt.vector("x0")

    def step(x, w):
        return x + pt.exp(w).sum()          # exp(w) does not change across steps

    xs = pytensor.scan(step, outputs_info=[x0], non_sequences=[w], n_steps=5,
                       return_updates=False, mode=backends.loop_mode())
    fn = pytensor.function([x0, w], xs[-1], mode=backends.mode_for("cvm"))
    scans = [n for n in fn.maker.fgraph.apply_nodes if isinstance(n.op, Scan)]
    assert len(scans) == 1
    inner = [n.op for n in scans[0].op.fgraph.apply_nodes]
    assert not any("Exp" in str(op) for op in inner)
    np.testing.assert_allclose(fn(np.zeros(2), np.ones(3)), 5 * 3 * np.e * np.ones(2))


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_compiled_array_step_same_with_rewrites_on_and_off(backend):
    """A step written with (B, N, 3) arrays and 3x3 matrices, in a scan,
    compiled with and without the rewrites: same numbers; with them, the
    loop body holds no matrix products or small sums (joins remain: they
    rebuild the carried (B, N, 3) states from components)."""
    def step(x, v, rot):
        speed = pt.sqrt((v * v).sum(-1, keepdims=True))
        v = v - 0.01 * speed * v + pt.constant([0.0, 0.0, -9.81 * 0.01])
        rot = rot + 0.01 * rot @ rot.swapaxes(-1, -2)
        spin = cross(v, (rot @ x[..., None])[..., 0])
        return x + 0.01 * v + 1e-3 * spin, v, rot

    def build():
        outs = pytensor.scan(step, outputs_info=[X, Y, R], n_steps=20,
                             return_updates=False, mode=backends.loop_mode())
        return [o[-1] for o in outs]

    results = {}
    for on in (False, True):
        with rewrites.switched(on):
            fn = backends.compile([X, Y, R], build(), backend, disk_cache=False)
            results[on] = fn(*VALUES.values())
            scans = outer_loops(fn.fn.maker.fgraph)
            assert len(scans) == 1
            inner = [n.op for n in scans[0].fgraph.apply_nodes]
            small = [op for op in inner if isinstance(op, (Blockwise, Sum))
                     or "BatchedDot" in str(op)]
            if on:
                assert not small, small
            else:
                assert small
    for a, b in zip(results[False], results[True]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_backend_defaults_and_forcing():
    assert rewrites.enabled("numba") and rewrites.enabled("cvm")
    assert not rewrites.enabled("jax") and not rewrites.enabled(backends.Backend.JAX)
    tags = lambda mode: set(mode.provided_optimizer.include)
    assert rewrites.TAG in tags(backends.mode_for("numba"))
    assert rewrites.TAG not in tags(backends.mode_for("jax"))
    with rewrites.switched(True):
        assert rewrites.enabled("jax") and rewrites.TAG in tags(backends.mode_for("jax"))
        with rewrites.for_backend("numba"):
            assert rewrites.TAG in tags(backends.loop_mode())
    with rewrites.switched(False):
        assert rewrites.TAG not in tags(backends.loop_mode())
    with rewrites.for_backend("jax"):              # loops built for jax
        assert rewrites.TAG not in tags(backends.loop_mode())


def test_rewrites_only_leaves_the_kernels_fused():
    assert rewrites.fused("numba")
    with rewrites.rewrites_only(False):
        assert not rewrites.enabled("numba") and rewrites.fused("numba")
        with rewrites.for_backend("numba"):
            assert rewrites.TAG not in set(backends.loop_mode().provided_optimizer.include)
    with rewrites.switched(False), rewrites.rewrites_only(True):
        assert rewrites.enabled("numba") and not rewrites.fused("numba")
    assert rewrites.enabled("numba")


def test_a_camera_sensor_turns_the_component_rewrites_off():
    from symphys.camera.image import RENDER_REWRITES
    from symphys.experiments.pendulum_camera import camera_scene
    from symphys.learn import closed_loop
    from symphys.scene.reader import load_scene

    scene, ball = camera_scene(), load_scene("ball")
    assert scene.sees_images and not ball.sees_images
    with closed_loop._rewrites_for(scene):
        assert rewrites.enabled("numba") is RENDER_REWRITES and rewrites.fused("numba")
    with closed_loop._rewrites_for(ball):
        assert rewrites.enabled("numba")
