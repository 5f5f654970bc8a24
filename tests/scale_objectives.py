"""Batch objectives for the Ray tests, shipped to the workers by value."""

import os

import numpy as np


def bowl(rows: int | None = None, gradients: bool = True):
    """(P, D) -> (values (P,), gradients (P, D)) of sum (x - 1)^2 + sin(3 x)
    (values alone without `gradients`), compiled (so to speak) for `rows`
    vectors a call when given."""
    def objective(thetas):
        thetas = np.asarray(thetas)
        if rows is not None:
            assert len(thetas) == rows, (len(thetas), rows)
        values = np.sum((thetas - 1.0) ** 2 + np.sin(3.0 * thetas), axis=1)
        if not gradients:
            return values
        return values, 2.0 * (thetas - 1.0) + 3.0 * np.cos(3.0 * thetas)

    if rows is not None:
        objective.rows = rows
    return objective


def dies_once(marker: str):
    """sum x^2, but the first call anywhere ends its worker's process (the
    marker file records that it happened)."""
    def objective(thetas):
        if not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(str(os.getpid()))
            os._exit(1)
        return np.sum(np.asarray(thetas) ** 2, axis=1)

    return objective
