"""From graph to function: symphys' rewrites, the backends, compiled loops,
the caches and export."""
