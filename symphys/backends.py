"""Compilation backends: one symbolic graph, three ways to run it.

numba (default, CPU, compiled functions cached on disk by PyTensor), jax
(CPU or GPU; float64 is switched on in JAX when this backend is first used)
and cvm (PyTensor's C virtual machine). Options are passed per function;
`pytensor.config` is never changed.
"""

from __future__ import annotations

import enum

import numpy as np
import pytensor
from pytensor.compile.mode import Mode, get_mode

from symphys.errors import BackendError
from symphys.scene_io import closest


class Backend(enum.Enum):
    NUMBA = "numba"
    JAX = "jax"
    CVM = "cvm"


def as_backend(backend: "str | Backend") -> Backend:
    if isinstance(backend, Backend):
        return backend
    try:
        return Backend(str(backend).lower())
    except ValueError:
        names = [b.value for b in Backend]
        raise BackendError(f"unknown backend {backend!r}{closest(str(backend), names)}; "
                           f"choose one of {names}") from None


def mode_for(backend: "str | Backend") -> Mode:
    """The PyTensor compilation mode of a backend."""
    backend = as_backend(backend)
    if backend is Backend.NUMBA:
        return get_mode("NUMBA")
    if backend is Backend.JAX:
        try:
            import jax
        except ImportError:
            raise BackendError("backend 'jax' needs JAX: pip install 'symphys[jax]'") from None
        # float64 gradients need x64 in JAX (a JAX setting, not PyTensor's).
        jax.config.update("jax_enable_x64", True)
        return get_mode("JAX")
    return Mode(linker="cvm", optimizer="fast_run")


class Compiled:
    """A compiled PyTensor function whose outputs are always NumPy arrays."""

    def __init__(self, fn, backend: Backend, input_names):
        self.fn = fn
        self.backend = backend
        self.input_names = list(input_names)

    def __call__(self, *args):
        out = self.fn(*args)
        if isinstance(out, (list, tuple)):
            return [np.asarray(o) for o in out]
        return np.asarray(out)


def compile(inputs, outputs, backend: "str | Backend" = "numba", **kwargs) -> Compiled:
    """Compile `outputs` as a function of `inputs` on `backend`."""
    backend = as_backend(backend)
    fn = pytensor.function(list(inputs), outputs, mode=mode_for(backend),
                           on_unused_input="ignore", **kwargs)
    return Compiled(fn, backend, [getattr(i, "name", None) for i in inputs])
