"""Faults of the on-disk caches: a damaged file in Numba's cache of the
kernel entries, a cache folder that cannot be written, and a loop compiled in the
background by several runs at once."""

import json
import logging
import pickle
import subprocess
import sys

import numba
import numpy as np
import psutil
import pytensor
import pytensor.tensor as pt
import pytest
from test_kernel_ops import EXP

import symphys as sp
from symphys import storage
from symphys.compiler import background, loops
from symphys.compiler.backends import compile
from symphys.physics.kernels import entry_numba
from symphys.physics.kernels.ops import In, Out, Stage, stage_ops


@pytest.fixture
def numba_folder(tmp_path, monkeypatch):
    """PyTensor's Numba cache folder (where the entries and loop markers go),
    moved to an empty one."""
    import pytensor.link.numba.cache as numba_cache

    folder = tmp_path / "numba"
    folder.mkdir()
    monkeypatch.setattr(numba_cache, "NUMBA_CACHE_PATH", folder)
    return folder


def _fresh_entry(monkeypatch):
    """The address of the toy stage's forward entry, as a new process finds
    it (not held in this one)."""
    key = entry_numba.entry_key(EXP, False, "")
    monkeypatch.delitem(entry_numba._ENTRIES, key, raising=False)
    return entry_numba.entry_address(key)


def _call(address):
    x = np.linspace(0.0, 1.0, 4)
    y = np.empty(4)
    ptrs = np.array([x.ctypes.data, y.ctypes.data], np.intp)
    shapes = np.array([[4, 0, 0], [4, 0, 0]], np.intp)
    entry_numba._call_arrays(address, ptrs, shapes, np.zeros(1))
    return y


def _unwritable(tmp_path):
    """A folder that cannot be written, even as root: a path below a
    regular file."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    return blocker / "cache"


# -- damaged files in Numba's cache of the kernel entries -----------------------------
@pytest.mark.parametrize("damaged", ["index", "data"])
def test_damaged_entry_file_is_replaced(damaged, numba_folder, monkeypatch, caplog):
    _fresh_entry(monkeypatch)
    pattern = "*.nbi" if damaged == "index" else "*.nbc"
    [path] = numba_folder.glob(pattern)
    path.write_bytes(b"\x80\x05damaged")
    with caplog.at_level(logging.WARNING):
        address = _fresh_entry(monkeypatch)
    np.testing.assert_array_equal(_call(address), np.exp(np.linspace(0.0, 1.0, 4)))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and path.name in warnings[0], warnings
    assert path.read_bytes() != b"\x80\x05damaged"         # replaced, readable again
    with open(path, "rb") as f:
        pickle.load(f)
    caplog.clear()
    _fresh_entry(monkeypatch)                               # loaded, nothing to say
    assert not caplog.records


def _half(x):
    return 0.5 * x


def _half_vjp(x, dy):
    return (0.5 * dy,)


def test_damaged_kernel_cache_file_is_replaced(numba_folder, tmp_path, monkeypatch, caplog):
    """The kernel behind an entry, in Numba's cache of its own (the
    workers': `NUMBA_CACHE_DIR`), is loaded when an entry is compiled."""
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "kernels"))

    def entry(name):
        stage = Stage(name, inputs=(In("x", 1),), outputs=(Out("y", (("x", 0),)),),
                      numba_forward=numba.njit(cache=True)(_half),
                      numba_vjp=numba.njit(_half_vjp), jax_forward=_half)
        stage_ops(stage)
        return entry_numba.entry_address(entry_numba.entry_key(stage, False, ""))

    entry("ToyHalfA")
    [path] = (tmp_path / "kernels").rglob("*_half*.nbi")
    path.write_bytes(b"\x80\x05damaged")
    with caplog.at_level(logging.WARNING):
        address = entry("ToyHalfB")                 # a new entry, the same kernel
    np.testing.assert_array_equal(_call(address), 0.5 * np.linspace(0.0, 1.0, 4))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and path.name in warnings[0], warnings
    with open(path, "rb") as f:
        pickle.load(f)


# -- cache folders that cannot be written ---------------------------------------------
def test_unwritable_graph_cache_warns_once_and_runs(tmp_path, monkeypatch, caplog):
    folder = _unwritable(tmp_path)
    monkeypatch.setenv("SYMPHYS_CACHE_DIR", str(folder))
    values = np.linspace(-1.0, 1.0, 3)
    with caplog.at_level(logging.WARNING):
        for scale in (2.0, 3.0):
            x = pt.vector("x")
            fn = compile([x], (pt.sin(x) * scale).sum(), backend="cvm")
            assert np.isclose(float(fn(values)), (np.sin(values) * scale).sum())
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and str(folder) in warnings[0], warnings


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch, caplog):
    def refuse(*args):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(storage.os, "replace", refuse)
    assert not storage.write_atomically(tmp_path / "entry.pkl", b"data")
    assert list(tmp_path.iterdir()) == []
    assert "cannot be written" in caplog.text


