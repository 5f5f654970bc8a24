"""The scenes shipped with symphys (symphys/graphs/*.json): where they
are, their names (old names included) and one-line summaries."""

from __future__ import annotations

import json
import os
import warnings
from importlib import resources
from pathlib import Path


def scenes_dir() -> Path:
    """Folder of the shipped scene files (package data or the repo's graphs/)."""
    try:
        packaged = resources.files("symphys.graphs")
        path = Path(str(packaged))
        if path.is_dir() and any(path.glob("*.json")):
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "graphs"


# Old names of shipped scenes: {old: new}. The old name still loads, with a
# FutureWarning naming the new one.
RENAMED_SCENES = {"hopper": "quadruped_revisited"}


def available_scenes() -> list[str]:
    return sorted(p.stem for p in scenes_dir().glob("*.json"))


def scene_summary(name: str, width: int = 70) -> str:
    """The first sentence of a shipped scene's description, cut to `width`."""
    doc = json.loads((scenes_dir() / f"{name}.json").read_text())
    text = str(doc.get("description", "")).split(". ")[0].rstrip(".")
    return text if len(text) <= width else text[:width - 3].rstrip() + "..."


def shipped(path_or_name) -> Path | None:
    """The shipped scene file that `path_or_name` names, if it is a bare name
    (no folder, no suffix) of one, old names included; else None."""
    text = str(path_or_name)
    if Path(text).suffix or "/" in text or os.sep in text:
        return None
    if text in RENAMED_SCENES:
        new = RENAMED_SCENES[text]
        warnings.warn(f"the shipped scene '{text}' is now called '{new}'; the old name is "
                      f"deprecated: load '{new}'", FutureWarning, stacklevel=4)
        text = new
    candidate = scenes_dir() / f"{text}.json"
    return candidate if candidate.is_file() else None
