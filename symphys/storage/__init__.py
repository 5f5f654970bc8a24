"""Files symphys keeps on disk, at the bottom of its layers (every other
part may import it): the cache folder (`cache_dir`), the digest of
symphys' own source (`source_digest`), writes that leave the whole file or
none (`write_atomically`), locks between processes (`file_lock`), and
`numba_files`, which replaces a damaged file of Numba's cache.

A folder that cannot be written is reported once (`cannot_write`) and the
run goes on without caching there.
"""


from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import tempfile
from pathlib import Path

from symphys import progress

CACHE_ENV = "SYMPHYS_CACHE_DIR"
_log = logging.getLogger(__name__)
_UNWRITABLE: set = set()     # folders reported as not writable in this process


def cache_dir() -> Path | None:
    """The folder of the on-disk caches: `$SYMPHYS_CACHE_DIR`, else
    `~/.cache/symphys/graphs`; None when the variable is set to an empty
    string (both on-disk caches off)."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env) if env else None
    return Path.home() / ".cache" / "symphys" / "graphs"


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 of every Python file of the symphys package (names and bytes)."""
    root = Path(__file__).resolve().parents[1]        # symphys/
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def cannot_write(folder: Path, err: Exception) -> None:
    """Say once per process that `folder` cannot be written (the run goes
    on without caching there)."""
    if str(folder) not in _UNWRITABLE:
        _UNWRITABLE.add(str(folder))
        _log.warning("symphys: cache folder %s cannot be written (%s: %s); running without "
                     "caching there (set %s to a writable folder)", folder,
                     type(err).__name__, err, CACHE_ENV if folder == cache_dir()
                     else "PYTENSOR_FLAGS=base_compiledir=...")


def writable(folder: Path) -> bool:
    """Whether files can be made in `folder` (created if missing); if not,
    `cannot_write` says so."""
    if str(folder) in _UNWRITABLE:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        cannot_write(folder, err)
        return False
    return True


def write_atomically(path: Path, data: bytes) -> bool:
    """Write `data` to `path` through a temporary file in the same folder, so
    another process reading the cache sees the whole file or none of it;
    whether it was written (else `cannot_write`, no temporary file left)."""
    temp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
            temp = f.name
            f.write(data)
        os.replace(temp, path)
    except OSError as err:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        cannot_write(path.parent, err)
        return False
    return True


@contextlib.contextmanager
def file_lock(path: Path, waiting: str | None = None):
    """Hold an exclusive lock on `path` (other processes wait, saying
    `waiting` first when given); without one where the file cannot be made
    (`cannot_write`) or `fcntl` is missing."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        handle = open(path, "a")
    except OSError as err:
        cannot_write(path.parent, err)
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                progress.say(waiting)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
