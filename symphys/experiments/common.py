"""What every experiment shares: its result record, JSON output, tables and
progress bars."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class ExperimentResult:
    """One run's numbers. `extra` holds experiment-specific top-level blocks
    (ball-throw's `gradient` and `cmaes`)."""

    name: str
    quick: bool
    seed: int
    metrics: dict
    paper: dict
    series: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        doc = {"experiment": self.name, "quick": self.quick, "seed": self.seed,
               "metrics": self.metrics, "paper": self.paper, "series": self.series}
        doc.update(self.extra)
        return _plain(doc)

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_json(), indent=1))


def _plain(x):
    """NumPy scalars/arrays -> JSON-ready Python values."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, np.generic):
        return x.item()
    return x


def table(head: list[str], rows: list[list]) -> str:
    """A plain-text table with aligned columns."""
    cells = [[str(c) for c in head]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths))
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def progress(iterable, desc: str, show: bool = True, total: int | None = None):
    """A tqdm progress bar (silent when show is False)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, disable=not show, leave=False,
                dynamic_ncols=True)


def verdict(met: bool) -> str:
    """How a report states a target: "met" or "NOT met"."""
    return "met" if met else "NOT met"


def first_reaching(curve, reached) -> int | None:
    """1-based index of the first value of `curve` for which `reached(value)`
    holds (evaluations or updates to a goal), or None."""
    return next((i + 1 for i, v in enumerate(curve) if reached(v)), None)


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
