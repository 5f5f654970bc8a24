"""Exported folders read back: `load_compiled(path)` checks the manifest,
every file's size and SHA-256 and the versions, then links the stored graph
(numba, cvm) or deserialises the `jax.export` function (jax).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from symphys.compiler.backends import (REWRITES_LOOPS_IN_PLACE, Backend, Compiled, jax_with_float64,
                                       mode_for)
from symphys.compiler.caches import rewritten_graphs
from symphys.compiler.caches.function_files import ExportedFunction
from symphys.compiler.export.manifest import (CHECKED_VERSIONS, MANIFEST, ArtifactFile,
                                              ArtifactKind, Manifest, TensorSpec, checked_inputs,
                                              scene_hash, sha256, versions)
from symphys.errors import ExportError, counted

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
    digest = sha256(data)
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
        values = checked_inputs(args, self.inputs, str(self.path))
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
            inner = rewritten_graphs.link(blobs[kind], mode, backend in REWRITES_LOOPS_IN_PLACE)
        except Exception as err:
            raise ExportError(f"{folder / manifest.file(kind).file}: the pickled graph does "
                              f"not load ({type(err).__name__}: {err})") from err
        if len(inner.maker.fgraph.inputs) != len(names):
            raise ExportError(f"{where}: field 'inputs' lists {counted(len(names), 'input')}, the "
                              f"graph has {len(inner.maker.fgraph.inputs)}")
    compiled = Compiled(inner, backend, names, single=manifest.single,
                        graph_key=manifest.graph_hash if manifest.graph_hash_of == "graph_key"
                        else None, rewrites_on=manifest.rewrites)
    return LoadedFunction(folder, manifest, compiled)


def _load_jax(folder: Path, manifest: Manifest, blobs: dict):
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


