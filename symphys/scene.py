"""The scene model: frozen dataclasses describing bodies, ground and solver.

A `Scene` is plain immutable data. Everything symbolic starts from it
(`symphys.params.symbols`, `symphys.rollout.rollout`). Build one with
`symphys.scene_io.load_scene` (JSON) or `symphys.scene_io.SceneBuilder`.

Conventions: SI units, z up, rotation R maps body to world coordinates,
quaternions are (w, x, y, z). A capsule's axis is its body z axis and
`length` is the distance between its two end-sphere centres. Box `size` is
the full extent along body x, y, z.

Material combination rule for a contact between a and b:
friction mu = sqrt(mu_a * mu_b) (geometric mean), restitution
e = max(e_a, e_b), rolling friction mu_roll = max(mu_roll_a, mu_roll_b).
Against the ground, the ground's values play b.

Rolling friction mu_roll (metres, as in MuJoCo) bounds the torque that
resists rolling at a contact by mu_roll * normal force: the resistance a
deformable ground or ball gives. It is off (0) by default; a scene with any
nonzero value gets two rolling rows per contact.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np


class Shape(enum.Enum):
    SPHERE = "sphere"
    BOX = "box"
    CAPSULE = "capsule"


class ContactModel(enum.Enum):
    IMPULSE = "impulse"


class FrictionModel(enum.Enum):
    PYRAMID = "pyramid"
    CONE = "cone"


@dataclass(frozen=True)
class Body:
    """One rigid body. Vectors are tuples of floats (world frame)."""

    name: str
    shape: Shape
    mass: float
    radius: float = 0.0                      # sphere, capsule
    size: tuple[float, float, float] = (0.0, 0.0, 0.0)  # box full extents
    length: float = 0.0                      # capsule segment length
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quaternion: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    angular_velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    friction: float = 1.0
    restitution: float = 0.0
    rolling_friction: float = 0.0            # metres


@dataclass(frozen=True)
class Ground:
    """The plane z = height, static."""

    height: float = 0.0
    friction: float = 1.0
    restitution: float = 0.0
    rolling_friction: float = 0.0


@dataclass(frozen=True)
class SolverOptions:
    """Options of the constraint solver and integrator.

    iterations: projected Gauss-Seidel sweeps per step.
    constraint_frequency, constraint_damping: soft constraints (Hz, ratio);
      None means stiff rows with `position_feedback` (Baumgarte factor).
    restitution_threshold: approach speed (m/s) below which e is ignored.
    gyroscopic: include the -w x (I w) torque.
    renormalisation_iterations: Bjorck steps (3A - A A^T A)/2 per step.
    """

    model: ContactModel = ContactModel.IMPULSE
    iterations: int = 8
    constraint_frequency: float | None = None
    constraint_damping: float = 0.0
    position_feedback: float = 0.2
    restitution_threshold: float = 0.2
    friction_model: FrictionModel = FrictionModel.PYRAMID
    gyroscopic: bool = True
    renormalisation_iterations: int = 1


@dataclass(frozen=True)
class ContactPair:
    """Two bodies (or a body and "ground") that may touch."""

    a: str
    b: str


@dataclass(frozen=True)
class Scene:
    """A validated scene. `source` names the file or builder it came from."""

    name: str
    dt: float
    gravity: tuple[float, float, float]
    solver: SolverOptions
    ground: Ground | None
    bodies: tuple[Body, ...]
    contacts: tuple[ContactPair, ...]
    source: str = "<builder>"
    raw: str = field(default="", repr=False, compare=False)

    # -- lookups ----------------------------------------------------------
    @property
    def body_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bodies)

    def body_index(self, name: str) -> int:
        return self.body_names.index(name)

    def parameters(self) -> dict[str, np.ndarray]:
        """All differentiable parameters with their default values."""
        from symphys.params import default_parameters

        return default_parameters(self)

    @property
    def has_rolling_friction(self) -> bool:
        """Whether contacts carry rolling-resistance rows (any value > 0)."""
        values = [b.rolling_friction for b in self.bodies]
        if self.ground is not None:
            values.append(self.ground.rolling_friction)
        return any(v > 0 for v in values)

    def structure_key(self) -> str:
        """Hash of everything that shapes the graph (not parameter values)."""
        solver = {k: (v.value if isinstance(v, enum.Enum) else v)
                  for k, v in asdict(self.solver).items()}
        # Frequency and damping are graph inputs; only their presence shapes it.
        solver["constraint_frequency"] = self.solver.constraint_frequency is not None
        solver.pop("constraint_damping")
        doc = {
            "dt": self.dt,
            "solver": solver,
            "ground": self.ground is not None,
            "rolling": self.has_rolling_friction,
            "bodies": [(b.name, b.shape.value) for b in self.bodies],
            "contacts": [(c.a, c.b) for c in self.contacts],
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
