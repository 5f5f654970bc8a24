"""Recorded trajectories, the data of system identification.

File format: CSV, comma-separated, a header line naming the columns.

- `time` (required): seconds, increasing, every value on the scene's step
  grid counted from the first row (t - t_0 a whole number of steps dt, to
  1e-6 dt); a recording starts at its first row.
- observed quantities, any subset:
  `<body>.x`, `<body>.y`, `<body>.z`: the body centre's world position (m);
  `<joint>.angle`: a hinge's angle (rad) of the child against the parent
  about the hinge axis, 0 at the pose the scene file gives; a slider's
  displacement (m) from that pose;
- inputs: `<motor>.command`, the motor's command from this row until the
  next (zero-order hold); every motor of the scene needs one when any is
  given; none given: commands 0.

An empty cell is a quantity not observed at that row (partial and missing
observations are allowed). Every error names the file, the row (1-based,
as in an editor, the header being row 1) and the column.
"""

from __future__ import annotations

import csv
import enum
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from symphys.errors import DataError, closest
from symphys.scene.elements import JointType
from symphys.scene.scene import Scene


class ColumnKind(enum.Enum):
    POSITION = "position"     # <body>.x / .y / .z
    JOINT = "joint"           # <joint>.angle
    COMMAND = "command"       # <motor>.command (an input)


AXES = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class Column:
    """One observed or input column: what it reads and from which body,
    joint or motor (`component`: the position axis, 0-2)."""

    name: str
    kind: ColumnKind
    source: str
    component: int = 0

    @property
    def is_angle(self) -> bool:
        """Whether residuals of this column wrap around 2 pi."""
        return self.kind is ColumnKind.JOINT


@dataclass(frozen=True)
class Recording:
    """One recording on a scene's step grid.

    steps: (T,) int step index of each row from the first (0 first);
    observed: (T, K) values of `columns` (NaN: not observed);
    commands: (T, M) in the order of `scene.motors`, or None (all 0)."""

    source: str
    dt: float
    steps: np.ndarray
    columns: tuple[Column, ...]
    observed: np.ndarray
    commands: np.ndarray | None = None

    @property
    def duration_steps(self) -> int:
        return int(self.steps[-1])

    def command_table(self, start: int, count: int, n_motors: int) -> np.ndarray:
        """(count, M) commands for steps start..start+count-1 (zero-order
        hold of the recorded rows; zeros without commands)."""
        if self.commands is None:
            return np.zeros((count, n_motors))
        wanted = start + np.arange(count)
        row = np.searchsorted(self.steps, wanted, side="right") - 1
        return self.commands[np.clip(row, 0, None)]


def parse_column(scene: Scene, name: str, where: str) -> Column:
    """The `Column` a header entry names, or a DataError saying why not."""
    head, _, tail = name.rpartition(".")
    joints = {j.name: j for j in scene.joints}
    if tail in AXES and head in scene.body_names:
        return Column(name, ColumnKind.POSITION, head, AXES[tail])
    if tail == "angle" and head in joints:
        if joints[head].type not in (JointType.HINGE, JointType.SLIDER):
            raise DataError(f"{where}: column '{name}': joint '{head}' is a "
                            f"{joints[head].type.value} joint; only hinges and sliders "
                            f"have an angle column")
        return Column(name, ColumnKind.JOINT, head)
    if tail == "command" and head in scene.motor_names:
        return Column(name, ColumnKind.COMMAND, head)
    valid = ([f"{b}.{a}" for b in scene.body_names for a in AXES]
             + [f"{j}.angle" for j in joints] + [f"{m}.command" for m in scene.motor_names])
    raise DataError(f"{where}: unknown column '{name}'{closest(name, valid)}; allowed: "
                    f"time, {', '.join(valid)}")


