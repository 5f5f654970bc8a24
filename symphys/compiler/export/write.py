"""Compiled functions written to a folder and read back in another process.

    fn = simulate_function(scene, 100)                 # any `backends.Compiled`
    sp.export(fn, "compiled/ball", scene=scene, example_inputs=[np.int64(100), *values])
    f = sp.load_compiled("compiled/ball")               # later, elsewhere
    outputs = f(np.int64(100), *values)                 # shapes and dtypes checked first

A folder (format `FORMAT`, described in compiled/README.md) holds:

- `manifest.json`: the inputs and outputs (name, shape, dtype; a null
  length is any length), the backend, the versions of symphys, PyTensor,
  NumPy, Python (and Numba or JAX), a hash of the scene's structure and of
  the graph, and every other file of the folder with its size and SHA-256;
- numba, cvm: `graph.pkl`, the compiled function's rewritten PyTensor graph
  pickled as `rewritten_graphs` keeps it (`rewritten_graphs.graph_bytes`); loading
  links it again without rewriting (Numba's machine code comes from
  PyTensor's own disk cache when warm). It needs symphys and the same
  symphys, PyTensor and NumPy versions;
- jax: `function.jax`, the function serialised by `jax.export` (StableHLO
  with concrete shapes), and `load.py`, a script that runs it with JAX and
  NumPy alone, without symphys or PyTensor;
- `example.npz` (when exported with `example_inputs`): the example inputs
  (`input0`, ...) and the outputs the exported function gave for them
  (`output0`, ...).

The output shapes in the manifest are the ones PyTensor infers statically
(numba, cvm: a length that depends on an input, such as the number of steps,
is null) or the ones JAX traced (jax: all concrete); `example.npz` holds
concrete outputs of one call.

Reading a folder back is `symphys.compiler.export.read`; its format is
`symphys.compiler.export.manifest`; the command line's `symphys export` is
`symphys.cli.export`.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from symphys import storage
from symphys.compiler.backends import Backend, Compiled, jax_with_float64
from symphys.compiler.caches import rewritten_graphs
from symphys.compiler.caches.function_files import ExportedFunction
from symphys.compiler.export.manifest import (EXAMPLE_FILE, FORMAT, GRAPH_FILE, JAX_FILE,
                                              LOADER_FILE, MANIFEST, ArtifactFile, ArtifactKind,
                                              Manifest, TensorSpec, as_list, checked_inputs,
                                              combined_hash, scene_hash, sha256, versions)
from symphys.errors import ExportError, counted

# -- export -------------------------------------------------------------------

def _static_inputs(fn) -> list[TensorSpec]:
    """The inputs of `Compiled` fn as its graph types them (None: any length)."""
    inner = fn.fn
    if isinstance(inner, ExportedFunction):
        found = [(n, s, d) for n, s, d in inner.inputs]
    elif hasattr(inner, "maker"):
        found = [(v.name, v.type.shape, v.type.dtype) for v in inner.maker.fgraph.inputs]
    else:
        raise ExportError(f"export: cannot read the inputs of {type(inner).__name__}; "
                          f"export takes functions compiled by symphys "
                          f"(symphys.compile, simulate_function, value_and_grad_function)")
    if len(found) != len(fn.input_names):
        raise ExportError(f"export: the function has {len(found)} graph inputs but "
                          f"{len(fn.input_names)} named inputs (shared variables are not "
                          f"exported)")
    return [TensorSpec(given or name or f"input{i}", tuple(shape), str(np.dtype(dtype)))
            for i, (given, (name, shape, dtype)) in enumerate(zip(fn.input_names, found))]


def _merged_inputs(static: list[TensorSpec], input_shapes) -> list[TensorSpec]:
    """`static` with lengths from `input_shapes` ({name: shape} or one shape
    (or None) per input; None entries mean any length) filled in."""
    if input_shapes is None:
        return static
    names = [s.name for s in static]
    if isinstance(input_shapes, Mapping):
        unknown = [n for n in input_shapes if n not in names]
        if unknown:
            raise ExportError(f"export: input_shapes names {unknown}, which are not inputs; "
                              f"inputs: {names}")
        given = [input_shapes.get(n) for n in names]
    else:
        given = list(input_shapes)
        if len(given) != len(static):
            raise ExportError(f"export: input_shapes has {counted(len(given), 'entry', 'entries')}"
                              f" for {counted(len(static), 'input')} {names}")
    merged = []
    for spec, shape in zip(static, given):
        if shape is None:
            merged.append(spec)
            continue
        shape = tuple(None if n is None else int(n) for n in shape)
        clash = len(shape) != len(spec.shape) or any(
            a is not None and b is not None and a != b for a, b in zip(shape, spec.shape))
        if clash:
            raise ExportError(f"export: input_shapes[{spec.name!r}] = {shape} does not fit "
                              f"the input's shape {spec.shape_text()}")
        merged.append(TensorSpec(spec.name, tuple(a if a is not None else b
                                                  for a, b in zip(spec.shape, shape)),
                                 spec.dtype))
    return merged


def _jax_exported(fn, inputs: list[TensorSpec]):
    """The `jax.export.Exported` of a JAX `Compiled`, traced for `inputs`."""
    jax = jax_with_float64()
    from jax import export as jax_export

    inner = fn.fn
    if isinstance(inner, ExportedFunction):    # from symphys' function store
        exported = inner.exported
        for spec, aval in zip(inputs, exported.in_avals):
            if not spec.accepts(tuple(aval.shape)):
                raise ExportError(f"export: input {spec.name!r} was traced with shape "
                                  f"{tuple(aval.shape)}, not {spec.shape_text()}; compile "
                                  f"the jax function for the shape wanted")
        return exported
    jitted = getattr(getattr(inner, "vm", None), "jit_fn", None)
    if not hasattr(jitted, "trace"):
        raise ExportError("export: this jax function is not a plain jax.jit function "
                          "(PyTensor wraps those with scalar shape inputs); it does not "
                          "export")
    unknown = [s for s in inputs if None in s.shape]
    if unknown:
        raise ExportError(f"export: the jax export needs every input length; input "
                          f"{unknown[0].name!r} has shape {unknown[0].shape_text()}: pass "
                          f"input_shapes={{{unknown[0].name!r}: (...)}}")
    specs = [jax.ShapeDtypeStruct(s.shape, np.dtype(s.dtype)) for s in inputs]
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Skipping Assert")
            return jax_export.export(jitted)(*specs)
    except Exception as err:
        raise ExportError(f"export: jax.export failed ({type(err).__name__}: {err})") from err


def _graph_bytes(fn) -> bytes:
    """The pickled rewritten graph of a numba or cvm `Compiled`: the
    `rewritten_graphs` entry it was linked from when there is one (byte for byte,
    so a process loading the export generates the same code, and finds
    Numba's cached machine code), else its graph pickled afresh."""
    folder = storage.cache_dir()
    entry = None if folder is None or fn.graph_key is None else folder / f"{fn.graph_key}.pkl"
    if entry is not None and entry.is_file():
        return entry.read_bytes()
    try:
        return rewritten_graphs.graph_bytes(fn.fn)
    except Exception as err:
        raise ExportError(f"export: the graph does not pickle "
                          f"({type(err).__name__}: {err})") from err


def _npz_bytes(inputs, outputs) -> bytes:
    buffer = io.BytesIO()
    arrays = {f"input{i}": np.asarray(a) for i, a in enumerate(inputs)}
    arrays.update({f"output{i}": np.asarray(a) for i, a in enumerate(outputs)})
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def export(fn, path, *, scene=None, input_shapes=None, example_inputs=None,
           output_names: Sequence[str] | None = None, description: str = "",
           metadata: Mapping | None = None) -> Path:
    """Write compiled function `fn` (a `backends.Compiled`) to folder `path`
    (replacing an earlier export there); returns the path.

    scene: the scene it was built from (its structure hash goes in the
    manifest; `load_compiled(scene=)` checks it). input_shapes: {name:
    shape} or one shape per input, filling lengths the graph leaves open
    (None entries: any length); the jax export needs every length.
    example_inputs: one value per input; the function is run on them and
    `example.npz` keeps inputs and outputs. output_names: default the graph
    outputs' names, else output0, output1, .... metadata: JSON-able values
    kept in the manifest."""
    if not isinstance(fn, Compiled):
        raise ExportError(f"export: expected a compiled symphys function (symphys.compile, "
                          f"simulate_function, value_and_grad_function), got "
                          f"{type(fn).__name__}")
    path = Path(path)
    backend = fn.backend.value
    inputs = _merged_inputs(_static_inputs(fn), input_shapes)
    example = None
    if example_inputs is not None:
        values = checked_inputs(list(example_inputs), inputs, "export: example_inputs")
        # Runs before the graph is read: a backend converting the loops
        # rewrites them in place on first link, and the export holds them so.
        example = (values, as_list(fn(*values)))

    files: dict[str, tuple[ArtifactKind, bytes]] = {}
    if fn.backend is Backend.JAX:
        exported = _jax_exported(fn, inputs)
        if len(exported.in_avals) != len(inputs):
            raise ExportError(f"export: the jax function takes "
                              f"{counted(len(exported.in_avals), 'argument')} for "
                              f"{counted(len(inputs), 'input')}")
        inputs = [TensorSpec(s.name, tuple(a.shape), str(np.dtype(a.dtype)))
                  for s, a in zip(inputs, exported.in_avals)]
        outputs = [(None, tuple(a.shape), str(np.dtype(a.dtype))) for a in exported.out_avals]
        files[JAX_FILE] = (ArtifactKind.JAX_EXPORT, bytes(exported.serialize()))
        files[LOADER_FILE] = (ArtifactKind.LOADER, loader_source())
        graph_of = "graph_key" if fn.graph_key else "stablehlo"
        graph_digest = fn.graph_key or sha256(exported.mlir_module())
    else:
        inner = fn.fn
        if not hasattr(inner, "maker"):
            raise ExportError(f"export: {backend} function of type {type(inner).__name__} "
                              f"holds no PyTensor graph")
        fgraph = inner.maker.fgraph
        outputs = [(v.name, tuple(v.type.shape), str(np.dtype(v.type.dtype)))
                   for v in fgraph.outputs]
        files[GRAPH_FILE] = (ArtifactKind.PYTENSOR_GRAPH, _graph_bytes(fn))
        graph_of = "graph_key" if fn.graph_key else "rewritten-graph"
        graph_digest = fn.graph_key or sha256(rewritten_graphs.graph_text(fgraph.outputs))

    if output_names is not None and len(output_names) != len(outputs):
        raise ExportError(f"export: {len(output_names)} output_names for "
                          f"{counted(len(outputs), 'output')}")
    outputs = [TensorSpec(output_names[i] if output_names is not None else
                          (name or f"output{i}"), shape, dtype)
               for i, (name, shape, dtype) in enumerate(outputs)]
    if example is not None:
        if len(example[1]) != len(outputs):
            raise ExportError(f"export: the function returned "
                              f"{counted(len(example[1]), 'output')}, "
                              f"its graph has {len(outputs)}")
        files[EXAMPLE_FILE] = (ArtifactKind.EXAMPLE, _npz_bytes(*example))

    scene_digest = None if scene is None else scene_hash(scene)
    manifest = Manifest(
        format=FORMAT, backend=backend, inputs=tuple(inputs), outputs=tuple(outputs),
        single=bool(fn.single), versions=versions(backend),
        scene_name=None if scene is None else scene.name, scene_hash=scene_digest,
        graph_hash=graph_digest, graph_hash_of=graph_of,
        hash=combined_hash(backend, scene_digest, graph_digest),
        rewrites=fn.rewrites_on,
        files=tuple(ArtifactFile(name, kind, len(data), sha256(data))
                    for name, (kind, data) in files.items()),
        description=description, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        metadata=dict(metadata or {}))
    doc = manifest_text(manifest)
    _write_folder(path, {name: data for name, (_, data) in files.items()}, doc)
    return path


def manifest_text(manifest: Manifest) -> str:
    """`manifest.json`'s text: indented JSON, one line per input, output and file."""
    items = list(manifest.to_json().items())
    lines = []
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if key in ("inputs", "outputs", "files") and value:
            rows = ",\n".join("    " + json.dumps(v) for v in value)
            lines.append(f"  {json.dumps(key)}: [\n{rows}\n  ]{comma}")
        else:
            body = json.dumps(value, indent=2).replace("\n", "\n  ")
            lines.append(f"  {json.dumps(key)}: {body}{comma}")
    return "{\n" + "\n".join(lines) + "\n}\n"


def _write_folder(path: Path, files: dict[str, bytes], manifest_text: str) -> None:
    """Write the folder beside `path` and move it into place, so a reader
    sees an earlier export or this one, never a mix."""
    if path.exists() and not (path / MANIFEST).exists() and (
            not path.is_dir() or any(path.iterdir())):
        raise ExportError(f"{path}: exists and is not an exported function (no {MANIFEST}); "
                          f"choose another path or remove it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        (tmp / MANIFEST).write_text(manifest_text)
        tmp.chmod(0o755)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def loader_source() -> bytes:
    """The standalone JAX runner written beside a jax export as load.py
    (`symphys/compiler/export/standalone.py`, which symphys itself never imports)."""
    return resources.files("symphys.compiler.export").joinpath("standalone.py").read_bytes()


