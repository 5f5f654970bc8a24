"""The integrate stage: the pose update, Numba forward and pullback and
the JAX twin."""
