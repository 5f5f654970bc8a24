"""Compilation backends: one symbolic graph, three ways to run it.

numba (default, CPU, compiled functions cached on disk by PyTensor), jax
(CPU or GPU; float64 is switched on in JAX when this backend is first used)
and cvm (PyTensor's C virtual machine). Options are passed per function;
`pytensor.config` is never changed.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import warnings

import numpy as np
import pytensor
from pytensor.compile.mode import Mode, get_mode
from pytensor.graph.rewriting.basic import dfs_rewriter
from pytensor.link.vm import VMLinker
from pytensor.tensor.rewriting.ofg import inline_ofg_expansion

from symphys import adjoint, progress, storage
from symphys.compiler import rewrites
from symphys.compiler.caches import rewritten_graphs
from symphys.compiler.loops import loops_run, numba_mode
from symphys.errors import BackendError, member


class Backend(enum.Enum):
    NUMBA = "numba"
    JAX = "jax"
    CVM = "cvm"


def as_backend(backend: "str | Backend") -> Backend:
    return member(backend, Backend, "backend", BackendError)


# PyTensor rewrites that look for diagonal, symmetric, orthogonal or
# selection matrices through its assumption system. symphys graphs have none
# to simplify, and each query walks the whole graph above a matrix product
# (in a closed-loop gradient, all of the physics): minutes of compile time.
# `useless_symmetric_transpose` also logs assumption conflicts on broadcast
# constants. `local_join_to_repeat` and
# `local_advanced_read_of_write_constant_indices` look for joins of one
# tensor repeated and for reads of a scatter at constant indices, which the
# solver's gathers after scatters are: on the quadruped's forward rollout (JAX, on-disk cache off)
# leaving them out cut PyTensor's compile from 60.7 s to 45.8 s, with the
# same result and run time (0.093 s, 0.082 s); the arm's gradient 108.5 s
# to 104.7 s.
# With `local_advanced_read_of_write_constant_indices` and
# `local_slice_read_of_write` back in, a quadruped step's VJP
# (JAX) ran no faster (interleaved: median 10.6 ms against 10.1 ms; same
# values) and compiled in 235 s against about 190 s (other jobs running).
# `extract_diag_lift_pass` (no diagonals here) walks every node with the
# read-of-write rewrites bundled in, as does `local_slice_read_of_write`:
# leaving them out too took the quadruped's closed-loop gradient (linear
# controller, JAX, cache off) from 451 s to 415 s of PyTensor compile, same
# loss.
# (`pre_local_IncSubtensor_serialize`, which chains sums of scatters into
# one another so that they run in place, stays in: it costs about 30 s of
# rewriting on a quadruped step's gradient, but the step's VJP (JAX, B = 1,
# timed to completion) runs in 6.25 ms with it against 10.1 ms without:
# 3,396 scatters and 41,816 XLA operations per call against 8,522 and
# 46,703.)
EXCLUDED_REWRITES = ("useless_symmetric_transpose", "dot_diag_to_elemwise",
                     "orthogonal_dot_transpose_to_eye", "selection_dot_to_indexing",
                     "local_join_to_repeat", "local_advanced_read_of_write_constant_indices",
                     "local_slice_read_of_write", "extract_diag_lift_pass")


def _with_rewrites(mode: Mode, on: bool) -> Mode:
    mode = mode.excluding(*EXCLUDED_REWRITES)
    return rewrites.register_in(mode) if on else mode


def mode_for(backend: "str | Backend", rewrites_on: bool | None = None) -> Mode:
    """The PyTensor compilation mode of a backend: PyTensor's rewrites less
    the exclusions above, plus symphys' own (`symphys.compiler.rewrites`) when
    `rewrites_on` (None: `rewrites.enabled(backend)`); inside `interpreted`,
    the cvm backend's is `interpreted_mode`."""
    if _runs_as_built(backend):
        return interpreted_mode()
    on = rewrites.enabled(backend) if rewrites_on is None else rewrites_on
    return _with_rewrites(_base_mode(backend), on)


