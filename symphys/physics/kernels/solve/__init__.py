"""The solve stage: projected Gauss-Seidel (`pgs_*`) and Newton's method
(`newton_*`), Numba forward and pullback and the JAX twin."""
