"""Blow-up checks on numeric trajectories.

A run blows up when a step is too long for the scene (dt), or motors are
given absurd limits, and the state grows without bound until it is NaN.
Nothing in the step stops that, so `simulate` (and the other entry points
that hand back numeric trajectories) look at what came back: the first
step at which any body's state is *runaway* gives one `SimulationWarning`
naming the step, body and field, or, with `strict=True`, a
`SimulationError`.

Runaway means any of:

- a value that is not finite (NaN or infinite), in any field;
- a position farther than `RUNAWAY_DISTANCE` (1e6 m) from the origin
  along any axis;
- a speed (linear, m/s) or angular speed (rad/s) above `RUNAWAY_SPEED`
  (1e6).

No rigid-body scene symphys models moves like that; a state past these
bounds is meaningless from there on.
"""

from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass

import numpy as np

from symphys.errors import SimulationError, SimulationWarning

RUNAWAY_DISTANCE = 1e6   # m, along any axis
RUNAWAY_SPEED = 1e6      # m/s, and rad/s for the angular speed


class Field(enum.Enum):
    """The fields of a body's state, in the packed state's order."""
    POSITION = "position"
    ROTATION = "rotation"
    VELOCITY = "velocity"
    ANGULAR_VELOCITY = "angular_velocity"


# columns of each field in the packed state (`physics.kernels.layout.STATE`)
_COLUMNS = {Field.POSITION: slice(0, 3), Field.ROTATION: slice(3, 12),
            Field.VELOCITY: slice(12, 15), Field.ANGULAR_VELOCITY: slice(15, 18)}
_UNITS = {Field.POSITION: "m", Field.VELOCITY: "m/s", Field.ANGULAR_VELOCITY: "rad/s"}


@dataclass(frozen=True)
class BlowUp:
    """Where a run first went runaway."""
    step: int
    time: float
    body: str
    field: Field
    value: np.ndarray
    world: int | None     # the batch index, None for one world
    worlds: int           # worlds that blew up (of a batch)

    def describe(self) -> str:
        if not np.all(np.isfinite(self.value)):
            what = f"is {np.array2string(self.value, precision=3)} (not finite)"
        elif self.field is Field.POSITION:
            what = (f"is {np.array2string(self.value, precision=3)} m, beyond "
                    f"{RUNAWAY_DISTANCE:g} m")
        else:
            speed = float(np.linalg.norm(self.value))
            what = (f"has magnitude {speed:.3g} {_UNITS[self.field]}, above "
                    f"{RUNAWAY_SPEED:g}")
        world = "" if self.world is None else (
            f" in world {self.world} ({self.worlds} world(s) blew up)")
        return (f"the simulation blew up at step {self.step} (t = {self.time:g} s)"
                f"{world}: body '{self.body}' field '{self.field.value}' {what}. The "
                f"trajectory is meaningless from there on; a smaller dt or gentler "
                f"motor limits usually cure it (runaway: a non-finite value, a position "
                f"beyond {RUNAWAY_DISTANCE:g} m or a speed above {RUNAWAY_SPEED:g} m/s "
                f"or rad/s)")


def _runaway(states: np.ndarray) -> np.ndarray:
    """(..., F) flags, one per field of `Field` order, of packed states (..., 18)."""
    with np.errstate(over="ignore", invalid="ignore"):
        flags = []
        for field, columns in _COLUMNS.items():
            x = states[..., columns]
            bad = ~np.isfinite(x).all(-1)
            if field is Field.POSITION:
                bad |= (np.abs(x) > RUNAWAY_DISTANCE).any(-1)
            elif field is not Field.ROTATION:
                bad |= np.sqrt((x * x).sum(-1)) > RUNAWAY_SPEED
            flags.append(bad)
    return np.stack(flags, axis=-1)


def find_blowup(states: np.ndarray, body_names, dt: float, stride: int = 1) -> BlowUp | None:
    """The first runaway entry of packed states (T+1, B, N, 18) (entry k is
    step k * stride), or None. Bodies are scanned in order, then fields."""
    states = np.asarray(states)
    bad = _runaway(states)                           # (T+1, B, N, F)
    per_step = bad.reshape(len(bad), -1).any(-1)
    if not per_step.any():
        return None
    k = int(np.argmax(per_step))
    where = bad[k]                                   # (B, N, F)
    worlds = where.reshape(len(where), -1).any(-1)
    body, field = (int(i) for i in np.argwhere(where.any(0))[0])
    world = int(np.argmax(where[:, body, field]))
    field = list(_COLUMNS)[field]
    value = states[k, world, body, _COLUMNS[field]]
    return BlowUp(step=k * stride, time=k * stride * dt, body=body_names[body], field=field,
                  value=np.array(value), world=world if states.shape[1] > 1 else None,
                  worlds=int(worlds.sum()))


def trajectory_states(traj) -> np.ndarray:
    """Packed states (T+1, B, N, 18) of a numeric `Trajectory`."""
    names = list(traj.position)
    parts = []
    for fields, size in ((traj.position, 3), (traj.rotation, 9), (traj.velocity, 3),
                         (traj.angular_velocity, 3)):
        series = [np.asarray(fields[n]) for n in names]
        lead = series[0].shape[:-2] if size == 9 else series[0].shape[:-1]
        parts.append(np.stack([x.reshape(lead + (size,)) for x in series], axis=-2))
    packed = np.concatenate(parts, axis=-1)                    # (..., T+1, N, 18)
    return np.moveaxis(packed, 0, 1) if traj.batched else packed[:, None]


def check(source: str, states: np.ndarray, body_names, dt: float, strict: bool = False,
          stride: int = 1, stacklevel: int = 3) -> BlowUp | None:
    """Warn once (`SimulationWarning`), or raise `SimulationError` when
    `strict`, at the first runaway entry of packed states (T+1, B, N, 18)."""
    found = find_blowup(states, body_names, dt, stride)
    if found is not None:
        message = f"{source}: {found.describe()}"
        if strict:
            raise SimulationError(message)
        warnings.warn(message, SimulationWarning, stacklevel=stacklevel)
    return found


def check_trajectory(source: str, traj, dt: float, strict: bool = False,
                     stacklevel: int = 3) -> BlowUp | None:
    """`check` on a numeric `Trajectory`."""
    return check(source, trajectory_states(traj), list(traj.position), dt, strict,
                 stacklevel=stacklevel + 1)
