"""A scene's structure as data: the tables the fused step kernels read.

The reference step (`symphys.physics.step`) unrolls the scene into its graph: one
node per body, row and component. The kernels instead read the scene from
arrays, so one compiled kernel serves every scene:

- packed per-world arrays (float, differentiable): the state (B, N, 18),
  body parameters (Bp, N, BODY.width), world parameters (Bp, WORLD.width),
  joint parameters (Bp, J, JOINT.width), motor parameters (Bp, M, MOTOR.width)
  and the action (B, M); Bp is B or 1;
- item tables (int, constant): contact points, joints, bearing losses and
  motors in the order the solver sweeps their rows, each with the index of
  its first row;
- per-item constants (float, not differentiable): joint softness and
  limits, motor command ranges;
- `options`: the solver's scalar settings (dt, feedback, flags, counts).

Rows come out in the reference's sweep order: contact blocks, joint blocks
(last block first), bearing losses, servos (last block first). Within a
block no body appears twice, so taking one item's rows after another's
(rather than row 0 of every item, then row 1 ...) gives the same sweeps.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, fields

import numpy as np

from symphys.physics.contacts import STATIC, ContactKind, contact_blocks
from symphys.physics.drives import command_range
from symphys.physics.joints import (DRAG_FIELDS, LIMITED, articulated_bodies, drag_blocks,
                                    joint_blocks, limit_range, motor_blocks, soft_joint)
from symphys.scene.elements import ContactModel, FrictionModel, JointType, MotorMode, SolverMethod
from symphys.scene.scene import Scene


class Packing:
    """Named column ranges of a packed array's last axis, laid out in the
    order given: `Packing(("x", 3), ("m", 1)).x == slice(0, 3)`,
    `.at("m") == 3`, `.width == 4`."""

    def __init__(self, *columns: tuple[str, int]):
        self.names = tuple(name for name, _ in columns)
        self.sizes = dict(columns)
        starts = itertools.accumulate((size for _, size in columns), initial=0)
        self.start = dict(zip(self.names, starts))
        self.width = sum(self.sizes.values())

    def at(self, name: str) -> int:
        """First column of `name`."""
        return self.start[name]

    def span(self, name: str) -> slice:
        """The columns of `name` (also `packing.<name>` for a name without a dot)."""
        return slice(self.start[name], self.start[name] + self.sizes[name])

    def __getattr__(self, name: str) -> slice:
        if name in ("names", "sizes", "start", "width"):
            raise AttributeError(name)
        try:
            return self.span(name)
        except KeyError:
            raise AttributeError(name) from None

    def pack(self, parts: dict, lib=np):
        """Stack {name: (..., size), or (...) for size 1} into (..., width)."""
        cols = [parts[n][..., None] if self.sizes[n] == 1 else parts[n] for n in self.names]
        return lib.concatenate(cols, axis=-1)


STATE = Packing(("position", 3), ("rotation", 9), ("velocity", 3), ("angular_velocity", 3))
BODY = Packing(("inv_mass", 1), ("inv_inertia", 3), ("inertia", 3), ("radius", 1),
               ("half_size", 3), ("half_length", 1), ("friction", 1), ("restitution", 1),
               ("rolling_friction", 1))
# A column holding a parameter carries the parameter's name: the world's
# whole (`ground.friction`), a joint's, body's or motor's after its owner's
# name (`<joint>.viscous_damping` -> "viscous_damping"); `packing` fills
# them by these names.
WORLD = Packing(("world.gravity", 3), ("ground.height", 1), ("ground.friction", 1),
                ("ground.restitution", 1), ("ground.rolling_friction", 1),
                ("solver.constraint_frequency", 1), ("solver.constraint_damping", 1),
                ("solver.velocity_damping", 1))
JOINT = Packing(("anchor_a", 3), ("anchor_b", 3), ("frame_a", 9), ("frame_b", 9),
                *((key, 1) for key in DRAG_FIELDS))


def reference_field(column: str) -> str:
    """The reference graph's dataclass field (`model.WorldArrays`,
    `joints.JointFrames`, ...) of a column: its name, with a world
    parameter's `world.`/`solver.` owner dropped and `.` as `_`
    ("ground.friction" -> ground_friction)."""
    owner, _, key = column.rpartition(".")
    return key if owner in ("world", "solver") else column.replace(".", "_")


# A geom (`symphys.scene.elements.Geom`): BODY's columns (shape sizes and
# materials where a body has them; the mass columns unused), then its
# centre and rotation (row-major) in its body's frame (the world's for a
# world geom), so the contact kernels read a geom's row as a body's.
GEOM = Packing(*((name, BODY.sizes[name]) for name in BODY.names), ("position", 3),
               ("rotation", 9))
MOTOR = Packing(("gain", 1), ("max_velocity", 1), ("max_torque", 1), ("stiffness", 1),
                ("damping", 1))
# A solver row as the sweeps read it: J and M^-1 J^T on each side (b's
# halves carry the minus sign), the mass an update is scaled by, softness,
# target velocity, the part of an update kept, bounds and friction factor.
ROW = Packing(("jac_a", 6), ("jac_b", 6), ("dir_a", 6), ("dir_b", 6), ("mass", 1),
              ("gamma", 1), ("target", 1), ("keep", 1), ("lower", 1), ("upper", 1),
              ("mu", 1))


class Bound(enum.IntEnum):
    """How a row's accumulated impulse is clamped after each update."""

    FREE = 0          # equality row
    LOWER = 1         # >= lower (contact normal: 0; joint limit: 0)
    BOX = 2           # lower <= . <= upper (servos, dry friction)
    FRICTION = 3      # |.| <= mu * impulse of row `ref` (0 when that is 0)


