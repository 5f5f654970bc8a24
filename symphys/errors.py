"""Exceptions raised by symphys.

Every message names where the problem is (file, body/joint, field) and what
is allowed, so a user can fix the input without reading a traceback.
"""

from __future__ import annotations

import difflib
import enum


class SymphysError(Exception):
    """Base class of every error symphys raises on purpose."""


class SceneError(SymphysError, ValueError):
    """A scene file or builder call describes an invalid scene."""

    def __init__(self, message: str, *, source: str | None = None,
                 item: str | None = None, field: str | None = None):
        where = []
        if source:
            where.append(str(source))
        if item:
            where.append(item)
        if field:
            where.append(f"field '{field}'")
        prefix = ": ".join([", ".join(where)]) if where else ""
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.source = source
        self.item = item
        self.field = field


class ParameterError(SymphysError, ValueError):
    """An unknown parameter name or a parameter value of the wrong shape."""


class BackendError(SymphysError, ValueError):
    """An unknown or unavailable compilation backend."""


class ExportError(SymphysError, ValueError):
    """An exported function's folder cannot be written or read back: a
    missing, truncated or corrupted file, a manifest field that does not
    match (versions, hashes), or a function that does not export."""


class DataError(SymphysError, ValueError):
    """A recording (system-identification data) cannot be read or does not
    fit its scene: the message names the file, the row or column, and what
    is allowed."""


def closest(name: str, choices) -> str:
    """' (did you mean X?)' for the closest valid name, or ''."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """'1 motor', '2 motors' ('1 body', '3 bodies' with plural='bodies')."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def member(value, choices: type[enum.Enum], what: str, error: type[Exception]):
    """`value` as a member of the enum `choices` (a member already, or its
    value in any case); else `error` naming `what`, the closest value and
    every valid one."""
    if isinstance(value, choices):
        return value
    try:
        return choices(str(value).lower())
    except ValueError:
        names = [c.value for c in choices]
        raise error(f"unknown {what} {value!r}{closest(str(value), names)}; "
                    f"choose one of {names}") from None


class SimulationError(SymphysError, FloatingPointError):
    """A simulation blew up (`strict=True`, `symphys simulate --strict`): a
    state went non-finite or ran away; the message names the first step,
    body and field (`symphys.loop.blowup`)."""


class SimulationWarning(UserWarning):
    """The same as `SimulationError`, said once per run instead of raised
    (the default, `strict=False`)."""