def read_recording(path, scene: Scene) -> Recording:
    """Read and check one CSV recording against `scene`."""
    path = Path(path)
    where = str(path)
    try:
        with path.open(newline="") as handle:
            rows = list(csv.reader(handle))
    except OSError as exc:
        raise DataError(f"{where}: cannot read the recording ({exc.strerror})") from None
    if not rows:
        raise DataError(f"{where}: empty file; the first line must be a header with a "
                        f"'time' column")
    header = [h.strip() for h in rows[0]]
    if "time" not in header:
        raise DataError(f"{where}: the header has no 'time' column (got {header})")
    if len(set(header)) != len(header):
        twice = sorted({h for h in header if header.count(h) > 1})
        raise DataError(f"{where}: column(s) {twice} appear more than once in the header")
    columns = [parse_column(scene, h, where) for h in header if h != "time"]
    if len(rows) < 3:
        raise DataError(f"{where}: needs at least two data rows, got {len(rows) - 1}")
    values = np.full((len(rows) - 1, len(header)), np.nan)
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DataError(f"{where}: row {r} has {len(row)} fields, the header "
                            f"{len(header)}")
        for c, cell in enumerate(row):
            cell = cell.strip()
            if not cell:
                continue
            try:
                values[r - 2, c] = float(cell)
            except ValueError:
                raise DataError(f"{where}: row {r}, column '{header[c]}': "
                                f"not a number: {cell!r}") from None
            if not np.isfinite(values[r - 2, c]):
                raise DataError(f"{where}: row {r}, column '{header[c]}': {cell!r} is not "
                                f"finite; leave the cell empty for a missing value")
    return recording_from_arrays(scene, values[:, header.index("time")],
                                 {h: values[:, i] for i, h in enumerate(header) if h != "time"},
                                 source=where, parsed=columns)


def recording_from_arrays(scene: Scene, time, data: dict, source: str = "<arrays>",
                          parsed: list[Column] | None = None) -> Recording:
    """A `Recording` from time (T,) and {column name: (T,) values} (NaN:
    not observed), checked as a file would be."""
    time = np.asarray(time, dtype=np.float64)
    if time.ndim != 1 or len(time) < 2:
        raise DataError(f"{source}: column 'time' needs at least two values")
    if np.any(~np.isfinite(time)):
        row = int(np.flatnonzero(~np.isfinite(time))[0]) + 2
        raise DataError(f"{source}: row {row}, column 'time': missing or not finite")
    columns = parsed or [parse_column(scene, name, source) for name in data]
    steps_f = (time - time[0]) / scene.dt
    steps = np.rint(steps_f).astype(np.int64)
    off = np.abs(steps_f - steps) > 1e-6
    if off.any():
        row = int(np.flatnonzero(off)[0]) + 2
        raise DataError(f"{source}: row {row}, column 'time': {time[row - 2]!r} s is not on "
                        f"the scene's step grid (dt = {scene.dt} s from {time[0]!r} s); "
                        f"resample the recording or change the scene's dt")
    if np.any(np.diff(steps) <= 0):
        row = int(np.flatnonzero(np.diff(steps) <= 0)[0]) + 3
        raise DataError(f"{source}: row {row}, column 'time': times must increase")
    observed = [c for c in columns if c.kind is not ColumnKind.COMMAND]
    commanded = {c.source: c for c in columns if c.kind is ColumnKind.COMMAND}
    if not observed:
        raise DataError(f"{source}: no observed column; give body positions "
                        f"(<body>.x/.y/.z) or joint angles (<joint>.angle)")
    commands = None
    if commanded:
        missing = [m for m in scene.motor_names if m not in commanded]
        if missing:
            raise DataError(f"{source}: commands are given for {sorted(commanded)} but not "
                            f"for motor(s) {missing}; give every motor a '.command' column")
        commands = np.stack([np.asarray(data[commanded[m].name], float)
                             for m in scene.motor_names], axis=1)
        if np.isnan(commands).any():
            r, c = np.argwhere(np.isnan(commands))[0]
            raise DataError(f"{source}: row {r + 2}, column "
                            f"'{commanded[scene.motor_names[c]].name}': a command cannot be "
                            f"missing")
    values = np.stack([np.asarray(data[c.name], float) for c in observed], axis=1)
    return Recording(source, scene.dt, steps, tuple(observed), values, commands)


def write_recording(path, recording: Recording, scene: Scene, t0: float = 0.0) -> Path:
    """Write `recording` in the file format above (NaN: an empty cell)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ["time"] + [c.name for c in recording.columns]
    blocks = [t0 + recording.steps[:, None] * scene.dt, recording.observed]
    if recording.commands is not None:
        header += [f"{m}.command" for m in scene.motor_names]
        blocks.append(recording.commands)
    table = np.concatenate(blocks, axis=1)
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(header)
        for row in table:
            out.writerow(["" if np.isnan(v) else repr(float(v)) for v in row])
    return path
