"""Robot files: which suffixes MuJoCo's compiler reads, and the small robot
files shipped with symphys (examples), found by file name alone."""

from __future__ import annotations

from pathlib import Path

# File suffixes read by MuJoCo's compiler, and the loader of each.
ROBOT_SUFFIXES = {".xml": "load_mjcf", ".mjcf": "load_mjcf", ".urdf": "load_urdf"}
# Small robot files shipped with symphys (examples): the loaders and the
# command line find them by file name alone.
ROBOTS_DIR = Path(__file__).resolve().parent.parent / "robots"


def shipped_robots() -> list[str]:
    """File names of the robots shipped with symphys (`ROBOTS_DIR`)."""
    return sorted(p.name for p in ROBOTS_DIR.iterdir() if p.suffix.lower() in ROBOT_SUFFIXES)


def robot_file(path) -> Path:
    """`path` as given when it exists, else the shipped robot of that file
    name (`shipped_robots`), else `path` as given."""
    given = Path(path)
    shipped = ROBOTS_DIR / given.name
    if not given.exists() and given.name == str(path) and shipped.is_file():
        return shipped
    return given
