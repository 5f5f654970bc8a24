"""Paper experiments, each a module with `run`, `report` and `plot`.

`symphys experiment NAME` runs one, prints its table (ours beside the
paper's numbers) and writes its JSON and PNG.
"""

from __future__ import annotations

import importlib

from symphys.errors import SymphysError
from symphys.scene_io import closest

EXPERIMENTS = {
    "double-pendulum-sysid": "symphys.experiments.double_pendulum_sysid",
    "ball-throw": "symphys.experiments.ball_throw",
    "arm-fixed": "symphys.experiments.arm_fixed",
    "arm-random": "symphys.experiments.arm_random",
    "arm-hardware": "symphys.experiments.arm_hardware",
    "quadruped-gait": "symphys.experiments.quadruped_gait",
    "quadruped-speed": "symphys.experiments.quadruped_speed",
    "pendulum-camera": "symphys.experiments.pendulum_camera",
    "suh-heaviside": "symphys.experiments.suh_heaviside",
    "suh-ball-wall": "symphys.experiments.suh_ball_wall",
    "suh-double-pendulum": "symphys.experiments.suh_double_pendulum",
    "suh-friction": "symphys.experiments.suh_friction",
    "suh-pivot": "symphys.experiments.suh_pivot",
    "suh-pushing": "symphys.experiments.suh_pushing",
    "suh-tennis": "symphys.experiments.suh_tennis",
}


def get(name: str):
    """The experiment module registered under `name`."""
    if name not in EXPERIMENTS:
        raise SymphysError(f"unknown experiment {name!r}{closest(name, EXPERIMENTS)}; "
                           f"available: {sorted(EXPERIMENTS)}")
    return importlib.import_module(EXPERIMENTS[name])
