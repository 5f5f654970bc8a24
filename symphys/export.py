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
  pickled as `compile_cache` keeps it (`compile_cache.graph_bytes`); loading
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

The command line's `symphys export` is `cli_main` (registered by
`add_parser`).
"""

from __future__ import annotations

import enum
import hashlib
import io
import json
import os
import platform
import shutil
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from symphys.errors import ExportError, ParameterError

FORMAT = "symphys-export/1"
MANIFEST = "manifest.json"
GRAPH_FILE = "graph.pkl"
JAX_FILE = "function.jax"
EXAMPLE_FILE = "example.npz"
LOADER_FILE = "load.py"
# Versions a pickled graph needs to match exactly (its ops are these
# libraries' classes); a jax.export artifact carries its own compatibility.
CHECKED_VERSIONS = ("symphys", "pytensor", "numpy")


class ArtifactKind(enum.Enum):
    """What a file of an exported folder holds."""

    PYTENSOR_GRAPH = "pytensor-graph"   # graph.pkl: pickled rewritten graph (numba, cvm)
    JAX_EXPORT = "jax-export"           # function.jax: jax.export serialisation
    EXAMPLE = "example"                 # example.npz: example inputs and outputs
    LOADER = "loader"                   # load.py: standalone JAX runner


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: `shape` has None for a length that may vary."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str

    def accepts(self, shape: tuple[int, ...]) -> bool:
        return len(shape) == len(self.shape) and all(
            want is None or want == got for want, got in zip(self.shape, shape))

    def shape_text(self) -> str:
        parts = ["any" if n is None else str(n) for n in self.shape]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class ArtifactFile:
    """A file of the folder, with what the manifest knows of it."""

    file: str
    kind: ArtifactKind
    bytes: int
    sha256: str

    def to_json(self) -> dict:
        return {"file": self.file, "kind": self.kind.value, "bytes": self.bytes,
                "sha256": self.sha256}


@dataclass(frozen=True)
class Manifest:
    """The contents of `manifest.json` (see compiled/README.md).

    hash: SHA-256 of the format, backend, scene_hash and graph_hash, what
    `load_compiled(expected_hash=)` compares. graph_hash_of: what
    graph_hash digests ("graph_key": `compile_cache.graph_key` of the graph
    before rewriting; "rewritten-graph": a print of the rewritten graph;
    "stablehlo": the exported StableHLO module)."""

    format: str
    backend: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    single: bool
    versions: Mapping[str, str]
    scene_name: str | None
    scene_hash: str | None
    graph_hash: str
    graph_hash_of: str
    hash: str
    rewrites: bool | None
    files: tuple[ArtifactFile, ...]
    description: str = ""
    created: str = ""
    metadata: Mapping = field(default_factory=dict)

    def file(self, kind: ArtifactKind) -> ArtifactFile | None:
        return next((f for f in self.files if f.kind is kind), None)

    def to_json(self) -> dict:
        return {"format": self.format, "backend": self.backend,
                "description": self.description, "created": self.created,
                "inputs": [s.to_json() for s in self.inputs],
                "outputs": [s.to_json() for s in self.outputs],
                "single": self.single, "versions": dict(self.versions),
                "scene_name": self.scene_name, "scene_hash": self.scene_hash,
                "graph_hash": self.graph_hash, "graph_hash_of": self.graph_hash_of,
                "hash": self.hash, "rewrites": self.rewrites,
                "files": [f.to_json() for f in self.files],
                "metadata": dict(self.metadata)}

    @classmethod
    def from_json(cls, doc, where: str) -> "Manifest":
        """Parse a manifest document; `where` (its path) names it in errors."""
        def need(d, key, kind: type, name=None):
            name = name or key
            if not isinstance(d, dict) or key not in d:
                raise ExportError(f"{where}: field '{name}' is missing")
            value = d[key]
            if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
                raise ExportError(f"{where}: field '{name}' must be of type "
                                  f"{kind.__name__}, got {value!r}")
            return value

        fmt = need(doc, "format", str)
        if fmt != FORMAT:
            raise ExportError(f"{where}: field 'format' is {fmt!r}; this symphys reads "
                              f"{FORMAT!r} (re-export the function)")

        def specs(key):
            out = []
            for i, d in enumerate(need(doc, key, list)):
                shape = need(d, "shape", list, f"{key}[{i}].shape")
                if not all(n is None or isinstance(n, int) and not isinstance(n, bool)
                           and n >= 0 for n in shape):
                    raise ExportError(f"{where}: field '{key}[{i}].shape' must hold "
                                      f"lengths or null, got {shape}")
                dtype = need(d, "dtype", str, f"{key}[{i}].dtype")
                try:
                    np.dtype(dtype)
                except TypeError:
                    raise ExportError(f"{where}: field '{key}[{i}].dtype': unknown dtype "
                                      f"{dtype!r}") from None
                out.append(TensorSpec(need(d, "name", str, f"{key}[{i}].name"),
                                      tuple(shape), dtype))
            return tuple(out)

        files = []
        for i, d in enumerate(need(doc, "files", list)):
            name = need(d, "file", str, f"files[{i}].file")
            if Path(name).name != name or name in ("", ".", "..", MANIFEST):
                raise ExportError(f"{where}: field 'files[{i}].file' must be a plain file "
                                  f"name, got {name!r}")
            kind = need(d, "kind", str, f"files[{i}].kind")
            try:
                kind = ArtifactKind(kind)
            except ValueError:
                raise ExportError(f"{where}: field 'files[{i}].kind': unknown kind {kind!r}; "
                                  f"known: {[k.value for k in ArtifactKind]}") from None
            files.append(ArtifactFile(name, kind, need(d, "bytes", int, f"files[{i}].bytes"),
                                      need(d, "sha256", str, f"files[{i}].sha256")))
        backend = need(doc, "backend", str)
        if backend not in ("numba", "jax", "cvm"):
            raise ExportError(f"{where}: field 'backend': unknown backend {backend!r}")
        versions = need(doc, "versions", dict)
        rewrites = doc.get("rewrites")
        return cls(format=fmt, backend=backend, inputs=specs("inputs"),
                   outputs=specs("outputs"), single=need(doc, "single", bool),
                   versions={str(k): str(v) for k, v in versions.items()},
                   scene_name=doc.get("scene_name"), scene_hash=doc.get("scene_hash"),
                   graph_hash=need(doc, "graph_hash", str),
                   graph_hash_of=need(doc, "graph_hash_of", str),
                   hash=need(doc, "hash", str),
                   rewrites=None if rewrites is None else bool(rewrites),
                   files=tuple(files), description=str(doc.get("description", "")),
                   created=str(doc.get("created", "")),
                   metadata=dict(doc.get("metadata") or {}))


# -- hashes and versions ------------------------------------------------------

def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def scene_hash(scene) -> str:
    """SHA-256 of a scene's structure (`Scene.structure_key`: everything that
    shapes the graph; parameter values are inputs of the function)."""
    return _sha256(scene.structure_key())


def _combined_hash(backend: str, scene_digest: str | None, graph_digest: str) -> str:
    return _sha256("\n".join([FORMAT, backend, scene_digest or "", graph_digest]))


def versions(backend: str) -> dict[str, str]:
    """The versions a function exported on `backend` in this process depends on."""
    import pytensor

    import symphys

    found = {"symphys": symphys.__version__, "pytensor": pytensor.__version__,
             "numpy": np.__version__, "python": platform.python_version()}
    if backend == "numba":
        import numba
        found["numba"] = numba.__version__
    if backend == "jax":
        import jax
        import jaxlib
        found["jax"], found["jaxlib"] = jax.__version__, jaxlib.__version__
    return found


# -- export -------------------------------------------------------------------

def _static_inputs(fn) -> list[TensorSpec]:
    """The inputs of `Compiled` fn as its graph types them (None: any length)."""
    from symphys.function_store import ExportedFunction

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
            raise ExportError(f"export: input_shapes has {len(given)} entries for "
                              f"{len(static)} inputs {names}")
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


def _checked_value(value, spec: TensorSpec, where: str) -> np.ndarray:
    """`value` as an array of `spec`'s dtype and shape, or a ParameterError
    naming the input. Python numbers and lists are converted when their
    kind fits (an int for a float input); NumPy values must match exactly."""
    array = np.asarray(value)
    want = np.dtype(spec.dtype)
    if array.dtype != want:
        plain = not isinstance(value, (np.ndarray, np.generic))
        if plain and np.can_cast(array.dtype, want, "same_kind"):
            array = array.astype(want)
        else:
            raise ParameterError(f"{where}: input {spec.name!r}: expected dtype {want}, "
                                 f"got {array.dtype}")
    if not spec.accepts(array.shape):
        raise ParameterError(f"{where}: input {spec.name!r}: expected shape "
                             f"{spec.shape_text()}, got {array.shape}")
    return array


def _checked_inputs(args, specs: Sequence[TensorSpec], where: str) -> list[np.ndarray]:
    if len(args) != len(specs):
        raise ParameterError(f"{where}: takes {len(specs)} inputs "
                             f"{[s.name for s in specs]}, got {len(args)}")
    return [_checked_value(a, s, where) for a, s in zip(args, specs)]


def _as_list(outputs) -> list[np.ndarray]:
    return list(outputs) if isinstance(outputs, list) else [outputs]


def _jax_exported(fn, inputs: list[TensorSpec]):
    """The `jax.export.Exported` of a JAX `Compiled`, traced for `inputs`."""
    from symphys.backends import jax_with_float64
    from symphys.function_store import ExportedFunction

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
    `compile_cache` entry it was linked from when there is one (byte for byte,
    so a process loading the export generates the same code, and finds
    Numba's cached machine code), else its graph pickled afresh."""
    from symphys import compile_cache

    folder = compile_cache.cache_dir()
    entry = None if folder is None or fn.graph_key is None else folder / f"{fn.graph_key}.pkl"
    if entry is not None and entry.is_file():
        return entry.read_bytes()
    try:
        return compile_cache.graph_bytes(fn.fn)
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
    from symphys.backends import Backend, Compiled

    if not isinstance(fn, Compiled):
        raise ExportError(f"export: expected a compiled symphys function (symphys.compile, "
                          f"simulate_function, value_and_grad_function), got "
                          f"{type(fn).__name__}")
    path = Path(path)
    backend = fn.backend.value
    inputs = _merged_inputs(_static_inputs(fn), input_shapes)
    example = None
    if example_inputs is not None:
        values = _checked_inputs(list(example_inputs), inputs, "export: example_inputs")
        # Runs before the graph is read: a backend converting the loops
        # rewrites them in place on first link, and the export holds them so.
        example = (values, _as_list(fn(*values)))

    files: dict[str, tuple[ArtifactKind, bytes]] = {}
    if fn.backend is Backend.JAX:
        exported = _jax_exported(fn, inputs)
        if len(exported.in_avals) != len(inputs):
            raise ExportError(f"export: the jax function takes {len(exported.in_avals)} "
                              f"arguments for {len(inputs)} inputs")
        inputs = [TensorSpec(s.name, tuple(a.shape), str(np.dtype(a.dtype)))
                  for s, a in zip(inputs, exported.in_avals)]
        outputs = [(None, tuple(a.shape), str(np.dtype(a.dtype))) for a in exported.out_avals]
        files[JAX_FILE] = (ArtifactKind.JAX_EXPORT, bytes(exported.serialize()))
        files[LOADER_FILE] = (ArtifactKind.LOADER, loader_source())
        graph_of = "graph_key" if fn.graph_key else "stablehlo"
        graph_digest = fn.graph_key or _sha256(exported.mlir_module())
    else:
        from symphys import compile_cache

        inner = fn.fn
        if not hasattr(inner, "maker"):
            raise ExportError(f"export: {backend} function of type {type(inner).__name__} "
                              f"holds no PyTensor graph")
        fgraph = inner.maker.fgraph
        outputs = [(v.name, tuple(v.type.shape), str(np.dtype(v.type.dtype)))
                   for v in fgraph.outputs]
        files[GRAPH_FILE] = (ArtifactKind.PYTENSOR_GRAPH, _graph_bytes(fn))
        graph_of = "graph_key" if fn.graph_key else "rewritten-graph"
        graph_digest = fn.graph_key or _sha256(compile_cache.graph_text(fgraph.outputs))

    if output_names is not None and len(output_names) != len(outputs):
        raise ExportError(f"export: {len(output_names)} output_names for "
                          f"{len(outputs)} outputs")
    outputs = [TensorSpec(output_names[i] if output_names is not None else
                          (name or f"output{i}"), shape, dtype)
               for i, (name, shape, dtype) in enumerate(outputs)]
    if example is not None:
        if len(example[1]) != len(outputs):
            raise ExportError(f"export: the function returned {len(example[1])} outputs, "
                              f"its graph has {len(outputs)}")
        files[EXAMPLE_FILE] = (ArtifactKind.EXAMPLE, _npz_bytes(*example))

    scene_digest = None if scene is None else scene_hash(scene)
    manifest = Manifest(
        format=FORMAT, backend=backend, inputs=tuple(inputs), outputs=tuple(outputs),
        single=bool(fn.single), versions=versions(backend),
        scene_name=None if scene is None else scene.name, scene_hash=scene_digest,
        graph_hash=graph_digest, graph_hash_of=graph_of,
        hash=_combined_hash(backend, scene_digest, graph_digest),
        rewrites=fn.rewrites_on,
        files=tuple(ArtifactFile(name, kind, len(data), _sha256(data))
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


# -- load ---------------------------------------------------------------------

def read_manifest(path) -> Manifest:
    """The parsed `manifest.json` of exported folder `path`."""
    where = Path(path) / MANIFEST
    if not where.is_file():
        raise ExportError(f"{where}: not found; {path} is not an exported function "
                          f"(sp.export or `symphys export` write one)")
    try:
        doc = json.loads(where.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ExportError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(doc, dict):
        raise ExportError(f"{where}: expected a JSON object")
    return Manifest.from_json(doc, str(where))


def _verified_bytes(folder: Path, entry: ArtifactFile) -> bytes:
    """The bytes of `entry`, checked against the manifest's size and SHA-256."""
    where = folder / entry.file
    if not where.is_file():
        raise ExportError(f"{where}: missing (listed in {MANIFEST})")
    data = where.read_bytes()
    if len(data) != entry.bytes:
        raise ExportError(f"{where}: truncated or altered: {len(data)} bytes, {MANIFEST} "
                          f"records {entry.bytes}")
    digest = _sha256(data)
    if digest != entry.sha256:
        raise ExportError(f"{where}: corrupted: SHA-256 {digest[:16]}..., {MANIFEST} "
                          f"records {entry.sha256[:16]}...")
    return data


def _check_versions(manifest: Manifest, where: Path) -> None:
    mine = versions(manifest.backend)
    for name in CHECKED_VERSIONS:
        theirs = manifest.versions.get(name)
        if theirs != mine[name]:
            raise ExportError(
                f"{where}: field 'versions.{name}': exported with {name} {theirs}, this "
                f"process has {mine[name]}; a pickled PyTensor graph needs the same "
                f"symphys, PyTensor and NumPy: re-export it, or pass check_versions=False "
                f"to try anyway")


class LoadedFunction:
    """An exported function read back by `load_compiled`.

    f(*inputs) checks the number of inputs and each one's shape and dtype
    against the manifest (a ParameterError naming the input, the expected
    and the given shape or dtype), then returns what the exported function
    returned: a list of arrays, or one array for a single-output function.
    manifest: the `Manifest`; inputs, outputs: its `TensorSpec`s."""

    def __init__(self, path: Path, manifest: Manifest, compiled):
        self.path = path
        self.manifest = manifest
        self._compiled = compiled

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.manifest.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.manifest.outputs

    @property
    def backend(self) -> str:
        return self.manifest.backend

    def __call__(self, *args):
        values = _checked_inputs(args, self.inputs, str(self.path))
        return self._compiled(*values)

    def example(self) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
        """(inputs, outputs) kept in `example.npz` at export, or None."""
        entry = self.manifest.file(ArtifactKind.EXAMPLE)
        if entry is None:
            return None
        data = np.load(io.BytesIO(_verified_bytes(self.path, entry)), allow_pickle=False)
        return ([data[f"input{i}"] for i in range(len(self.inputs))],
                [data[f"output{i}"] for i in range(len(self.outputs))])

    def __repr__(self) -> str:
        m = self.manifest
        rows = [f"LoadedFunction({str(self.path)!r}, backend={m.backend}, "
                f"scene={m.scene_name!r})"]
        rows += [f"  in  {s.name}: {s.shape_text()} {s.dtype}" for s in m.inputs]
        rows += [f"  out {s.name}: {s.shape_text()} {s.dtype}" for s in m.outputs]
        return "\n".join(rows)


def load_compiled(path, *, scene=None, expected_hash: str | None = None,
                  check_versions: bool = True) -> LoadedFunction:
    """Read back a function written by `export`.

    Every file is checked against the manifest's size and SHA-256; a
    pickled graph (numba, cvm) needs the symphys, PyTensor and NumPy
    versions it was exported with (`check_versions=False` skips that check).
    scene: must have the structure the function was exported for;
    expected_hash: must equal the manifest's `hash`. Any mismatch is an
    ExportError naming the file and field."""
    from symphys import compile_cache
    from symphys.backends import REWRITES_LOOPS_IN_PLACE, Backend, Compiled, mode_for

    folder = Path(path)
    manifest = read_manifest(folder)
    where = folder / MANIFEST
    blobs = {entry.kind: _verified_bytes(folder, entry) for entry in manifest.files}
    if scene is not None:
        mine = scene_hash(scene)
        if manifest.scene_hash is None:
            raise ExportError(f"{where}: field 'scene_hash' is null (exported without a "
                              f"scene), so scene {scene.name!r} cannot be checked")
        if manifest.scene_hash != mine:
            raise ExportError(f"{where}: field 'scene_hash': exported for scene "
                              f"{manifest.scene_name!r} ({manifest.scene_hash[:16]}...), "
                              f"given scene {scene.name!r} has another structure "
                              f"({mine[:16]}...)")
    if expected_hash is not None and expected_hash != manifest.hash:
        raise ExportError(f"{where}: field 'hash' is {manifest.hash}, expected "
                          f"{expected_hash}")
    backend = Backend(manifest.backend)
    names = [s.name for s in manifest.inputs]
    if backend is Backend.JAX:
        inner = _load_jax(folder, manifest, blobs)
    else:
        kind = ArtifactKind.PYTENSOR_GRAPH
        if kind not in blobs:
            raise ExportError(f"{where}: field 'files' lists no {kind.value} file")
        if check_versions:
            _check_versions(manifest, where)
        mode = mode_for(backend, manifest.rewrites)
        try:
            inner = compile_cache.link(blobs[kind], mode, backend in REWRITES_LOOPS_IN_PLACE)
        except Exception as err:
            raise ExportError(f"{folder / manifest.file(kind).file}: the pickled graph does "
                              f"not load ({type(err).__name__}: {err})") from err
        if len(inner.maker.fgraph.inputs) != len(names):
            raise ExportError(f"{where}: field 'inputs' lists {len(names)} inputs, the "
                              f"graph has {len(inner.maker.fgraph.inputs)}")
    compiled = Compiled(inner, backend, names, single=manifest.single,
                        graph_key=manifest.graph_hash if manifest.graph_hash_of == "graph_key"
                        else None, rewrites_on=manifest.rewrites)
    return LoadedFunction(folder, manifest, compiled)


def _load_jax(folder: Path, manifest: Manifest, blobs: dict):
    from symphys.backends import jax_with_float64
    from symphys.function_store import ExportedFunction

    where = folder / MANIFEST
    kind = ArtifactKind.JAX_EXPORT
    if kind not in blobs:
        raise ExportError(f"{where}: field 'files' lists no {kind.value} file")
    jax = jax_with_float64()
    from jax import export as jax_export

    file = folder / manifest.file(kind).file
    try:
        exported = jax_export.deserialize(bytearray(blobs[kind]))
    except Exception as err:
        raise ExportError(f"{file}: JAX {jax.__version__} cannot read it (exported with JAX "
                          f"{manifest.versions.get('jax')}): {type(err).__name__}: "
                          f"{err}") from err
    avals = [(tuple(a.shape), str(np.dtype(a.dtype))) for a in exported.in_avals]
    if avals != [(s.shape, s.dtype) for s in manifest.inputs]:
        raise ExportError(f"{where}: field 'inputs' does not match {file.name}'s arguments "
                          f"{avals}")
    return ExportedFunction(exported, [(s.name, s.shape, s.dtype) for s in manifest.inputs])


def loader_source() -> bytes:
    """The standalone JAX runner written beside a jax export as load.py
    (`symphys/export_loader.py`, which symphys itself never imports)."""
    return resources.files("symphys").joinpath("export_loader.py").read_bytes()


# -- command line -------------------------------------------------------------

# The simulate function's one output: (steps + 1, B, bodies, 18), the last
# axis position xyz, rotation (row-major), velocity xyz, angular velocity xyz.
SIMULATE_OUTPUT_NAMES = ("states",)


def final_position_loss(traj):
    """The `--gradient` loss: the sum over bodies (and worlds) of the squared
    norm of each body's final position."""
    total = 0.0
    for position in traj.position.values():
        final = position[:, -1] if traj.batched else position[-1]
        total = total + (final ** 2).sum()
    return total


def add_parser(subparsers) -> None:
    """Register `symphys export` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "export", help="write a scene's compiled function to a folder (compiled/README.md)")
    p.add_argument("scene", help="a scene name (see `symphys list`) or a JSON path")
    p.add_argument("--steps", type=int, required=True,
                   help="steps of the example run (numba, cvm: an input, any count "
                        "runs; jax: fixed)")
    p.add_argument("--backend", default="numba", choices=["numba", "jax", "cvm"],
                   help="compiler (default numba)")
    p.add_argument("--batch", type=int, default=None,
                   help="B worlds: every parameter gets a leading axis of length B "
                        "(numba and cvm then take any B; the example uses this one)")
    p.add_argument("--gradient", metavar="WRT,...", default=None,
                   help="export (loss, gradients in these parameters) instead of the "
                        "trajectory; loss: sum of squared final positions of every body")
    p.add_argument("--out", required=True, help="the folder to write, e.g. compiled/NAME")
    p.add_argument("--description", default="", help="free text stored in the manifest")
    p.set_defaults(func=cli_main)


def cli_main(args) -> int:
    """`symphys export`: the scene's simulate function (or, with --gradient,
    its value and gradient of `final_position_loss`), exported with the
    scene's default parameters as the example."""
    from symphys.api import (_check_steps, resolve_action, simulate_function,
                             value_and_grad_function)
    from symphys.params import check_names, resolve_values
    from symphys.scene_io import load_scene

    scene = load_scene(args.scene)
    steps = _check_steps(args.steps)
    values, _ = resolve_values(scene, None)
    batch = args.batch
    if batch is not None:
        if batch < 1:
            raise ParameterError(f"--batch must be a positive integer, got {batch}")
        values = {k: np.repeat(np.asarray(v)[None], batch, axis=0) for k, v in values.items()}
    batched = tuple(values) if batch is not None else ()
    action, _, _ = resolve_action(scene, None, batch)
    extra = [] if action is None else [action]
    meta = {"scene": scene.name, "steps": steps, "batch": batch}
    if args.gradient:
        wrt = [w.strip() for w in args.gradient.split(",") if w.strip()]
        check_names(scene, [n for n in wrt if not (n == "action" and scene.motors)],
                    "--gradient")
        fn = value_and_grad_function(scene, steps, final_position_loss, wrt, batched,
                                     args.backend, batch=batch)
        example = [*values.values(), *extra]
        names = ["loss", *(f"grad.{n}" for n in wrt)]
        meta.update(function="value_and_grad", wrt=wrt,
                    loss="sum over bodies of |final position|^2")
    else:
        fn = simulate_function(scene, steps, batched, args.backend, batch=batch)
        example = [np.int64(steps), *values.values(), *extra]
        names = list(SIMULATE_OUTPUT_NAMES)
        meta.update(function="simulate",
                    outputs="states (steps + 1, B, bodies, 18): position xyz, rotation "
                            "row-major, velocity xyz, angular velocity xyz")
    path = export(fn, args.out, scene=scene, example_inputs=example, output_names=names,
                  description=args.description, metadata=meta)
    manifest = read_manifest(path)
    print(f"wrote {path}: {meta['function']} of {scene.name} on {args.backend}, "
          f"{len(manifest.inputs)} inputs, {len(manifest.outputs)} outputs "
          f"({', '.join(f.file for f in manifest.files)}, {MANIFEST})")
    return 0
