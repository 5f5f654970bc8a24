"""What every experiment shares: its result record, JSON output, tables and
progress bars."""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from symphys.errors import SymphysError

CHECKPOINT_FORMAT = "symphys-checkpoint/1"


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


def progress(iterable, desc: str, show: bool = True, total: int | None = None,
             initial: int = 0):
    """A progress bar (`symphys.progress.bar`; silent when show is False);
    `initial` items were done before (a resumed run: `iterable` holds the
    rest, `total` all)."""
    from symphys.progress import bar

    return bar(iterable, desc, show, total=total, initial=initial)


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


class CheckpointError(SymphysError, ValueError):
    """A checkpoint file that belongs to a different run or cannot be read."""


def save_checkpoint(path: str | Path, config: dict, state: dict) -> None:
    """Write a training run's `state` (weights, optimiser, curves) with the
    `config` that must match to resume it. The file is replaced atomically,
    so a run killed mid-write keeps its previous checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump({"format": CHECKPOINT_FORMAT, "config": config, "state": state}, f)
    os.replace(tmp, path)


def load_checkpoint(path: str | Path, config: dict) -> dict | None:
    """The state saved at `path`, or None when there is no file yet.

    Raises CheckpointError naming the file and the first differing field
    when the checkpoint was written by a run with another configuration."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        with open(path, "rb") as f:
            doc = pickle.load(f)
    except Exception as exc:                        # truncated or foreign file
        raise CheckpointError(f"{path}: not a readable symphys checkpoint ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a {CHECKPOINT_FORMAT} file")
    for key in sorted(set(config) | set(doc["config"])):
        if doc["config"].get(key) != config.get(key):
            raise CheckpointError(
                f"{path}: field '{key}' is {doc['config'].get(key)!r} in the checkpoint but "
                f"{config.get(key)!r} in this run; delete the file or rerun with the same options")
    return doc["state"]


def draw_paths(ax, series: dict, estimators, ylabel: str, title: str) -> None:
    """Each estimator's descent path `series["path_<e>"]` against the
    iteration, coloured C1, C2, C3 in `estimators` order."""
    for i, e in enumerate(estimators):
        ax.plot(series["path_" + e], label=f"{e}-order", color=f"C{i + 1}")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.set_title(title)
