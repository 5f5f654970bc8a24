"""Loops compiled by Numba against the same loops interpreted by PyTensor's
Python VM (the stage kernels compiled in both): value and gradient of the
ball bouncing (contact rows, restitution, friction) and of the arm (joints,
limits, motors), on the same graph; `Loops.AUTO` switching from one to the
other once its background compile ends."""

import time

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

import symphys as sp
from symphys.api import parameter_values, value_and_grad_function
from symphys.bench.runner import bench_loss
from symphys.compiler.loops import CompiledLoop

STEPS = 150
WRT = {"ball": ["ball.velocity", "ball.radius", "ground.friction"],
       "arm": ["forearm.mass", "action"]}
PARAMS = {"ball": {"ball.velocity": [2.0, -0.5, 1.0], "ball.friction": 0.2}, "arm": {}}


def _run(name, kind):
    scene = sp.load_scene(name)
    args, batched = parameter_values(scene, PARAMS[name])
    with sp.loops(kind):
        fn = value_and_grad_function(scene, STEPS, bench_loss, WRT[name], batched, "numba")
        if scene.motors:
            args = [*args, np.full(len(scene.motors), 0.3)]
        return fn(*args)


@pytest.mark.parametrize("name", ["ball", "arm"])
def test_compiled_loops_match_interpreted(name):
    compiled = _run(name, sp.Loops.COMPILED)
    interpreted = _run(name, sp.Loops.INTERPRETED)
    assert len(compiled) == 1 + len(WRT[name])
    for k, (got, ref) in enumerate(zip(compiled, interpreted)):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12, err_msg=f"output {k}")
    assert np.abs(np.concatenate([np.ravel(g) for g in compiled[1:]])).max() > 1e-3


def test_loops_setting_is_checked(monkeypatch):
    from symphys.compiler.loops import loops_run

    monkeypatch.setenv("SYMPHYS_LOOPS", "fast")
    with pytest.raises(sp.SymphysError, match="SYMPHYS_LOOPS='fast'"):
        loops_run()
    monkeypatch.setenv("SYMPHYS_LOOPS", "Compiled")
    assert loops_run() is sp.Loops.COMPILED


def _loop(offset: float):
    """x -> the sum over 5 steps of s <- sin(s) * 0.9 + offset (a graph of its
    own for each offset: a loop this machine has not compiled)."""
    x = pt.vector("x")
    states = pytensor.scan(lambda s: pt.sin(s) * 0.9 + offset, outputs_info=[x], n_steps=5,
                           return_updates=False)
    return x, states.sum()


def _expected(x, offset):
    total = 0.0
    for _ in range(5):
        x = np.sin(x) * 0.9 + offset
        total += x.sum()
    return total


def test_auto_loops_run_interpreted_until_compiled_in_the_background():
    offset = float(np.random.default_rng().uniform(0.1, 0.2))
    value = np.linspace(-1.0, 1.0, 4)
    with sp.loops(sp.Loops.AUTO):
        x, y = _loop(offset)
        fn = sp.compile([x], y, backend="numba", disk_cache=False)
    loop = next(n.op for n in fn.fn.maker.fgraph.apply_nodes if isinstance(n.op, CompiledLoop))
    assert loop.kind is sp.Loops.AUTO
    first = float(fn(value))
    assert loop._stand_in is not None and loop._fn is None        # interpreted first
    assert np.isclose(first, _expected(value, offset), rtol=1e-13)
    deadline = time.monotonic() + 600
    while loop._fn is None and time.monotonic() < deadline:
        time.sleep(0.5)
        assert np.isclose(float(fn(value)), first, rtol=1e-13)
    assert loop._fn is not None and loop._stand_in is None, "the background compile never ended"
    assert np.isclose(float(fn(value)), first, rtol=1e-13)
    # A new function of the same loop finds it compiled at once.
    with sp.loops(sp.Loops.AUTO):
        x, y = _loop(offset)
        again = sp.compile([x], y, backend="numba", disk_cache=False)
    assert np.isclose(float(again(value)), first, rtol=1e-13)
    loop = next(n.op for n in again.fn.maker.fgraph.apply_nodes
                if isinstance(n.op, CompiledLoop))
    assert loop._fn is not None and loop._stand_in is None


def test_interpreted_graphs_leave_no_elementwise_node_to_python():
    """`split_elementwise`: a fused node, sums and products of many terms,
    casts and clips become nodes NumPy runs whole (binary `add`/`multiply`,
    array casts, `clip`), with the same values; a node of more operands
    than a ufunc takes too."""
    import pytensor.scalar as ps
    from pytensor.graph import FunctionGraph
    from pytensor.scalar import Composite
    from pytensor.tensor.elemwise import Elemwise

    from symphys.compiler.backends import interpreted_mode
    from symphys.compiler.loops import UFUNC_OPERANDS, split_elementwise

    xs = [pt.vector(f"x{k}") for k in range(UFUNC_OPERANDS + 3)]
    a, b, c = (ps.float64(n) for n in "abc")
    fused = Elemwise(Composite([a, b, c], [ps.exp(a) * b + c]))
    outputs = [pt.mul(*xs[:3]), pt.add(*xs), fused(*xs[:3]), pt.cast(xs[0] * 3, "int64"),
               pt.clip(xs[1], -0.5, 0.5), pt.cast(xs[2] > 0, "float64")]
    fgraph = FunctionGraph(xs, outputs, clone=True)
    split_elementwise(fgraph)
    for node in fgraph.apply_nodes:
        if not isinstance(node.op, Elemwise):
            continue                       # the clip's bounds broadcast (DimShuffle)
        assert not isinstance(node.op.scalar_op, Composite), node
        nfunc = node.op.nfunc_spec
        assert nfunc is not None and nfunc[1] == len(node.inputs), node
    rng = np.random.default_rng(0)
    values = [rng.normal(size=4) for _ in xs]
    got = pytensor.function(fgraph.inputs, fgraph.outputs,
                            mode=interpreted_mode())(*values)
    want = [np.prod(values[:3], axis=0), np.sum(values, axis=0),
            np.exp(values[0]) * values[1] + values[2], (values[0] * 3).astype(np.int64),
            np.clip(values[1], -0.5, 0.5), (values[2] > 0).astype(np.float64)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-14)
