"""On-disk store of whole compiled functions, found before any graph is built.

`rewritten_graphs` finds a function by its graph, so a process must build the
graph first: the rollout, the step's VJP and `pytensor.grad`, most of a warm
compile of a gradient. This store finds a function by what its graph is made
from instead: the entry point, the scene's structure, the step count, batch
and options, a print of the loss applied to a stand-in trajectory
(`loss_text`), the rewrites chosen, and a digest of symphys' own source
(an edited engine never reads an entry written by another).

An entry (`<key>.fn.json`) names the rewritten graph stored by
`rewritten_graphs`, which Numba and the CVM link as it is. For JAX it also holds
the function exported with `jax.export` (`<key>.jax`), which a later process
calls without building, reading, converting or tracing any graph, and XLA's
compiled executable for this host (`<key>.<host>.xla`, written by the first
call), so that the later process does not run XLA's compile either.

The store shares `rewritten_graphs`'s folder and switch (`SYMPHYS_CACHE_DIR`;
an empty value turns both off).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sys
from pathlib import Path

import numpy as np

from symphys import storage
from symphys.compiler.backends import (REWRITES_LOOPS_IN_PLACE, Backend, Compiled, jax_with_float64,
                                       mode_for)
from symphys.compiler.caches import rewritten_graphs
from symphys.storage import source_digest
from symphys.errors import ParameterError, counted
from symphys.loop.rollout import trajectory_from_states
from symphys.physics.model import STATE_SIZE
from symphys.version import __version__

_log = logging.getLogger(__name__)
FORMAT = 1     # bump when what an entry holds changes


def loss_text(scene, loss, batched: bool, stride: int = 1, extra=()) -> str | None:
    """A print of `loss` applied to a stand-in trajectory (symbolic packed
    states (T, B, N, 18)) and the symbolic `extra` arguments, the
    same in every process for the same loss; None when the loss reaches
    other symbolic values (shared variables, other inputs: not storable) or
    fails on the stand-in (the real build reports the error)."""
    import pytensor.tensor as pt
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import graph_inputs


    n = len(scene.bodies)
    states = pt.tensor("states", dtype="float64", shape=(None, None, n, STATE_SIZE))
    try:
        out = loss(trajectory_from_states(scene, states, batched, stride=stride), *extra)
        # An aux function may give several outputs.
        values = [pt.as_tensor_variable(v)
                  for v in (out if isinstance(out, (list, tuple)) else [out])]
    except Exception:     # noqa: BLE001 - the real build raises it where it belongs
        return None
    own = {states} | set(extra)
    if any(v not in own for v in graph_inputs(values) if not isinstance(v, Constant)):
        return None
    return rewritten_graphs.graph_text(values)


def function_key(parts: tuple, backend: Backend) -> str:
    """Hex digest of an entry point's `parts` (plain values with a stable
    repr) on `backend`, with the versions of everything that shapes the code."""
    import pytensor

    h = hashlib.sha256()
    versions = [f"format={FORMAT}", __version__, source_digest(),
                pytensor.__version__, np.__version__, sys.version, backend.value]
    if backend is Backend.JAX:
        import jax
        versions += [jax.__version__, jax.default_backend()]
    for part in versions + [repr(parts)]:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _paths(key: str) -> tuple[Path, Path] | None:
    """(entry, exported artifact) paths of `key`; None with the store off."""
    folder = storage.cache_dir()
    if folder is None:
        return None
    return folder / f"{key}.fn.json", folder / f"{key}.jax"


def _executable_path(key: str) -> Path:
    """Where this host's XLA executable of entry `key` is kept."""
    return storage.cache_dir() / f"{key}.{host_fingerprint()}.xla"


@functools.lru_cache(maxsize=1)
def host_fingerprint() -> str:
    """What an XLA executable compiled in this process depends on: jaxlib's
    version, the device kind and count (an executable loaded in a process
    with more devices is laid out for the wrong number), and the CPU's
    model and feature flags (XLA compiles CPU code for the host's
    instruction set)."""
    import platform

    import jax
    import jaxlib

    parts = [jaxlib.__version__, platform.machine(), jax.devices()[0].device_kind,
             f"devices={jax.device_count()}"]
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text().splitlines()
        parts += sorted({ln for ln in lines if ln.startswith(("model name", "flags"))})
    else:
        parts.append(platform.processor())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _initialize_lapack() -> None:
    """Point jaxlib's CPU LAPACK kernels (Cholesky, solves) at their
    routines, which JAX does when it lowers a linear-algebra op: an
    executable read back without lowering segfaults on its first call
    otherwise."""
    try:
        from jax._src.lax.linalg import initialize_lapack
    except ImportError:        # a JAX without it initialises on import
        return
    initialize_lapack()


