"""symphys' own graph rewrites: small fixed-size linear algebra to components.

Model code written with (..., 3) vectors and (..., 3, 3) matrices (stacks,
matrix products, sums over the last axis, indexing of components) compiles
into many small Ops per step: each pays a per-Op cost inside a scan, which
dominates the Numba backend (17.7 ms against 0.39 ms for the same toy
step, measured when this module was written). These rewrites take such graphs to the form
symphys' own engine is written in (`symphys.physics.algebra`): each component a
tensor of the batch shape, every operation elementwise, so PyTensor's
fusion turns a step into a few loops.

The rewrites work by pushing constant component indices (`v[..., 0]`)
towards the inputs; the small Ops they go through become elementwise Ops on
components and the (..., 3) tensors they came from drop out of the graph
once nothing else reads them:

- `local_sum_of_small_axis`: a sum over an axis of static length <= 4
  becomes the sum of its components (which are then indexed);
- `local_small_matmul_to_components`: a matrix product whose dimensions are
  all static and <= 4 becomes a stack of component sums of products;
- `local_subtensor_of_join_axis`: a component of a stack/join is the piece
  it came from;
- `local_components_of_elemwise`: an elementwise result read only through
  constant component indices is computed per component;
- `local_components_of_dimshuffle`: components of a transpose, expand_dims
  or squeeze are components of its input (with PyTensor's
  `local_dimshuffle_lift` to merge what is left);
- `local_matmul_by_identity`: a product with a constant identity matrix
  (the rotation of a static body) is the other operand;
- `local_repeated_normalisation`: normalising a vector that was just
  normalised along the same axis does nothing.

Hoisting what does not change across steps out of a loop is PyTensor's own
`scan_push_out_non_seq`, which symphys' loop mode keeps (tested in
tests/test_rewrites.py).

The rewrites run in the modes `symphys.compiler.backends` builds for Numba and CVM
(not JAX: `default_for`), cancellations before PyTensor's canonicalisation,
components after its `stabilize` stage and before scans are rewritten and
Ops specialised. `switched(on)` forces them on or off for graphs built and
compiled inside it, for side-by-side measurements.
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np
import pytensor.tensor as pt
from pytensor.compile import optdb
from pytensor.graph.basic import Constant
from pytensor.graph.rewriting.basic import EquilibriumGraphRewriter, node_rewriter
from pytensor.scalar import basic as ps
from pytensor.tensor.basic import Join
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.math import Dot, Sum
from pytensor.tensor.rewriting.elemwise import local_dimshuffle_lift
from pytensor.tensor.subtensor import Subtensor, indices_from_subtensor

# Axes up to this static length are split into components.
SMALL = 4
# Part of the on-disk graph cache key: bump when a rewrite (symphys.compiler.rewrites,
# symphys.compiler.loops) changes.
VERSION = 10

_FORCED: contextvars.ContextVar[bool | None] = contextvars.ContextVar("symphys_rewrites",
                                                                       default=None)
_FORCED_REWRITES: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "symphys_rewrites_only", default=None)
_BACKEND: contextvars.ContextVar[str | None] = contextvars.ContextVar("symphys_backend",
                                                                      default=None)


def _backend_name(backend) -> str:
    return str(getattr(backend, "value", backend)).lower()


def default_for(backend) -> bool:
    """Whether a backend gets symphys' rewrites unless told otherwise: Numba
    and CVM do (they pay per Op, and components fuse into few loops); JAX
    does not (XLA fuses (..., 3) arrays itself, and the component form ran
    the array toy step 2.3x slower there: docs/benchmarks.md)."""
    return _backend_name(backend) != "jax"


def fuses_by_default(backend) -> bool:
    """Whether graphs built for a backend use the fused step kernels
    (`symphys.physics.kernels`) unless told otherwise: Numba's do; the C
    VM runs the reference graph; JAX's run the reference graph too for now
    (its kernels sweep the rows one at a time in a `lax.fori_loop`, 5x
    slower than the reference's vectorised blocks on the CPU)."""
    return _backend_name(backend) == "numba"


def enabled(backend=None) -> bool:
    """Whether graphs built and compiled now get symphys' rewrites: as
    `switched` forces, else the default of `backend` (or of the backend the
    graph is being built for, `for_backend`; True when none is named)."""
    forced = _FORCED_REWRITES.get()
    forced = _FORCED.get() if forced is None else forced
    if forced is not None:
        return forced
    backend = _BACKEND.get() if backend is None else backend
    return True if backend is None else default_for(backend)


def fused(backend=None) -> bool:
    """Whether graphs built now use the fused step kernels: as `switched`
    forces (off: the reference graph), else `fuses_by_default` of `backend`
    (or of the backend being built for; True when none is named)."""
    forced = _FORCED.get()
    if forced is not None:
        return forced
    backend = _BACKEND.get() if backend is None else backend
    return True if backend is None else fuses_by_default(backend)


@contextlib.contextmanager
def switched(on: bool | None):
    """Force symphys' rewrites, and the fused step kernels, on or off (None:
    each backend's default) for the graphs built and compiled inside the
    block; loops carry the choice in their modes, so build and compile
    inside the same block."""
    token = _FORCED.set(None if on is None else bool(on))
    try:
        yield
    finally:
        _FORCED.reset(token)


@contextlib.contextmanager
def rewrites_only(on: bool | None):
    """Force symphys' rewrites on or off inside the block, as `switched`
    does, leaving the fused step kernels at their default: for graphs the
    component rewrites only slow down (a renderer's broadcasts)."""
    token = _FORCED_REWRITES.set(None if on is None else bool(on))
    try:
        yield
    finally:
        _FORCED_REWRITES.reset(token)


@contextlib.contextmanager
def for_backend(backend):
    """The block in which a graph for `backend` is built: its loops get the
    rewrites when `enabled(backend)` (never JAX's component rewrites), and
    its step is fused when `fused(backend)`."""
    token = _BACKEND.set(_backend_name(backend))
    try:
        yield
    finally:
        _BACKEND.reset(token)


def split_loops() -> bool:
    """Whether loops built now get the component rewrites (JAX's never)."""
    return enabled() and _BACKEND.get() != "jax"


def _static_int(v) -> int | None:
    """The value of a constant integer scalar index, else None."""
    if isinstance(v, Constant) and v.type.ndim == 0 and "int" in v.type.dtype:
        return int(v.data)
    if isinstance(v, (int, np.integer)):
        return int(v)
    return None


def _component_index(node) -> dict | None:
    """{axis: index} when a Subtensor node reads constant components: every
    entry of its index is a full slice or a constant integer on an axis of
    static length <= SMALL; None otherwise."""
    if not isinstance(node.op, Subtensor):
        return None
    x = node.inputs[0]
    idx = indices_from_subtensor(node.inputs[1:], node.op.idx_list)
    picks = {}
    for axis, i in enumerate(idx):
        if isinstance(i, slice):
            if i != slice(None):
                return None
            continue
        value = _static_int(i)
        length = x.type.shape[axis]
        if value is None or length is None or length > SMALL:
            return None
        picks[axis] = value % length
    return picks or None


def _component_read(node, op_type) -> tuple[dict, object] | None:
    """(picks, x) when `node` reads constant components `picks` of x, an
    output of an `op_type` node; else None."""
    picks = _component_index(node)
    x = node.inputs[0]
    if picks is None or x.owner is None or not isinstance(x.owner.op, op_type):
        return None
    return picks, x


def _take(x, picks: dict):
    """x indexed at constant components {axis: index}; an axis of length
    one that broadcasts takes its only entry."""
    idx = [slice(None)] * x.type.ndim
    for axis, i in picks.items():
        idx[axis] = 0 if x.type.broadcastable[axis] else i
    return x[tuple(idx)]


@node_rewriter([Sum])
def local_sum_of_small_axis(fgraph, node):
    # sum(x, axis=a) with x.shape[a] static and <= 4
    #   -> x[.., 0, ..] + x[.., 1, ..] + ...
    # Only a single reduced axis; the component reads are pushed further up
    # by the other rewrites.
    x = node.inputs[0]
    axes = node.op.axis
    if axes is None or len(axes) != 1:
        return None
    axis = axes[0]
    length = x.type.shape[axis]
    if length is None or length > SMALL:
        return None
    terms = [_take(x, {axis: i}) for i in range(length)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return [total.astype(node.outputs[0].type.dtype)]


def _is_dot(node) -> bool:
    return isinstance(node.op, Blockwise) and isinstance(node.op.core_op, Dot)


@node_rewriter([Blockwise])
def local_small_matmul_to_components(fgraph, node):
    # a @ b with a: (..., m, k), b: (..., k, n), all of m, k, n static and
    # <= 4  ->  stack_i stack_j sum_k a[.., i, k] * b[.., k, j]
    # (a matrix-vector product is the n = 1 case).
    if not _is_dot(node):
        return None
    a, b = node.inputs
    m, k = a.type.shape[-2:]
    k2, n = b.type.shape[-2:]
    if None in (m, k, n) or max(m, k, n) > SMALL or k != k2:
        return None
    ra, rb = a.type.ndim - 1, b.type.ndim - 1
    rows = []
    for i in range(m):
        row = []
        for j in range(n):
            acc = None
            for kk in range(k):
                term = _take(a, {ra - 1: i, ra: kk}) * _take(b, {rb - 1: kk, rb: j})
                acc = term if acc is None else acc + term
            row.append(acc)
        rows.append(pt.stack(row, axis=-1))
    out = pt.stack(rows, axis=-2)
    old = node.outputs[0]
    out = pt.broadcast_to(out, old.shape) if out.type.ndim != old.type.ndim else out
    return [out.astype(old.type.dtype)]


@node_rewriter([Subtensor])
def local_subtensor_of_join_axis(fgraph, node):
    # join(a, x, y, z)[.., 1 (on axis a), ..] -> y[.., 0, ..] when the pieces
    # have static lengths along a. (PyTensor lifts indices on the other
    # axes; this one picks the piece.)
    found = _component_read(node, Join)
    if found is None:
        return None
    picks, joined = found
    axis_var, *pieces = joined.owner.inputs
    axis = _static_int(axis_var)
    if axis is None:
        return None
    axis %= joined.type.ndim
    if axis not in picks:
        return None
    lengths = [p.type.shape[axis] for p in pieces]
    if None in lengths:
        return None
    want, start = picks[axis], 0
    for piece, length in zip(pieces, lengths):
        if want < start + length:
            local = dict(picks)
            local[axis] = want - start
            return [_take(piece, local)]
        start += length
    return None


def _reads_components_only(fgraph, var) -> bool:
    """True when every reader of `var` is a constant-component Subtensor
    (a graph output is not)."""
    clients = fgraph.clients[var]
    return bool(clients) and all(isinstance(client.op, Subtensor)
                                 and _component_index(client) is not None
                                 for client, _ in clients)


@node_rewriter([Subtensor])
def local_components_of_elemwise(fgraph, node):
    # f(x, y)[.., 2, ..] -> f(x[.., 2, ..], y[.., 2, ..]) when every reader
    # of f(x, y) takes constant components: the elementwise work is split
    # between the components, not repeated. (PyTensor's own lift needs a
    # single reader.) Broadcast inputs take their only entry.
    found = _component_read(node, Elemwise)
    if found is None:
        return None
    picks, elem = found
    if len(elem.owner.outputs) != 1 or not _reads_components_only(fgraph, elem):
        return None
    inputs = [_take(x, picks) for x in elem.owner.inputs]
    out = elem.owner.op(*inputs)
    old = node.outputs[0]
    if out.type.broadcastable != old.type.broadcastable:
        out = pt.broadcast_to(out, old.shape)
    return [out]


def _strip(v, op_types):
    while v.owner is not None and isinstance(v.owner.op, op_types):
        v = v.owner.inputs[0]
    return v


def _is_identity(x) -> bool:
    """A constant (possibly with broadcast axes added in front) whose last
    two axes hold an identity matrix in every batch entry."""
    x = _strip(x, (DimShuffle,))
    if not isinstance(x, Constant) or x.type.ndim < 2:
        return False
    data = np.asarray(x.data)
    n, m = data.shape[-2:]
    return n == m and all(x.type.broadcastable[:-2]) and np.array_equal(
        data.reshape(-1, n, n)[0], np.eye(n))


@node_rewriter([Blockwise])
def local_matmul_by_identity(fgraph, node):
    # I @ b -> b and a @ I -> a for a constant identity I (a static body's
    # rotation), when that leaves the output's shape and type unchanged.
    if not _is_dot(node):
        return None
    a, b = node.inputs
    old = node.outputs[0]
    for const, other in ((a, b), (b, a)):
        if _is_identity(const) and other.type.broadcastable == old.type.broadcastable \
                and other.type.dtype == old.type.dtype:
            return [other]
    return None


def _squared_operand(v):
    """x when v is x*x, sqr(x) or x**2 (possibly through Real); else None."""
    v = v.owner.inputs[0] if v.owner is not None and isinstance(v.owner.op, Elemwise) \
        and isinstance(v.owner.op.scalar_op, ps.Real) else v
    if v.owner is None or not isinstance(v.owner.op, Elemwise):
        return None
    scalar, ins = v.owner.op.scalar_op, v.owner.inputs
    if isinstance(scalar, ps.Sqr):
        return ins[0]
    if isinstance(scalar, ps.Mul) and len(ins) == 2 and ins[0] is ins[1]:
        return ins[0]
    if isinstance(scalar, ps.Pow):
        exponent = _strip(ins[1], (DimShuffle,))
        if isinstance(exponent, Constant) and np.all(np.asarray(exponent.data) == 2):
            return ins[0]
    return None


def _normalised(v):
    """(x, axis) when v is x / |x| along a single axis (the norm taken as
    sqrt(sum of squares) with the axis kept), else None."""
    if v.owner is None or not isinstance(v.owner.op, Elemwise) \
            or not isinstance(v.owner.op.scalar_op, ps.TrueDiv):
        return None
    x, divisor = v.owner.inputs
    core = divisor
    saw_sqrt = False
    while core.owner is not None and (isinstance(core.owner.op, DimShuffle) or (
            isinstance(core.owner.op, Elemwise) and isinstance(core.owner.op.scalar_op, ps.Sqrt)
            and not saw_sqrt)):
        saw_sqrt |= isinstance(core.owner.op, Elemwise)
        core = core.owner.inputs[0]
    if not saw_sqrt or core.owner is None or not isinstance(core.owner.op, Sum):
        return None
    axes = core.owner.op.axis
    if axes is None or len(axes) != 1 or _squared_operand(core.owner.inputs[0]) is not x:
        return None
    axis = axes[0]
    if divisor.type.ndim != x.type.ndim or not divisor.type.broadcastable[axis]:
        return None
    return x, axis


@node_rewriter([Elemwise])
def local_repeated_normalisation(fgraph, node):
    # (x / |x|) / |x / |x|| -> x / |x| (same axis): the second norm is one.
    found = _normalised(node.outputs[0])
    if found is None:
        return None
    inner, axis = found
    again = _normalised(inner)
    if again is None or again[1] != axis:
        return None
    return [inner]


@node_rewriter([Subtensor])
def local_components_of_dimshuffle(fgraph, node):
    # transpose / expand_dims / squeeze of x, read at constant components
    #   -> the same components of x, rearranged: R.T[.., 0, 1] -> R[.., 1, 0],
    #   x[..., None][.., 2, 0] -> x[.., 2]. A DimShuffle is a view, so it
    #   needs no single reader.
    found = _component_read(node, DimShuffle)
    if found is None:
        return None
    picks, shuffled = found
    x = shuffled.owner.inputs[0]
    order = shuffled.owner.op.new_order
    in_picks = {order[k]: v for k, v in picks.items() if order[k] != "x"}
    taken = _take(x, in_picks) if in_picks else x
    new_order = []
    for k, src in enumerate(order):
        if k in picks:
            continue
        new_order.append("x" if src == "x" else src - sum(1 for j in in_picks if j < src))
    return [taken.dimshuffle(*new_order)]


# Cancellations, matched in the form model code writes them: before
# PyTensor's canonicalisation rewrites matrix products and norms.
CANCEL_REWRITES = (local_repeated_normalisation, local_matmul_by_identity)
# Splitting into components, after canonicalisation and stabilisation.
COMPONENT_REWRITES = (local_small_matmul_to_components, local_sum_of_small_axis,
                      local_subtensor_of_join_axis, local_components_of_elemwise,
                      local_components_of_dimshuffle, local_dimshuffle_lift)
# Positions in PyTensor's rewrite database: cancellations before
# `canonicalize` (1); components after `stabilize` (1.5) and before
# `scan_eqopt2` (1.6), BLAS (1.7) and `specialize` (2), which turn matrix
# products into batched BLAS calls.
CANCEL_POSITION = 0.95
COMPONENT_POSITION = 1.55


def cancel_rewriter() -> EquilibriumGraphRewriter:
    """The cancellation rewrites, applied until none changes the graph."""
    return EquilibriumGraphRewriter(list(CANCEL_REWRITES), max_use_ratio=100)


def component_rewriter() -> EquilibriumGraphRewriter:
    """The component rewrites, applied until none changes the graph."""
    return EquilibriumGraphRewriter(list(COMPONENT_REWRITES), max_use_ratio=100)


# Both passes live in PyTensor's rewrite database under the tag `TAG`, which
# no mode includes unless asked (`register_in`): modes then name them by tag
# and pickle (scans carry their mode into symphys' on-disk graph cache).
TAG = "symphys"
for _name, _make, _position in (("symphys_cancel", cancel_rewriter, CANCEL_POSITION),
                                ("symphys_components", component_rewriter,
                                 COMPONENT_POSITION)):
    if _name not in optdb._names:
        optdb.register(_name, _make(), TAG, position=_position)


def register_in(mode):
    """`mode` with symphys' rewrites included."""
    return mode.including(TAG)
