"""The parts of a scene: frozen dataclasses for bodies, ground, solver
options, joints, motors, sensors and cameras, the enums they use, and the
sign each bounded field must have (`FIELD_SIGNS`).

A `symphys.scene.scene.Scene` holds them; everything symbolic starts from it.
Read one with `symphys.scene.reader.load_scene` (JSON) or build one with
`symphys.scene.builder.SceneBuilder`.

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
import math
from dataclasses import dataclass, field

import numpy as np

from symphys.errors import SceneError

Vec = tuple[float, float, float]
RGB = tuple[float, float, float]


class Shape(enum.Enum):
    SPHERE = "sphere"
    BOX = "box"
    CAPSULE = "capsule"


# The name contact pairs use for the ground plane.
GROUND = "ground"


class ContactKind(enum.Enum):
    """A contact routine: the shapes of body a and of body b (or the ground)."""
    SPHERE_GROUND = "sphere-ground"
    BOX_GROUND = "box-ground"
    CAPSULE_GROUND = "capsule-ground"
    SPHERE_SPHERE = "sphere-sphere"
    SPHERE_BOX = "sphere-box"
    CAPSULE_SPHERE = "capsule-sphere"
    CAPSULE_CAPSULE = "capsule-capsule"
    CAPSULE_BOX = "capsule-box"
    BOX_BOX = "box-box"


# The shape pairs that can touch, keyed (shape of a, shape of b or GROUND):
# every reader of pairs (the scene reader, the reference step's and the
# kernels' collision tables) asks this one table.
CONTACT_KINDS: dict[tuple, ContactKind] = {
    (Shape.SPHERE, GROUND): ContactKind.SPHERE_GROUND,
    (Shape.BOX, GROUND): ContactKind.BOX_GROUND,
    (Shape.CAPSULE, GROUND): ContactKind.CAPSULE_GROUND,
    (Shape.SPHERE, Shape.SPHERE): ContactKind.SPHERE_SPHERE,
    (Shape.SPHERE, Shape.BOX): ContactKind.SPHERE_BOX,
    (Shape.CAPSULE, Shape.SPHERE): ContactKind.CAPSULE_SPHERE,
    (Shape.CAPSULE, Shape.CAPSULE): ContactKind.CAPSULE_CAPSULE,
    (Shape.CAPSULE, Shape.BOX): ContactKind.CAPSULE_BOX,
    (Shape.BOX, Shape.BOX): ContactKind.BOX_BOX,
}


def contact_kind(shape_a, shape_b) -> tuple[ContactKind, bool] | None:
    """The routine of a against b (a shape or GROUND) and whether it takes
    the two the other way round (b first, as a fixed capsule against a
    moving box: the step swaps them back); None when no routine takes them."""
    if (shape_a, shape_b) in CONTACT_KINDS:
        return CONTACT_KINDS[(shape_a, shape_b)], False
    if (shape_b, shape_a) in CONTACT_KINDS:
        return CONTACT_KINDS[(shape_b, shape_a)], True
    return None


class ContactModel(enum.Enum):
    IMPULSE = "impulse"     # velocity-level rows in the Gauss-Seidel solver (stiff)
    PENALTY = "penalty"     # spring-damper force k d - c v_n once the depth d > 0
    SMOOTH = "smooth"       # the same with softplus(d / s) s for d: a force before touching


class FrictionModel(enum.Enum):
    PYRAMID = "pyramid"
    CONE = "cone"


class SolverMethod(enum.Enum):
    """How the rows are solved each step (`SolverOptions.method`)."""

    PGS = "pgs"           # projected Gauss-Seidel, `iterations` sweeps (the paper's)
    NEWTON = "newton"     # Newton's method to `tolerance` (docs/solver.md)


class TextureKind(enum.Enum):
    IMAGE = "image"       # an image file (PNG), read when the scene is loaded
    CHECKER = "checker"   # two colours, 2 x 2 squares per repeat


@dataclass(frozen=True)
class Texture:
    """An image wrapped onto a surface and sampled bilinearly (repeating).

    scale: one repeat of the image spans (u, v) = scale: metres on a plane
    or the ground; on a body, a fraction of the body's own (u, v) range
    (each box face, or once around a sphere or capsule: (1, 1)).
    path: the image file (absolute) of an IMAGE texture; colors: the two
    colours of a CHECKER."""

    kind: TextureKind
    path: str = ""
    colors: tuple[RGB, RGB] = ((0.75, 0.75, 0.75), (0.45, 0.45, 0.45))
    scale: tuple[float, float] = (1.0, 1.0)


# The ground's default look: a grey checkerboard of 0.5 m squares.
GROUND_CHECKER = Texture(TextureKind.CHECKER)


@dataclass(frozen=True)
class Body:
    """One rigid body. Vectors are tuples of floats (world frame).

    color (RGB in [0, 1]; None: a palette colour by body index) and texture
    are seen by cameras only (`symphys.camera.image`); no graph of the physics
    depends on them."""

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
    color: RGB | None = None
    texture: Texture | None = None
    # Principal moments of inertia (kg m^2) about the centre, along body x,
    # y, z; None: those of a uniform solid of `shape` and `mass`.
    inertia: tuple[float, float, float] | None = None

    @property
    def isotropic(self) -> bool:
        """Whether the inertia is a multiple of the identity in every
        parameter setting (a uniform sphere): then its world inertia needs
        no rotation and it feels no gyroscopic torque."""
        return self.shape is Shape.SPHERE and self.inertia is None


@dataclass(frozen=True)
class Geom:
    """A further collision shape fixed to a body, beside the body's own
    shape, or fixed to the world (`body` = "world"): a robot link's second
    capsule, a foot off the centre of mass, a wall or a rail.

    position and quaternion are world coordinates at the initial pose (as
    joint anchors are): the geom keeps its place and turn in its body's
    frame. Sizes as a body's; friction, restitution and rolling friction
    are the geom's own in contacts (a body's own shape uses the body's).
    Contact pairs name a geom by its name, which is unique among bodies
    and geoms; geoms have no mass (the body's mass and inertia count them)
    and are seen by cameras like bodies."""

    name: str
    body: str
    shape: Shape
    radius: float = 0.0                      # sphere, capsule
    size: tuple[float, float, float] = (0.0, 0.0, 0.0)  # box full extents
    length: float = 0.0                      # capsule segment length
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quaternion: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    friction: float = 1.0
    restitution: float = 0.0
    rolling_friction: float = 0.0            # metres
    color: RGB | None = None


@dataclass(frozen=True)
class Ground:
    """The plane z = height, static. color multiplies texture (None: plain
    color), as cameras see it."""

    height: float = 0.0
    friction: float = 1.0
    restitution: float = 0.0
    rolling_friction: float = 0.0
    color: RGB = (1.0, 1.0, 1.0)
    texture: Texture | None = GROUND_CHECKER


@dataclass(frozen=True)
class SolverOptions:
    """Options of the constraint solver and integrator.

    method: `SolverMethod`: projected Gauss-Seidel (PGS, the paper's) or
      Newton's method on the convex problem of the rows (NEWTON: joints
      exact, bounded rows soft by `bound_softness`, friction on a pyramid
      of edges; converged to `tolerance`).
    iterations: PGS sweeps per step, 1 to `MAX_ITERATIONS`.
    newton_iterations: NEWTON: at most this many Newton steps, 1 to
      `MAX_ITERATIONS` (it stops sooner at `tolerance`; the reference graph
      takes all of them).
    tolerance: NEWTON: the largest velocity residual |M^-1 g| it stops at,
      relative to the largest speed.
    bound_softness: NEWTON: the compliance of contacts, limits, servo and
      dry-friction bounds relative to each row's inverse effective mass
      (MuJoCo's (1 - d) / d of an impedance d).
    constraint_frequency, constraint_damping: soft constraints (Hz, ratio);
      None means stiff rows with `position_feedback` (Baumgarte factor).
    restitution_threshold: approach speed (m/s) below which e is ignored.
    gyroscopic: include the -w x (I w) torque.
    renormalisation_iterations: Bjorck steps (3A - A A^T A)/2 per step, 0 to
      `MAX_RENORMALISATION`.
    contact_stiffness, contact_damping: k (N/m) and c (N s/m) of the
      penalty and smooth contact models (parameters `solver.contact_*`);
    contact_smoothing: the smooth model's length scale s (m).
    stiction_velocity: penalty models only: friction grows linearly with the
      slip speed up to μ f_n at this speed v_s (m/s; regularised Coulomb
      friction, as in Drake); 0: the impulse that stops the slip, capped to
      the cone (sticking).
    velocity_damping: a drag λ (1/s) on every body: each step scales its
      linear and angular velocity by (1 − λ dt) before forces act (Bullet's
      linear and angular damping; Suh et al.'s v+ = c v + h F / m with
      c = 1 − λ h); the parameter `solver.velocity_damping` when > 0; 0:
      none, and no graph node.
    """

    model: ContactModel = ContactModel.IMPULSE
    method: SolverMethod = SolverMethod.PGS
    iterations: int = 8
    newton_iterations: int = 20
    tolerance: float = 1e-7
    bound_softness: float = 0.01
    constraint_frequency: float | None = None
    constraint_damping: float = 0.0
    position_feedback: float = 0.2
    restitution_threshold: float = 0.2
    friction_model: FrictionModel = FrictionModel.PYRAMID
    gyroscopic: bool = True
    renormalisation_iterations: int = 1
    contact_stiffness: float = 1e4
    contact_damping: float = 100.0
    contact_smoothing: float = 1e-3
    stiction_velocity: float = 0.0
    velocity_damping: float = 0.0

    @property
    def penalty(self) -> bool:
        """Whether contacts are spring-dampers (PENALTY or SMOOTH)."""
        return self.model is not ContactModel.IMPULSE


class JointType(enum.Enum):
    FIXED = "fixed"      # weld: no relative motion
    HINGE = "hinge"      # rotation about `axis`
    BALL = "ball"        # rotation about the anchor, any axis
    SLIDER = "slider"    # translation along `axis`, no rotation
    UNIVERSAL = "universal"  # rotation about `axis` (parent) and `axis2` (child), no twist
    PLANAR = "planar"    # motion in the plane normal to `axis`: two slides, a turn about it


class MotorMode(enum.Enum):
    POSITION = "position"   # servo: target rate clip(gain (command - q), +-max_velocity)
    VELOCITY = "velocity"   # servo: target rate clip(command, +-max_velocity)
    TORQUE = "torque"       # torque (force): gain command - stiffness q - damping dq/dt


WORLD = "world"


@dataclass(frozen=True)
class Joint:
    """A joint between `parent` (a body or "world") and `child`.

    anchor and axis are world coordinates at the initial pose; the joint
    coordinate q (angle in rad, or slide in m) is 0 there. limits: (lo, hi)
    on q or None, on hinges and sliders; on a ball joint (0, largest turn):
    a cone on the angle its child turns from its initial pose, about any
    axis (MuJoCo's ball range). A universal joint
    (a 2-DOF hip or wrist) turns about `axis`, fixed in the parent, and
    `axis2` (perpendicular to it at the initial pose), fixed in the child;
    its coordinates q0, q1 are the angles about each. frequency (Hz) and
    damping (ratio): a soft joint, whose equality rows act as springs and
    dampers of that natural frequency on each row's effective mass (limits
    stay stiff); None: stiff. viscous_damping c and dry_friction f (hinges
    and sliders): the joint feels a torque (or force) -c dq/dt (N m s/rad,
    N s/m) and Coulomb friction of at most f (N m, N) against its rate:
    bearing losses. armature I_a (hinges and sliders; kg m^2, kg): the
    inertia of a rotor geared to the joint, a torque -I_a d2q/dt2 (MuJoCo's
    `armature`). spring_stiffness k and spring_reference q_s (hinges and
    sliders): a spring torque -k (q - q_s) (MuJoCo's `stiffness` and
    `springref`)."""

    name: str
    type: JointType
    parent: str
    child: str
    anchor: tuple[float, float, float]
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    limits: tuple[float, float] | None = None
    axis2: tuple[float, float, float] | None = None
    frequency: float | None = None
    damping: float = 0.0
    viscous_damping: float = 0.0
    dry_friction: float = 0.0
    armature: float = 0.0
    spring_stiffness: float = 0.0
    spring_reference: float = 0.0

    @property
    def has_drag(self) -> bool:
        """Whether the joint has bearing losses (viscous or dry), armature or
        a spring: rows on its rate."""
        return (self.viscous_damping > 0 or self.dry_friction > 0 or self.armature > 0
                or self.spring_stiffness > 0)

    @property
    def softness(self) -> tuple[float, float] | None:
        """(frequency, damping) of a soft joint, None when stiff."""
        return None if self.frequency is None else (self.frequency, self.damping)

    @property
    def n_coordinates(self) -> int:
        return {JointType.HINGE: 1, JointType.SLIDER: 1, JointType.UNIVERSAL: 2}.get(self.type, 0)


# A torque bound (N m, or N) at or above which a motor counts as unbounded:
# a torque motor with feedback on a hinge or slider then acts implicitly (a
# clamp is not a linear spring, so a bounded motor stays explicit). The MJCF
# reader gives it to actuators whose file bounds neither command nor force.
UNBOUNDED_TORQUE = 1e9


@dataclass(frozen=True)
class Motor:
    """An actuator on a hinge, slider or universal joint (`axis`: which of
    its two coordinates), driven by one action entry.

    Position and velocity servos are constraint rows whose impulse is
    bounded by max_torque * dt (N m, or N on a slider); a torque motor adds
    clip(gain command - stiffness q - damping q', +-max_torque) as an external
    torque/force (gain: a gear ratio; stiffness and damping: a PD servo as
    MuJoCo's position and velocity actuators are). Its stiffness and damping
    act explicitly, from q and q' at the step's start (MuJoCo's Euler),
    unless the motor is `implicit` (`Scene.implicit_motors`): unbounded
    (max_torque >= UNBOUNDED_TORQUE) on a hinge or slider, where they join
    the joint's drag row and act on q and q' at the step's end (MuJoCo's
    `implicitfast`); gain command stays explicit. Commands are clipped to
    `command_range` (default: the joint limits for a position servo,
    +-max_velocity for a velocity servo, +-max_torque for torque)."""

    name: str
    joint: str
    mode: MotorMode = MotorMode.POSITION
    gain: float = 1.0
    max_velocity: float = 1.0
    max_torque: float = 1.0
    command_range: tuple[float, float] | None = None
    axis: int = 0
    stiffness: float = 0.0      # torque motors: N m/rad (N/m)
    damping: float = 0.0        # torque motors: N m s/rad (N s/m)

    @property
    def feedback(self) -> bool:
        """Whether the motor's torque feels its joint's coordinate or rate
        (a torque motor with stiffness or damping)."""
        return self.mode is MotorMode.TORQUE and (self.stiffness > 0 or self.damping > 0)

    @property
    def unbounded(self) -> bool:
        """Whether max_torque is at least UNBOUNDED_TORQUE (no bound in practice)."""
        return self.max_torque >= UNBOUNDED_TORQUE


class SensorKind(enum.Enum):
    JOINT_ANGLE = "joint_angle"            # q of a hinge/slider: 1 value
    JOINT_RATE = "joint_rate"              # dq/dt: 1
    POSITION = "position"                  # body centre, world: 3
    VELOCITY = "velocity"                  # body centre velocity: 3
    ANGULAR_VELOCITY = "angular_velocity"  # world frame: 3
    ORIENTATION = "orientation"            # rotation matrix, row-major: 9
    CONTACT = "contact"                    # 1 when within `margin` of the ground: 1
    TIME = "time"                          # sin, cos of 2 pi f t per frequency: 2 each
    TARGET = "target"                      # a task input given per world: `size`
    TARGET_DISTANCE = "target_distance"    # |body centre - task point|: 1 (reads 3 task inputs)
    CAMERA = "camera"                      # a scene camera's image, row-major (H, W, 3): H W 3


# The sensors that read a joint (a hinge or slider) and those that read a body.
JOINT_SENSORS = (SensorKind.JOINT_ANGLE, SensorKind.JOINT_RATE)
BODY_SENSORS = (SensorKind.POSITION, SensorKind.VELOCITY, SensorKind.ANGULAR_VELOCITY,
                SensorKind.ORIENTATION, SensorKind.CONTACT, SensorKind.TARGET_DISTANCE)


@dataclass(frozen=True)
class Sensor:
    """One block of the observation vector (see `SensorKind` for sizes).

    source: the joint or body read, or the camera (empty for time and
    target); frequencies: Hz, for time features; size: length of a target
    input, or of a camera's image (H W 3); margin: contact distance (m)."""

    name: str
    kind: SensorKind
    source: str = ""
    frequencies: tuple[float, ...] = ()
    size: int = 0
    margin: float = 0.005

    @property
    def width(self) -> int:
        fixed = {SensorKind.JOINT_ANGLE: 1, SensorKind.JOINT_RATE: 1, SensorKind.POSITION: 3,
                 SensorKind.VELOCITY: 3, SensorKind.ANGULAR_VELOCITY: 3,
                 SensorKind.ORIENTATION: 9, SensorKind.CONTACT: 1,
                 SensorKind.TARGET_DISTANCE: 1}
        if self.kind is SensorKind.TIME:
            return 2 * len(self.frequencies)
        if self.kind in (SensorKind.TARGET, SensorKind.CAMERA):
            return self.size
        return fixed[self.kind]

    @property
    def task_width(self) -> int:
        """How many task inputs (per world) this sensor reads."""
        if self.kind is SensorKind.TARGET:
            return self.size
        return 3 if self.kind is SensorKind.TARGET_DISTANCE else 0


@dataclass(frozen=True)
class Plane:
    """A static, two-sided infinite plane seen by one camera (a back wall):
    through `point`, with `normal`; color multiplies texture. Its texture's
    v axis points down the plane (against world z, or -y when the plane is
    horizontal) and u completes (u, v, normal) right-handed, so an image on
    a wall reads upright from the side the normal points to."""

    point: Vec
    normal: Vec
    color: RGB = (1.0, 1.0, 1.0)
    texture: Texture | None = None


def _norm(v) -> float:
    return math.sqrt(sum(float(x) ** 2 for x in v))


@dataclass(frozen=True)
class Camera:
    """A pinhole RGB camera (`symphys.camera.image` renders it).

    position (m), direction (the optical axis) and up (image up, need not
    be orthogonal to direction) are world vectors; focal_length and
    sensor_size (width, height) are metres, resolution (width, height)
    pixels; rays_per_pixel: 1, or n**2 rays on an n x n sub-pixel grid,
    averaged. soft_edge (pixels): 0 for hard outlines, else the scale of a
    logistic coverage ramp across each body's outline (5% to 95% over
    about 6 soft_edge pixels), what makes an image loss differentiable
    with respect to where an outline lies (see `symphys.camera.image`).
    light_direction points towards a directional light; ambient in [0, 1]
    is the light every surface gets; background is the colour of rays
    that hit nothing; planes are static planes only this camera sees.

    Checked on construction: a bad camera raises `SceneError` naming the
    camera, the field and `source` (the scene file)."""

    name: str
    position: Vec
    direction: Vec
    up: Vec = (0.0, 0.0, 1.0)
    focal_length: float = 0.018
    sensor_size: tuple[float, float] = (0.036, 0.024)
    resolution: tuple[int, int] = (96, 64)
    rays_per_pixel: int = 1
    soft_edge: float = 0.0
    light_direction: Vec = (0.3, 0.6, 1.0)
    ambient: float = 0.35
    background: RGB = (0.70, 0.80, 0.95)
    planes: tuple[Plane, ...] = ()
    source: str = field(default="<builder>", repr=False, compare=False)

    def __post_init__(self):
        def fail(key: str, message: str):
            raise SceneError(message, source=self.source, item=f"camera '{self.name}'",
                             field=key)

        for key in ("position", "direction", "up", "light_direction"):
            value = getattr(self, key)
            if len(value) != 3 or not all(math.isfinite(float(x)) for x in value):
                fail(key, f"expected 3 finite numbers, got {value!r}")
        for key in ("direction", "up", "light_direction"):
            if _norm(getattr(self, key)) < 1e-9:
                fail(key, "zero-length vector has no direction")
        d, u = np.asarray(self.direction, float), np.asarray(self.up, float)
        if np.linalg.norm(np.cross(d, u)) < 1e-6 * np.linalg.norm(d) * np.linalg.norm(u):
            fail("up", f"{list(self.up)} is parallel to direction {list(self.direction)}; "
                 "give a vector across the optical axis (image up)")
        if not self.focal_length > 0:
            fail("focal_length", f"must be > 0 (metres), got {self.focal_length!r}")
        if len(self.sensor_size) != 2 or not all(s > 0 for s in self.sensor_size):
            fail("sensor_size", f"expected [width, height] > 0 (metres), got "
                 f"{list(self.sensor_size)}")
        if (len(self.resolution) != 2 or not all(
                isinstance(r, (int, np.integer)) and r > 0 for r in self.resolution)):
            fail("resolution", f"expected [width, height] positive integers (pixels), got "
                 f"{list(self.resolution)}")
        n = math.isqrt(self.rays_per_pixel) if (
            isinstance(self.rays_per_pixel, (int, np.integer)) and self.rays_per_pixel > 0) else 0
        if not n or n * n != self.rays_per_pixel:
            fail("rays_per_pixel", f"expected a square number (1, 4, 9, ...: an n x n "
                 f"sub-pixel grid), got {self.rays_per_pixel!r}")
        if not (math.isfinite(self.soft_edge) and self.soft_edge >= 0):
            fail("soft_edge", f"must be >= 0 (pixels; 0: hard edges), got {self.soft_edge!r}")
        if not 0.0 <= self.ambient <= 1.0:
            fail("ambient", f"must be in [0, 1], got {self.ambient!r}")
        check_color(self.background, fail, "background")
        for i, plane in enumerate(self.planes):
            key = f"planes[{i}]"
            if _norm(plane.normal) < 1e-9:
                fail(f"{key}.normal", "zero-length normal")
            check_color(plane.color, fail, f"{key}.color")

    @property
    def samples(self) -> int:
        """n: rays_per_pixel = n * n."""
        return math.isqrt(self.rays_per_pixel)


def check_color(value, fail, key: str) -> None:
    """`fail(key, message)` unless `value` is three numbers in [0, 1]."""
    if len(value) != 3 or not all(0.0 <= float(c) <= 1.0 for c in value):
        fail(key, f"expected an RGB colour, 3 numbers in [0, 1], got {list(value)}")


@dataclass(frozen=True)
class ContactPair:
    """Two colliders that may touch: each a body (its own shape), a geom
    (`Geom`), or "ground" for b."""

    a: str
    b: str


MOTOR_FIELDS = ("gain", "max_velocity", "max_torque")
# A torque motor's feedback gains (parameters of the motors that have them).
FEEDBACK_FIELDS = ("stiffness", "damping")


class Sign(enum.Enum):
    """What a field's values must be, in a scene file and in `params=`."""
    POSITIVE = "> 0"
    NONNEGATIVE = ">= 0"


# The sign of each bounded field, by name: the scene reader checks a file's
# fields with it, and `params=` checks a parameter by its field (the part
# after the dot). A motor's gain and limits may be 0 (the motor off).
def check_inertia(moments, fail) -> None:
    """Call fail(why) unless the principal moments (..., 3) are those of a
    rigid body: each at most the sum of the other two (equal: a flat body),
    to a relative 1e-9."""
    m = np.asarray(moments, dtype=np.float64)
    excess = 2 * m.max(axis=-1) - m.sum(axis=-1)
    if np.any(excess > 1e-9 * m.sum(axis=-1)):
        fail("principal moments must each be at most the sum of the other two "
             f"(no rigid body has {np.round(m, 12).tolist()})")


FIELD_SIGNS = {
    **dict.fromkeys(("mass", "radius", "size", "length", "inertia", "constraint_frequency",
                     "contact_stiffness"), Sign.POSITIVE),
    **dict.fromkeys(("friction", "restitution", "rolling_friction", "viscous_damping", "armature",
                     "spring_stiffness",
                     "dry_friction", "constraint_damping", "contact_damping",
                     "velocity_damping", *MOTOR_FIELDS, *FEEDBACK_FIELDS), Sign.NONNEGATIVE),
}

# Upper bounds (inclusive) of bounded fields, by name, checked as FIELD_SIGNS
# is: a restitution above 1 would add energy at every bounce.
FIELD_MAXIMA = {"restitution": 1.0}
# Most solver sweeps and renormalisation steps per step: each is unrolled or
# taped per step, and a converged solver needs tens (MuJoCo's default cap is 100).
MAX_ITERATIONS = 1000
MAX_RENORMALISATION = 100
