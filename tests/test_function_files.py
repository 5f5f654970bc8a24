"""The on-disk store of whole functions (symphys.compiler.caches.function_files): found by
what a graph is made from, before any graph is built."""

import subprocess
import sys
import textwrap

import numpy as np
import pytensor
import pytest
from scenes import drop
# test_backends' function: the backends' code caches hold its parts already.
from test_backends import PARAMS, WRT, loss

from symphys import api
from symphys.api import parameter_values, value_and_grad_function
from symphys.compiler.caches import compiled_functions, function_files
from symphys.errors import ParameterError

STEPS = 300


def make_loss(weight=1.0):
    """A new callable each call: the in-process cache (keyed by the loss
    object) never matches it, the store (keyed by what it computes) does."""
    if weight == 1.0:
        return lambda tr: loss(tr)
    return lambda tr: weight * loss(tr)


def _no_graph_building(*args, **kwargs):
    raise AssertionError("a graph was built")


@pytest.mark.parametrize("backend", ["jax", "cvm"])
def test_a_stored_function_is_read_back_without_building_a_graph(backend, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    scene = drop()
    args, batched = parameter_values(scene, PARAMS)
    expected = value_and_grad_function(scene, STEPS, make_loss(), WRT, batched, backend)(*args)
    assert len(list(tmp_path.glob("*.fn.json"))) == 1
    # JAX: the exported function, and XLA's executable written by its first call.
    assert len(list(tmp_path.glob("*.jax"))) == len(list(tmp_path.glob("*.xla"))) \
        == (backend == "jax")
    compiled_functions.clear_cache()                  # as a new process would start
    with monkeypatch.context() as m:
        m.setattr(api, "rollout_states", _no_graph_building)
        again = value_and_grad_function(scene, STEPS, make_loss(), WRT, batched, backend)
        if backend == "jax":       # the exported function with its executable, read back
            assert isinstance(again.fn, function_files.ExportedFunction)
            assert again.fn._run is not None
        got = again(*args)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-13, atol=1e-13)
    assert np.abs(got[1]).max() > 0.1
    # Another loss (another constant) is another function: built afresh.
    compiled_functions.clear_cache()
    with monkeypatch.context() as m:
        m.setattr(api, "rollout_states", _no_graph_building)
        with pytest.raises(AssertionError, match="a graph was built"):
            value_and_grad_function(scene, STEPS, make_loss(3.0), WRT, batched, backend)


def test_loss_text_names_what_the_loss_computes():
    scene = drop()
    assert function_files.loss_text(scene, make_loss(), False) == \
        function_files.loss_text(scene, make_loss(), False)
    assert function_files.loss_text(scene, make_loss(), False) != \
        function_files.loss_text(scene, make_loss(2.5), False)
    assert function_files.loss_text(scene, make_loss(), False) != \
        function_files.loss_text(scene, make_loss(), True)          # batched worlds
    # A loss that reads a shared variable (its value can change) or fails on
    # the stand-in is not storable: None, and the function is built as usual.
    target = pytensor.shared(np.zeros(3), name="target")
    assert function_files.loss_text(
        scene, lambda tr: ((tr.position["ball"][-1] - target) ** 2).sum(), False) is None
    assert function_files.loss_text(scene, lambda tr: tr.position["nobody"], False) is None


def test_key_changes_with_the_engine_source(monkeypatch):
    from symphys.compiler.backends import Backend
    key = function_files.function_key(("grad", 1), Backend.CVM)
    assert key == function_files.function_key(("grad", 1), Backend.CVM)
    assert key != function_files.function_key(("grad", 2), Backend.CVM)
    assert key != function_files.function_key(("grad", 1), Backend.NUMBA)
    monkeypatch.setattr(function_files, "source_digest", lambda: "edited")
    assert key != function_files.function_key(("grad", 1), Backend.CVM)


