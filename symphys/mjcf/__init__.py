"""Scenes and MJCF, MuJoCo's model format: robots read from MJCF and URDF
files (`load_mjcf`, `load_urdf`, in `read`) and scenes written as MJCF for
MuJoCo to run beside symphys (`write`).

Reading needs the `mujoco` package (its compiler reads the files): the
functions here import it when called, so symphys starts without it.
"""

from __future__ import annotations

from pathlib import Path

from symphys.errors import SymphysError
from symphys.mjcf.files import ROBOT_SUFFIXES, ROBOTS_DIR, robot_file, shipped_robots  # noqa: F401
from symphys.scene.reader import load_scene
from symphys.scene.scene import Scene

MUJOCO_MISSING = ("reading MJCF and URDF files needs MuJoCo's compiler: "
                  "pip install 'symphys[mjcf]' (or pip install mujoco)")


def _reader():
    # Imported when first asked for: MuJoCo is an optional dependency.
    try:
        from symphys.mjcf import read
    except ImportError as exc:
        if "mujoco" not in str(exc):
            raise
        raise SymphysError(MUJOCO_MISSING) from None
    return read


def load_mjcf(source, **options) -> Scene:
    """A `Scene` from an MJCF file or text (`symphys.mjcf.read.load_mjcf`)."""
    return _reader().load_mjcf(source, **options)


def load_urdf(path, **options) -> Scene:
    """A `Scene` from a URDF file (`symphys.mjcf.read.load_urdf`)."""
    return _reader().load_urdf(path, **options)


def load_any(path_or_name, **options) -> Scene:
    """A scene from a scene file (.json), a robot file (.xml/.mjcf: MJCF;
    .urdf) or a shipped scene's name: what the command line accepts.
    `options` go to the robot loaders."""
    loader = ROBOT_SUFFIXES.get(Path(str(path_or_name)).suffix.lower())
    if loader is None:
        return load_scene(path_or_name)
    return getattr(_reader(), loader)(path_or_name, **options)
