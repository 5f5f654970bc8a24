"""Stage kernels as PyTensor Ops: one declaration, Numba and JAX, with pullbacks.

A `Stage` declares a kernel's inputs and outputs and its three
implementations; `stage_ops(stage)` makes (once per stage) two Op classes:

- the forward Op, `Fwd(**params)(*inputs)` -> the outputs;
- its pullback, `Grad(**params)(*inputs, [*outputs,] *cotangents)` -> the
  cotangents of the inputs whose `grad` is "vjp", in input order.

Implementations (each receives the stage's `params` values after its array
arguments, in `Stage.params` order):

- numba_forward(*inputs, *params) -> tuple of outputs (or the one array);
- numba_vjp(*inputs, [*outputs,] *cotangents, *params) -> tuple of the
  "vjp" inputs' cotangents (or the one array); a cotangent is given for
  every output (zeros where the loss ignores it; an integer output's is
  zeros of its dtype);
- jax_forward(*inputs, *params) -> tuple of outputs (or the one array).
  The JAX pullback is `jax.vjp` of it with respect to the "vjp" inputs
  (the others are closed over, so integer tables need no float0).

Kernels must return fresh arrays (never an input: the Ops declare no
views) of the declared dtypes and ranks; `perform` (the C VM's path,
which calls the Numba functions from Python) checks this.

Numba: both Ops are registered with `register_funcify_and_cache_key`; the
code they generate allocates the outputs and calls the kernel's C entry
through a pointer (`entry_numba`: each kernel compiles once per machine,
not once per function that uses it). The
key is the Op's class and params, `Stage.version` and a hash of the source
files that define the Numba functions (plus `Stage.depends` and this
file): never the scene, which enters as data. Edit a helper kept in another
module, and not named in `depends`, and you must bump `version`, or PyTensor's on-disk
Numba cache (keyed by this and nothing else: its source stamp is 0) runs
the old code. A scene's tables must be inputs of the compiled function,
not graph constants, for one cache entry to serve every scene: a
constant's bytes are part of the enclosing graph's key.

Example::

    TOY = Stage("Toy", inputs=(In("x", 2), In("s", 1, "int64")),
                outputs=(Out("y", (("x", 0), ("x", 1))),),
                numba_forward=toy_nb, numba_vjp=toy_vjp_nb, jax_forward=toy_jax,
                params=("iterations",), version=1)
    Toy, ToyGrad = stage_ops(TOY)
    y = Toy(iterations=3)(x, s)
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, disconnected_type
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.tensor.exceptions import ShapeError
from pytensor.tensor.type import TensorType

from symphys.physics.kernels import entry_numba
from symphys.physics.kernels.registry import REGISTRY, stage_cache_key

GRADS = ("vjp", "zero", "disconnected")


@dataclass(frozen=True)
class In:
    """An input: rank, dtype and what its gradient is. grad: "vjp" (from the
    pullback), "zero" (connected, always zero: a float option) or
    "disconnected" (structure: tables, counts); None: "vjp" for float
    dtypes, else "disconnected"."""

    name: str
    ndim: int
    dtype: str = "float64"
    grad: str | None = None

    @property
    def gradient(self) -> str:
        g = self.grad or ("vjp" if self.dtype.startswith("float") else "disconnected")
        if g not in GRADS or (g != "disconnected" and not self.dtype.startswith("float")):
            raise ValueError(f"input {self.name!r}: grad {g!r} not allowed for {self.dtype}")
        return g


@dataclass(frozen=True)
class Out:
    """An output. shape: one entry per axis, each an int (a fixed size), a
    pair (input name or index, axis) (that input's size there) or None
    (unknown until run)."""

    name: str
    shape: tuple
    dtype: str = "float64"


@dataclass(frozen=True, eq=False)
class Stage:
    """A stage kernel's declaration (see the module docstring). params:
    names of the static settings (simple values: int, float, bool, str or
    tuples of them) that the Op carries and passes to the functions after
    the arrays. vjp_reads_outputs: the pullback also receives the forward
    outputs (the JAX one ignores them). depends: further modules whose
    source is part of the Numba cache key. home: the module that declares
    the stage, imported to find its Op classes when a graph is unpickled
    (default: the Numba kernel's module). passes: (input name, output
    name, start, stop) for each input that an output holds unchanged in
    [..., start:stop] (a reverse pass that knows the output reads it there
    instead of recomputing it: `StageOp.passed_inputs`)."""

    name: str
    inputs: tuple
    outputs: tuple
    numba_forward: Callable
    numba_vjp: Callable
    jax_forward: Callable
    params: tuple = ()
    version: int = 0
    vjp_reads_outputs: bool = False
    depends: tuple = ()
    home: str | None = None      # the module declaring the stage (default: the kernel's)
    passes: tuple = ()           # (input, output, start, stop): output[..., start:stop] == input

    def __post_init__(self):
        names = [i.name for i in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"stage {self.name}: duplicate input names {names}")
        for i in self.inputs:
            i.gradient      # validates
        for o in self.outputs:
            for d in o.shape:
                if isinstance(d, tuple):
                    self.input_index(d[0])
        outputs = [o.name for o in self.outputs]
        for name, out, *_ in self.passes:
            self.input_index(name)
            if out not in outputs:
                raise ValueError(f"stage {self.name}: passes names no output {out!r}")

    def input_index(self, ref) -> int:
        if isinstance(ref, int):
            return ref
        for k, i in enumerate(self.inputs):
            if i.name == ref:
                return k
        raise ValueError(f"stage {self.name}: no input named {ref!r}")

    @functools.cached_property
    def vjp_inputs(self) -> list[int]:
        return [k for k, i in enumerate(self.inputs) if i.gradient == "vjp"]

    @property
    def float_outputs(self) -> list[int]:
        return [k for k, o in enumerate(self.outputs) if o.dtype.startswith("float")]

    @property
    def module(self) -> str:     # where pickle finds the stage's Op classes again
        return self.home or _py(self.numba_forward).__module__

    def source_hash(self) -> str:
        """A hash of the source files defining the Numba functions (and
        `depends`), for the cache key. Read once per process, when the
        stage's Ops are made (`stage_ops`, at import): the key then names
        the code this process runs even if the files change later (a
        background compile that began before an edit would otherwise store
        the old code under the new files' key)."""
        known = self.__dict__.get("_source_hash")
        if known is not None:
            return known
        h = hashlib.sha256()
        files = {__file__, inspect.getsourcefile(entry_numba)} | {inspect.getsourcefile(_py(f))
                              for f in (self.numba_forward, self.numba_vjp)}
        files |= {inspect.getsourcefile(importlib.import_module(m)) for m in self.depends}
        for path in sorted(f for f in files if f):
            with open(path, "rb") as fh:
                h.update(fh.read())
        object.__setattr__(self, "_source_hash", h.hexdigest())    # frozen: set once
        return self._source_hash


def _py(fn):
    """The Python function behind a Numba dispatcher."""
    return getattr(fn, "py_func", fn)


# -- the Ops -----------------------------------------------------------------------
class _Base(Op):
    stage: Stage
    is_grad: bool = False

    def __init__(self, **params):
        if set(params) != set(self.stage.params):
            raise TypeError(f"{type(self).__name__} takes params {self.stage.params}, "
                            f"got {sorted(params)}")
        for k, v in params.items():
            if not _simple(v):
                raise TypeError(f"{type(self).__name__}: param {k}={v!r} must be an int, "
                                "float, bool, str or a tuple of them")
            setattr(self, k, v)

    @property
    def param_values(self) -> tuple:
        return tuple(getattr(self, p) for p in self.stage.params)

    def __reduce__(self):
        # The classes are made at run time: pickle (symphys' graph cache)
        # finds them again through the stage's module and name.
        return (_rebuild, (self.stage.module, self.stage.name, self.is_grad,
                           dict(zip(self.stage.params, self.param_values))))

    def _as_inputs(self, inputs, specs) -> list:
        if len(inputs) != len(specs):
            raise TypeError(f"{self}: expected {len(specs)} inputs, got {len(inputs)}")
        out = []
        for x, (name, ndim, dtype) in zip(inputs, specs):
            x = pt.as_tensor_variable(x)
            if x.ndim != ndim:
                raise TypeError(f"{self}: input {name!r} must have {ndim} dims, got {x.type}")
            if x.dtype != dtype:
                if dtype.startswith("int") and not x.dtype.startswith(("int", "uint", "bool")):
                    raise TypeError(f"{self}: input {name!r} must be {dtype}, got {x.dtype}")
                x = x.astype(dtype)
            out.append(x)
        return out

    def _run(self, fn, node, args, output_storage):
        out = fn(*args, *self.param_values)
        out = out if isinstance(out, tuple) else (out,)
        if len(out) != len(node.outputs):
            raise ValueError(f"{self}: kernel returned {len(out)} arrays, "
                             f"expected {len(node.outputs)}")
        for k, (o, var, store) in enumerate(zip(out, node.outputs, output_storage)):
            o = np.asarray(o)
            if o.dtype != var.dtype or o.ndim != var.ndim:
                raise TypeError(f"{self}: output {k} is {o.dtype} with {o.ndim} dims, "
                                f"declared {var.type}")
            if any(isinstance(a, np.ndarray) and np.shares_memory(o, a) for a in args):
                raise ValueError(f"{self}: output {k} shares memory with an input "
                                 "(kernels must return fresh arrays)")
            store[0] = o

    @staticmethod
    def _store(outs, output_storage):
        for store, o in zip(output_storage, outs):
            store[0] = o


def _simple(v) -> bool:
    if isinstance(v, tuple):
        return all(_simple(x) for x in v)
    return isinstance(v, (int, float, bool, str))


class StageOp(_Base):
    """Forward Op of a stage (subclassed per stage by `stage_ops`)."""

    grad_class: type

    @property
    def grad_op(self) -> "StageGradOp":
        return self.grad_class(**dict(zip(self.stage.params, self.param_values)))

    def make_node(self, *inputs):
        st = self.stage
        inputs = self._as_inputs(inputs, [(i.name, i.ndim, i.dtype) for i in st.inputs])
        outs = []
        for o in st.outputs:
            shape = tuple(d if isinstance(d, int) or d is None
                          else inputs[st.input_index(d[0])].type.shape[d[1]]
                          for d in o.shape)
            outs.append(TensorType(o.dtype, shape=shape)())
        return Apply(self, inputs, outs)

    def perform(self, node, inputs, output_storage):
        st = self.stage
        plan = _output_sizes(st)
        if plan is None:
            self._run(st.numba_forward, node, inputs, output_storage)
            return
        shapes = [tuple(d if isinstance(d, int) else inputs[d[0]].shape[d[1]] for d in sizes)
                  for sizes in plan]
        self._store(entry_numba.call_from_python(st, False, self.param_values, inputs, shapes),
                    output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        st = self.stage
        if any(d is None for o in st.outputs for d in o.shape):
            raise ShapeError(f"{self}: an output size is unknown")
        return [tuple(d if isinstance(d, int) else input_shapes[st.input_index(d[0])][d[1]]
                      for d in o.shape) for o in st.outputs]

    def connection_pattern(self, node):
        return [[i.gradient != "disconnected"] * len(node.outputs) for i in self.stage.inputs]

    def passed_inputs(self, node) -> list:
        """[(input variable, output position, start, stop)] for the stage's
        `passes`: node.outputs[position][..., start:stop] holds the input."""
        st = self.stage
        out_names = [o.name for o in st.outputs]
        return [(node.inputs[st.input_index(i)], out_names.index(o), a, b)
                for i, o, a, b in st.passes]

    def pullback(self, inputs, outputs, cotangents):
        st = self.stage
        cots = [pt.zeros_like(o) if isinstance(c.type, DisconnectedType)
                or not o.dtype.startswith("float") else c.astype(o.dtype)
                for o, c in zip(outputs, cotangents)]
        extra = list(outputs) if st.vjp_reads_outputs else []
        grads = self.grad_op(*inputs, *extra, *cots) if st.vjp_inputs else []
        grads = grads if isinstance(grads, (list, tuple)) else [grads]
        by_input = dict(zip(st.vjp_inputs, grads))
        result = []
        for k, (x, spec) in enumerate(zip(inputs, st.inputs)):
            g = spec.gradient
            result.append(by_input[k] if g == "vjp" else
                          pt.zeros_like(x) if g == "zero" else disconnected_type())
        return result


@functools.lru_cache(maxsize=None)
def _output_sizes(stage: Stage) -> list | None:
    """Per output of `stage`, per axis: its size (int) or (input position,
    axis); None when an output's size is unknown until the kernel runs."""
    if any(d is None for o in stage.outputs for d in o.shape):
        return None
    return [tuple(d if isinstance(d, int) else (stage.input_index(d[0]), d[1]) for d in o.shape)
            for o in stage.outputs]


class StageGradOp(_Base):
    """Pullback Op of a stage: (inputs, [outputs,] cotangents) -> the
    cotangents of the "vjp" inputs."""

    is_grad = True

    def make_node(self, *args):
        st = self.stage
        specs = [(i.name, i.ndim, i.dtype) for i in st.inputs]
        outs = [(o.name, len(o.shape), o.dtype) for o in st.outputs]
        specs += (outs if st.vjp_reads_outputs else []) + [("d" + n, nd, dt) for n, nd, dt in outs]
        args = self._as_inputs(args, specs)
        return Apply(self, args, [args[k].type() for k in st.vjp_inputs])

    def perform(self, node, inputs, output_storage):
        shapes = [inputs[k].shape for k in self.stage.vjp_inputs]
        self._store(entry_numba.call_from_python(self.stage, True, self.param_values, inputs,
                                                 shapes), output_storage)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[k] for k in self.stage.vjp_inputs]

    def pullback(self, inputs, outputs, cotangents):
        raise NotImplementedError("second derivatives of symphys kernels are not implemented "
                                  f"({self})")




def stage_ops(stage: Stage) -> tuple[type, type]:
    """(forward Op class, pullback Op class) of `stage`, made once per stage
    (per module and name: a second stage of the same name replaces it)."""
    stage.source_hash()            # read the sources now, as imported
    key = (stage.module, stage.name)
    known = REGISTRY.get(key)
    if known is not None and known[0] is stage:
        return known[1], known[2]
    props = tuple(stage.params)
    grad = type(f"{stage.name}Grad", (StageGradOp,),
                {"__props__": props, "stage": stage, "__module__": stage.module,
                 "__qualname__": f"{stage.name}Grad"})
    fwd = type(stage.name, (StageOp,),
               {"__props__": props, "stage": stage, "grad_class": grad,
                "__module__": stage.module, "__qualname__": stage.name})
    REGISTRY[key] = (stage, fwd, grad)
    return fwd, grad


def _rebuild(module: str, name: str, is_grad: bool, params: dict):
    importlib.import_module(module)
    _, fwd, grad = REGISTRY[(module, name)]
    return (grad if is_grad else fwd)(**params)


def entry_keys(fgraph) -> set[str]:
    """The Numba entry keys of the stage Ops in `fgraph` and in the inner
    graphs of its loops (and of theirs), with their pullbacks' (asked for
    next, as a rule)."""
    keys, seen, todo = set(), set(), [fgraph]
    while todo:
        graph = todo.pop()
        for node in graph.apply_nodes:
            op = node.op
            if isinstance(op, _Base):
                kinds = entry_numba.param_kinds(op, op.stage.params, op.param_values)
                keys.add(entry_numba.entry_key(op.stage, op.is_grad, kinds))
                if op.stage.vjp_inputs:
                    keys.add(entry_numba.entry_key(op.stage, True, kinds))
            inner = getattr(op, "fgraph", None)
            if inner is not None and id(inner) not in seen:
                seen.add(id(inner))
                todo.append(inner)
    return keys


def prepare_kernels(fgraph) -> None:
    """Compile, in parallel, the kernel entries `fgraph` will call that are
    not yet on disk (`entry_numba.prepare`)."""
    entry_numba.prepare(entry_keys(fgraph))


# -- Numba -------------------------------------------------------------------------
def _install_numba():
    from pytensor.link.numba.cache import compile_numba_function_src
    from pytensor.link.numba.dispatch.basic import (default_hash_key_from_props, numba_njit,
                                                    register_funcify_and_cache_key)

    def wrapper(op, node):
        """njit f(*arrays) -> the one result or the tuple of them: allocates the
        results and calls the kernel's C entry (`entry_numba`)."""
        st = op.stage
        kinds = entry_numba.param_kinds(op, st.params, op.param_values)
        if op.is_grad:
            shapes = [tuple(f"c{k}.shape[{d}]" for d in range(st.inputs[k].ndim))
                      for k in st.vjp_inputs]
        else:
            shapes = []
            for o in st.outputs:
                if any(d is None for d in o.shape):
                    raise TypeError(f"{op}: output {o.name!r} has a size unknown until run; "
                                    "the Numba entry allocates its outputs from the inputs")
                shapes.append(tuple(str(d) if isinstance(d, int)
                                    else f"c{st.input_index(d[0])}.shape[{d[1]}]"
                                    for d in o.shape))
        name = f"{st.name.lower()}_{'vjp' if op.is_grad else 'forward'}"
        src = entry_numba.caller_source(st, op.is_grad, name, op.param_values, kinds, shapes)
        fn = compile_numba_function_src(src, name, {
            "np": np, "call_entry": entry_numba.call_entry})
        return numba_njit(fn)

    def cache_key(op) -> str:
        st = op.stage
        return default_hash_key_from_props(
            op, stage=stage_cache_key(st), reads_outputs=st.vjp_reads_outputs)

    @register_funcify_and_cache_key(StageOp)
    def numba_funcify_stage(op, node, **kwargs):
        return wrapper(op, node), cache_key(op)

    @register_funcify_and_cache_key(StageGradOp)
    def numba_funcify_stage_grad(op, node, **kwargs):
        return wrapper(op, node), cache_key(op)

    return cache_key


numba_cache_key = _install_numba()
"""numba_cache_key(op): the key under which PyTensor caches `op`'s Numba function."""


# -- JAX ---------------------------------------------------------------------------
def _jax_forward_tuple(stage: Stage, params: tuple):
    def f(*inputs):
        out = stage.jax_forward(*inputs, *params)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return f


def _install_jax():
    try:
        import jax
        import jax.numpy as jnp
        from pytensor.link.jax.dispatch.basic import jax_funcify
    except ImportError:     # JAX is optional
        return

    @jax_funcify.register(StageOp)
    def jax_funcify_stage(op, node=None, **kwargs):
        f = _jax_forward_tuple(op.stage, op.param_values)
        dtypes = [o.dtype for o in op.stage.outputs]

        def stage_fn(*inputs):
            out = tuple(jnp.asarray(o, dtype=d) for o, d in zip(f(*inputs), dtypes))
            return out[0] if len(out) == 1 else out
        return stage_fn

    @jax_funcify.register(StageGradOp)
    def jax_funcify_stage_grad(op, node=None, **kwargs):
        st = op.stage
        f = _jax_forward_tuple(st, op.param_values)
        n_in, n_out = len(st.inputs), len(st.outputs)
        wrt, floats = st.vjp_inputs, st.float_outputs

        def stage_vjp(*args):
            inputs, cots = list(args[:n_in]), args[len(args) - n_out:]

            def g(*diff):
                full = list(inputs)
                for k, v in zip(wrt, diff):
                    full[k] = v
                out = f(*full)
                return tuple(out[k] for k in floats)

            primals = [jnp.asarray(inputs[k], dtype=st.inputs[k].dtype) for k in wrt]
            _, pull = jax.vjp(g, *primals)
            res = pull(tuple(jnp.asarray(cots[k], dtype=st.outputs[k].dtype) for k in floats))
            return res[0] if len(res) == 1 else tuple(res)
        return stage_vjp


_install_jax()
