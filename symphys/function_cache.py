"""The in-process cache of compiled functions.

Every entry point that compiles (`simulate`, `value_and_grad`, the
closed-loop losses, the experiments) keys its function by what shapes the
graph (scene structure, steps, backend, loss identity) and builds it once per
process. PyTensor's and symphys' on-disk caches sit below this one.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

from symphys import rewrites
from symphys.backends import Compiled
from symphys.rollout import quiet_graph_building

_CACHE: dict = {}
COMPILE_SECONDS: dict = {}   # cache key -> seconds spent compiling it


def cached(key, build: Callable[[], Compiled], backend) -> Compiled:
    """The function stored under `key`, built (and timed) on first use for
    `backend`, with symphys' rewrites as `rewrites.enabled(backend)` says
    (part of the key)."""
    key = (key, rewrites.enabled(backend))
    if key not in _CACHE:
        start = time.perf_counter()
        with quiet_graph_building(), rewrites.for_backend(backend):
            _CACHE[key] = build()
        COMPILE_SECONDS[key] = time.perf_counter() - start
    return _CACHE[key]


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
