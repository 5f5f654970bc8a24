"""Faults of the on-disk caches: a damaged file in Numba's cache of the
kernel entries and a cache folder that cannot be written."""

import logging
import pickle

import numpy as np
import pytensor.tensor as pt
import pytest
from test_kernel_ops import EXP

from symphys.compiler import caches
from symphys.compiler.backends import compile
from symphys.physics.kernels import entry_numba


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

    monkeypatch.setattr(caches.os, "replace", refuse)
    assert not caches.write_atomically(tmp_path / "entry.pkl", b"data")
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