class ExportedFunction:
    """A JAX function read back from a `jax.export` artifact: called with
    NumPy values, returns the list of outputs.

    inputs: [(name, shape, dtype)] of the exported function's arguments.
    exported: the `jax.export.Exported` it calls (`symphys.compiler.export.write` writes it).
    executable: where XLA's compiled executable for this host is kept: read
    if it is there, else written after the first call compiles it (so a
    later process skips XLA's compile too)."""

    def __init__(self, exported, inputs, executable: Path | None = None):
        jax = jax_with_float64()
        self.inputs = [(name, tuple(shape), np.dtype(dtype)) for name, shape, dtype in inputs]
        self.exported = exported
        self._jit = jax.jit(exported.call)
        self._executable = executable
        self._run = None
        if executable is not None and executable.exists():
            try:
                from jax.experimental import serialize_executable
                _initialize_lapack()
                # compiled for the default device: loaded there alone (by default
                # JAX loads it onto every device, and a process with several
                # then expects each input split into that many shards)
                self._run = serialize_executable.deserialize_and_load(
                    executable.read_bytes(), exported.in_tree, exported.out_tree,
                    execution_devices=jax.devices()[:1])
            except Exception as err:   # noqa: BLE001 - compile it again instead
                _log.warning("symphys: ignoring unreadable executable %s (%s: %s)",
                             executable, type(err).__name__, err)

    def _compile(self, values):
        """XLA's executable for these inputs, kept on disk when a path is set."""
        compiled = self._jit.lower(*values).compile()
        if self._executable is not None:
            try:
                from jax.experimental import serialize_executable
                payload = serialize_executable.serialize(compiled)[0]
                storage.write_atomically(self._executable, payload)
            except Exception as err:   # noqa: BLE001 - the function still runs
                _log.warning("symphys: executable not kept (%s: %s)",
                             type(err).__name__, err)
        return compiled

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise ParameterError(f"compiled function takes {counted(len(self.inputs), 'input')} "
                                 f"{[n for n, _, _ in self.inputs]}, got {len(args)}")
        values = []
        for value, (name, shape, dtype) in zip(args, self.inputs):
            value = np.asarray(value, dtype=dtype)
            if value.shape != shape:
                raise ParameterError(f"compiled function input {name!r}: expected shape "
                                     f"{shape}, got {value.shape}")
            values.append(value)
        if self._run is None:
            self._run = self._compile(values)
        return list(self._run(*values))


def load(key: str, backend: Backend) -> Compiled | None:
    """The function stored under `key`, or None (no entry, or one that
    cannot be read: a warning, and the caller builds afresh)."""
    paths = _paths(key)
    if paths is None or not paths[0].exists():
        return None
    entry_path, jax_path = paths
    try:
        entry = json.loads(entry_path.read_text())
        if entry["format"] != FORMAT or entry["backend"] != backend.value:
            return None
        if entry["jax"]:
            from jax import export
            exported = export.deserialize(bytearray(jax_path.read_bytes()))
            fn = ExportedFunction(exported, entry["inputs"], _executable_path(key))
            return Compiled(fn, backend, entry["input_names"], single=entry["single"],
                            graph_key=entry["graph_key"], rewrites_on=entry["rewrites"])
        mode = mode_for(backend, entry["rewrites"])
        fn = rewritten_graphs.load(entry["graph_key"], mode,
                                backend in REWRITES_LOOPS_IN_PLACE)
        if fn is None:
            return None
        return Compiled(fn, backend, entry["input_names"], single=entry["single"],
                        graph_key=entry["graph_key"], rewrites_on=entry["rewrites"])
    except Exception as err:   # noqa: BLE001 - a stale or damaged entry: build afresh
        _log.warning("symphys: ignoring unreadable function store entry %s (%s: %s)",
                     entry_path, type(err).__name__, err)
        return None


def _export_jax(fn) -> tuple | None:
    """(`jax.export.Exported`, its serialised bytes, [(name, shape, dtype)]
    of its inputs) of a PyTensor function compiled for JAX, or None when its
    inputs' shapes are not all known or it does not export."""
    import jax
    from jax import export

    inputs = fn.maker.fgraph.inputs
    if any(None in v.type.shape for v in inputs):
        return None
    jitted = getattr(getattr(fn, "vm", None), "jit_fn", None)
    if not hasattr(jitted, "trace"):       # PyTensor wrapped it (static shape inputs)
        return None
    specs = [jax.ShapeDtypeStruct(v.type.shape, v.type.dtype) for v in inputs]
    try:
        exported = export.export(jitted)(*specs)
        blob = exported.serialize()
    except Exception as err:   # noqa: BLE001 - the function still works, unstored
        _log.warning("symphys: function not exported for the store (%s: %s)",
                     type(err).__name__, err)
        return None
    return exported, bytes(blob), [(v.name, list(v.type.shape), v.type.dtype) for v in inputs]


def store(key: str, compiled: Compiled) -> Compiled:
    """Keep `compiled` (built by `backends.compile`, its graph in
    `rewritten_graphs`) under `key`, and return the function to use: on JAX
    the exported one, whose first call compiles and keeps XLA's executable
    (the PyTensor function is then never compiled by XLA); else `compiled`."""
    paths = _paths(key)
    if paths is None or compiled.graph_key is None:
        return compiled
    entry = {"format": FORMAT, "backend": compiled.backend.value,
             "graph_key": compiled.graph_key, "rewrites": compiled.rewrites_on,
             "input_names": compiled.input_names,
             "single": compiled.single, "jax": False, "inputs": None}
    use = compiled
    if compiled.backend is Backend.JAX:
        exported = _export_jax(compiled.fn)
        if exported is not None:
            exported, blob, entry["inputs"] = exported
            entry["jax"] = storage.write_atomically(paths[1], blob)
            use = Compiled(ExportedFunction(exported, entry["inputs"], _executable_path(key)),
                           compiled.backend, compiled.input_names, single=compiled.single,
                           graph_key=compiled.graph_key, rewrites_on=compiled.rewrites_on)
    storage.write_atomically(paths[0], json.dumps(entry).encode())
    return use
