"""symphys' three caches of compiled work, from the top down.

- `compiled_functions`: the functions compiled in this process, keyed by
  what shapes their graph (scene structure, steps, backend, loss). Nothing
  is compiled twice in one process.
- `function_files`: whole compiled functions on disk, keyed by what their
  graph is made from, so that a later process finds one before building any
  graph (for JAX, the exported function and XLA's executable).
- `rewritten_graphs`: graphs after PyTensor's and symphys' rewrites on disk,
  keyed by a print of the graph before rewriting, so that a later process
  that builds the same graph skips the rewrites.

Below them sit PyTensor's compile folder (C modules) and Numba's cache
(machine code), both kept by those libraries. The two on-disk caches share
one folder, `cache_dir()`.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

CACHE_ENV = "SYMPHYS_CACHE_DIR"


def cache_dir() -> Path | None:
    """The folder of the on-disk caches: `$SYMPHYS_CACHE_DIR`, else
    `~/.cache/symphys/graphs`; None when the variable is set to an empty
    string (both on-disk caches off)."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env) if env else None
    return Path.home() / ".cache" / "symphys" / "graphs"


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 of every Python file of the symphys package (names and bytes)."""
    root = Path(__file__).resolve().parents[2]        # symphys/
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()
