"""Named, differentiable scene parameters and their symbolic inputs.

Every numeric quantity a user may differentiate or fit has a name
(`ball.mass`, `ground.friction`, `world.gravity`, ...), a base shape and a
default taken from the scene. A parameter value may carry a leading batch
axis B (one world per row).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import numpy as np
import pytensor.tensor as pt

from symphys.errors import ParameterError
from symphys.scene import JointType, Scene, Shape
from symphys.scene_io import closest


MOTOR_FIELDS = ("gain", "max_velocity", "max_torque")


class Sign(enum.Enum):
    """What a parameter's values must be, as the scene reader requires of
    the same field."""
    POSITIVE = "> 0"
    NONNEGATIVE = ">= 0"


# The sign of each bounded parameter, by field (the part after the dot).
# A motor's gain and limits may be 0 here (the motor switched off), though
# a scene file must give a working motor.
FIELD_SIGNS = {
    **dict.fromkeys(("mass", "radius", "size", "length", "constraint_frequency",
                     "contact_stiffness"), Sign.POSITIVE),
    **dict.fromkeys(("friction", "restitution", "rolling_friction", "viscous_damping",
                     "dry_friction", "constraint_damping", "contact_damping",
                     "velocity_damping", *MOTOR_FIELDS), Sign.NONNEGATIVE),
}


def drag_joints(scene: Scene) -> list:
    """The joints with bearing-loss parameters: every hinge and slider when
    any joint of the scene has losses, else none."""
    if not scene.has_joint_drag:
        return []
    return [j for j in scene.joints if j.type in (JointType.HINGE, JointType.SLIDER)]


def parameter_shapes(scene: Scene) -> dict[str, tuple[int, ...]]:
    """{name: base shape} of every parameter of `scene`, in a fixed order."""
    shapes: dict[str, tuple[int, ...]] = {}
    for b in scene.bodies:
        shapes[f"{b.name}.mass"] = ()
        if b.shape in (Shape.SPHERE, Shape.CAPSULE):
            shapes[f"{b.name}.radius"] = ()
        if b.shape is Shape.BOX:
            shapes[f"{b.name}.size"] = (3,)
        if b.shape is Shape.CAPSULE:
            shapes[f"{b.name}.length"] = ()
        for vec in ("position", "velocity", "angular_velocity"):
            shapes[f"{b.name}.{vec}"] = (3,)
        shapes[f"{b.name}.quaternion"] = (4,)
        shapes[f"{b.name}.friction"] = ()
        shapes[f"{b.name}.restitution"] = ()
        if scene.has_rolling_friction:
            shapes[f"{b.name}.rolling_friction"] = ()
    if scene.ground is not None:
        for key in ("height", "friction", "restitution"):
            shapes[f"ground.{key}"] = ()
        if scene.has_rolling_friction:
            shapes["ground.rolling_friction"] = ()
    for j in scene.joints:
        shapes[f"{j.name}.anchor"] = (3,)
    for j in drag_joints(scene):
        shapes[f"{j.name}.viscous_damping"] = ()
        shapes[f"{j.name}.dry_friction"] = ()
    for m in scene.motors:
        for key in MOTOR_FIELDS:
            shapes[f"{m.name}.{key}"] = ()
    shapes["world.gravity"] = (3,)
    if scene.solver.constraint_frequency is not None:
        shapes["solver.constraint_frequency"] = ()
        shapes["solver.constraint_damping"] = ()
    if scene.solver.penalty:
        shapes["solver.contact_stiffness"] = ()
        shapes["solver.contact_damping"] = ()
    if scene.solver.velocity_damping > 0:
        shapes["solver.velocity_damping"] = ()
    return shapes


def default_parameters(scene: Scene) -> dict[str, np.ndarray]:
    """{name: default value as a float64 array} of every parameter."""
    values: dict[str, np.ndarray] = {}
    for b in scene.bodies:
        values[f"{b.name}.mass"] = b.mass
        if b.shape in (Shape.SPHERE, Shape.CAPSULE):
            values[f"{b.name}.radius"] = b.radius
        if b.shape is Shape.BOX:
            values[f"{b.name}.size"] = b.size
        if b.shape is Shape.CAPSULE:
            values[f"{b.name}.length"] = b.length
        values[f"{b.name}.position"] = b.position
        values[f"{b.name}.velocity"] = b.velocity
        values[f"{b.name}.angular_velocity"] = b.angular_velocity
        values[f"{b.name}.quaternion"] = b.quaternion
        values[f"{b.name}.friction"] = b.friction
        values[f"{b.name}.restitution"] = b.restitution
        if scene.has_rolling_friction:
            values[f"{b.name}.rolling_friction"] = b.rolling_friction
    if scene.ground is not None:
        values["ground.height"] = scene.ground.height
        values["ground.friction"] = scene.ground.friction
        values["ground.restitution"] = scene.ground.restitution
        if scene.has_rolling_friction:
            values["ground.rolling_friction"] = scene.ground.rolling_friction
    for j in scene.joints:
        values[f"{j.name}.anchor"] = j.anchor
    for j in drag_joints(scene):
        values[f"{j.name}.viscous_damping"] = j.viscous_damping
        values[f"{j.name}.dry_friction"] = j.dry_friction
    for m in scene.motors:
        for key in MOTOR_FIELDS:
            values[f"{m.name}.{key}"] = getattr(m, key)
    values["world.gravity"] = scene.gravity
    if scene.solver.constraint_frequency is not None:
        values["solver.constraint_frequency"] = scene.solver.constraint_frequency
        values["solver.constraint_damping"] = scene.solver.constraint_damping
    if scene.solver.penalty:
        values["solver.contact_stiffness"] = scene.solver.contact_stiffness
        values["solver.contact_damping"] = scene.solver.contact_damping
    if scene.solver.velocity_damping > 0:
        values["solver.velocity_damping"] = scene.solver.velocity_damping
    return {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}


def check_names(scene: Scene, names: Iterable[str], what: str) -> list[str]:
    """Raise a ParameterError naming the closest valid name for unknown ones."""
    valid = parameter_shapes(scene)
    names = list(names)
    for name in names:
        if isinstance(name, str) and name.endswith(".rolling_friction") and name not in valid:
            raise ParameterError(
                f"{scene.source}: parameter {name!r} in {what}= does not exist because "
                f"this scene has no rolling friction; give 'rolling_friction' > 0 to a "
                f"body or the ground in the scene to enable it")
        if isinstance(name, str) and name.endswith((".viscous_damping", ".dry_friction")) \
                and name not in valid and name.split(".")[0] in scene.joint_names:
            raise ParameterError(
                f"{scene.source}: parameter {name!r} in {what}= does not exist because "
                f"no joint of this scene has bearing losses (or it is not a hinge or "
                f"slider); give 'viscous_damping' or 'dry_friction' > 0 to a joint in "
                f"the scene to enable them")
        if not isinstance(name, str) or name not in valid:
            raise ParameterError(
                f"{scene.source}: unknown parameter {name!r} in {what}="
                f"{closest(str(name), valid)}; valid names: {sorted(valid)}")
    return names


def resolve_values(scene: Scene, params: Mapping | None) -> tuple[dict[str, np.ndarray], int | None]:
    """Defaults overridden by `params`, shape-checked; returns (values, batch).

    batch is None when no value carries a batch axis, else B (all batched
    values must agree on it).
    """
    shapes = parameter_shapes(scene)
    values = default_parameters(scene)
    batch = None
    for name in check_names(scene, check_mapping(scene, params).keys(), "params"):
        value = check_value(scene, name, params[name])
        base = shapes[name]
        if value.shape == base:
            pass
        elif value.ndim == len(base) + 1 and value.shape[1:] == base:
            if batch is not None and value.shape[0] != batch:
                raise ParameterError(
                    f"{scene.source}: parameter {name!r} has batch size "
                    f"{value.shape[0]} but another parameter has {batch}")
            batch = value.shape[0]
        else:
            raise ParameterError(
                f"{scene.source}: parameter {name!r} must have shape {base} "
                f"(or (B,) + {base} for a batch of worlds), got {value.shape}")
        values[name] = value
    return values, batch


def check_mapping(scene: Scene, params) -> Mapping:
    """`params` as given (None: {}), if it is a mapping of names to values."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise ParameterError(f"{scene.source}: params= must be a dict of parameter names to "
                             f"values, e.g. {{'ball.mass': 2.0}}; got a {type(params).__name__}")
    return params


