"""Physics kernels compiled in worker processes, with progress.

`entry_numba.prepare` splits the entries to compile into shares, one per
worker process (`compile_in_workers`); each worker says on its stdout which
entry it has finished, and this process turns that into progress lines.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import tempfile
import threading
import time

from symphys.progress import LINE_SECONDS, say

# A worker: compile (or load from the disk cache) each entry named on its
# command line, and say so when it is done.
_WORKER = ("import sys\n"
           "from symphys.physics.kernels.entry_numba import entry_address\n"
           "for key in sys.argv[1:]:\n"
           "    entry_address(key)\n"
           "    print(key, flush=True)\n")


def kernel_label(key: str) -> str:
    """An entry's kernel as people read it: the stage and its direction,
    e.g. `Solve (reverse)`."""
    _, name, direction, _ = key.rsplit(".", 3)
    return f"{name} ({'reverse' if direction == 'vjp' else 'forward'})"


def compile_in_workers(shares: list[list[str]], env: dict) -> list[tuple[list[str], str]]:
    """Compile each share of entries in a worker process of its own, saying
    which kernels are done, which compile now and for how long, on each
    kernel done and every `progress.LINE_SECONDS`. Returns (share, the
    worker's stderr) of the workers that failed."""
    total = sum(map(len, shares))
    say(f"compiling {total} physics kernels in {len(shares)} process(es), once per "
        "machine (they are cached on disk)")
    done: queue.Queue = queue.Queue()
    runs, logs = [], []
    for share in shares:
        log = tempfile.TemporaryFile(mode="w+")
        run = subprocess.Popen([sys.executable, "-c", _WORKER, *share], env=env,
                               stdout=subprocess.PIPE, stderr=log, text=True)
        threading.Thread(target=lambda out=run.stdout: [done.put(line.strip()) for line in out],
                         daemon=True).start()
        runs.append(run)
        logs.append(log)
    start = time.perf_counter()
    finished: list[str] = []
    while len(finished) < total and (any(run.poll() is None for run in runs)
                                     or not done.empty()):
        try:
            key = done.get(timeout=LINE_SECONDS)
        except queue.Empty:
            key = None
        if key:
            finished.append(key)
        # each worker compiles its share in order: its first one not done is under way
        now = [kernel_label(next(k for k in share if k not in finished))
               for share in shares if not set(share) <= set(finished)]
        say(f"physics kernels: {len(finished)} of {total} compiled"
            + (f" (last: {kernel_label(key)})" if key else "")
            + f", {time.perf_counter() - start:.0f} s so far"
            + (f"; compiling {', '.join(now)}" if now else ""))
    failed = []
    for run, log, share in zip(runs, logs, shares):
        run.wait()
        log.seek(0)
        if run.returncode:
            failed.append((share, log.read()))
        log.close()
    return failed
