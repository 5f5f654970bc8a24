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
(machine code), both kept by those libraries (`symphys.storage.numba_files` replaces a
damaged file of Numba's cache of the kernel entries). The two on-disk
caches share one folder, `cache_dir()`; the folder, the writes and the
locks are `symphys.storage`'s.
"""
