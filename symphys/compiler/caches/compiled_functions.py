"""The in-process cache of compiled functions.

Every entry point that compiles (`simulate`, `value_and_grad`, the
closed-loop losses, the experiments) keys its function by what shapes the
graph (scene structure, steps, backend, loss identity) and builds it once per
process. Below it sit symphys' on-disk stores: whole functions
(`function_files`, for entry points that can describe their graph without
building it) and rewritten graphs (`rewritten_graphs`); below those, PyTensor's.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

from symphys import progress
from symphys.compiler import rewrites
from symphys.compiler.backends import Backend, Compiled, as_backend, interpreting, jax_with_float64
from symphys.compiler.caches import function_files
from symphys.compiler.loops import loops_run
from symphys.loop.rollout import quiet_graph_building

_CACHE: dict = {}
COMPILE_SECONDS: dict = {}   # cache key -> seconds spent compiling it


def cached(key, build: Callable[[], Compiled], backend,
           described: Callable[[], tuple | None] | None = None) -> Compiled:
    """The function stored under `key`, built (and timed) on first use for
    `backend`, with symphys' rewrites as `rewrites.enabled(backend)` says
    and loops run as `loops_run()` says (both part of the key).

    described: returns what the graph is made from as plain values with a
    stable repr (None: cannot say), the key of the on-disk
    `function_files`: a function found there is not built."""
    if as_backend(backend) is Backend.JAX:
        jax_with_float64()          # without JAX: one BackendError naming the extra
    key = (key, rewrites.enabled(backend), rewrites.fused(backend), loops_run(), interpreting())
    if key not in _CACHE:
        start = time.perf_counter()
        with quiet_graph_building(), rewrites.for_backend(backend):
            _CACHE[key] = _stored_or_built(build, as_backend(backend), described)
        COMPILE_SECONDS[key] = time.perf_counter() - start
    return _CACHE[key]


def _announced(build, backend):
    """`build`, after one line on stderr (compiling is slow the first time
    only: PyTensor and Numba keep what they compiled on disk), with a line
    every `progress.LINE_SECONDS` while it takes."""
    what = f"compiling a {backend.value} function"
    with progress.waiting(what, announce=f"{what} (first run only: it is cached on disk for "
                                         "later runs)"):
        return build()


def _stored_or_built(build, backend, described) -> Compiled:
    parts = described() if described is not None else None
    if parts is None:
        return _announced(build, backend)
    # The loops' rewrites are chosen while the graph is built (for_backend).
    disk_key = function_files.function_key(
        (parts, rewrites.enabled(backend), rewrites.enabled(), rewrites.fused(),
         loops_run().value, interpreting()), backend)
    fn = function_files.load(disk_key, backend)
    if fn is None:
        fn = function_files.store(disk_key, _announced(build, backend))
    return fn


def clear_cache() -> None:
    """Forget compiled functions held in this process (disk caches stay)."""
    _CACHE.clear()
    COMPILE_SECONDS.clear()


class LossKey:
    """Identity of a loss callable for the cache key (held weakly: a new
    function that reuses a dead one's id does not match it)."""

    def __init__(self, fn):
        try:
            self.ref = weakref.ref(fn)
        except TypeError:
            self.ref = lambda fn=fn: fn
        self.id = id(fn)

    def __hash__(self):
        return self.id

    def __eq__(self, other):
        return isinstance(other, LossKey) and self.ref() is other.ref() is not None
