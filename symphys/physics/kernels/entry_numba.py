"""Stage kernels behind C entry points, called through a function pointer.

Numba links a callee's code into every caller and optimises and compiles
the linked module again, so a big kernel called from a PyTensor function
(and from the time loop inside it) was compiled once per enclosing function:
most of a cold compile. Here each stage kernel (forward or pullback) gets one
C entry, a `numba.cfunc` cached on disk under the stage's Numba cache key,
and the code PyTensor generates for a stage Op calls it through a pointer
that the process looks up once. A kernel then compiles once per machine,
and the functions that call it stay small.

The entry's C signature is `void(ptrs, shapes, params)`, three addresses:

- ptrs: intp[n] data pointers of the stage's inputs, then of its outputs
  (C-contiguous, allocated by the caller);
- shapes: intp[n, MAX_NDIM] their shapes (axes past an array's rank unused);
- params: float64[max(1, p)] the stage's params, in `Stage.params` order
  (an entry is made per stage and per kinds of its params, "i" integer or
  "f" float: integers reach the kernel as ints).

The entry wraps the arrays, runs the kernel (which returns fresh arrays)
and copies its results into the outputs.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import inspect
import os
import sys
from pathlib import Path

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

from symphys import storage
from symphys.storage import numba_files
from symphys.physics.kernels.entry_workers import compile_in_workers
from symphys.physics.kernels.registry import stage_cache_key, stage_named
from symphys.progress import detailed

MAX_NDIM = 3
_SIGNATURE = types.void(types.intp, types.intp, types.intp)
_ENTRIES: dict = {}      # key -> numba CFunc


@intrinsic
def _voidptr(typingctx, address):
    """The integer `address` as a void pointer (for `numba.carray`)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(address), codegen


@intrinsic
def call_entry(typingctx, key, ptrs, shapes, params, keep):
    """Call the entry named by the string literal `key` with the data
    addresses of the arrays `ptrs`, `shapes` and `params`. `keep`: a tuple
    of the arrays the entry reads or writes, unused here but held (as the
    three are) until the call returns. The entry's pointer is asked of
    `entry_pointer(key)` on the first call and kept in a global of the
    calling module, so a function loaded from Numba's disk cache finds it
    again in a new process."""
    if not isinstance(key, types.StringLiteral):
        return None
    name = "_symphys_entry_" + "".join(c if c.isalnum() else "_" for c in key.literal_value)
    asker = typingctx.resolve_value_type(entry_pointer)
    ask = typingctx.resolve_function_type(asker, [types.unicode_type], {})

    def codegen(context, builder, sig, args):
        byte_ptr = ir.IntType(8).as_pointer()
        slot = cgutils.add_global_variable(builder.module, byte_ptr, name)
        slot.linkage = "private"
        slot.initializer = byte_ptr(None)
        slot.align = 64
        cached = builder.load_atomic(slot, "acquire", 64)
        pointer = cgutils.alloca_once_value(builder, cached)
        with builder.if_then(builder.icmp_unsigned("==", cached, byte_ptr(None)),
                             likely=False):
            text = context.get_constant_generic(builder, types.unicode_type, key.literal_value)
            address = context.get_function(asker, ask)(builder, [text])
            fresh = builder.inttoptr(address, byte_ptr)
            builder.store_atomic(fresh, slot, "release", 64)
            builder.store(fresh, pointer)
        return _call_pointer(context, builder, builder.load(pointer), sig.args[1:4], args[1:4])

    return types.none(key, ptrs, shapes, params, keep), codegen


def _call_pointer(context, builder, target, array_types, arrays):
    """Emit the call of the entry at `target` (a pointer) with the data
    addresses of the three arrays (ptrs, shapes, params)."""
    intp = context.get_value_type(types.intp)
    fnty = ir.FunctionType(ir.VoidType(), [intp, intp, intp])
    target = builder.bitcast(target, fnty.as_pointer())
    addresses = [builder.ptrtoint(context.make_array(t)(context, builder, v).data, intp)
                 for t, v in zip(array_types, arrays)]
    builder.call(target, addresses)
    return context.get_dummy_value()


