"""Contact geometry: the shape-pair functions, geoms and their pullbacks
(run inside the rows stage's kernels)."""