def test_damaged_entry_is_ignored_and_rebuilt(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    scene = drop()
    args, batched = parameter_values(scene, PARAMS)
    first = value_and_grad_function(scene, STEPS, make_loss(), WRT, batched, "jax")(*args)
    [artifact] = tmp_path.glob("*.jax")
    artifact.write_bytes(artifact.read_bytes()[:100])        # truncated
    compiled_functions.clear_cache()
    built = []
    real_rollout = api.rollout_states
    with monkeypatch.context() as m:
        m.setattr(api, "rollout_states", lambda *a, **k: built.append(1) or real_rollout(*a, **k))
        fn = value_and_grad_function(scene, STEPS, make_loss(), WRT, batched, "jax")
    assert "ignoring unreadable function store entry" in caplog.text and built
    np.testing.assert_allclose(fn(*args)[1], first[1], rtol=1e-13)
    compiled_functions.clear_cache()                              # stored again, readable
    again = value_and_grad_function(scene, STEPS, make_loss(), WRT, batched, "jax")
    assert isinstance(again.fn, function_files.ExportedFunction)
    # A damaged executable is compiled again (and kept again).
    [executable] = tmp_path.glob("*.xla")
    executable.write_bytes(b"not an executable")
    compiled_functions.clear_cache()
    fn = value_and_grad_function(scene, STEPS, make_loss(), WRT, batched, "jax")
    assert "ignoring unreadable executable" in caplog.text and fn.fn._run is None
    np.testing.assert_allclose(fn(*args)[1], first[1], rtol=1e-13)
    assert executable.stat().st_size > 1000
    # Inputs are checked by name, shape and count.
    with pytest.raises(ParameterError, match="expected shape"):
        again(*[np.zeros(7)] + args[1:])
    with pytest.raises(ParameterError, match="takes"):
        again(*args[:-1])


def test_closed_loop_gradient_is_stored_too(tmp_path, monkeypatch):
    # The controller losses of the robot experiments take (trajectory, task):
    # found again in a new process without building the controlled rollout.
    from scenes import servo_pendulum

    from symphys.learn import closed_loop, nn

    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    scene = servo_pendulum()
    ctrl = nn.MLP(scene.n_observations, 1, hidden=(4,), output_init=1.0)
    weights = ctrl.init(0)
    task = np.array([[0.4]])

    def make_loss():
        return lambda traj, task: ((traj.position["rod"][:, -1, 0] - task[:, 0]) ** 2).mean()

    def run():
        fn = closed_loop.closed_loop_function(scene, 30, ctrl, make_loss(), backend="jax")
        return fn, fn(task, *weights.values())

    _, expected = run()
    compiled_functions.clear_cache()
    with monkeypatch.context() as m:
        m.setattr(closed_loop, "rollout", _no_graph_building)
        fn, got = run()
    assert isinstance(fn.fn, function_files.ExportedFunction)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-13, atol=1e-13)
    assert np.abs(got[1]).max() > 0


def test_a_scene_differing_only_in_values_gets_its_own_closed_loop_function(tmp_path,
                                                                          monkeypatch):
    # A closed loop builds the parameters it does not take as inputs (here
    # the servo's gain and the rod's mass) into the graph as constants:
    # neither the process's cache nor the store may hand a scene that
    # differs only in such a value the function of another.
    import dataclasses

    from scenes import servo_pendulum

    from symphys.learn import closed_loop, nn

    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(tmp_path))
    scene = servo_pendulum()
    slow = dataclasses.replace(scene, motors=tuple(dataclasses.replace(m, gain=2.0)
                                                   for m in scene.motors))
    ctrl = nn.MLP(scene.n_observations, 1, hidden=(4,), output_init=1.0)
    weights = ctrl.init(0)
    task = np.array([[0.4]])

    def angle(traj, task):
        return traj.position["rod"][:, -1, 0].mean()

    def run(s):
        return float(closed_loop.closed_loop_function(s, 30, ctrl, angle, backend="jax",
                                                      gradient=False)(task, *weights.values()))

    assert scene.values_key() != slow.values_key()
    assert scene.values_key(["servo.gain"]) == slow.values_key(["servo.gain"])
    fast_value, slow_value = run(scene), run(slow)
    assert abs(fast_value - slow_value) > 1e-3
    compiled_functions.clear_cache()
    with monkeypatch.context() as m:
        m.setattr(closed_loop, "rollout", _no_graph_building)
        assert run(slow) == pytest.approx(slow_value, abs=1e-13)    # read back, not rebuilt
        heavy = dataclasses.replace(scene, bodies=tuple(dataclasses.replace(b, mass=3 * b.mass)
                                                        for b in scene.bodies))
        with pytest.raises(AssertionError, match="a graph was built"):
            run(heavy)


LAPACK_CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    import numpy as np
    import jax, jax.numpy as jnp
    from jax import export
    from jax.scipy.linalg import cho_factor, cho_solve
    from symphys.compiler.caches.function_files import ExportedFunction
    jax.config.update("jax_enable_x64", True)

    def solve(a, b):
        return (cho_solve(cho_factor(a @ a.T + jnp.eye(3), lower=True), b),)

    folder = Path(sys.argv[1])
    if (folder / "f.jax").exists():           # as the store reads it: nothing lowered
        exported = export.deserialize(bytearray((folder / "f.jax").read_bytes()))
    else:
        spec = [jax.ShapeDtypeStruct((3, 3), np.float64),
                jax.ShapeDtypeStruct((3,), np.float64)]
        exported = export.export(jax.jit(solve))(*spec)
        (folder / "f.jax").write_bytes(exported.serialize())
    fn = ExportedFunction(exported, [("a", (3, 3), "float64"), ("b", (3,), "float64")],
                          folder / "f.xla")
    print(fn._run is not None, np.round(fn(np.eye(3), np.arange(3.0))[0], 12).tolist())
""")


def test_an_executable_with_lapack_calls_is_read_back_in_a_new_process(tmp_path):
    """XLA's executable of a Cholesky solve (as the Newton solve's), kept by
    one process and loaded by the next without lowering anything first."""
    runs = [subprocess.run([sys.executable, "-c", LAPACK_CHILD, str(tmp_path)],
                           capture_output=True, text=True, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    lines = [run.stdout.strip().splitlines()[-1] for run in runs]
    assert lines[0] == "False [0.0, 0.5, 1.0]" and lines[1] == "True [0.0, 0.5, 1.0]", lines
