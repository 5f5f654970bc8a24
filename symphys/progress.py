"""Progress on long waits, on stderr: bars, status lines and a ticker.

- `bar(...)`: a tqdm progress bar. On a terminal it redraws one line; written
  to a file or a pipe (a log, CI) it prints a newline-terminated status
  line at most every `LINE_SECONDS` instead of one ever-growing line.
- `say(text)`: one line, `symphys: text`.
- `waiting(what)`: while the block runs longer than `LINE_SECONDS`, a
  line every `LINE_SECONDS` saying what it waits for and for how long.

All three are silent inside `quiet()` or when the environment variable
`SYMPHYS_PROGRESS` is `0` (what `symphys --no-progress` sets, so that
worker processes are quiet too). Warnings and errors are not progress:
they always print.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time

from tqdm.std import tqdm as _tqdm

LINE_SECONDS = 10.0
VARIABLE = "SYMPHYS_PROGRESS"

_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("symphys_quiet", default=False)


def enabled() -> bool:
    """Whether progress is shown: not inside `quiet()`, and
    `SYMPHYS_PROGRESS` is not 0."""
    return not _QUIET.get() and os.environ.get(VARIABLE, "1").strip() not in ("0", "off", "no")


@contextlib.contextmanager
def quiet():
    """No progress inside (this thread's bars, lines and tickers)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


_DETAILED = []     # the `detailed` blocks under way, in any thread


@contextlib.contextmanager
def detailed():
    """A block that says its own progress, in more detail than a `waiting`
    around it: the tickers of those keep quiet meanwhile."""
    _DETAILED.append(True)
    try:
        yield
    finally:
        _DETAILED.pop()


def say(text: str) -> None:
    """`symphys: text` on stderr, when progress is shown."""
    if enabled():
        print(f"symphys: {text}", file=sys.stderr, flush=True)


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class LineBar(_tqdm):
    """tqdm that writes whole lines (for a file or a pipe): one at the
    start, at most one per `mininterval` while it runs (`set_postfix`
    included), one at the end."""

    def __init__(self, *args, **kwargs):
        self._written_at = None
        self._closing = False
        super().__init__(*args, **kwargs)

    def display(self, msg=None, pos=None):
        if msg == "":              # clears a terminal's bar: nothing here (and no '\r' after)
            return False
        now = time.monotonic()
        if (not self._closing and self._written_at is not None
                and now - self._written_at < self.mininterval):
            return True
        self.fp.write((self.__str__() if msg is None else msg).rstrip() + "\n")
        self.fp.flush()
        self._written_at = now
        return True

    def close(self):
        if not self.disable:
            self._closing = True
            self.display()                           # the final count and rate
        super().close()


def bar(iterable=None, desc: str = "", show: bool = True, total: int | None = None,
        initial: int = 0, unit: str = "it"):
    """A progress bar over `iterable` (or updated by hand), silent when
    `show` is False or progress is off."""
    stream = sys.stderr
    common = dict(desc=desc, total=total, initial=initial, unit=unit, file=stream,
                  disable=not (show and enabled()), leave=False)
    if _is_terminal(stream):
        return _tqdm(iterable, dynamic_ncols=True, **common)
    return LineBar(iterable, mininterval=LINE_SECONDS, maxinterval=LINE_SECONDS,
                   ascii=True, ncols=100, **common)


@contextlib.contextmanager
def waiting(what: str, period: float = LINE_SECONDS, announce: "bool | str" = False):
    """While the block runs: after each `period` seconds, a line
    `symphys: what: N s so far`; when it took longer than one period,
    `symphys: what: done in N s`. announce: also a line at the start,
    `symphys: what` (True) or `symphys: announce` (a string)."""
    if not enabled():
        yield
        return
    if announce:
        say(what if announce is True else announce)
    stop = threading.Event()
    start = time.perf_counter()

    def tick():
        while not stop.wait(period):
            if not _DETAILED:
                say(f"{what}: {time.perf_counter() - start:.0f} s so far")

    ticker = threading.Thread(target=tick, name="symphys-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()
        seconds = time.perf_counter() - start
        if seconds > period:
            say(f"{what}: done in {seconds:.0f} s")
