"""Exported compiled functions: round trips in a fresh process, clear errors.

One compiled ball simulation per backend (numba, jax) for the module,
exported once; error tests work on copies of its folder."""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import symphys as sp
from symphys.api import parameter_values, simulate_function
from symphys.cli.export import SIMULATE_OUTPUT_NAMES, add_parser
from symphys.compiler.export.manifest import ArtifactKind
from symphys.compiler.export.read import read_manifest
from symphys.errors import ExportError, ParameterError

STEPS = 10


@pytest.fixture(scope="module")
def scene():
    return sp.load_scene("ball")


def _exported(backend, scene, tmp_path_factory):
    values, batched = parameter_values(scene, None)
    fn = simulate_function(scene, STEPS, batched, backend)
    inputs = [np.int64(STEPS), *values]
    outputs = fn(*inputs)
    path = sp.export(fn, tmp_path_factory.mktemp(backend) / "ball", scene=scene,
                     example_inputs=inputs, output_names=SIMULATE_OUTPUT_NAMES,
                     description=f"ball, {STEPS} steps")
    return SimpleNamespace(backend=backend, fn=fn, inputs=inputs, outputs=outputs, path=path)


@pytest.fixture(scope="module")
def numba_export(scene, tmp_path_factory):
    return _exported("numba", scene, tmp_path_factory)


@pytest.fixture(scope="module")
def jax_export(scene, tmp_path_factory):
    return _exported("jax", scene, tmp_path_factory)


@pytest.fixture(params=["numba", "jax"])
def exported(request):
    return request.getfixturevalue(f"{request.param}_export")


def _copy(exported, tmp_path):
    return shutil.copytree(exported.path, tmp_path / "copy")


def _edit_manifest(path, **changes):
    doc = json.loads((path / "manifest.json").read_text())
    for key, value in changes.items():
        target = doc
        *parents, last = key.split(".")
        for p in parents:
            target = target[p]
        if value is None:
            del target[last]
        else:
            target[last] = value
    (path / "manifest.json").write_text(json.dumps(doc))


def _assert_identical(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w)


def test_manifest_describes_the_function(exported, scene):
    m = read_manifest(exported.path)
    assert m.backend == exported.backend and m.scene_name == scene.name
    assert [s.name for s in m.inputs] == exported.fn.input_names
    assert m.inputs[0].shape == () and m.inputs[0].dtype == "int64"
    position = m.inputs[[s.name for s in m.inputs].index("ball.position")]
    assert position.shape == (3,) and position.dtype == "float64"
    assert [s.name for s in m.outputs] == list(SIMULATE_OUTPUT_NAMES)
    # numba takes any step count (the time axis is open); jax was traced for STEPS
    want = (None, 1, 1, 18) if exported.backend == "numba" else (STEPS + 1, 1, 1, 18)
    assert all(s.shape == want for s in m.outputs)
    assert {"symphys", "pytensor", "numpy", "python"} <= set(m.versions)
    assert m.versions["pytensor"] == __import__("pytensor").__version__
    kinds = {f.kind for f in m.files}
    main = ArtifactKind.PYTENSOR_GRAPH if exported.backend == "numba" else ArtifactKind.JAX_EXPORT
    assert main in kinds and ArtifactKind.EXAMPLE in kinds
    assert (ArtifactKind.LOADER in kinds) == (exported.backend == "jax")
    assert sorted(p.name for p in exported.path.iterdir()) == sorted(
        [f.file for f in m.files] + ["manifest.json"])