@intrinsic
def _call_address(typingctx, address, ptrs, shapes, params):
    """Call the entry at the integer `address` (see `call_entry`)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        target = builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        return _call_pointer(context, builder, target, sig.args[1:], args[1:])

    return types.none(address, ptrs, shapes, params), codegen


# A NumPy array object starts with PyObject_HEAD (two words), then its data
# pointer, its number of dimensions (a C int), pointers to its shape,
# strides, base and dtype, and its flags (a C int): the layout NumPy's
# inline accessors (PyArray_DATA, PyArray_NDIM, PyArray_DIMS,
# PyArray_FLAGS) compile into every extension module. `_layout_known`
# checks it once per process; else `call_from_python` takes its Python path.
_DATA_WORD, _NDIM_WORD, _DIMS_WORD, _FLAGS_WORD = 2, 3, 4, 8
_C_CONTIGUOUS = 1     # NPY_ARRAY_C_CONTIGUOUS


@numba.njit(cache=True)
def _run_entry(address, objects, params):
    """Call the entry at `address` on the arrays whose object addresses
    (`id`) are `objects` (n,) (the kernel's inputs, then its outputs, of
    the kernel's dtypes; kept alive by the caller), reading their data
    pointers and shapes from the array objects. False, calling nothing,
    if one is not C-contiguous."""
    n = objects.shape[0]
    ptrs = np.empty(n, np.intp)
    shapes = np.zeros((n, MAX_NDIM), np.intp)
    for k in range(n):
        head = numba.carray(_voidptr(objects[k]), (_FLAGS_WORD + 1,), np.intp)
        ints = numba.carray(_voidptr(objects[k]), (2 * _FLAGS_WORD + 1,), np.int32)
        if not ints[2 * _FLAGS_WORD] & _C_CONTIGUOUS:
            return False
        ndim = ints[2 * _NDIM_WORD]
        dims = numba.carray(_voidptr(head[_DIMS_WORD]), (ndim,), np.intp)
        ptrs[k] = head[_DATA_WORD]
        for d in range(ndim):
            shapes[k, d] = dims[d]
    _call_address(address, ptrs, shapes, params)
    return True


def only(x):
    """x[0] for a 1-tuple, else x: a kernel may return its one result either
    way (Numba picks the branch when it compiles)."""
    return x[0] if isinstance(x, tuple) else x


@overload(only)
def _only(x):
    if isinstance(x, types.BaseTuple):
        return lambda x: x[0]
    return lambda x: x


@numba.njit(cache=True)
def copy_into(dst, src):
    """dst[...] = src for two C-contiguous arrays of one size (a loop: a
    slice assignment compiles Numba's shape-mismatch error path, seconds)."""
    flat, values = dst.reshape(dst.size), src.reshape(src.size)
    for k in range(flat.size):
        flat[k] = values[k]


@numba.njit(cache=True)
def copy_scalar_into(dst, src):
    """dst[()] = src for a 0-d dst and a scalar or 0-d src."""
    dst.reshape(1)[0] = np.asarray(src).reshape(1)[0]


# -- the entries ----------------------------------------------------------------
def _signature(stage, is_grad: bool) -> tuple[list, list]:
    """([(ndim, dtype)] of the kernel's array arguments, [(ndim, dtype)] of
    its results), for the forward kernel or the pullback."""
    ins = [(i.ndim, i.dtype) for i in stage.inputs]
    outs = [(len(o.shape), o.dtype) for o in stage.outputs]
    if not is_grad:
        return ins, outs
    args = ins + (outs if stage.vjp_reads_outputs else []) + outs
    return args, [ins[k] for k in stage.vjp_inputs]


def _array(k: int, ndim: int, dtype: str) -> str:
    if ndim == 0:
        return f"carray(_voidptr(ptrs[{k}]), (1,), np.{dtype}).reshape(())"
    shape = ", ".join(f"shapes[{k}, {d}]" for d in range(ndim))
    return f"carray(_voidptr(ptrs[{k}]), ({shape},), np.{dtype})"


def param_kinds(op_name, names, values) -> str:
    """"i" or "f" per param value (ints and bools: "i"); other values raise."""
    kinds = ""
    for name, v in zip(names, values):
        if isinstance(v, (bool, int, np.integer)):
            kinds += "i"
        elif isinstance(v, (float, np.floating)):
            kinds += "f"
        else:
            raise TypeError(f"{op_name}: param {name}={v!r}: a Numba entry takes int and "
                            "float params only")
    return kinds


def entry_source(stage, is_grad: bool, kinds: str) -> str:
    """The Python source of the entry of `stage`'s kernel (see the module
    docstring)."""
    args, results = _signature(stage, is_grad)
    n = len(args) + len(results)
    lines = ["def entry(ptrs_address, shapes_address, params_address):",
             f"    ptrs = carray(_voidptr(ptrs_address), ({n},), np.intp)",
             f"    shapes = carray(_voidptr(shapes_address), ({n}, {MAX_NDIM}), np.intp)",
             f"    params = carray(_voidptr(params_address), ({max(1, len(kinds))},), "
             "np.float64)"]
    names = []
    for k, (ndim, dtype) in enumerate(args):
        lines.append(f"    a{k} = {_array(k, ndim, dtype)}")
        names.append(f"a{k}")
    names += [f"int(params[{p}])" if kind == "i" else f"params[{p}]"
              for p, kind in enumerate(kinds)]
    lines.append(f"    out = kernel({', '.join(names)})")
    for j, (ndim, dtype) in enumerate(results):
        result = f"out[{j}]" if len(results) > 1 else "only(out)"
        copy = "copy_into" if ndim else "copy_scalar_into"
        lines.append(f"    {copy}({_array(len(args) + j, ndim, dtype)}, {result})")
    return "\n".join(lines) + "\n"


def entry_key(stage, is_grad: bool, kinds: str) -> str:
    return f"{stage.module}.{stage.name}.{'vjp' if is_grad else 'forward'}.{kinds or '_'}"


def _entry_cache_key(key: str) -> str:
    module, name, direction, kinds = key.rsplit(".", 3)
    return f"{stage_cache_key(stage_named(module, name))}_{direction}_{kinds.strip('_')}_entry"


def on_disk(key: str) -> bool:
    """Whether the entry `key` is in Numba's disk cache (PyTensor's folder)."""
    from pytensor.link.numba.cache import NUMBA_CACHE_PATH

    return any(NUMBA_CACHE_PATH.glob(f"*-{_entry_cache_key(key)}.*nbi"))


def _compile_weight(key: str) -> int:
    """Bytes of source behind an entry's kernel (the larger, the longer its
    compile: compiled first)."""
    module, name, direction, _ = key.rsplit(".", 3)
    stage = stage_named(module, name)
    kernel = stage.numba_vjp if direction == "vjp" else stage.numba_forward
    return len(inspect.getsource(inspect.getmodule(getattr(kernel, "py_func", kernel))))


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def prepare(keys) -> None:
    """Compile the entries `keys` that neither this process nor the disk
    cache has, in worker processes (in parallel where there are several
    cores; a cold machine's first graph: about a minute on one core for all
    the stages), which keep the kernels' own Numba cache in
    `kernel_cache_dir`. Nothing where PyTensor's Numba folder cannot be
    written (`storage.writable`)."""
    from pytensor.link.numba.cache import NUMBA_CACHE_PATH

    missing = sorted({k for k in keys if k not in _ENTRIES and not on_disk(k)},
                     key=_compile_weight, reverse=True)
    # Where nothing can be kept, each entry compiles (uncached) on first use.
    if not missing or not storage.writable(NUMBA_CACHE_PATH):
        return
    # Another process compiling entries: wait, then find them on disk.
    with storage.file_lock(NUMBA_CACHE_PATH / "symphys-entries.lock",
                          "waiting for another process compiling the physics kernels"):
        missing = [k for k in missing if not on_disk(k)]
        workers = min(len(missing), _cpus())
        if not missing:
            return
        shares = [missing[w::workers] for w in range(workers)]
        env = dict(worker_env(), NUMBA_CACHE_DIR=kernel_cache_dir(missing))
        with detailed():
            failed = compile_in_workers(shares, env)
        for share, err in failed:     # compiled here instead, where any error shows
            print(f"symphys: a kernel compile process failed; compiling {share} here:\n"
                  f"{err[-2000:]}", file=sys.stderr, flush=True)
            for key in share:
                entry_address(key)


def kernel_cache_dir(keys) -> str:
    """Where the worker processes keep Numba's cache of the kernels behind
    the entries `keys`: a folder named for their stages' sources. Numba
    keys a cached function on its own file only, so a kernel cached before
    a module it calls changed would be loaded stale; in a folder of its own
    per version of every source the kernels read, it cannot be."""
    from pytensor.link.numba.cache import NUMBA_CACHE_PATH

    sources = sorted({stage_named(*key.rsplit(".", 3)[:2]).source_hash() for key in keys})
    digest = hashlib.sha256("".join(sources).encode()).hexdigest()[:16]
    return str(NUMBA_CACHE_PATH / f"symphys-kernels-{digest}")


def worker_env() -> dict:
    """This process's environment, with symphys importable and PyTensor's
    cache folder (where the entries go) as this process has it."""
    from pytensor.configdefaults import config

    env = dict(os.environ)
    home = str(Path(__file__).resolve().parents[3])      # the folder holding symphys/
    # This process's import path: a stage may be declared outside symphys.
    paths = [home] + [os.path.abspath(p) for p in sys.path if p] + [env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    flags = env.get("PYTENSOR_FLAGS", "")
    if "base_compiledir" not in flags:
        folder = f"base_compiledir={config.base_compiledir}"
        env["PYTENSOR_FLAGS"] = ",".join(f for f in (flags, folder) if f)
    return env


def entry_address(key: str) -> int:
    """The address of the entry `key` (an `entry_key`), compiled (or loaded
    from Numba's disk cache) on first use in this process."""
    entry = _ENTRIES.get(key)
    if entry is None:
        from pytensor.link.numba.cache import compile_numba_function_src

        module, name, direction, kinds = key.rsplit(".", 3)
        kinds = kinds.strip("_")
        stage = stage_named(module, name)
        is_grad = direction == "vjp"
        kernel = stage.numba_vjp if is_grad else stage.numba_forward
        fn = compile_numba_function_src(
            entry_source(stage, is_grad, kinds), "entry",
            {"kernel": kernel, "carray": numba.carray, "np": np, "_voidptr": _voidptr,
             "copy_into": copy_into, "copy_scalar_into": copy_scalar_into, "only": only,
             "__name__": __name__},
            cache_key=_entry_cache_key(key))
        entry = _ENTRIES[key] = _cfunc(fn, key, kernel)
    return entry.address


def _cfunc(fn, key: str, kernel):
    """The C entry of `fn`, loaded from Numba's disk cache or compiled into
    it; damaged files of its cache and of its kernel's replaced, and
    compiled uncached where the folder cannot be written."""
    from pytensor.link.numba.cache import NUMBA_CACHE_PATH

    def build(cache=on_disk(key) or storage.writable(NUMBA_CACHE_PATH)):
        return numba.cfunc(_SIGNATURE, cache=cache, error_model="numpy")(fn)

    places = [(NUMBA_CACHE_PATH, _entry_cache_key(key))]
    # The kernel's own Numba cache (a worker's: `kernel_cache_dir`).
    kernel_cache = getattr(getattr(kernel, "_cache", None), "cache_path", None)
    if kernel_cache:
        places.append((Path(kernel_cache), ""))
    try:
        return numba_files.compile_healing(build, places)
    except OSError as err:                # a damaged file that cannot be replaced
        storage.cannot_write(NUMBA_CACHE_PATH, err)
        return build(cache=False)


def caller_source(stage, is_grad: bool, name: str, params: tuple, kinds: str,
                  out_shapes: list) -> str:
    """The source of `name(*arrays)`: the function PyTensor's Numba backend
    calls for the stage Op, which allocates the results, gathers pointers
    and shapes and calls the entry. out_shapes: one tuple of source
    expressions per result (in terms of the contiguous inputs c0, c1, ...)."""
    args, results = _signature(stage, is_grad)
    n = len(args) + len(results)
    lines = [f"def {name}({', '.join(f'a{k}' for k in range(len(args)))}):"]
    lines += [f"    c{k} = np.ascontiguousarray(a{k})" for k in range(len(args))]
    for j, (shape, (_, dtype)) in enumerate(zip(out_shapes, results)):
        size = f"({', '.join(shape)},)" if shape else "()"
        lines.append(f"    c{len(args) + j} = np.empty({size}, np.{dtype})")
    lines += [f"    ptrs = np.empty({n}, np.intp)",
              f"    shapes = np.zeros(({n}, {MAX_NDIM}), np.intp)",
              f"    params = np.zeros({max(1, len(params))}, np.float64)"]
    for p, (value, kind) in enumerate(zip(params, kinds)):
        text = int(value) if kind == "i" else f"float({str(float(value))!r})"
        lines.append(f"    params[{p}] = {text}")
    for k, (ndim, _) in enumerate(args + results):
        lines.append(f"    ptrs[{k}] = c{k}.ctypes.data")
        lines += [f"    shapes[{k}, {d}] = c{k}.shape[{d}]" for d in range(ndim)]
    key = entry_key(stage, is_grad, kinds)
    everything = ", ".join(f"c{k}" for k in range(n))
    lines.append(f"    call_entry({key!r}, ptrs, shapes, params, ({everything},))")
    outs = [f"c{len(args) + j}" for j in range(len(results))]
    lines.append(f"    return {outs[0] if len(outs) == 1 else '(' + ', '.join(outs) + ')'}")
    return "\n".join(lines) + "\n"


_PLANS: dict = {}    # (stage key, is_grad, params) -> _Plan


class _Plan:
    """What a call of one entry from Python needs besides its arrays."""

    def __init__(self, stage, is_grad: bool, params: tuple):
        args, results = _signature(stage, is_grad)
        key = entry_key(stage, is_grad, param_kinds(stage.name, stage.params, params))
        self.address = entry_address(key)
        self.arg_dtypes = [np.dtype(dtype) for _, dtype in args]
        self.result_dtypes = [np.dtype(dtype) for _, dtype in results]
        self.params = np.array([float(v) for v in params] or [0.0], np.float64)


def call_from_python(stage, is_grad: bool, params: tuple, arrays: list,
                     out_shapes: list) -> list:
    """Run the entry of `stage`'s kernel from Python: `arrays` (the kernel's
    array arguments, made contiguous of their declared dtypes here) in, fresh
    arrays of `out_shapes` out. The kernel is the one the compiled callers
    use, so running a graph in PyTensor's Python VM compiles nothing more
    (but `_run_entry`, once per machine)."""
    plan_key = (stage.module, stage.name, is_grad, params)
    plan = _PLANS.get(plan_key)
    if plan is None:
        plan = _PLANS[plan_key] = _Plan(stage, is_grad, params)
    outs = [np.empty(shape, dtype) for shape, dtype in zip(out_shapes, plan.result_dtypes)]
    # (The Ops' inputs have the kernel's dtypes: `make_node` casts them.)
    if _layout_known() and _run_entry(plan.address, np.array([id(a) for a in arrays + outs],
                                                             np.intp), plan.params):
        return outs
    everything = [a if a.flags.c_contiguous and a.dtype == dtype
                  else np.ascontiguousarray(a, dtype=dtype)
                  for a, dtype in zip(arrays, plan.arg_dtypes)] + outs
    ptrs = np.array([a.__array_interface__["data"][0] for a in everything], np.intp)
    shapes = np.array([a.shape + (0,) * (MAX_NDIM - a.ndim) for a in everything], np.intp)
    _call_arrays(plan.address, ptrs, shapes, plan.params)
    return outs


@numba.njit(cache=True)
def _call_arrays(address, ptrs, shapes, params):
    _call_address(address, ptrs, shapes, params)


@functools.lru_cache(maxsize=None)
def _layout_known() -> bool:
    """Whether this NumPy's array objects have the layout `_run_entry` reads."""
    probe = np.zeros((2, 3, 5))[:, :2]
    word = ctypes.sizeof(ctypes.c_void_p)
    if word != 8:
        return False
    base = id(probe)
    dims = ctypes.c_void_p.from_address(base + word * _DIMS_WORD).value
    flags = [ctypes.c_int.from_address(id(a) + word * _FLAGS_WORD).value & _C_CONTIGUOUS
             for a in (probe, np.zeros(3))]
    return (ctypes.c_void_p.from_address(base + word * _DATA_WORD).value
            == probe.__array_interface__["data"][0]
            and ctypes.c_int.from_address(base + word * _NDIM_WORD).value == probe.ndim
            and tuple((ctypes.c_ssize_t * 3).from_address(dims)) == probe.shape
            and flags == [0, _C_CONTIGUOUS])


@numba.njit(cache=True)
def entry_pointer(key):
    """The address of the entry `key`, asked of Python (`entry_address`)."""
    with numba.objmode(address="intp"):
        address = entry_address(key)
    return address
