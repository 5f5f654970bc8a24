"""Suite-wide fixtures."""

import gc
import sys

import pytest

from symphys import function_cache


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_functions():
    """Let go of a module's compiled functions when it ends (symphys'
    in-process cache and JAX's compiled executables). Holding every graph
    the suite compiles took the test process past 21 GB on a 24 GB machine
    (session 13); a later module that needs a graph again reads it from the
    on-disk caches."""
    yield
    function_cache.clear_cache()
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
    gc.collect()