class Item(enum.IntEnum):
    """Columns of the item tables (int64)."""

    KIND = 0          # ContactKind / JointType / MotorMode code
    SUB = 1           # contact point; motor: joint type
    A = 2             # body a (child)
    B = 3             # body b (parent); -1: ground or world
    INDEX = 4         # joint or motor index into the parameter arrays
    JOINT = 5         # motors: the joint's index
    AXIS = 6          # motors: coordinate driven; joints: has limit rows
    ROW = 7           # first row (-1: none)
    GA = 8            # contacts: a's geom (-1: a's own shape)
    GB = 9            # contacts: b's geom (-1: b's own shape, or the ground)
    FLIP = 10         # contacts: 1 where the routine takes b's side first
    IMPLICIT = 11     # drags: the implicit motor the row carries (-1: none)


ITEM_COLUMNS = len(Item)


class RowColumn(enum.IntEnum):
    """Columns of the row table (int64)."""

    A = 0             # body a
    B = 1             # body b; -1: static
    BOUND = 2         # `Bound`
    REF = 3           # FRICTION rows: the normal row bounding them
CONTACT_CODES = {kind: i for i, kind in enumerate(ContactKind)}
JOINT_CODES = {kind: i for i, kind in enumerate(JointType)}
MOTOR_CODES = {mode: i for i, mode in enumerate(MotorMode)}
# Equality rows per joint type (point rows, then angular rows), before limits.
JOINT_ROWS = {JointType.FIXED: 6, JointType.HINGE: 5, JointType.BALL: 3,
              JointType.SLIDER: 5, JointType.UNIVERSAL: 4, JointType.PLANAR: 3}


class Option(enum.IntEnum):
    """Entries of the float `options` vector."""

    DT = 0
    FEEDBACK = 1              # Baumgarte factor of stiff rows
    RESTITUTION_THRESHOLD = 2
    SOFT_CONTACTS = 3         # 1: contact normals soft (constraint frequency given)
    GYROSCOPIC = 4            # 1: apply -w x (I w)
    ISOTROPIC = 5             # 1: every body is a sphere (scalar inverse inertia)
    DAMPING = 6               # 1: velocity damping acts
    ROLLING = 7               # 1: contacts carry rolling rows
    RENORMALISE = 8           # Bjorck iterations per step
    ITERATIONS = 9            # PGS: sweeps per step
    NEWTON = 10               # 1: the rows are solved by Newton's method
    TOLERANCE = 11            # NEWTON: relative velocity residual it stops at
    BOUND_SOFTNESS = 12       # NEWTON: bounded rows' relative compliance
    NEWTON_ITERATIONS = 13    # NEWTON: most Newton steps


N_OPTIONS = len(Option)
CONTACT_ROWS, ROLLING_ROWS = 3, 2
INF = 1e30     # a limit or command range that never binds


class UnsupportedByKernels(NotImplementedError):
    """The scene uses a feature the fused kernels do not model yet."""


@dataclass(frozen=True)
class StepLayout:
    """Everything the kernels read about a scene that is not a parameter.

    contacts, joints, drags, servos, torques: (count, ITEM_COLUMNS) int64
    item tables in sweep order (torques: direct-torque motors, applied
    before the solve; an implicit motor is in its joint's drag row instead,
    `Item.IMPLICIT`). joint_consts: (J, 4) [keep, feedback, lo, hi] per
    joint; motor_consts: (M, 2) command range per motor. rows: (R, 4) int64
    [a, b, bound, ref] per row (`RowColumn`). articulated: (N,) 1.0 for bodies held by a joint.
    options: (N_OPTIONS,) float64."""

    contacts: np.ndarray
    joints: np.ndarray
    drags: np.ndarray
    servos: np.ndarray
    torques: np.ndarray
    joint_consts: np.ndarray
    motor_consts: np.ndarray
    rows: np.ndarray
    articulated: np.ndarray
    options: np.ndarray

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    def arrays(self) -> list[np.ndarray]:
        """The tables in field order (the kernels' trailing inputs)."""
        return [getattr(self, f.name) for f in fields(self)]


def check_supported(scene: Scene) -> None:
    """Raise `UnsupportedByKernels` naming what the kernels lack."""
    if scene.solver.model is not ContactModel.IMPULSE:
        raise UnsupportedByKernels(f"contact model {scene.solver.model.value!r}")
    if scene.solver.friction_model is not FrictionModel.PYRAMID:
        raise UnsupportedByKernels(f"friction model {scene.solver.friction_model.value!r}")


