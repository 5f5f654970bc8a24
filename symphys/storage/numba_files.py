"""Damaged files in Numba's caches of symphys' kernel entries, found and
replaced.

Numba keeps each cached function as an index (`<name>.nbi`: Numba's
version, then a pickled map from signature to data file) and data files
(`<name>.<n>.nbc`, pickled). One damaged file (a disk filled up, a copy cut
short) makes every later load of that function raise (`UnpicklingError`,
`EOFError`, ...) until someone deletes it. `compile_healing` runs a compile
(which loads from the cache), and when it raises while a file of that cache
does not read back, warns naming the file, deletes it and compiles again:
Numba then writes the file afresh.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable
from pathlib import Path

import numba

_log = logging.getLogger(__name__)


def damaged(folder: Path, name: str = "") -> list[Path]:
    """The index and data files of Numba's cache in `folder` and its
    subfolders (those whose file names contain `name`) that do not read back
    as Numba reads them."""
    found = []
    for index in sorted(folder.rglob(f"*{name}*.nbi" if name else "*.nbi")):
        try:
            with open(index, "rb") as f:
                version = pickle.load(f)
                rest = f.read()
            if version != numba.__version__:
                continue                          # Numba ignores it
            _, overloads = pickle.loads(rest)
            data_names = list(overloads.values())
        except Exception:                         # noqa: BLE001 - whatever unpickling raises
            found.append(index)
            continue
        for data_name in data_names:
            data = index.parent / data_name
            try:
                if data.exists():
                    pickle.loads(data.read_bytes())
            except Exception:                     # noqa: BLE001
                found.append(data)
    return found


def compile_healing(compile_fn: Callable, places: list[tuple[Path, str]]):
    """compile_fn(), compiled again after deleting the damaged files of the
    caches `places` ([(folder, part of the file names)]) when it raises with
    one there (a warning names each); else what it raises."""
    try:
        return compile_fn()
    except Exception as err:
        bad = [path for folder, name in places if folder.is_dir()
               for path in damaged(folder, name)]
        if not bad:
            raise
        for path in bad:
            _log.warning("symphys: damaged Numba cache file %s (%s: %s); compiling again "
                         "and replacing it", path, type(err).__name__, err)
            path.unlink(missing_ok=True)
    return compile_fn()
