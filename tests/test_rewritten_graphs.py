"""The on-disk cache of rewritten graphs (symphys.compiler.caches.rewritten_graphs)."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.basic import Constant
from pytensor.link.vm import Loop, Stack
from pytensor.scan.op import Scan

from symphys import storage
from symphys.compiler.backends import compile
from symphys.compiler.caches import rewritten_graphs
from symphys.compiler.loops import CompiledLoop, Loops, loops


def _graph(scale):
    x = pt.vector("x")
    return x, (pt.sin(x) * scale + x ** 2).sum()


def test_second_compile_loads_the_rewritten_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    x, y = _graph(3.0)
    first = compile([x], y, backend="numba")
    assert len(list(tmp_path.glob("*.pkl"))) == 1
    calls = []
    real_load = rewritten_graphs.load
    monkeypatch.setattr(rewritten_graphs, "load",
                        lambda key, *a: calls.append(key) or real_load(key, *a))
    x2, y2 = _graph(3.0)                       # the same graph, built again
    second = compile([x2], y2, backend="numba")
    assert calls and second.fn is not first.fn
    assert second.fn.maker.fgraph is not first.fn.maker.fgraph
    value = np.linspace(-1, 1, 5)
    assert float(second(value)) == float(first(value)) == float(
        (np.sin(value) * 3.0 + value ** 2).sum())


def test_key_depends_on_constants_backend_and_inputs():
    x, y = _graph(3.0)
    _, y_other = _graph(3.5)
    key = rewritten_graphs.graph_key([x], [y], "numba")
    assert key == rewritten_graphs.graph_key([x], [_graph(3.0)[1]], "numba")
    assert key != rewritten_graphs.graph_key([x], [y_other], "numba")
    assert key != rewritten_graphs.graph_key([x], [y], "jax")
    big = pt.vector("x")
    a = (big * np.arange(1000.0)).sum()
    c = np.arange(1000.0)
    c[500] = -1.0                               # hidden in a printed summary
    b = (big * c).sum()
    assert rewritten_graphs.graph_key([big], [a], "numba") != rewritten_graphs.graph_key(
        [big], [b], "numba")


def test_cache_switched_off_by_empty_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", "")
    assert storage.cache_dir() is None
    x, y = _graph(2.0)
    assert float(compile([x], y, backend="cvm")(np.zeros(3))) == 0.0


def test_key_ignores_which_equal_constants_are_one_object():
    # Whether two equal constants are one object depends on what the process
    # built before; the key must not (a gradient built after a compile in one
    # process, and without it in another, must find the same entry).
    x = pt.vector("x")
    two = pt.constant(2.0)
    shared = x * two + pt.exp(x) * two
    separate = x * pt.constant(2.0) + pt.exp(x) * pt.constant(2.0)
    consts = [v for v in pytensor.graph.traversal.ancestors([separate])
              if isinstance(v, Constant)]
    assert len({id(c) for c in consts}) == 2
    assert rewritten_graphs.graph_key([x], [shared], "jax") == rewritten_graphs.graph_key(
        [x], [separate], "jax")
    other = x * pt.constant(2.0) + pt.exp(x) * pt.constant(3.0)
    assert rewritten_graphs.graph_key([x], [shared], "jax") != rewritten_graphs.graph_key(
        [x], [other], "jax")


def _nested_loops():
    """x -> sum of 3 outer steps, each an inner 4-step loop, with work in
    both bodies that PyTensor's rewrites change (exp of log, a product by one)."""
    x = pt.vector("x")

    def inner(s):
        return pt.exp(pt.log(s * 1.0 + 1.0)) * 0.5

    def outer(s):
        return pytensor.scan(inner, outputs_info=[s], n_steps=4,
                             return_updates=False)[-1] + pt.sin(s)

    seq = pytensor.scan(outer, outputs_info=[x], n_steps=3, return_updates=False)
    return x, seq.sum()


