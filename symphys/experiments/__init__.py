"""Paper experiments, each a module with `run`, `report` and `plot`.

`symphys experiment NAME` runs one, prints its table (ours beside the
paper's numbers) and writes its JSON and PNG.
"""

from __future__ import annotations

import importlib

from symphys.errors import SymphysError, closest

# name -> (module, one line on what it runs)
EXPERIMENTS = {
    "ball-throw": ("ball_throw", "A1: throw a ball to come to rest 10 m away"),
    "quadruped-speed": ("quadruped_speed", "A2 and Table 1: closed-loop gradient speed "
                                           "of the quadruped"),
    "arm-fixed": ("arm_fixed", "A3: a 4-servo arm learns to hold its gripper on a point"),
    "arm-random": ("arm_random", "A4: the arm learns to reach any point it is given"),
    "quadruped-gait": ("quadruped_gait", "A5: a quadruped learns an open-loop gait"),
    "pendulum-camera": ("pendulum_camera", "A6: swing a bar up on a cart from camera "
                                           "pixels"),
    "arm-hardware": ("arm_hardware", "A7: the arm's link lengths optimised with its "
                                     "controller"),
    "suh-heaviside": ("suh_heaviside", "B1: gradient estimates of a smoothed step"),
    "suh-ball-wall": ("suh_ball_wall", "B2: a ball thrown over a wall, a flat region"),
    "suh-pivot": ("suh_pivot", "B3: angular momentum transfer, a cliff"),
    "suh-pushing": ("suh_pushing", "B4: pushing a block through a spring"),
    "suh-friction": ("suh_friction", "B5: a block sliding off a pushed cart"),
    "suh-double-pendulum": ("suh_double_pendulum", "B6: gradient variance of a chaotic "
                                                   "double pendulum"),
    "suh-tennis": ("suh_tennis", "B7: a linear policy returns a tennis ball"),
    "double-pendulum-sysid": ("double_pendulum_sysid", "C: identify a real double "
                                                       "pendulum from recordings"),
}


def get(name: str):
    """The experiment module registered under `name`."""
    if name not in EXPERIMENTS:
        raise SymphysError(f"unknown experiment {name!r}{closest(name, EXPERIMENTS)}; "
                           f"available: {sorted(EXPERIMENTS)}")
    return importlib.import_module(f"{__name__}.{EXPERIMENTS[name][0]}")
