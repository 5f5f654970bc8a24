"""What a worker needs to evaluate a population: a `Recipe` that builds the
objective once per worker, and the evaluation of one share of the
population on the built objective.

A compiled function does not travel between processes; its recipe does.
`Recipe(build, args, kwargs)` names a function that a worker calls once,
`build(*args, **kwargs) -> objective`, compiling from the scene through
the on-disk caches (a machine that compiled it before loads it). The
objective takes a population of parameter vectors (P, D) and returns an
array (P, ...) or a tuple of them (values and gradients, say; None
entries stay None).
"""

from __future__ import annotations

import functools
import hashlib
import pickle
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from symphys.errors import ParameterError, counted


@dataclass(frozen=True)
class Recipe:
    """build(*args, **kwargs) -> objective (P, D) -> outputs (P, ...), run
    once on each worker. `build` and the arguments must pickle as Ray ships
    them (a module-level function travels by name, a loss written in a
    notebook by value)."""

    build: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        if not callable(self.build):
            raise ParameterError(f"Recipe: build must be a function, got {self.build!r}")
        try:
            _dumps((self.args, self.kwargs))
        except Exception as err:
            raise ParameterError(f"Recipe for {_name(self.build)}: its arguments do not "
                                 f"pickle ({type(err).__name__}: {err}); pass data a worker "
                                 f"can rebuild from (a scene name, a path), not compiled "
                                 f"functions") from None

    @functools.cached_property
    def key(self) -> str:
        """A digest naming what the recipe builds (a worker's cache key)."""
        text = _dumps((_name(self.build), self.args, sorted(self.kwargs.items())))
        return hashlib.sha256(text).hexdigest()[:16]

    def make(self):
        """The objective, built here."""
        return self.build(*self.args, **self.kwargs)


def _dumps(value) -> bytes:
    """`value` pickled as Ray ships it (cloudpickle: lambdas and local
    functions, a loss written in a notebook, travel by value)."""
    try:
        from ray import cloudpickle
    except ImportError:
        return pickle.dumps(value)
    return cloudpickle.dumps(value)


def _name(build: Callable) -> str:
    return f"{getattr(build, '__module__', '?')}.{getattr(build, '__qualname__', build)}"


def concatenate(parts: list):
    """Outputs of consecutive shares joined along their first axis: arrays,
    or tuples of arrays and Nones."""
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(None if first[i] is None else np.concatenate([p[i] for p in parts])
                     for i in range(len(first)))
    return np.concatenate(parts)


def _take(output, kept: int):
    if isinstance(output, (tuple, list)):
        return tuple(None if o is None else np.asarray(o)[:kept] for o in output)
    return np.asarray(output)[:kept]


def pad(array: np.ndarray, rows: int) -> np.ndarray:
    """array (K, ...) padded to (rows, ...) with copies of its last row."""
    if rows < len(array):
        raise ParameterError(f"{counted(len(array), 'vector')} for a function of "
                             f"{counted(rows, 'row')}")
    return np.concatenate([array, np.repeat(array[-1:], rows - len(array), axis=0)])


def evaluate_share(objective, thetas: np.ndarray):
    """objective(thetas (P, D)) in one call, or, for an objective compiled
    for a fixed batch (`objective.rows`), in calls of that many rows, the
    last padded with copies of its last vector."""
    thetas = np.asarray(thetas, dtype=np.float64)
    rows = getattr(objective, "rows", None)
    if rows is None:
        return _take(objective(thetas), len(thetas))
    parts = [thetas[lo:lo + rows] for lo in range(0, len(thetas), rows)]
    return concatenate([_take(objective(pad(part, rows)), len(part)) for part in parts])