_INTERPRETED: contextvars.ContextVar[bool] = contextvars.ContextVar("symphys_interpreted",
                                                                    default=False)


def interpreted_mode() -> Mode:
    """PyTensor's Python VM with no rewrite but the inlining of loop
    wrappers: a graph runs as built, node by node, with nothing to compile
    (slow to run, instant to start). Intermediate values are kept until the
    call ends (`allow_gc=False`): freeing them early costs the VM a setup
    quadratic in the graph's size, minutes for a robot's reference step."""
    return Mode(linker=VMLinker(allow_gc=False, use_cloop=False, c_thunks=False),
                optimizer=dfs_rewriter(inline_ofg_expansion))


@contextlib.contextmanager
def interpreted():
    """Loops built inside run with `interpreted_mode`, and so do whole
    functions compiled inside for the cvm backend (the tests' reference
    graphs: compiling a robot's reference step to C takes minutes)."""
    token = _INTERPRETED.set(True)
    try:
        yield
    finally:
        _INTERPRETED.reset(token)


def interpreting() -> bool:
    """Whether graphs built now run in PyTensor's Python VM (`interpreted`)."""
    return _INTERPRETED.get()


def _runs_as_built(backend: "str | Backend") -> bool:
    """Whether a function for `backend` compiled now runs as built, in the
    Python VM: the cvm backend inside `interpreted`."""
    return as_backend(backend) is Backend.CVM and interpreting()


def loop_mode() -> Mode:
    """The mode symphys' scans carry for their inner graphs: what PyTensor
    uses when a scan has none (fast_run rewrites; the cvm linker, which the
    cvm backend's scans run their inner function with) less the exclusions
    above, plus symphys' rewrites unless switched off while the graph is
    built. Numba and JAX take only its rewrites when they convert a loop, so
    the choice must travel with the scan."""
    if _INTERPRETED.get():
        return interpreted_mode()
    return _with_rewrites(Mode("cvm", "fast_run"), rewrites.split_loops())


adjoint.use_loop_mode(loop_mode)


def _base_mode(backend: "str | Backend") -> Mode:
    backend = as_backend(backend)
    if backend is Backend.NUMBA:
        return numba_mode(get_mode("NUMBA"))
    if backend is Backend.JAX:
        jax_with_float64()
        return get_mode("JAX")
    return Mode(linker="cvm", optimizer="fast_run")


def jax_with_float64():
    """The `jax` module, with float64 switched on (a JAX setting, not
    PyTensor's: float64 gradients need it); a clear error without JAX."""
    try:
        import jax
    except ImportError:
        raise BackendError("backend 'jax' needs JAX: pip install 'symphys[jax]'") from None
    jax.config.update("jax_enable_x64", True)
    return jax


def serves_any_batch(backend: "str | Backend") -> bool:
    """Whether one batched function of `backend` serves every batch size
    (Numba, CVM); JAX traces shapes, so its functions are specialised."""
    return as_backend(backend) is not Backend.JAX


def static_batch(backend: "str | Backend", batched: bool, batch: int | None) -> int | None:
    """The batch size to compile a batched function for: one size (`batch`,
    which must then be given) where the backend specialises to it
    (`serves_any_batch`), else None."""
    if serves_any_batch(backend) or not batched:
        return None
    if batch is None:
        raise BackendError("the jax backend compiles batched functions for one batch "
                           "size: pass batch=B")
    return int(batch)


