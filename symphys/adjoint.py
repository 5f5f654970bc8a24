"""Loops with their own reverse pass.

`loop_with_adjoint(run, state0, leaves, n_steps)` repeats
`state <- run(state, leaves)` with a forward `scan` and returns the
sequences s_1..s_T. The scan is wrapped in an `OpFromGraph` whose pullback
is an adjoint scan running backwards: with a_t the cotangent of s_t,

    a_t = g_t + VJP_state(run, s_t)(a_{t+1}),   dleaves += VJP_leaves(...)

where g_t is the loss's direct cotangent on s_t. PyTensor's generic scan
gradient gives the same numbers but builds a far larger graph (its
`forced_replace` compares every gradient node against every loop output:
minutes for one ball, far longer for an arm's solver loop); this keeps the
reverse loop to one VJP of `run`. The Ops are inlined at compile time, so
the backend sees plain scans.

`close_over(fn, carry)` turns a loop body that reads outer tensors (a
solver sweep reading its rows) into one with explicit leaves, as the
`OpFromGraph` needs.
"""

from __future__ import annotations

import contextvars
import enum
import functools
from dataclasses import dataclass, replace

import pytensor
import pytensor.tensor as pt
from pytensor.compile.builders import OpFromGraph
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.basic import Constant
from pytensor.graph.op import io_connection_pattern
from pytensor.graph.replace import clone_replace
from pytensor.graph.traversal import ancestors, graph_inputs, io_toposort
from pytensor.raise_op import Assert
from pytensor.tensor.rewriting.ofg import inline_ofg_node
from pytensor.tensor.shape import Shape, Shape_i

from symphys.errors import ParameterError

# Says which mode each scan carries for its inner graph; the compiler
# registers its own (`symphys.compiler.backends.loop_mode`) when imported.
_loop_mode: list = [lambda: None]


def use_loop_mode(factory) -> None:
    """Make `factory()` (a PyTensor `Mode`, or None for PyTensor's default)
    the mode of the scans built from now on."""
    _loop_mode[0] = factory


class Reverse(enum.Enum):
    """Where each reverse step gets the forward values its VJP reads."""

    STORE = "store"            # the forward loop returns them as extra sequences
    RECOMPUTE = "recompute"    # each reverse step runs the step again


@dataclass(frozen=True)
class LoopOptions:
    """Back-propagation options of a loop.

    gradient_decay: the cotangent passed from step t+1 back to step t is
      multiplied by this factor (the paper's 0.95 trick: far-future losses
      weigh less; 1 gives the exact gradient).
    truncate: if > 0, the cotangent is cut every `truncate` steps
      (truncated back-propagation through time).
    checkpoint: if > 0, the loop keeps (and returns) the state every
      `checkpoint` steps only, and the reverse pass recomputes each segment
      of that many steps from the state kept before it: memory for T / K
      states instead of T, for one more forward pass; the same gradient.
      The number of steps must be a multiple of it.
    reverse: `Reverse.RECOMPUTE` (default) keeps the states only and runs
      each step again in the reverse pass; `Reverse.STORE` keeps, for
      every step, the values of the step that its VJP reads (the
      residuals), so the reverse pass runs only the VJP, for more memory
      (several times the states'). With checkpoints, the residuals are
      kept for one segment at a time. Loops built inside a storing loop's
      step (the solver's sweeps) store too. docs/gradients.md ("The
      reverse pass") has both measured."""

    gradient_decay: float = 1.0
    truncate: int = 0
    checkpoint: int = 0
    reverse: Reverse = Reverse.RECOMPUTE

    def __post_init__(self):
        if self.checkpoint < 0 or self.truncate < 0:
            raise ParameterError(f"LoopOptions: checkpoint ({self.checkpoint}) and truncate "
                                 f"({self.truncate}) must be >= 0")
        if self.checkpoint and self.truncate:
            raise ParameterError("LoopOptions: checkpoint and truncate cannot be combined "
                                 "(truncation counts steps across segments)")

    @property
    def exact(self) -> bool:
        return self.gradient_decay == 1.0 and self.truncate == 0

    @property
    def stride(self) -> int:
        """Steps between two returned states."""
        return max(self.checkpoint, 1)


