"""Numba compiles a graph's loops; the graph around them runs as it is.

A rollout's graph is a time loop (a `Scan`: the step, repeated) and the
nodes around it that run once per call: the model built from the named
parameters, the packing, the loss and, in a gradient, the loop's cotangents.
PyTensor's Numba backend compiles every node into one function, and its
compile time grows with the node count: the nodes around a quadruped's
loop (about a thousand, one per body and field) cost minutes, while running
them takes well under a millisecond.

So the `numba` mode compiles only the loops. After PyTensor's rewrites,
`RunLoops` replaces each outermost `Scan` node by a `CompiledLoop`,
which runs a Numba function of that one node (compiled on first call, and
cached on disk by PyTensor under a key of the loop alone). `LoopLinker`
runs a graph holding loops with PyTensor's Python VM, node by node, and
compiles a graph without loops with Numba whole (except under
`Loops.INTERPRETED`, which runs every graph in the VM).

Compiling a loop takes seconds to a minute the first time (then it is on
disk); interpreting it takes none, and the step's work is in the stage
kernels, compiled either way. `Loops` says how the `numba` mode runs loops:

- `Loops.COMPILED`: compiled on the first call (blocking);
- `Loops.INTERPRETED`: each loop's inner graph in the Python VM
  (`interpreted_scan`); a quadruped's value and gradient then run about 2x
  slower than compiled, the ball's about 10-30x;
- `Loops.AUTO` (the default): compiled when this machine has compiled the
  loop before, else interpreted while a background process compiles it
  (one per loop and machine: `symphys.compiler.background`); the calls
  after that run compiled. Values from the two agree to about
  1e-12 (not bit for bit); choose one of the others where a run must be
  reproduced bit for bit.

`loops_run()` says which is in force: the `loops()` context, else the
`SYMPHYS_LOOPS` environment variable, else `Loops.AUTO`.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import os
import pickle
import sys

import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.compile.io import In
from pytensor.compile.mode import Mode, get_mode
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import GraphRewriter
from pytensor.link.numba.linker import NumbaLinker
from pytensor.link.vm import VMLinker
from pytensor.scalar.basic import Composite
from pytensor.scan.op import Scan
from pytensor.tensor.elemwise import Elemwise

from symphys.compiler import background
from symphys.compiler.caches import rewritten_graphs
from symphys.storage import source_digest
from symphys.errors import SymphysError


class Loops(enum.Enum):
    """How the `numba` mode runs a graph's loops (`Scan`s)."""
    COMPILED = "compiled"          # Numba, each loop on its own (cached on disk)
    INTERPRETED = "interpreted"    # PyTensor's Python VM, kernels compiled
    AUTO = "auto"                  # compiled if on disk, else interpreted until it is


_LOOPS: contextvars.ContextVar["Loops | None"] = contextvars.ContextVar("symphys_loops",
                                                                      default=None)


def loops_run() -> Loops:
    """The `Loops` in force: the `loops()` context, else `SYMPHYS_LOOPS`,
    else `Loops.AUTO`."""
    chosen = _LOOPS.get()
    if chosen is not None:
        return chosen
    text = os.environ.get("SYMPHYS_LOOPS", Loops.AUTO.value)
    try:
        return Loops(text.strip().lower())
    except ValueError:
        raise SymphysError(f"SYMPHYS_LOOPS={text!r}: expected one of "
                           f"{[k.value for k in Loops]}") from None


@contextlib.contextmanager
def loops(kind: "Loops | str"):
    """Functions compiled inside run their loops as `kind`."""
    token = _LOOPS.set(Loops(kind))
    try:
        yield
    finally:
        _LOOPS.reset(token)

# After every PyTensor rewrite, in-place ones included (those run at 49-50).
POSITION = 100.0