def _expected(x):
    total = 0.0
    for _ in range(3):
        s = x
        for _ in range(4):
            s = (s + 1.0) * 0.5
        x = s + np.sin(x)
        total += x.sum()
    return total


def test_numba_compiles_outer_loops_on_their_own(tmp_path, monkeypatch):
    """Numba: each outermost loop is a `CompiledLoop` (a Numba function of
    the loop alone; the nested loop inside it), the graph around it runs in
    the Python VM, and the graph read back from disk gives the same value."""
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    value = np.linspace(0.1, 1.0, 3)
    with loops(Loops.COMPILED):
        x, y = _nested_loops()
        first = compile([x], y, backend="numba")        # stored, then read back
        nodes = first.fn.maker.fgraph.apply_nodes
        assert [type(n.op) for n in nodes if isinstance(n.op, (Scan, CompiledLoop))] == [
            CompiledLoop]
        assert isinstance(first.fn.vm, (Loop, Stack))
        assert np.isclose(float(first(value)), _expected(value), rtol=1e-13)
        x2, y2 = _nested_loops()
        second = compile([x2], y2, backend="numba")
        assert float(second(value)) == float(first(value))


def test_numba_interprets_loops_when_asked(tmp_path, monkeypatch):
    """`Loops.INTERPRETED`: the loops stay scans whose inner graphs (the
    nested loop's too) run in the Python VM, with the same value as compiled
    ones; the two kinds are stored under different keys."""
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    value = np.linspace(0.1, 1.0, 3)
    with loops(Loops.INTERPRETED):
        x, y = _nested_loops()
        interpreted = compile([x], y, backend="numba")
        got = float(interpreted(value))
    outer = [n.op for n in interpreted.fn.maker.fgraph.apply_nodes if isinstance(n.op, Scan)]
    assert len(outer) == 1 and isinstance(interpreted.fn.vm, (Loop, Stack))
    inner_vm = outer[0].fn.vm
    assert isinstance(inner_vm, (Loop, Stack))
    nested = [n.op for n in outer[0].fn.maker.fgraph.apply_nodes if isinstance(n.op, Scan)]
    assert len(nested) == 1 and isinstance(nested[0].fn.vm, (Loop, Stack))
    assert np.isclose(got, _expected(value), rtol=1e-13)
    with loops(Loops.COMPILED):
        x2, y2 = _nested_loops()
        compiled = compile([x2], y2, backend="numba")
    assert compiled.graph_key != interpreted.graph_key
    assert any(isinstance(n.op, CompiledLoop) for n in compiled.fn.maker.fgraph.apply_nodes)


@pytest.mark.parametrize("backend", ["jax"])
def test_loops_read_back_are_linked_without_rewriting_again(backend, tmp_path, monkeypatch):
    # JAX rewrites a loop's inner graph in place as it converts it, so the
    # stored graph holds rewritten loops: read back, they are marked and
    # converted as they are.
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    value = np.linspace(0.1, 1.0, 3)
    x, y = _nested_loops()
    first = compile([x], y, backend=backend)        # stored, then read back
    loops = list(rewritten_graphs.loops(first.fn.maker.fgraph))
    assert len(loops) == 2
    assert all(isinstance(op.mode, rewritten_graphs._Rewritten) for op in loops)
    # The stored inner graphs were rewritten by the first conversion.
    assert all("Composite" in str([n.op for n in op.fgraph.apply_nodes]) for op in loops)
    rewritten = []
    real = rewritten_graphs._unchanged
    monkeypatch.setattr(rewritten_graphs, "_unchanged", lambda fg: rewritten.append(fg) or real(fg))
    x2, y2 = _nested_loops()
    second = compile([x2], y2, backend=backend)
    assert len(rewritten) == 2                      # each loop asked, none rewrote
    assert float(second(value)) == float(first(value))
    assert np.isclose(float(second(value)), _expected(value), rtol=1e-13)
