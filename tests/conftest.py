"""Suite-wide fixtures and settings."""

import gc
import os
import sys

# The suite runs loops interpreted (the stage kernels compiled, the loops in
# PyTensor's Python VM): compiling each test's loops with Numba would take
# most of the suite's time. tests/test_loops.py compiles loops and checks
# them against interpreted ones; tests that need compiled loops say so with
# `symphys.loops(Loops.COMPILED)`.
os.environ.setdefault("SYMPHYS_LOOPS", "interpreted")

import pytensor
import pytest

from symphys.compiler.caches import compiled_functions

# No creation traceback on every graph variable the tests build (PyTensor
# walks the Python stack for each one: a tenth of building a reference
# step's graph). Errors then name the node without where it was made.
pytensor.config.traceback__limit = 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_functions():
    """Let go of a module's compiled functions when it ends (symphys'
    in-process cache and JAX's compiled executables). Holding every graph
    the suite compiles took the test process past 21 GB on a 24 GB machine; a later module that needs a graph again reads it from the
    on-disk caches."""
    yield
    compiled_functions.clear_cache()
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
    gc.collect()
