"""Faults of the on-disk caches: a cache folder that cannot be written."""

import logging

import numpy as np
import pytensor.tensor as pt
import pytest

from symphys.compiler import caches
from symphys.compiler.backends import compile


def _unwritable(tmp_path):
    """A folder that cannot be written, even as root: a path below a
    regular file."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    return blocker / "cache"


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
