"""The exported folder's format: its manifest (`Manifest`, `TensorSpec`,
`ArtifactFile`), the hashes and versions it records, and the checks of a
call's inputs against the recorded specs. The folder is described in
compiled/README.md; `write` writes one, `read` loads one.
"""

from __future__ import annotations

import enum
import hashlib
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from symphys.errors import ExportError, ParameterError, counted
from symphys.version import __version__

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
    graph_hash digests ("graph_key": `rewritten_graphs.graph_key` of the graph
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

def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def scene_hash(scene) -> str:
    """SHA-256 of a scene's structure (`Scene.structure_key`: everything that
    shapes the graph; parameter values are inputs of the function)."""
    return sha256(scene.structure_key())


def combined_hash(backend: str, scene_digest: str | None, graph_digest: str) -> str:
    return sha256("\n".join([FORMAT, backend, scene_digest or "", graph_digest]))


def versions(backend: str) -> dict[str, str]:
    """The versions a function exported on `backend` in this process depends on."""
    import pytensor


    found = {"symphys": __version__, "pytensor": pytensor.__version__,
             "numpy": np.__version__, "python": platform.python_version()}
    if backend == "numba":
        import numba
        found["numba"] = numba.__version__
    if backend == "jax":
        import jax
        import jaxlib
        found["jax"], found["jaxlib"] = jax.__version__, jaxlib.__version__
    return found


def checked_value(value, spec: TensorSpec, where: str) -> np.ndarray:
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


def checked_inputs(args, specs: Sequence[TensorSpec], where: str) -> list[np.ndarray]:
    if len(args) != len(specs):
        raise ParameterError(f"{where}: takes {counted(len(specs), 'input')} "
                             f"{[s.name for s in specs]}, got {len(args)}")
    return [checked_value(a, s, where) for a, s in zip(args, specs)]


def as_list(outputs) -> list[np.ndarray]:
    return list(outputs) if isinstance(outputs, list) else [outputs]