def _table(items: list[list[int]]) -> np.ndarray:
    """(count, ITEM_COLUMNS) int64; columns an item leaves out hold 0."""
    items = [list(item) + [0] * (ITEM_COLUMNS - len(item)) for item in items]
    return np.asarray(items, dtype=np.int64).reshape(len(items), ITEM_COLUMNS)


def build_layout(scene: Scene) -> StepLayout:
    """The tables of `scene` (see `StepLayout`)."""
    check_supported(scene)
    rows: list[tuple[int, int]] = []

    def add_rows(a: int, b: int, bounds: list[Bound]) -> int:
        first = len(rows)
        rows.extend((a, b, int(bound), -1) for bound in bounds)
        return first

    rolling = scene.has_rolling_friction
    contacts = []
    for block in contact_blocks(scene):
        for a, b, ga, gb in zip(block.a, block.b, block.ga, block.gb):
            b = -1 if b == STATIC else b
            first = len(rows)
            rows.append((a, b, int(Bound.LOWER), -1))
            friction = CONTACT_ROWS - 1 + (ROLLING_ROWS if rolling else 0)
            rows += [(a, b, int(Bound.FRICTION), first)] * friction
            contacts.append([CONTACT_CODES[block.kind], block.point, a, b, 0, 0, 0, first, ga,
                             gb, int(block.flip)])

    joints = []
    joint_consts = np.zeros((len(scene.joints), 4))
    for i, j in enumerate(scene.joints):
        keep, gain = soft_joint(j.softness, scene.dt) if j.softness else (
            1.0, scene.solver.position_feedback)
        lo, hi = limit_range(j)
        joint_consts[i] = keep, gain, lo, hi
    for block in joint_blocks(scene)[::-1]:
        limited = block.type in LIMITED and any(
            scene.joints[j].limits is not None for j in block.joints)
        for k, (j, a) in enumerate(zip(block.joints, block.a)):
            b = -1 if block.b is None else block.b[k]
            first = add_rows(a, b, [Bound.FREE] * JOINT_ROWS[block.type]
                             + [Bound.LOWER] * (2 if limited else 0))
            joints.append([JOINT_CODES[block.type], 0, a, b, j, j, int(limited), first])

    drags = []
    implicit = scene.implicit_motors
    for block in drag_blocks(scene):
        for k, j in enumerate(block.joints):
            b = -1 if block.b is None else block.b[k]
            first = add_rows(block.a[k], b, [Bound.FREE, Bound.BOX])
            drags.append([JOINT_CODES[block.type], 0, block.a[k], b, j, j, 0, first, -1, -1, 0,
                          implicit.get(j, -1)])

    motor_consts = np.zeros((len(scene.motors), 2))
    for i in range(len(scene.motors)):
        r = command_range(scene, i)
        motor_consts[i] = r if r is not None else (-INF, INF)
    servos, torques = [], []
    for block in motor_blocks(scene):
        if block.mode is not MotorMode.TORQUE:
            continue
        for k, m in enumerate(block.motors):
            b = -1 if block.b is None else block.b[k]
            torques.append([MOTOR_CODES[block.mode], JOINT_CODES[block.joint_type],
                            block.a[k], b, m, block.joints[k], block.axis, -1])
    for block in motor_blocks(scene)[::-1]:
        if block.mode is MotorMode.TORQUE:
            continue
        for k, m in enumerate(block.motors):
            b = -1 if block.b is None else block.b[k]
            first = add_rows(block.a[k], b, [Bound.BOX])
            servos.append([MOTOR_CODES[block.mode], JOINT_CODES[block.joint_type],
                           block.a[k], b, m, block.joints[k], block.axis, first])

    articulated = np.zeros(len(scene.bodies))
    articulated[list(articulated_bodies(scene))] = 1.0
    options = np.zeros(N_OPTIONS)
    s = scene.solver
    options[Option.DT] = scene.dt
    options[Option.FEEDBACK] = s.position_feedback
    options[Option.RESTITUTION_THRESHOLD] = s.restitution_threshold
    options[Option.SOFT_CONTACTS] = s.constraint_frequency is not None
    options[Option.ISOTROPIC] = all(b.isotropic for b in scene.bodies)
    options[Option.GYROSCOPIC] = s.gyroscopic and not options[Option.ISOTROPIC]
    options[Option.DAMPING] = s.velocity_damping > 0
    options[Option.ROLLING] = rolling
    options[Option.RENORMALISE] = s.renormalisation_iterations
    options[Option.ITERATIONS] = s.iterations
    options[Option.NEWTON] = s.method is SolverMethod.NEWTON
    options[Option.TOLERANCE] = s.tolerance
    options[Option.BOUND_SOFTNESS] = s.bound_softness
    options[Option.NEWTON_ITERATIONS] = s.newton_iterations
    return StepLayout(_table(contacts), _table(joints), _table(drags), _table(servos),
                      _table(torques), joint_consts, motor_consts,
                      np.asarray(rows, dtype=np.int64).reshape(len(rows), 4),
                      articulated, options)
