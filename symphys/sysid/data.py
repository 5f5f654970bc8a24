"""What system identification fits and what it compares: the variables
(`Variable`: a scene parameter or a start state, shared or one per
segment), the recordings cut into segments on the step grid (`Data`), and
the observed columns read off a trajectory (`observe`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from symphys.errors import DataError, ParameterError
from symphys.loop.rollout import Trajectory
from symphys.physics.algebra import quat_to_mat_array
from symphys.physics.joints import perpendicular
from symphys.scene.elements import FIELD_MAXIMA, FIELD_SIGNS
from symphys.scene.params import check_names, parameter_shapes
from symphys.scene.scene import Scene
from symphys.sysid.recordings import Column, ColumnKind, Recording

_INDEXED = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<index>\d+)\]$")


@dataclass(frozen=True)
class Variable:
    """One fitted quantity: `shape` (per world), its starting value, bounds
    (elementwise, broadcast to the shape) and whether each segment has its
    own (`per_segment`: its `initial` is (S,) + shape)."""

    name: str
    shape: tuple[int, ...]
    initial: np.ndarray
    lower: float | np.ndarray = -np.inf
    upper: float | np.ndarray = np.inf
    per_segment: bool = False

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class Segment:
    """Steps start..start + steps of one recording."""

    recording: int
    start: int


@dataclass(frozen=True)
class Data:
    """Every segment's observations on the step grid, (S, T + 1, K): values
    (0 where not observed) and weights (1 / sigma there, else 0); commands
    (S, T, M) or None."""

    columns: tuple[Column, ...]
    segments: tuple[Segment, ...]
    steps: int
    observed: np.ndarray
    weights: np.ndarray
    commands: np.ndarray | None

    def subset(self, keep) -> "Data":
        """The segments at indices `keep` only."""
        keep = np.asarray(keep, dtype=np.int64)
        return Data(self.columns, tuple(self.segments[k] for k in keep), self.steps,
                    self.observed[keep], self.weights[keep],
                    None if self.commands is None else self.commands[keep])


# -- names ---------------------------------------------------------------------
def split_name(name: str) -> tuple[str, int | None]:
    """("pivot.anchor", 2) for "pivot.anchor[2]"; (name, None) unindexed."""
    match = _INDEXED.match(name)
    return (match["base"], int(match["index"])) if match else (name, None)


def scene_variables(scene: Scene, names: Sequence[str], values: dict, *, per_segment=False,
                    segments: int = 0, bounds: dict | None = None) -> list[Variable]:
    """Variables for scene parameters named `name` or `name[i]` (one
    component), starting at `values` (resolved parameters)."""
    shapes = parameter_shapes(scene)
    out = []
    for name in names:
        base, index = split_name(name)
        check_names(scene, [base], "fit")
        shape = shapes[base]
        if index is not None and (len(shape) != 1 or index >= shape[0]):
            raise ParameterError(f"{scene.source}: '{name}': parameter '{base}' has shape "
                                 f"{shape}; an index needs a vector and 0 <= i < length")
        start = np.asarray(values[base], dtype=np.float64)
        if start.ndim > len(shape):
            raise ParameterError(f"{scene.source}: '{name}': give one starting value, not a "
                                 f"batch")
        start = start[index] if index is not None else start
        # A field with a sign (`FIELD_SIGNS`) is bounded below by 0, one with a
        # bound (`FIELD_MAXIMA`: restitution) above by it, unless given.
        field = base.rsplit(".", 1)[-1]
        lo = 0.0 if field in FIELD_SIGNS else -np.inf
        lo, hi = (bounds or {}).get(name, (lo, FIELD_MAXIMA.get(field, np.inf)))
        if per_segment:
            start = np.broadcast_to(start, (segments,) + start.shape).copy()
        out.append(Variable(name, () if index is not None else shape, start, lo, hi,
                            per_segment))
    return out


def scene_parameters(scene: Scene, variables: dict, base: dict) -> dict:
    """The default `derive`: scene parameters with the fitted variables in
    place (indexed ones set one component of the base value). variables:
    {name: (B,) + shape tensor}; base: resolved numeric parameters."""
    params = {}
    for name, value in variables.items():
        key, index = split_name(name)
        if index is None:
            params[key] = value
            continue
        current = params.get(key)
        if current is None:
            current = pt.as_tensor_variable(np.asarray(base[key], dtype=np.float64))
            current = pt.broadcast_to(current, (value.shape[0],) + tuple(base[key].shape))
        params[key] = pt.set_subtensor(current[:, index], value)
    return params


# -- observations --------------------------------------------------------------
def _reference(scene: Scene):
    """Per body, its rotation in the scene file's pose (numeric)."""
    return {b.name: quat_to_mat_array(np.asarray(b.quaternion, float)) for b in scene.bodies}


