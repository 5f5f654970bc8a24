"""Numba compiles a graph's loops; the graph around them runs as it is.

A rollout's graph is a time loop (a `Scan`: the step, repeated) and the
nodes around it that run once per call: the model built from the named
parameters, the packing, the loss and, in a gradient, the loop's cotangents.
PyTensor's Numba backend compiles every node into one function, and its
compile time grows with the node count: the nodes around a quadruped's
loop (about a thousand, one per body and field) cost minutes, while running
them takes well under a millisecond.

So the `numba` mode compiles only the loops. After PyTensor's rewrites,
`CompileLoops` replaces each outermost `Scan` node by a `CompiledLoop`,
which runs a Numba function of that one node (compiled on first call, and
cached on disk by PyTensor under a key of the loop alone). `LoopLinker`
runs a graph holding such loops with PyTensor's Python VM, node by node,
and compiles any other graph with Numba whole, as before.
"""

from __future__ import annotations

import pytensor
import pytensor.tensor as pt
from pytensor.compile.io import In
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import GraphRewriter
from pytensor.link.numba.linker import NumbaLinker
from pytensor.link.vm import VMLinker
import pytensor.scalar as ps
from pytensor.scalar.basic import Composite
from pytensor.scan.op import Scan
from pytensor.tensor.elemwise import Elemwise

# After every PyTensor rewrite, in-place ones included (those run at 49-50).
POSITION = 100.0


class CompiledLoop(Op):
    """A `Scan` run as a Numba function of itself alone.

    Same inputs, outputs and in-place behaviour as the scan. The function
    is compiled on the first call (PyTensor keeps the machine code on disk,
    keyed by the loop's graph)."""

    __props__ = ("scan",)

    def __init__(self, scan: Scan):
        self.scan = scan
        self.destroy_map = dict(scan.destroy_map)
        self.view_map = dict(getattr(scan, "view_map", {}))
        self._fn = None

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

    def _function(self, node):
        if self._fn is None:
            fresh = [i.type() for i in node.inputs]
            outs = self.scan.make_node(*fresh).outputs
            destroyed = {k for ks in self.destroy_map.values() for k in ks}
            inputs = [In(v, mutable=k in destroyed) for k, v in enumerate(fresh)]
            self._fn = pytensor.function(inputs, outs, mode=Mode(linker=NumbaLinker(),
                                                                   optimizer=None),
                                         accept_inplace=True, on_unused_input="ignore")
        return self._fn

    def perform(self, node, inputs, output_storage):
        results = self._function(node)(*inputs)
        results = results if isinstance(results, (list, tuple)) else [results]
        for store, value in zip(output_storage, results):
            store[0] = value

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fn"] = None
        return state


# NumPy's ufuncs, which the Python VM runs elementwise nodes with, take at
# most this many operands.
UFUNC_OPERANDS = 32


def _elementwise(scalar_op, args) -> list:
    """`Elemwise(scalar_op)(*args)` as nodes NumPy runs whole: a fused op
    (`Composite`, which the Python VM would evaluate element by element in
    Python) one scalar operation at a time, and a sum or product of more
    terms than a ufunc takes in groups."""
    if isinstance(scalar_op, Composite):
        value = dict(zip(scalar_op.fgraph.inputs, args))
        for inner in scalar_op.fgraph.toposort():
            inner_args = [value[i] if i in value else pt.constant(i.data, dtype=i.type.dtype)
                          for i in inner.inputs]
            value.update(zip(inner.outputs, _elementwise(inner.op, inner_args)))
        return [value[o] for o in scalar_op.fgraph.outputs]
    if len(args) + scalar_op.nout <= UFUNC_OPERANDS:
        return Elemwise(scalar_op)(*args, return_list=True)
    if isinstance(scalar_op, (ps.Add, ps.Mul)):
        group = UFUNC_OPERANDS - 1
        while len(args) > group:
            args = [_elementwise(scalar_op, args[k:k + group])[0] if len(args[k:k + group]) > 1
                    else args[k] for k in range(0, len(args), group)]
        return _elementwise(scalar_op, args)
    raise NotImplementedError(f"an elementwise {scalar_op} of {len(args)} operands")


class CompileLoops(GraphRewriter):
    """Each outermost `Scan` node becomes a `CompiledLoop`; then, in a graph
    that had loops (it runs in the Python VM), fused elementwise nodes and
    those with more operands than a NumPy ufunc takes are split up
    (`_elementwise`)."""

    def add_requirements(self, fgraph):
        pass

    def apply(self, fgraph):
        loops = [n for n in fgraph.toposort() if isinstance(n.op, Scan)]
        for node in loops:
            new = CompiledLoop(node.op).make_node(*node.inputs).outputs
            fgraph.replace_all_validate(list(zip(node.outputs, new)), reason="compile_loops")
        if not loops:
            return
        for node in list(fgraph.toposort()):
            if isinstance(node.op, Elemwise) and (
                    isinstance(node.op.scalar_op, Composite)
                    or len(node.inputs) + len(node.outputs) > UFUNC_OPERANDS):
                new = _elementwise(node.op.scalar_op, list(node.inputs))
                fgraph.replace_all_validate(list(zip(node.outputs, new)),
                                            reason="compile_loops")


def outer_loops(fgraph) -> list:
    """The `Scan` ops of `fgraph`'s outermost loops, compiled on their own or not."""
    return [n.op.loop if isinstance(n.op, CompiledLoop) else n.op
            for n in fgraph.apply_nodes if isinstance(n.op, (Scan, CompiledLoop))]


def has_compiled_loops(fgraph) -> bool:
    return any(isinstance(n.op, CompiledLoop) for n in fgraph.apply_nodes)


class LoopLinker(NumbaLinker):
    """Numba's linker for a graph without loops; PyTensor's Python VM (no
    compilation) for one whose loops are `CompiledLoop`s."""

    def accept(self, fgraph, no_recycling=None, profile=None):
        if has_compiled_loops(fgraph):
            return VMLinker(use_cloop=False, c_thunks=False).accept(fgraph, no_recycling,
                                                                     profile)
        return super().accept(fgraph, no_recycling, profile)


def numba_mode(base: Mode) -> Mode:
    """`base` (PyTensor's NUMBA mode) with `LoopLinker` and `CompileLoops`."""
    mode = Mode(linker=LoopLinker(), optimizer=base.provided_optimizer)
    return mode.register((CompileLoops(), POSITION))
