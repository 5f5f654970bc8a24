"""The rows stage: every step's rows (joints, drives, contacts), Numba
forward and pullback and the JAX twin."""