class Compiled:
    """A compiled PyTensor function whose outputs are always NumPy arrays.

    graph_key: the `rewritten_graphs` entry holding its rewritten graph (None
    when it is not stored there), compiled with symphys' rewrites
    `rewrites_on`."""

    def __init__(self, fn, backend: Backend, input_names, single: bool = False,
                 graph_key: str | None = None, rewrites_on: bool | None = None):
        self.fn = fn
        self.backend = backend
        self.input_names = list(input_names)
        self.single = single    # fn returns a one-element list for one output
        self.graph_key = graph_key
        self.rewrites_on = rewrites_on
        self._called = False

    def __call__(self, *args):
        if not getattr(self, "_called", True):
            # The backend generates and compiles its code on the first call
            # (JAX traces and XLA compiles; Numba and the C VM build theirs).
            self._called = True
            with progress.waiting(f"first call of a {self.backend.value} function "
                                  "(compiles, then runs)"):
                return self(*args)
        if self.backend is Backend.JAX:
            # JAX traces on a first call (and on each new batch size), and
            # PyTensor then says it drops its run-time broadcast checks:
            # shapes are checked while tracing instead.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Skipping Assert")
                out = self.fn(*args)
        else:
            out = self.fn(*args)
        if self.single:
            out = out[0]
        if isinstance(out, (list, tuple)):
            return [np.asarray(o) for o in out]
        return np.asarray(out)


# Backends whose conversion of a loop rewrites its inner graph in place
# (PyTensor's Numba and JAX Scan dispatch), so a stored graph holds its
# loops rewritten; the CVM rewrites a copy when it compiles a loop.
REWRITES_LOOPS_IN_PLACE = (Backend.NUMBA, Backend.JAX)


def compile(inputs, outputs, backend: "str | Backend" = "numba", *,
            disk_cache: bool = True, rewrites_on: bool | None = None, **kwargs) -> Compiled:
    """Compile `outputs` as a function of `inputs` on `backend`.

    With `disk_cache` (and no extra `pytensor.function` keywords) the
    rewritten graph is kept on disk (`symphys.compiler.caches.rewritten_graphs`), so compiling
    the same graph in another process skips PyTensor's rewrites.
    `rewrites_on` chooses symphys' own rewrites for this graph (None:
    `rewrites.enabled(backend)`); its loops carry the choice made when they
    were built (`rewrites.switched`, `rewrites.for_backend`)."""
    backend = as_backend(backend)
    inputs = list(inputs)
    names = [getattr(i, "name", None) for i in inputs]
    on = rewrites.enabled(backend) if rewrites_on is None else bool(rewrites_on)
    mode = mode_for(backend, on)
    single = not isinstance(outputs, (list, tuple))
    in_place = backend in REWRITES_LOOPS_IN_PLACE
    # A function run as built is not rewritten: there is nothing to keep.
    use_cache = (disk_cache and not kwargs and storage.cache_dir() is not None
                 and not _runs_as_built(backend))
    if use_cache:
        outs = [outputs] if single else list(outputs)
        # Loops carry their own choice, made when they were built.
        rules = EXCLUDED_REWRITES + (
            f"symphys-rewrites={on},loops={rewrites.split_loops()},fused={rewrites.fused()},"
            f"v{rewrites.VERSION}",) + ((f"loops-run={loops_run().value}",)
                                        if backend is Backend.NUMBA else ())
        key = rewritten_graphs.graph_key(inputs, outs, backend.value, rules)
        fn = rewritten_graphs.load(key, mode, in_place)
        if fn is not None:
            return Compiled(fn, backend, names, single=single, graph_key=key, rewrites_on=on)
    fn = pytensor.function(inputs, outputs, mode=mode, on_unused_input="ignore", **kwargs)
    if use_cache and rewritten_graphs.store(key, fn):
        # Run the graph as read back from disk, as a later process will: its
        # node order (and so the key under which Numba caches the generated
        # code) is then the same in both, and the second process finds the
        # compiled machine code too. (Backend code is generated on the
        # first call, so the in-process function is never compiled.)
        reloaded = rewritten_graphs.load(key, mode, in_place)
        if reloaded is not None:
            return Compiled(reloaded, backend, names, single=single, graph_key=key,
                            rewrites_on=on)
    return Compiled(fn, backend, names)
