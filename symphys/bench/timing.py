"""Timing and memory helpers of `symphys bench`, and its child processes.

A cold compile is measured in a child process whose caches (PyTensor's,
Numba's and symphys') all start empty in one folder (`child_env`); the
child prints one `RESULT<json>` line (`run_child`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from symphys.storage import CACHE_ENV

TIME_BUDGET_S = 30.0      # stop repeating a timed call after this long (at least one run)


def median_time(fn, args, repeats: int, budget_s: float = float("inf")) -> tuple[float, int]:
    """(median seconds of up to `repeats` calls, calls made): repeating
    stops once the calls made have taken `budget_s` (a 100 s call runs once)."""
    times = []
    while len(times) < repeats and sum(times) < budget_s:
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return float(np.median(times)), len(times)


def memory_mb(field: str) -> float:
    """A memory figure of this process from /proc (Linux), in MB: "VmRSS"
    (resident now) or "VmHWM" (peak since the last `reset_peak`)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")      # Linux: VmHWM <- VmRSS


def run_child(code: str, env: dict | None = None, label: str = "") -> object:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    raise RuntimeError(f"benchmark child failed for {label}:\n{out.stderr[-3000:]}")


def child_env(cache: str) -> dict:
    """This process's environment with PyTensor, Numba and symphys caches in `cache`."""
    env = dict(os.environ)
    env["PYTENSOR_FLAGS"] = f"base_compiledir={cache}"
    env[CACHE_ENV] = os.path.join(cache, "symphys-graphs")
    env["NUMBA_CACHE_DIR"] = os.path.join(cache, "numba")
    return env