def test_unwritable_numba_folder_compiles_entries_uncached(tmp_path, monkeypatch, caplog):
    import pytensor.link.numba.cache as numba_cache

    folder = _unwritable(tmp_path)
    monkeypatch.setattr(numba_cache, "NUMBA_CACHE_PATH", folder)
    key = entry_numba.entry_key(EXP, True, "")
    monkeypatch.delitem(entry_numba._ENTRIES, key, raising=False)
    with caplog.at_level(logging.WARNING):
        entry_numba.prepare([key])                  # its lock and workers, then the entry
        entry_numba.entry_address(key)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and str(folder) in warnings[0], warnings


# -- one background compile per loop and machine ---------------------------------------
def _auto_loop():
    """(the `CompiledLoop` op, its node, input values) of a one-loop graph
    compiled with `Loops.AUTO` (the loop itself not compiled)."""
    x = pt.vector("x")
    states = pytensor.scan(lambda s: pt.cos(s) * 0.5, outputs_info=[x], n_steps=3,
                           return_updates=False)
    with sp.loops(sp.Loops.AUTO):
        fn = compile([x], states.sum(), backend="numba", disk_cache=False)
    node = next(n for n in fn.fn.maker.fgraph.apply_nodes
                if isinstance(n.op, loops.CompiledLoop))
    return node.op, node, [np.int64(3), np.zeros((4, 3))]


class _Started(Exception):
    """Raised by the stand-in for starting a background compile."""


def _no_start(*args, **kwargs):
    raise _Started


def _marker_of(proc):
    return {"pid": proc.pid, "started": psutil.Process(proc.pid).create_time()}


def test_a_loop_another_process_compiles_is_not_compiled_again(numba_folder, monkeypatch):
    op, node, inputs = _auto_loop()
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        marker = background.in_flight_marker(loops._loop_key(op, node))
        marker.write_text(json.dumps(_marker_of(owner)))
        monkeypatch.setattr(background, "_launch", _no_start)
        waiting = loops.background_compile(op, node, inputs)     # starts nothing
        assert waiting.poll() is None
        background.done_marker(loops._loop_key(op, node)).write_text("12.5")
        assert waiting.poll() == 0                                 # the other one finished
    finally:
        owner.kill()
        owner.wait()


def test_a_dead_owners_marker_is_taken_over(numba_folder, monkeypatch):
    op, node, inputs = _auto_loop()
    owner = subprocess.Popen([sys.executable, "-c", "pass"])
    owner.wait()                                                   # its pid is gone
    marker = background.in_flight_marker(loops._loop_key(op, node))
    marker.write_text(json.dumps({"pid": owner.pid, "started": 1.0}))
    monkeypatch.setattr(background, "_launch", _no_start)
    with pytest.raises(_Started):
        loops.background_compile(op, node, inputs)


def test_exit_line_says_what_still_compiles(numba_folder, monkeypatch, capsys):
    monkeypatch.setattr(background, "_WAITING", [])
    monkeypatch.setattr(background, "_launch", _no_start)
    op, node, inputs = _auto_loop()
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (numba_folder / "symphys-loop-earlier.done").write_text("90")
        background.in_flight_marker(loops._loop_key(op, node)).write_text(json.dumps(_marker_of(owner)))
        loops.background_compile(op, node, inputs)
        background.say_still_compiling()
    finally:
        owner.kill()
        owner.wait()
    err = capsys.readouterr().err
    assert "1 loop still compiling in the background" in err
    assert "usually ~90 s" in err and "the next run uses it" in err


def test_an_unwritable_numba_folder_leaves_the_loop_interpreted(tmp_path, monkeypatch, caplog):
    import pytensor.link.numba.cache as numba_cache

    op, node, inputs = _auto_loop()
    folder = _unwritable(tmp_path)
    monkeypatch.setattr(numba_cache, "NUMBA_CACHE_PATH", folder)
    monkeypatch.setattr(background, "_launch", _no_start)
    with caplog.at_level(logging.WARNING):
        waiting = loops.background_compile(op, node, inputs)       # starts nothing
    assert waiting.poll() is None and not waiting.running()
    assert str(folder) in caplog.text
