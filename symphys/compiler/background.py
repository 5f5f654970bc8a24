"""Loops compiled in a background process, once per loop and machine.

A loop that `Loops.AUTO` finds not yet compiled runs interpreted while a
background process (started here, at low priority) compiles it into
PyTensor's Numba disk cache. Files beside that cache say where each loop
(`key`) stands, so that several runs do not compile one loop side by side:

- `symphys-loop-<key>.compiling`: a compile is under way. It holds the
  compiling process's pid, its start time and host (JSON). A run that needs
  the loop waits for that compile instead of starting another; a marker
  whose process is gone (no such pid, or a pid reused by a process started
  at another time) is taken over.
- `symphys-loop-<key>.done`: compiled; it holds the compile's seconds.

At exit, a run that still waits on background compiles says so on stderr
(how many, since when, how long one usually takes). Where the folder cannot
be written, nothing would be kept: the loop stays interpreted.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from symphys import progress
from symphys import storage

# A marker written on another host (a shared folder): its pid cannot be
# checked here, so it counts as abandoned after this many seconds.
ELSEWHERE_SECONDS = 3600.0
_WAITING: list = []    # this process's `Compile`s, for the exit line


def folder() -> Path:
    from pytensor.link.numba.cache import NUMBA_CACHE_PATH

    return NUMBA_CACHE_PATH


def done_marker(key: str) -> Path:
    return folder() / f"symphys-loop-{key}.done"


def in_flight_marker(key: str) -> Path:
    return folder() / f"symphys-loop-{key}.compiling"


def _owner(marker: Path) -> dict | None:
    """The record of a compile under way, None when there is none or its
    process is gone."""
    try:
        record = json.loads(marker.read_text())
        pid, started = int(record["pid"]), float(record["started"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        # Unreadable (a write cut short): abandoned once old enough.
        try:
            young = time.time() - marker.stat().st_mtime < 60.0
        except OSError:
            return None
        return {"pid": None, "started": time.time()} if young else None
    if record.get("host", socket.gethostname()) != socket.gethostname():
        return record if time.time() - started < ELSEWHERE_SECONDS else None
    try:
        same = abs(psutil.Process(pid).create_time() - started) < 1.0
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:       # there, but not ours to inspect
        return record
    return record if same else None


class Compile:
    """One loop's background compile, started here or by another process.
    `poll()`: None while under way, 0 once compiled, else the failed
    compile's exit status."""

    def __init__(self, key: str, job: bytes):
        self.key = key
        self._job = job            # pickled (scan, input types, inputs)
        self.process = None        # this process's compile, when it is ours
        self.started = time.time()
        self.kept = storage.writable(folder())

    def claim(self) -> None:
        """Start the compile unless it is done or another process's is under way."""
        with storage.file_lock(folder() / "symphys-loops.lock"):
            if done_marker(self.key).exists():
                return
            owner = _owner(in_flight_marker(self.key))
            if owner is not None:
                self.started = float(owner["started"])
                progress.say("a loop runs interpreted while another process compiles it")
                return
            self.process = _launch(self.key, self._job)
            try:
                self.started = psutil.Process(self.process.pid).create_time()
            except psutil.Error:       # ended already: the marker is stale at once
                pass
            storage.write_atomically(in_flight_marker(self.key), json.dumps(
                {"pid": self.process.pid, "started": self.started,
                 "host": socket.gethostname()}).encode())
        progress.say("a loop runs interpreted while a background process compiles it "
                     "(once per machine)")

    def running(self) -> bool:
        if not self.kept:
            return False
        if self.process is not None:
            return self.process.poll() is None
        return (not done_marker(self.key).exists()
                and _owner(in_flight_marker(self.key)) is not None)

    def poll(self) -> int | None:
        if not self.kept:
            return None            # nothing can be kept: stays interpreted
        if self.process is not None:
            return self.process.poll()
        if done_marker(self.key).exists():
            return 0
        if _owner(in_flight_marker(self.key)) is None:
            self.claim()           # its compile died: take over
            return 0 if self.process is None and done_marker(self.key).exists() else None
        return None


def start(key: str, job: bytes) -> Compile:
    """The background compile of loop `key` (`job`: the pickled scan, its
    input types and inputs): started here, or the one under way elsewhere."""
    compile_ = Compile(key, job)
    if compile_.kept:
        compile_.claim()
    if not _WAITING:
        atexit.register(say_still_compiling)
    _WAITING.append(compile_)
    return compile_


def _launch(key: str, job: bytes) -> subprocess.Popen:
    from symphys.physics.kernels.entry_numba import worker_env   # brings Numba in

    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
        f.write(job)
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _COMPILER, f.name, str(done_marker(key)),
             str(in_flight_marker(key))], env=worker_env(),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except BaseException:
        os.unlink(f.name)
        raise


def usual_seconds() -> float | None:
    """The median seconds of the loop compiles this machine finished."""
    seconds = []
    for marker in folder().glob("symphys-loop-*.done"):
        try:
            seconds.append(float(marker.read_text()))
        except (OSError, ValueError):
            pass
    return statistics.median(seconds) if seconds else None


def say_still_compiling() -> None:
    """One line on stderr: the background compiles this process waited on
    that are still under way (they go on after it exits)."""
    running = [c for c in _WAITING if c.running()]
    if not running:
        return
    ago = time.time() - min(c.started for c in running)
    usual = usual_seconds()
    usually = f", usually ~{usual:.0f} s" if usual is not None else ""
    many = len(running) > 1
    print(f"symphys: {len(running)} loop{'s' if many else ''} still compiling in the "
          f"background (started {ago:.0f} s ago{usually}); the next run uses "
          f"{'them' if many else 'it'} when done", file=sys.stderr, flush=True)


# The background compile (a fresh interpreter, so the caller's main module is
# not run again), at low priority: build the loop, run it once, leave the
# done marker with the seconds it took; the in-flight marker goes either way.
_COMPILER = ("import time\n"
             "began = time.time()\n"
             "import os, pickle, sys\n"
             "from pathlib import Path\n"
             "if hasattr(os, 'nice'):\n"
             "    os.nice(10)\n"
             "job, done, in_flight = sys.argv[1:4]\n"
             "try:\n"
             "    from symphys import storage\n"
             "    from symphys.compiler.loops import CompiledLoop\n"
             "    scan, types, inputs = pickle.loads(Path(job).read_bytes())\n"
             "    os.unlink(job)\n"
             "    CompiledLoop(scan).compiled(types)(*inputs)\n"
             "    storage.write_atomically(Path(done), f'{time.time() - began:.1f}'.encode())\n"
             "finally:\n"
             "    Path(in_flight).unlink(missing_ok=True)\n")
