"""The declared stages, found by module and name.

`ops.stage_ops` registers each stage with its Op classes here; the Numba
entries (`entry_numba`), which a worker process compiles from a stage's
name alone, and unpickled graphs look them up.
"""

from __future__ import annotations

import importlib

# (module, name) -> (Stage, forward Op class, pullback Op class)
REGISTRY: dict = {}


def stage_named(module: str, name: str):
    """The `Stage` called `name` declared in `module` (imported if need be)."""
    importlib.import_module(module)
    return REGISTRY[(module, name)][0]


def stage_cache_key(stage) -> str:
    """What a stage's compiled Numba code depends on: its name, version and
    the source of its kernels (not the params, which the entries take at
    run time)."""
    return f"symphys_{stage.module}.{stage.name}_v{stage.version}_{stage.source_hash()}"
