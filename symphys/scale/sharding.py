"""A batch of worlds split over JAX devices.

`shard_worlds(fn, batch)` takes a function compiled for JAX with a batch
of `batch` worlds (`value_function`, `value_and_grad_function`,
`symphys.compile`, ... with backend "jax") and runs it with every argument
whose first axis has `batch` entries split along that axis over a
one-axis device mesh ("worlds"), the other arguments copied to every
device. XLA partitions the computation to match: each device steps its
own worlds, and reductions over worlds (a summed loss) are combined across
devices. One code path serves one device and many: several GPUs, or on a
CPU several host devices (`XLA_FLAGS=--xla_force_host_platform_device_count=N`
set before JAX starts).
"""

from __future__ import annotations

import warnings

import numpy as np

from symphys.compiler.backends import Backend, jax_with_float64
from symphys.errors import ParameterError

AXIS = "worlds"


def world_mesh(devices=None):
    """A one-axis mesh ("worlds") over `devices` (default: all of JAX's)."""
    jax = jax_with_float64()
    from jax.sharding import Mesh

    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ParameterError("world_mesh: no devices")
    return Mesh(np.array(devices), (AXIS,))


def _jax_callable(fn):
    """The jitted JAX function inside a JAX `Compiled`."""
    if getattr(fn, "backend", None) is not Backend.JAX:
        raise ParameterError(f"shard_worlds takes a function compiled with backend 'jax', "
                             f"got {getattr(fn, 'backend', type(fn).__name__)}")
    inner = fn.fn
    jitted = getattr(inner, "_jit", None)                     # read from the function store
    if jitted is None:
        jitted = getattr(getattr(inner, "vm", None), "jit_fn", None)   # built by PyTensor
    if jitted is None:
        raise ParameterError("shard_worlds: this JAX function does not expose its jitted "
                             "computation")
    return jitted


class ShardedFunction:
    """`fn` with its batch of worlds split over a device mesh; called with
    NumPy arrays, returns NumPy arrays (`call` keeps JAX's sharded arrays)."""

    def __init__(self, fn, batch: int, devices=None):
        self.jax = jax_with_float64()
        self.fn, self.batch = fn, int(batch)
        self.mesh = world_mesh(devices)
        self.devices = self.mesh.devices.size
        if self.batch % self.devices:
            raise ParameterError(f"shard_worlds: {self.batch} worlds do not split evenly over "
                                 f"{self.devices} devices; use a batch that is a multiple "
                                 f"of {self.devices}")
        self._call = _jax_callable(fn)

    def place(self, value):
        """`value` on the mesh: split along its first axis if it holds one
        entry per world, else copied to every device."""
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        value = np.asarray(value)
        spec = P(AXIS) if value.ndim and value.shape[0] == self.batch else P()
        return self.jax.device_put(value, NamedSharding(self.mesh, spec))

    def call(self, *args):
        """The outputs as JAX arrays, sharded as XLA left them."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Skipping Assert")
            out = self._call(*[self.place(a) for a in args])
        return out

    def __call__(self, *args):
        out = self.call(*args)
        if getattr(self.fn, "single", False) and isinstance(out, (list, tuple)):
            out = out[0]
        if isinstance(out, (list, tuple)):
            return [np.asarray(o) for o in out]
        return np.asarray(out)


def shard_worlds(fn, batch: int, devices=None) -> ShardedFunction:
    """`fn` (compiled for JAX with `batch` worlds) run with its worlds split
    over `devices` (default: every device JAX has)."""
    return ShardedFunction(fn, batch, devices)
