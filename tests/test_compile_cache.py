"""The on-disk cache of rewritten graphs (symphys.compile_cache)."""

import numpy as np
import pytensor.tensor as pt

from symphys import compile_cache
from symphys.backends import compile


def _graph(scale):
    x = pt.vector("x")
    return x, (pt.sin(x) * scale + x ** 2).sum()


def test_second_compile_loads_the_rewritten_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    x, y = _graph(3.0)
    first = compile([x], y, backend="numba")
    assert len(list(tmp_path.glob("*.pkl"))) == 1
    calls = []
    real_load = compile_cache.load
    monkeypatch.setattr(compile_cache, "load",
                        lambda key, mode: calls.append(key) or real_load(key, mode))
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
    key = compile_cache.graph_key([x], [y], "numba")
    assert key == compile_cache.graph_key([x], [_graph(3.0)[1]], "numba")
    assert key != compile_cache.graph_key([x], [y_other], "numba")
    assert key != compile_cache.graph_key([x], [y], "jax")
    big = pt.vector("x")
    a = (big * np.arange(1000.0)).sum()
    c = np.arange(1000.0)
    c[500] = -1.0                               # hidden in a printed summary
    b = (big * c).sum()
    assert compile_cache.graph_key([big], [a], "numba") != compile_cache.graph_key(
        [big], [b], "numba")


def test_cache_switched_off_by_empty_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", "")
    assert compile_cache.cache_dir() is None
    x, y = _graph(2.0)
    assert float(compile([x], y, backend="cvm")(np.zeros(3))) == 0.0