def check_value(scene: Scene, name: str, value) -> np.ndarray:
    """A numeric parameter value as float64, if finite and of the sign its
    field requires (`FIELD_SIGNS`)."""
    try:
        value = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{scene.source}: parameter {name!r} must be a number or an "
                             f"array of numbers, got {value!r}") from None
    if not np.all(np.isfinite(value)):
        raise ParameterError(f"{scene.source}: parameter {name!r} contains NaN or inf")
    sign = FIELD_SIGNS.get(name.rsplit(".", 1)[-1])
    if value.size and (sign is Sign.POSITIVE and value.min() <= 0
                       or sign is Sign.NONNEGATIVE and value.min() < 0):
        raise ParameterError(f"{scene.source}: parameter {name!r} must be {sign.value}, "
                             f"got {value.min():g}")
    return value


def symbols(scene: Scene, wrt: Iterable[str] | None = None, *, batched=()) -> dict:
    """Symbolic inputs for the parameters named in `wrt` (all when None).

    Names in `batched` get a leading batch axis. Returns {name: TensorVariable}.
    """
    shapes = parameter_shapes(scene)
    names = list(shapes) if wrt is None else check_names(scene, wrt, "wrt")
    check_names(scene, batched, "batched")
    out = {}
    for name in names:
        ndim = len(shapes[name]) + (1 if name in batched else 0)
        shape = ((None,) if name in batched else ()) + shapes[name]
        out[name] = pt.tensor(name=name, dtype="float64", shape=shape)
        assert out[name].ndim == ndim
    return out
