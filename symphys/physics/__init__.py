"""The physics of a step. `kernels` holds the fused step: a scene's
structure as integer and float tables, and a few stage kernels that read
them (Numba and JAX), each with its pullback."""