class CompiledLoop(Op):
    """A `Scan` run as a Numba function of itself alone.

    Same inputs, outputs and in-place behaviour as the scan. With
    `Loops.COMPILED` the function is compiled on the first call (PyTensor
    keeps the machine code on disk, keyed by the loop's graph). With
    `Loops.AUTO` a loop not yet compiled on this machine runs interpreted
    while a background process compiles it (`background_compile`); the
    calls after that process has finished run compiled."""

    __props__ = ("scan", "kind")

    def __init__(self, scan: Scan, kind: Loops = Loops.COMPILED):
        self.scan = scan
        self.kind = Loops(kind)
        self.destroy_map = dict(scan.destroy_map)
        self.view_map = dict(getattr(scan, "view_map", {}))
        self._fn = None
        self._stand_in = None      # interpreted function (AUTO, while compiling)
        self._compiling = None     # the background compile's process
        self._said_failed = False

    @property
    def loop(self) -> Scan:
        """The scan as compiled (its inner graph rewritten by Numba's
        conversion) once the function exists, else as given."""
        if self._fn is None:
            return self.scan
        return next(n.op for n in self._fn.maker.fgraph.apply_nodes if isinstance(n.op, Scan))

    @property
    def fgraph(self):
        """The loop's inner graph (for code that walks a graph's loops)."""
        return self.loop.fgraph

    def make_node(self, *inputs):
        node = self.scan.make_node(*inputs)
        return Apply(self, list(node.inputs), [o.type() for o in node.outputs])

    def _build(self, scan: Scan, types, linker):
        fresh = [t() for t in types]
        outs = scan.make_node(*fresh).outputs
        destroyed = {k for ks in self.destroy_map.values() for k in ks}
        inputs = [In(v, mutable=k in destroyed) for k, v in enumerate(fresh)]
        return pytensor.function(inputs, outs, mode=Mode(linker=linker, optimizer=None),
                                 accept_inplace=True, on_unused_input="ignore")

    def compiled(self, types):
        """The loop compiled by Numba for inputs of `types` (from the disk
        cache when it holds it)."""
        if self._fn is None:
            self._fn = self._build(self.scan, types, NumbaLinker())
            self._stand_in = None
        return self._fn

    def _current(self, node, inputs):
        """The function to run now: compiled, or (AUTO, compile under way)
        the interpreted stand-in."""
        if self._fn is not None or self.kind is Loops.COMPILED:
            return self.compiled([i.type for i in node.inputs])
        if self._compiling is None:
            self._compiling = background_compile(self, node, inputs)
        done = self._compiling is True or self._compiling.poll()
        if done is True or done == 0:
            return self.compiled([i.type for i in node.inputs])
        if done is not None and not self._said_failed:
            self._said_failed = True
            print(f"symphys: compiling a loop in the background failed (exit {done}); it "
                  "stays interpreted", file=sys.stderr, flush=True)
        if self._stand_in is None:
            self._stand_in = self._build(interpreted_scan(self.scan),
                                         [i.type for i in node.inputs],
                                         VMLinker(use_cloop=False, c_thunks=False))
        return self._stand_in

    def perform(self, node, inputs, output_storage):
        results = self._current(node, inputs)(*inputs)
        results = results if isinstance(results, (list, tuple)) else [results]
        for store, value in zip(output_storage, results):
            store[0] = value

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_fn=None, _stand_in=None, _compiling=None)
        return state


def _loop_key(op: CompiledLoop, node) -> str:
    fresh = [i.type() for i in node.inputs]
    outs = op.scan.make_node(*fresh).outputs
    return rewritten_graphs.graph_key(fresh, outs, f"numba-loop-{source_digest()}")


def background_compile(op: CompiledLoop, node, inputs):
    """True when the loop is compiled on this machine already; else its
    compile in a background process (`background.start`: started here, or
    another process's under way), which runs it once on `inputs`."""
    key = _loop_key(op, node)
    if background.done_marker(key).exists():
        return True
    return background.start(key, pickle.dumps((op.scan, [i.type for i in node.inputs],
                                               list(inputs))))


# NumPy's ufuncs, which the Python VM runs elementwise nodes with, take at
# most this many operands.
UFUNC_OPERANDS = 32


def _elementwise(scalar_op, args) -> list:
    """`Elemwise(scalar_op)(*args)` as nodes NumPy runs whole: a fused op
    (`Composite`, which the Python VM would evaluate element by element in
    Python) one scalar operation at a time, and a sum or product of more
    than two terms (NumPy's `add` and `multiply` take two; the VM would
    call Python per element) as a chain of binary ones; casts and clips
    through NumPy's (`_numpy_spec`)."""
    if isinstance(scalar_op, Composite):
        value = dict(zip(scalar_op.fgraph.inputs, args))
        for inner in scalar_op.fgraph.toposort():
            inner_args = [value[i] if i in value else pt.constant(i.data, dtype=i.type.dtype)
                          for i in inner.inputs]
            value.update(zip(inner.outputs, _elementwise(inner.op, inner_args)))
        return [value[o] for o in scalar_op.fgraph.outputs]
    spec = _numpy_spec(scalar_op)
    if spec is not None:
        return Elemwise(scalar_op, nfunc_spec=spec)(*args, return_list=True)
    if _variadic(scalar_op, len(args)):
        total = args[0]
        for term in args[1:]:          # left to right, as the compiled loop adds
            total = Elemwise(scalar_op)(total, term)
        return [total]
    if len(args) + scalar_op.nout <= UFUNC_OPERANDS:
        return Elemwise(scalar_op)(*args, return_list=True)
    raise NotImplementedError(f"an elementwise {scalar_op} of {len(args)} operands")


def _numpy_spec(scalar_op) -> tuple[str, int, int] | None:
    """(NumPy function, inputs, outputs) that computes `scalar_op` on whole
    arrays where PyTensor names none (a cast, a clip): without one the
    Python VM calls Python once per element."""
    if isinstance(scalar_op, ps.Cast):
        return (scalar_op.o_type.dtype, 1, 1)       # np.float64(array): an array cast
    if isinstance(scalar_op, ps.Clip):
        return ("clip", 3, 1)
    return None


