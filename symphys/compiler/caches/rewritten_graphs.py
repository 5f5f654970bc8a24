"""On-disk cache of rewritten graphs: a second process skips PyTensor's rewrites.

Compiling a simulation graph has three costs: building the symbolic graph
(about a second), PyTensor's rewrites (tens of seconds for a gradient
through a rollout) and linking (Numba code generation; Numba's own cache,
kept by PyTensor, makes it fast when warm). This module removes the middle
one for graphs seen before: after a compile it pickles the rewritten
`FunctionGraph`; a later compile of the same graph links that directly.

The key is a SHA-256 of the backend, the versions of symphys, PyTensor and
NumPy, the rewrites left out (`backends.EXCLUDED_REWRITES`), the input
types and a print of the graph before rewriting (inner graphs included,
each constant named by a hash of its bytes: `graph_text`), so a different
loss, scene structure or step count gets a different entry.

Numba and JAX rewrite each loop's inner graph when they convert the loop,
in place, so the graph stored after a compile holds rewritten loops. A
graph read back for those backends has its loops marked as rewritten
(`_Rewritten`): converting them again runs no rewrites, which were most of
a warm compile.

Location: `symphys.storage.cache_dir()`.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import re
import sys
import threading

import numpy as np
import pytensor
from pytensor.compile.io import In, SymbolicOutput
from pytensor.graph.basic import Constant
from pytensor.graph.fg import FunctionGraph
from pytensor.scan.op import Scan

from symphys.storage import cache_dir, write_atomically
from symphys.version import __version__

_log = logging.getLogger(__name__)
FORMAT = 2     # bump when what is stored changes


def _constants(outputs) -> list:
    """Every constant in the graph of `outputs`, inner graphs included."""
    seen_vars, seen_nodes, found, stack = set(), set(), [], list(outputs)
    while stack:
        var = stack.pop()
        if id(var) in seen_vars:
            continue
        seen_vars.add(id(var))
        if isinstance(var, Constant):
            found.append(var)
        node = var.owner
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        stack.extend(node.inputs)
        stack.extend(getattr(node.op, "inner_outputs", ()))
    return found


def _constant_label(const) -> str:
    """A constant named by its type and bytes."""
    data = np.ascontiguousarray(np.asarray(const.data))
    digest = hashlib.sha256(f"{const.type}{data.dtype}{data.shape}".encode())
    digest.update(data.tobytes())
    return f"[const {digest.hexdigest()[:24]}]"


def graph_text(outputs) -> str:
    """A print of the graph of `outputs` (inner graphs included) that is the
    same in every process building that graph. Whether two equal constants
    are one object or two depends on what else the process did before, so
    constants are named by their type and bytes, and the other `[id ...]`
    labels are renumbered in order of first appearance."""
    labels = {c: _constant_label(c) for c in _constants(outputs)}
    text = pytensor.printing.debugprint(list(outputs), file="str", used_ids=labels)
    order: dict[str, str] = {}
    return re.sub(r"\[id ([A-Z]+)\]",
                  lambda m: order.setdefault(m.group(1), f"[id {len(order)}]"), text)


def graph_key(inputs, outputs, backend_name: str, excluded: tuple[str, ...] = ()) -> str:
    """A hex digest identifying the function `inputs -> outputs` on a
    backend, rewritten without the `excluded` rewrites."""

    h = hashlib.sha256()
    for part in (f"format={FORMAT}", backend_name, __version__,
                 pytensor.__version__, np.__version__, sys.version,
                 "exclude=" + ",".join(sorted(excluded))):
        h.update(part.encode())
    for var in inputs:
        h.update(f"{var.name}:{var.type}".encode())
    h.update(graph_text(outputs).encode())
    return h.hexdigest()


class _Rewritten:
    """The mode of a loop whose inner graph is rewritten already. PyTensor's
    Numba and JAX conversions of a loop ask its mode for rewrites
    (`get_mode(op.mode).including(...).excluding(...).optimizer`) and run
    them on the inner graph; this one has none to give."""

    def including(self, *tags):
        return self

    def excluding(self, *tags):
        return self

    @property
    def optimizer(self):
        return _unchanged


def _unchanged(fgraph) -> None:
    """A rewriter that leaves `fgraph` as it is."""


def loops(fgraph: FunctionGraph):
    """Every loop (Scan) op of `fgraph`, nested loops included, once each."""
    seen, stack = set(), [fgraph]
    while stack:
        for node in stack.pop().apply_nodes:
            if isinstance(node.op, Scan) and id(node.op) not in seen:
                seen.add(id(node.op))
                stack.append(node.op.fgraph)
                yield node.op


def _mark_loops_rewritten(fgraph: FunctionGraph) -> None:
    """Give every loop of `fgraph` the `_Rewritten` mode. Only for ops read
    back from the cache: the mode is not part of a loop op's identity and
    nothing else holds them."""
    for op in loops(fgraph):
        op.mode = _Rewritten()


def load(key: str, mode, loops_rewritten: bool = False):
    """The cached function for `key` linked under `mode`, or None.
    `loops_rewritten`: the backend rewrote the loops' inner graphs in place
    before the graph was stored (Numba, JAX), so they are linked as they are."""
    folder = cache_dir()
    path = None if folder is None else folder / f"{key}.pkl"
    if path is None or not path.exists():
        return None
    try:
        return link(path.read_bytes(), mode, loops_rewritten)
    except Exception as err:  # a stale or foreign file: compile afresh
        _log.warning("symphys: ignoring unreadable graph cache %s (%s)", path, err)
        return None


def link(blob: bytes, mode, loops_rewritten: bool = False):
    """The function of a graph pickled by `graph_bytes`, linked under `mode`
    without rewriting it (`loops_rewritten`: as in `load`). Raises what
    unpickling or linking raises."""
    in_vars, out_vars = _with_deep_stack(lambda: pickle.loads(blob))
    fgraph = FunctionGraph(in_vars, out_vars, clone=False)
    if loops_rewritten:
        _mark_loops_rewritten(fgraph)
    maker = pytensor.compile.maker.FunctionMaker(
        [In(v) for v in in_vars], [SymbolicOutput(v) for v in out_vars],
        mode=mode, fgraph=fgraph, accept_inplace=True, no_fgraph_prep=True,
        on_unused_input="ignore")
    return maker.create([None] * len(in_vars))


def _with_deep_stack(work):
    """work() in a helper thread with a large stack and a raised recursion
    limit (both restored afterwards). A gradient through a rollout nests
    thousands of graph nodes, deeper than pickle manages with Python's
    default limit."""
    result: dict = {}

    def run():
        try:
            result["value"] = work()
        except Exception as err:   # re-raised in the caller's thread
            result["error"] = err

    old_limit, old_stack = sys.getrecursionlimit(), threading.stack_size()
    try:
        sys.setrecursionlimit(max(old_limit, 200_000))
        threading.stack_size(1 << 30)
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old_stack)
        sys.setrecursionlimit(old_limit)
    if "error" in result:
        raise result["error"]
    return result["value"]


def store(key: str, fn) -> bool:
    """Pickle the rewritten graph of compiled function `fn` under `key`;
    whether it was stored (not where the folder cannot be written)."""
    folder = cache_dir()
    if folder is None:
        return False
    try:
        blob = graph_bytes(fn)
    except Exception as err:
        _log.warning("symphys: graph not cached, it does not pickle (%s: %s)",
                     type(err).__name__, err)
        return False
    return write_atomically(folder / f"{key}.pkl", blob)


def graph_bytes(fn) -> bytes:
    """The rewritten graph of compiled function `fn` (its inputs and
    outputs), pickled; `link` reads it back. Raises when it does not pickle."""
    fgraph = fn.maker.fgraph
    graph = (list(fgraph.inputs), list(fgraph.outputs))
    return _with_deep_stack(lambda: pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL))