def observe(scene: Scene, traj: Trajectory, columns: Sequence[Column]):
    """Predicted columns (B, T + 1, K) of a batched trajectory.

    Joint angles are measured from the scene file's pose: a hinge's child
    reference direction (perpendicular to the axis) against the parent's,
    both carried from that pose by the bodies' rotations since; a slider's
    anchor separation along its axis."""
    rest = _reference(scene)
    joints = {j.name: j for j in scene.joints}
    defaults = scene.parameters()
    out = []
    for col in columns:
        if col.kind is ColumnKind.POSITION:
            out.append(traj.position[col.source][..., col.component])
            continue
        joint = joints[col.source]
        axis = np.asarray(joint.axis, float)
        ref = perpendicular(axis)            # the reference the joint rows use
        side = np.cross(axis, ref)

        def carried(body, vector):
            """World direction (B, T + 1, 3) of a vector fixed in `body`
            (world coordinates at the scene's pose)."""
            if body == "world":
                return pt.as_tensor_variable(vector)[None, None, :]
            local = rest[body].T @ vector
            return (traj.rotation[body] * local[None, None, None, :]).sum(axis=-1)

        if joint.type.value == "hinge":
            ref_a = carried(joint.child, ref)
            ref_b, side_b = carried(joint.parent, ref), carried(joint.parent, side)
            out.append(pt.arctan2((ref_a * side_b).sum(-1), (ref_a * ref_b).sum(-1)))
            continue
        anchor = np.asarray(joint.anchor, float)

        def point(body):
            if body == "world":
                return pt.as_tensor_variable(anchor)[None, None, :]
            lever = rest[body].T @ (anchor - defaults[f"{body}.position"])
            return traj.position[body] + (traj.rotation[body] * lever).sum(axis=-1)

        separation = point(joint.child) - point(joint.parent)
        out.append((separation * carried(joint.parent, axis)).sum(-1))
    return pt.stack(out, axis=-1)


def wrap_angles(diff, columns: Sequence[Column]):
    """diff (B, T + 1, K) with angle columns wrapped into (-pi, pi]."""
    angles = np.array([c.is_angle for c in columns])
    if not angles.any():
        return diff
    wrapped = pt.arctan2(pt.sin(diff), pt.cos(diff))
    return pt.switch(angles[None, None, :], wrapped, diff)


# -- data on the step grid -----------------------------------------------------
def segment_data(scene: Scene, recordings: Sequence[Recording], segment_steps: int | None,
                 noise: dict | None = None) -> Data:
    """Cut the recordings into segments (whole recordings when
    `segment_steps` is None: they must then have equal length) and lay
    their observations on the step grid. noise: {column: sigma} (default 1
    in the column's units)."""
    if not recordings:
        raise DataError("no recordings given")
    columns: list[Column] = []
    for rec in recordings:
        if abs(rec.dt - scene.dt) > 1e-12:
            raise DataError(f"{rec.source}: recorded for dt = {rec.dt} s, the scene has "
                            f"{scene.dt} s")
        columns += [c for c in rec.columns if c not in columns]
    index = {c.name: k for k, c in enumerate(columns)}
    noise = dict(noise or {})
    unknown = set(noise) - set(index)
    if unknown:
        raise DataError(f"noise given for column(s) {sorted(unknown)} that no recording has; "
                        f"columns: {sorted(index)}")
    for name, sigma in noise.items():
        if not (np.isfinite(sigma) and sigma > 0):
            raise DataError(f"noise for column '{name}' must be a positive number, got "
                            f"{sigma!r}")
    sigma = np.array([noise.get(c.name, 1.0) for c in columns])
    lengths = [rec.duration_steps for rec in recordings]
    if segment_steps is None:
        if len(set(lengths)) != 1:
            raise DataError(f"recordings of different lengths {sorted(set(lengths))} steps: "
                            f"give segment_steps to cut them into equal segments")
        steps = lengths[0]
    else:
        steps = int(segment_steps)
        if steps < 1:
            raise DataError(f"segment_steps must be at least 1, got {segment_steps}")
        short = [rec.source for rec, n in zip(recordings, lengths) if n < steps]
        if short:
            raise DataError(f"recording(s) {short} are shorter than one segment of {steps} "
                            f"steps")
    segments, observed, weights, commands = [], [], [], []
    for r, rec in enumerate(recordings):
        for start in range(0, rec.duration_steps - steps + 1, steps):
            values = np.zeros((steps + 1, len(columns)))
            weight = np.zeros_like(values)
            rows = (rec.steps >= start) & (rec.steps <= start + steps)
            at = rec.steps[rows] - start
            for k, col in enumerate(rec.columns):
                v = rec.observed[rows, k]
                seen = ~np.isnan(v)
                values[at[seen], index[col.name]] = v[seen]
                weight[at[seen], index[col.name]] = 1.0 / sigma[index[col.name]]
            segments.append(Segment(r, start))
            observed.append(values)
            weights.append(weight)
            if scene.motors:
                commands.append(rec.command_table(start, steps, len(scene.motors)))
    return Data(tuple(columns), tuple(segments), steps, np.stack(observed), np.stack(weights),
                np.stack(commands) if scene.motors else None)


def starts_from_data(data: Data, variable: Variable, dt: float) -> np.ndarray:
    """Per-segment starting values (S,) + shape of a `<body>.position` or
    `<body>.velocity` variable (or one component) from the recorded
    positions: the first observed value, and the slope at the segment's
    start of a parabola through the first three observed values; entries
    whose column is not observed there keep `variable.initial`."""
    base, index = split_name(variable.name)
    body, _, field_name = base.rpartition(".")
    out = np.array(variable.initial, dtype=np.float64, copy=True)
    if field_name not in ("position", "velocity"):
        return out
    names = {c.name: k for k, c in enumerate(data.columns)}
    components = [index] if index is not None else [0, 1, 2]
    for slot, comp in enumerate(components):
        k = names.get(f"{body}.{'xyz'[comp]}")
        if k is None:
            continue
        for s in range(len(data.segments)):
            seen = np.flatnonzero(data.weights[s, :, k] > 0)
            need = 1 if field_name == "position" else 3
            if len(seen) < need or (field_name == "position" and seen[0] != 0):
                continue
            at = (s,) if index is not None else (s, slot)
            if field_name == "position":
                out[at] = data.observed[s, 0, k]
            else:
                t = seen[:3].astype(float)
                poly = np.polyfit(t, data.observed[s, seen[:3], k], 2)
                out[at] = poly[1] / dt                # per step -> per second
    return out