def _variadic(scalar_op, operands: int) -> bool:
    """A sum or product of more than two terms."""
    return isinstance(scalar_op, (ps.Add, ps.Mul)) and operands > 2


def _splittable(node) -> bool:
    return isinstance(node.op, Elemwise) and (
        isinstance(node.op.scalar_op, Composite)
        or (node.op.nfunc_spec is None and _numpy_spec(node.op.scalar_op) is not None)
        or _variadic(node.op.scalar_op, len(node.inputs))
        or len(node.inputs) + len(node.outputs) > UFUNC_OPERANDS)


def split_elementwise(fgraph) -> None:
    """Replace, in place, the fused elementwise nodes of `fgraph` and those
    with more operands than a NumPy ufunc takes (`_elementwise`): the graph
    is about to run in the Python VM."""
    for node in list(fgraph.toposort()):
        if _splittable(node):
            new = _elementwise(node.op.scalar_op, list(node.inputs))
            fgraph.replace_all_validate(list(zip(node.outputs, new)), reason="split_elementwise")


def _interpreted_inner(scan: Scan) -> Mode:
    """The mode of an interpreted loop's inner graph: the loop's own rewrites
    less elementwise fusion and in-place operations, nested loops
    interpreted too, PyTensor's Python VM.

    (In place, an outer loop's carried value could be written into the
    storage of a nested loop's result, which the Python VM hands back to
    that nested loop on its next call: the checkpointed reverse pass
    then lost the leaves' gradients of every segment but the last.)"""
    base = Mode("cvm", "fast_run") if scan.mode in (None, "FAST_RUN") else get_mode(scan.mode)
    mode = Mode(linker=VMLinker(use_cloop=False, c_thunks=False),
                optimizer=base.provided_optimizer).excluding("fusion", "inplace")
    return mode.register((RunLoops(Loops.INTERPRETED), POSITION))


def interpreted_scan(scan: Scan) -> Scan:
    """A copy of `scan` whose inner graph runs in the Python VM (the stage
    kernels it calls run compiled)."""
    new = scan.clone()
    new.mode = _interpreted_inner(scan)
    new._fn = None
    return new


class RunLoops(GraphRewriter):
    """Each outermost `Scan` node becomes a `CompiledLoop` or an
    `interpreted_scan`, as `kind` says; then, in a graph that had loops (it
    runs in the Python VM), `split_elementwise`."""

    def __init__(self, kind: Loops):
        super().__init__()
        self.kind = Loops(kind)

    def add_requirements(self, fgraph):
        pass

    def apply(self, fgraph):
        from symphys.physics.kernels.ops import prepare_kernels   # brings Numba and JAX in

        prepare_kernels(fgraph)
        loops = [n for n in fgraph.toposort() if isinstance(n.op, Scan)]
        for node in loops:
            if self.kind is not Loops.INTERPRETED:
                new = CompiledLoop(node.op, self.kind).make_node(*node.inputs).outputs
            else:
                new = interpreted_scan(node.op).make_node(*node.inputs).outputs
            fgraph.replace_all_validate(list(zip(node.outputs, new)), reason="run_loops")
        if loops or self.kind is Loops.INTERPRETED:
            split_elementwise(fgraph)


def outer_loops(fgraph) -> list:
    """The `Scan` ops of `fgraph`'s outermost loops, compiled on their own or not."""
    return [n.op.loop if isinstance(n.op, CompiledLoop) else n.op
            for n in fgraph.apply_nodes if isinstance(n.op, (Scan, CompiledLoop))]


def has_loops(fgraph) -> bool:
    return any(isinstance(n.op, (CompiledLoop, Scan)) for n in fgraph.apply_nodes)


class LoopLinker(NumbaLinker):
    """Numba's linker for a graph without loops; PyTensor's Python VM (no
    compilation) for one with loops (`CompiledLoop`s or interpreted ones),
    and for every graph when `kind` is `Loops.INTERPRETED`."""

    def __init__(self, *args, kind: Loops = Loops.COMPILED, **kwargs):
        super().__init__(*args, **kwargs)
        self.kind = Loops(kind)

    def accept(self, fgraph, no_recycling=None, profile=None):
        if self.kind is Loops.INTERPRETED or has_loops(fgraph):
            return VMLinker(use_cloop=False, c_thunks=False).accept(fgraph, no_recycling,
                                                                     profile)
        return super().accept(fgraph, no_recycling, profile)


def numba_mode(base: Mode, kind: "Loops | None" = None) -> Mode:
    """`base` (PyTensor's NUMBA mode) with `LoopLinker` and `RunLoops(kind)`
    (None: `loops_run()`)."""
    kind = kind or loops_run()
    mode = Mode(linker=LoopLinker(kind=kind), optimizer=base.provided_optimizer)
    if kind is Loops.INTERPRETED:
        # A loop run by the Python VM gains little from writing its results
        # in place, and trying each result costs a shape inference over the
        # whole loop body (minutes for the camera's closed loop).
        mode = mode.excluding("scan_make_inplace")
    return mode.register((RunLoops(kind), POSITION))
