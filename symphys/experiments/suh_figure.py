"""One figure of the Suh et al. experiments (experiments B), drawn from
their JSON files, a panel each, like the paper's overview figure.

    symphys figure suh [--dir docs] [--out docs/suh-combined.png]

Reads `suh-<name>.json` from the folder (as `symphys experiment` writes
them) and skips experiments without a file, naming them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from symphys.errors import SymphysError
from symphys.experiments.common import draw_paths, pyplot

COLOURS = {"first": "C1", "zeroth": "C2", "alpha": "C3"}


def _heaviside(ax, doc):
    s = doc["series"]
    ax.plot(s["theta"], s["exact"], "k-", lw=1, label="exact ∇F")
    ax.plot(s["theta"], s["first"], "o", ms=2, color=COLOURS["first"], label="first")
    ax.plot(s["theta"], s["zeroth"], "s", ms=2, color=COLOURS["zeroth"], label="zeroth")
    ax.set_xlabel("θ")
    ax.set_title("B1 Heaviside: gradient estimates")


def _ball_wall(ax, doc):
    ax.axhline(doc["metrics"]["clears_wall_from"], color="grey", ls=":", lw=1)
    draw_paths(ax, doc["series"], COLOURS, "throw angle θ (rad)", "B2 ball and wall: θ")


def _pivot(ax, doc):
    ax.axhline(np.pi / 4, color="grey", ls=":", lw=1)
    draw_paths(ax, doc["series"], COLOURS, "θ (rad)", "B3 pivot: θ (cliff at π/4)")


def _costs(ax, doc, prefix, title):
    """Each estimator's cost per iteration, series `<prefix><e>`."""
    for e, colour in COLOURS.items():
        ax.plot(doc["series"][prefix + e], color=colour, label=e)
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost")
    ax.set_title(title)


def _variance(ax, doc, x, xlabel, title):
    s = doc["series"]
    ax.loglog(s[x], s["variance_first"], "o-", color=COLOURS["first"], label="first")
    ax.loglog(s[x], s["variance_zeroth"], "s-", color=COLOURS["zeroth"], label="zeroth")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("sample variance")
    ax.set_title(title)


def _tennis(ax, doc):
    m = doc["metrics"]
    names = list(COLOURS)
    ax.bar(names, [m["returned"][e] for e in names], color=[COLOURS[e] for e in names],
           label=names)
    ax.set_ylabel(f"balls within 0.5 m (of {m['evaluated']})")
    ax.set_title(f"B7 tennis: returned balls (N = {m['samples']})")


PANELS = {
    "suh-heaviside": _heaviside,
    "suh-ball-wall": _ball_wall,
    "suh-pivot": _pivot,
    "suh-pushing": lambda ax, doc: _costs(ax, doc, "cost_stiff_", "B4 pushing, k = 1000: cost"),
    "suh-pushing-variance": lambda ax, doc: _variance(ax, doc, "stiffness", "stiffness k",
                                                      "B4 variance against k"),
    "suh-friction": lambda ax, doc: _costs(ax, doc, "cost_", "B5 friction: cost"),
    "suh-double-pendulum": lambda ax, doc: _variance(ax, doc, "horizon_s", "horizon (s)",
                                                     "B6 variance against horizon"),
    "suh-tennis": _tennis,
}


def combined(folder: str | Path = "docs", out: str | Path = "docs/suh-combined.png"):
    """Draw every panel whose JSON is in `folder` into `out`; returns
    (drawn, missing) experiment names."""
    folder = Path(folder)
    docs, missing = {}, []
    for panel in PANELS:
        name = panel.removesuffix("-variance")
        path = folder / f"{name}.json"
        if path.exists():
            docs[panel] = json.loads(path.read_text())
        elif name not in missing:
            missing.append(name)
    if not docs:
        raise SymphysError(f"no suh-*.json results in {folder}; run "
                           f"`symphys experiment suh-...` first")
    plt = pyplot()
    cols = 3
    rows = -(-len(docs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, (panel, doc) in zip(axes.flat, docs.items()):
        PANELS[panel](ax, doc)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(docs):]:
        ax.set_visible(False)
    fig.suptitle("Suh et al. 2022 in symphys: first- (orange), zeroth- (green) "
                 "and alpha-order (red) estimates", fontsize=11)
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return [p for p in docs], missing