def test_round_trip_in_a_fresh_process_is_bitwise_identical(exported, tmp_path):
    out = tmp_path / "out.npz"
    code = ("import sys, numpy as np, symphys as sp\n"
            "f = sp.load_compiled(sys.argv[1])\n"
            "inputs, _ = f.example()\n"
            "np.savez(sys.argv[2], *f(*inputs))\n")
    run = subprocess.run([sys.executable, "-c", code, str(exported.path), str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    data = np.load(out)
    _assert_identical([data[f"arr_{i}"] for i in range(len(data.files))], exported.outputs)
    # and the example kept at export is what the function gave
    f = sp.load_compiled(exported.path)
    inputs, outputs = f.example()
    _assert_identical(outputs, exported.outputs)
    _assert_identical([np.asarray(v) for v in inputs], [np.asarray(v) for v in exported.inputs])


def _installed_alone(names, folder: Path) -> Path:
    """`folder` holding links to what pip installs for `names`: each
    distribution's top-level files and those of everything it requires."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    todo, seen = list(names), set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        todo += [r.name for r in map(Requirement, dist.requires or ())
                 if r.marker is None or r.marker.evaluate({"extra": ""})]
        folder.mkdir(exist_ok=True)
        for top in {f.parts[0] for f in dist.files or () if f.parts[0] != ".."}:
            if not (folder / top).exists():
                (folder / top).symlink_to(Path(dist.locate_file(top)).resolve())
    return folder


def test_jax_artifact_runs_with_only_the_packages_it_names(jax_export, tmp_path):
    """load.py, written beside the artifact, in a Python that can import only
    what its own `pip install` line names (and their requirements): no
    symphys, no PyTensor."""
    (line,) = [x for x in (jax_export.path / "load.py").read_text().splitlines()
               if "pip install" in x]
    names = line.split("pip install", 1)[1].split()
    assert "flatbuffers" in names
    site = _installed_alone(names, tmp_path / "site")
    out = tmp_path / "out.npz"
    code = ("import importlib.util, runpy, sys\n"
            "sys.path.insert(0, sys.argv[3])\n"
            "assert not any(map(importlib.util.find_spec, ['symphys', 'pytensor', 'numba']))\n"
            "sys.argv = ['load.py', sys.argv[1], sys.argv[2]]\n"
            "runpy.run_path(sys.argv[1] + '/load.py', run_name='__main__')\n")
    run = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(jax_export.path),
                          str(out), str(site)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr + run.stdout
    assert "equal to example.npz" in run.stdout
    data = np.load(out)
    _assert_identical([data[f"output{i}"] for i in range(len(data.files))], jax_export.outputs)


def test_numba_function_keeps_any_step_count(numba_export):
    f = sp.load_compiled(numba_export.path)
    states, = f(np.int64(STEPS + 5), *numba_export.inputs[1:])
    assert states.shape == (STEPS + 6, 1, 1, 18)
    _assert_identical([states[:STEPS + 1]], numba_export.outputs)


def test_version_mismatch_is_a_clear_error(numba_export, tmp_path):
    path = _copy(numba_export, tmp_path)
    _edit_manifest(path, **{"versions.pytensor": "0.0.1"})
    with pytest.raises(ExportError, match=r"manifest.json: field 'versions.pytensor': "
                                          r"exported with pytensor 0\.0\.1, this process "
                                          r"has 3\.") as err:
        sp.load_compiled(path)
    assert "check_versions=False" in str(err.value)
    f = sp.load_compiled(path, check_versions=False)     # the escape hatch
    _assert_identical(f(*numba_export.inputs), numba_export.outputs)


def test_hash_mismatch_is_a_clear_error(exported, scene):
    m = read_manifest(exported.path)
    assert sp.load_compiled(exported.path, scene=scene, expected_hash=m.hash)
    with pytest.raises(ExportError, match=r"manifest.json: field 'hash' is [0-9a-f]{64}, "
                                          r"expected 0+$"):
        sp.load_compiled(exported.path, expected_hash="0" * 64)
    other = sp.load_scene("spheres16")
    with pytest.raises(ExportError, match=r"field 'scene_hash': exported for scene "
                                          r"'ball'.*given scene 'spheres16'"):
        sp.load_compiled(exported.path, scene=other)


@pytest.mark.parametrize("damage", ["truncated", "corrupted", "missing"])
def test_damaged_artifact_is_a_clear_error(exported, tmp_path, damage):
    path = _copy(exported, tmp_path)
    name = "graph.pkl" if exported.backend == "numba" else "function.jax"
    data = (path / name).read_bytes()
    if damage == "truncated":
        (path / name).write_bytes(data[: len(data) // 2])
        pattern = rf"{name}: truncated or altered: {len(data) // 2} bytes, manifest.json " \
                  rf"records {len(data)}"
    elif damage == "corrupted":
        (path / name).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
        pattern = rf"{name}: corrupted: SHA-256"
    else:
        (path / name).unlink()
        pattern = rf"{name}: missing \(listed in manifest.json\)"
    with pytest.raises(ExportError, match=pattern):
        sp.load_compiled(path)


def test_bad_manifest_is_a_clear_error(numba_export, tmp_path):
    with pytest.raises(ExportError, match=r"manifest.json: not found"):
        sp.load_compiled(tmp_path)
    path = _copy(numba_export, tmp_path)
    _edit_manifest(path, format="symphys-export/99")
    with pytest.raises(ExportError, match=r"field 'format' is 'symphys-export/99'"):
        sp.load_compiled(path)
    _edit_manifest(path, format="symphys-export/1", graph_hash=None)
    with pytest.raises(ExportError, match=r"field 'graph_hash' is missing"):
        sp.load_compiled(path)
    (path / "manifest.json").write_text("{not json")
    with pytest.raises(ExportError, match=r"manifest.json: not valid JSON"):
        sp.load_compiled(path)


def test_wrong_inputs_are_clear_errors(exported):
    f = sp.load_compiled(exported.path)
    inputs = list(exported.inputs)
    with pytest.raises(ParameterError, match=r"takes 17 inputs \['n_steps', 'ball.mass'.*"
                                             r"got 16"):
        f(*inputs[:-1])
    at = [s.name for s in f.inputs].index("ball.position")
    wrong = inputs[:at] + [np.zeros(2)] + inputs[at + 1:]
    with pytest.raises(ParameterError, match=r"input 'ball.position': expected shape "
                                             r"\(3,\), got \(2,\)"):
        f(*wrong)
    wrong = inputs[:at] + [np.zeros(3, np.float32)] + inputs[at + 1:]
    with pytest.raises(ParameterError, match=r"input 'ball.position': expected dtype "
                                             r"float64, got float32"):
        f(*wrong)
    with pytest.raises(ParameterError, match=r"input 'n_steps': expected dtype int64, "
                                             r"got float64"):
        f(float(STEPS), *inputs[1:])
    # Python numbers and lists of a fitting kind are converted
    plain = [STEPS] + [np.asarray(v).tolist() for v in inputs[1:]]
    _assert_identical(f(*plain), exported.outputs)


def test_export_errors(jax_export, numba_export, tmp_path):
    with pytest.raises(ExportError, match="expected a compiled symphys function"):
        sp.export(lambda x: x, tmp_path / "f")
    with pytest.raises(ExportError, match=r"input_shapes\['ball.position'\] = \(4,\) does "
                                          r"not fit the input's shape \(3,\)"):
        sp.export(numba_export.fn, tmp_path / "f", input_shapes={"ball.position": (4,)})
    with pytest.raises(ExportError, match=r"input_shapes names \['nope'\]"):
        sp.export(numba_export.fn, tmp_path / "f", input_shapes={"nope": ()})
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match=r"taken: exists and is not an exported function"):
        sp.export(jax_export.fn, tmp_path / "taken")
    # an earlier export is replaced
    again = sp.export(jax_export.fn, jax_export.path.parent / "again")
    assert sp.export(jax_export.fn, again, description="second").exists()
    assert read_manifest(again).description == "second"


def _cli(argv):
    parser = argparse.ArgumentParser(prog="symphys")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_exports_a_scene(numba_export, tmp_path, capsys):
    out = tmp_path / "compiled" / "ball"
    assert _cli(["export", "ball", "--steps", str(STEPS), "--out", str(out)]) == 0
    assert f"wrote {out}: simulate of ball on numba" in capsys.readouterr().out
    m = read_manifest(out)
    assert m.metadata["steps"] == STEPS and m.metadata["function"] == "simulate"
    f = sp.load_compiled(out, scene=sp.load_scene("ball"))
    inputs, outputs = f.example()
    _assert_identical(outputs, numba_export.outputs)
    with pytest.raises(ParameterError, match="ball.nope"):
        _cli(["export", "ball", "--steps", "3", "--gradient", "ball.nope", "--out", str(out)])


def test_cli_exports_a_batched_gradient(tmp_path):
    out = tmp_path / "grad"
    assert _cli(["export", "ball", "--steps", "3", "--backend", "jax", "--batch", "2",
                 "--gradient", "ball.velocity", "--out", str(out)]) == 0
    m = read_manifest(out)
    assert [s.name for s in m.outputs] == ["loss", "grad.ball.velocity"]
    assert [s.shape for s in m.outputs] == [(), (2, 3)]
    assert m.inputs[[s.name for s in m.inputs].index("ball.velocity")].shape == (2, 3)
    f = sp.load_compiled(out)
    inputs, outputs = f.example()
    _assert_identical(f(*inputs), outputs)
    # the loss: sum over worlds of |final position|^2, gradient 2 p_T dp_T/dv
    assert outputs[0] > 0 and np.all(np.isfinite(outputs[1]))