def inline_loops(outs: list) -> list:
    """`outs` with the `OpFromGraph` nodes of their graph (nested loops'
    wrappers, not those inside scans) expanded in place.

    A loop body is inlined before it goes into a scan: inside a scan's inner
    graph a wrapper would be shape-inferred through its whole inner graph at
    every rewrite pass (minutes for an arm); its pullback has been used by
    then."""
    while True:
        nodes = {v.owner for v in ancestors(outs)
                 if v.owner is not None and isinstance(v.owner.op, OpFromGraph)}
        if not nodes:
            return outs
        replace = {}
        for node in nodes:
            replace.update(zip(node.outputs, inline_ofg_node(node)))
        outs = clone_replace(outs, replace=replace)


def _scan(body, name: str, **kwargs) -> list:
    """A scan in symphys' loop mode; its outputs as a list (one or more)."""
    out = pytensor.scan(body, return_updates=False, name=name, mode=_loop_mode[0](), **kwargs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _states_before(state0, seqs) -> list:
    """s_0 .. s_{T-1} from s_0 and the sequences s_1 .. s_T."""
    return [pt.concatenate([s0[None], q[:-1]], axis=0) for s0, q in zip(state0, seqs)]


def _dense(outputs, cotangents) -> list:
    """The cotangents, a disconnected one as zeros shaped like its output."""
    return [pt.zeros_like(o) if isinstance(c.type, DisconnectedType) else c
            for o, c in zip(outputs, cotangents)]


# True while the step of a storing loop is built: loops inside it store too
# (their residuals become the outer step's).
_STORING = contextvars.ContextVar("symphys_storing_loop", default=False)


class _StepGraph:
    """One step `run` on probe inputs, split for the loops.

    state, leaves: the probes; out: the next state; residuals: the forward
    values (depending on the state) that the step's VJP reads, empty when
    the reverse pass recomputes. The VJP (cotangents of the
    differentiable state components, `wrt_state`, and leaves,
    `wrt_leaves`, given probes `cotangent` for those of `out`) is built
    on first use: a loop that recomputes and is never differentiated
    does not build it."""

    def __init__(self, run, state0, leaves, reverse: Reverse):
        self.state = [s.type() for s in state0]
        self.leaves = [lf.type() for lf in leaves]
        # (`loop_with_adjoint` has already made a loop inside a storing one store.)
        token = _STORING.set(reverse is Reverse.STORE)
        try:
            self.out = list(run(self.state, self.leaves))
        finally:
            _STORING.reset(token)
        self.reverse = reverse
        self.wrt_state = [i for i, x in enumerate(self.state) if _differentiable(x)]
        self.wrt_leaves = [i for i, x in enumerate(self.leaves) if _differentiable(x)]

    @functools.cached_property
    def _vjp(self) -> tuple[list, list]:
        """(cotangent probes, the VJP's outputs)."""
        cot = [o.type() for o in self.out]
        total = sum((o * c).sum() for o, c in zip(self.out, cot) if _differentiable(o))
        wrt = ([self.state[k] for k in self.wrt_state]
               + [self.leaves[k] for k in self.wrt_leaves])
        grads = pytensor.grad(total, wrt, disconnected_inputs="ignore",
                              return_disconnected="zero")
        if self.reverse is Reverse.RECOMPUTE and self.passed:
            grads = clone_replace(list(grads), replace={v: p for v, p, _ in self.passed})
        return cot, list(grads)

    @functools.cached_property
    def passed(self) -> list:
        """[(variable, its probe in the VJP, how to read it from the step's
        outputs)] for the values that a step output's Op holds unchanged
        (`StageOp.passed_inputs`: the solved velocities in the next state),
        so that a reverse step, which knows the outputs, does not compute
        them again."""
        found = []
        for k, o in enumerate(self.out):
            op = o.owner.op if o.owner is not None else None
            if hasattr(op, "passed_inputs"):
                for v, position, a, b in op.passed_inputs(o.owner):
                    if o.owner.outputs[position] is o:
                        found.append((v, v.type(), (k, a, b)))
        return found

    @functools.cached_property
    def residuals(self) -> list:
        if self.reverse is Reverse.RECOMPUTE:
            return []
        cot, grads = self._vjp
        on_state = _dependents(grads, self.state)
        # (A gradient that does not read the cotangents is zero: not kept.)
        return [v for v in _frontier(grads, cot)
                if v in on_state and v not in self.state and v not in grads]

    def forward(self, state, leaves) -> list:
        """The next state and the residuals of one step from `state`."""
        return inline_loops(clone_replace(self.out + self.residuals,
                                          replace=self._inputs(state, leaves)))

    def vjp(self, state, leaves, residuals, cotangent, next_state) -> list:
        """The VJP's graph for one step (its inner loops inlined), given
        the state after the step too (what the step's outputs are)."""
        cot, grads = self._vjp
        replace = self._inputs(state, leaves) | dict(zip(self.residuals, residuals))
        replace |= dict(zip(cot, cotangent))
        if self.reverse is Reverse.RECOMPUTE:
            replace |= {p: next_state[k][..., a:b] for _, p, (k, a, b) in self.passed}
        return inline_loops(clone_replace(grads, replace=replace))

    def _inputs(self, state, leaves) -> dict:
        return dict(zip(self.state, state)) | dict(zip(self.leaves, leaves))


def _loop_pattern(step: _StepGraph, n_out: int) -> list:
    """Which loop outputs (the state sequences, then the residual ones:
    the first `n_out` of them) depend on which inputs (the initial state,
    then the leaves), as `[input][output]` booleans: one step's pattern
    closed over the steps. (Read from the step's graph: asking the loop's
    scan instead analyses its whole inner graph, which took minutes for
    the quadruped's solver loop.)"""
    n_state = len(step.state)
    one = io_connection_pattern(step.state + step.leaves, step.out + step.residuals)
    # reach[i][k]: state component k after some number of steps >= 1 depends on input i.
    reach = [list(row[:n_state]) for row in one]
    changed = True
    while changed:
        changed = False
        for row in reach:
            for k in range(n_state):
                if not row[k] and any(row[j] and one[j][k] for j in range(n_state)):
                    row[k] = changed = True
    # An output of step t reads the inputs directly or through the state before it.
    return [[one[i][o] or any(reach[i][j] and one[j][o] for j in range(n_state))
             for o in range(n_out)] for i in range(len(one))]


def _dependents(outs: list, probe: list) -> set:
    """The variables of `outs`' graph whose values depend on `probe`'s
    values (a shape does not: shapes are the same at every step, and the
    backends need them as constants, e.g. the sizes of a split)."""
    depends = set(probe)
    for node in io_toposort(probe, outs):
        if not isinstance(node.op, (Shape, Shape_i)) and any(i in depends for i in node.inputs):
            depends.update(node.outputs)
    return depends


def _forward(step: _StepGraph, state0, leaves, n_steps, name: str) -> list:
    """Sequences (n_steps, ...) of the states s_1.. and of the residuals."""
    n_state, n_leaves = len(state0), len(leaves)

    def body(*args):
        return step.forward(list(args[:n_state]), list(args[n_state:n_state + n_leaves]))

    # Residuals are outputs only (nothing is fed back): outputs_info None.
    return _scan(body, name, outputs_info=list(state0) + [None] * len(step.residuals),
                 non_sequences=list(leaves), n_steps=n_steps)


def _forward_kept(step: _StepGraph, state0, leaves, n_steps, every: int, name: str):
    """States after every `every` steps: sequences (n_steps // every, ...)."""
    n_state = len(state0)

    def segment(*args):
        seqs = _forward(step, list(args[:n_state]), list(args[n_state:]), every,
                        f"{name}_segment")
        return [q[-1] for q in seqs[:n_state]]

    return _scan(segment, f"{name}_kept", outputs_info=list(state0),
                 non_sequences=list(leaves), n_steps=n_steps // every)


def _adjoint_kept(step: _StepGraph, state0, leaves, n_steps, kept, cotangents,
                  options: LoopOptions, name: str):
    """Gradients of sum_j <g_j, kept_j> (kept_j the state after (j+1)·K
    steps) with respect to state0 and leaves: a reverse scan over segments
    that recomputes each segment (with its residuals) from the state kept
    before it and runs the step adjoint over it."""
    n_state, n_leaves, every = len(state0), len(leaves), options.checkpoint
    inner = LoopOptions(gradient_decay=options.gradient_decay)
    cots = _dense(kept, cotangents)
    starts = _states_before(state0, kept)

    def body(*args):
        start = list(args[:n_state])
        g_end = list(args[n_state:2 * n_state])
        adj = list(args[2 * n_state:3 * n_state])
        acc = list(args[3 * n_state:3 * n_state + n_leaves])
        lv = list(args[3 * n_state + n_leaves:])
        seqs = _forward(step, start, lv, every, f"{name}_recompute")
        states, residuals = seqs[:n_state], seqs[n_state:]
        # Cotangents of the segment's states: only its last one is read
        # outside (g_end) or by the later segments (adj).
        seg_cots = [pt.zeros_like(q)[:-1] for q in states]
        seg_cots = [pt.concatenate([z, (g + a)[None]], axis=0)
                    for z, g, a in zip(seg_cots, g_end, adj)]
        grads = _adjoint(step, start, lv, every, states, residuals, seg_cots, inner,
                         f"{name}_segment")
        back, leaf = grads[:n_state], grads[n_state:]
        return inline_loops(list(back) + [a + g for a, g in zip(acc, leaf)])

    init = [pt.zeros_like(s) for s in state0] + [pt.zeros_like(lf) for lf in leaves]
    res = _scan(body, f"{name}_adjoint_kept",
                sequences=[q[::-1] for q in starts] + [c[::-1] for c in cots],
                outputs_info=init, non_sequences=list(leaves), n_steps=n_steps // every)
    return [r[-1] for r in res]


def _differentiable(x) -> bool:
    return x.dtype.startswith("float")


def _adjoint(step: _StepGraph, state0, leaves, n_steps, outputs, residuals, cotangents,
             options: LoopOptions, name: str):
    """Gradients of sum_t <g_t, s_t> with respect to state0 and leaves.
    outputs: the state sequences s_1..s_T; residuals: the residual
    sequences of the forward loop (empty when recomputing)."""
    n_state, n_leaves, n_res = len(state0), len(leaves), len(residuals)
    cots = _dense(outputs, cotangents)
    before = _states_before(state0, outputs)       # the state before each step
    # Step numbers T-1 .. 0, only needed to truncate.
    index = [pt.arange(n_steps)[::-1]] if options.truncate > 0 else []

    def body(*args):
        i = len(index)
        t = args[0] if index else None
        s_t = list(args[i:i + n_state]); i += n_state
        s_next = list(args[i:i + n_state]); i += n_state
        r_t = list(args[i:i + n_res]); i += n_res
        g_t = list(args[i:i + n_state]); i += n_state
        adj = list(args[i:i + n_state]); i += n_state
        acc = list(args[i:i + n_leaves]); i += n_leaves
        lv = list(args[i:i + n_leaves])
        a_next = [a + g for a, g in zip(adj, g_t)]        # cotangent of s_{t+1}
        grads = step.vjp(s_t, lv, r_t, a_next, s_next)
        n_wrt = len(step.wrt_state)
        back = [pt.zeros_like(s) for s in s_t]
        for k, g in zip(step.wrt_state, grads[:n_wrt]):
            back[k] = g.astype(s_t[k].dtype)
        if options.gradient_decay != 1.0:
            back = [options.gradient_decay * g for g in back]
        if options.truncate > 0:
            cut = pt.eq(t % options.truncate, 0) & (t > 0)
            back = [pt.switch(cut, 0.0, g) for g in back]
        new_acc = list(acc)
        for k, g in zip(step.wrt_leaves, grads[n_wrt:]):
            new_acc[k] = acc[k] + g.astype(acc[k].dtype)
        return back + new_acc

    init = [pt.zeros_like(s) for s in state0] + [pt.zeros_like(lf) for lf in leaves]
    res = _scan(body, f"{name}_adjoint",
                sequences=index + [b[::-1] for b in before] + [o[::-1] for o in outputs]
                + [r[::-1] for r in residuals]
                + [c[::-1] for c in cots],
                outputs_info=init, non_sequences=list(leaves), n_steps=n_steps)
    return [r[-1] for r in res]


def loop_with_adjoint(run, state0, leaves, n_steps, options: LoopOptions = LoopOptions(),
                      name: str = "symphys_loop") -> list:
    """Sequences s_1..s_T (each (T, *state shape)) of `state <- run(state,
    leaves)`; run maps two lists of tensors to the list of next states.
    With `options.checkpoint` = K > 0: s_K, s_2K, .., s_T ((T / K, ...))."""
    state0 = [pt.as_tensor_variable(s) for s in state0]
    leaves = [pt.as_tensor_variable(lf) for lf in leaves]
    n_steps = pt.as_tensor_variable(n_steps).astype("int64")
    if _STORING.get():
        options = replace(options, reverse=Reverse.STORE)
    if options.checkpoint:
        every = options.checkpoint
        n_steps = Assert(f"the number of steps must be a multiple of checkpoint={every}")(
            n_steps, pt.eq(n_steps % every, 0))
    n_state, n_leaves = len(state0), len(leaves)

    inner_state = [s.type() for s in state0]
    inner_leaves = [lf.type() for lf in leaves]
    inner_n = n_steps.type()
    step = _StepGraph(run, inner_state, inner_leaves, options.reverse)
    if options.checkpoint:
        inner_out = _forward_kept(step, inner_state, inner_leaves, inner_n,
                                  options.checkpoint, name)
    else:       # the states, then the residuals for the reverse pass
        inner_out = _forward(step, inner_state, inner_leaves, inner_n, name)
    # Leaves the loop never reads (e.g. a sphere's box size) must report a
    # disconnected gradient, not zeros, to agree with the Op's connection
    # pattern; so must an input whose outputs all have disconnected
    # cotangents (e.g. a sphere's rotation when the loss ignores rotations).
    pattern = _loop_pattern(step, len(inner_out))

    def pullback(inputs, outputs, cotangents):
        s0 = inputs[:n_state]
        lv = inputs[n_state:n_state + n_leaves]
        live = [not isinstance(c.type, DisconnectedType) for c in cotangents]
        if options.checkpoint:
            grads = _adjoint_kept(step, s0, lv, inputs[-1], outputs, cotangents, options,
                                  name)
        else:
            grads = _adjoint(step, s0, lv, inputs[-1], outputs[:n_state],
                             outputs[n_state:], cotangents[:n_state], options, name)
        grads = [g if any(p and lv_ for p, lv_ in zip(row, live)) and _differentiable(x)
                 else disconnected_type()
                 for g, row, x in zip(grads, pattern, list(s0) + list(lv))]
        return grads + [disconnected_type()]

    op = OpFromGraph(inner_state + inner_leaves + [inner_n], inner_out,
                     pullback=pullback, inline=True, name=name,
                     connection_pattern=pattern + [[False] * len(inner_out)])
    out = op(*state0, *leaves, n_steps)
    return (list(out) if isinstance(out, (list, tuple)) else [out])[:n_state]


def _constant_valued(v) -> bool:
    """True for a constant or an expression of constants only (broadcast
    zeros, folded literals): it can stay inside a loop body."""
    return all(isinstance(x, Constant) for x in graph_inputs([v]))


def _frontier(outs: list, probe: list) -> list:
    """The tensors nearest to `outs` that do not depend on `probe`: every
    input of a probe-dependent node (and every output) that does not itself
    depend on the probe, in graph order. (PyTensor's `truncated_graph_inputs`
    may return such a tensor's own inputs instead, when they are read
    elsewhere too, which would recompute it in every loop iteration.)"""
    depends = set(probe)
    found: dict = {}
    for node in io_toposort(probe, outs):
        if any(i in depends for i in node.inputs):
            depends.update(node.outputs)
            for i in node.inputs:
                if i not in depends:
                    found.setdefault(i, None)
    for o in outs:
        if o not in depends:
            found.setdefault(o, None)
    return [v for v in found if not _constant_valued(v)]


def close_over(fn, carry: list) -> tuple:
    """(run, leaves) with run(carry, leaves) == fn(carry) for a loop body
    `fn` that also reads outer tensors.

    The outer tensors `fn` reads nearest to its outputs that do not depend
    on the carry (the frontier of its graph) become explicit leaves;
    constants stay inside."""
    probe = [c.type() for c in carry]
    outs = fn(probe)
    frontier = _frontier(outs, probe)

    def run(state, leaves):
        return clone_replace(outs, replace=dict(zip(probe, state)) | dict(zip(frontier, leaves)))

    return run, frontier
