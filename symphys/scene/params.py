"""Named, differentiable scene parameters and their symbolic inputs.

Every numeric quantity a user may differentiate or fit has a name
(`ball.mass`, `ground.friction`, `world.gravity`, ...), a base shape and a
default taken from the scene. A parameter value may carry a leading batch
axis B (one world per row).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields, replace

import numpy as np
import pytensor.tensor as pt

from symphys.errors import ParameterError, closest
from symphys.scene.elements import FIELD_MAXIMA, FIELD_SIGNS, Sign, check_inertia
from symphys.scene.scene import Scene


def parameter_shapes(scene: Scene) -> dict[str, tuple[int, ...]]:
    """{name: base shape} of every parameter of `scene`, in a fixed order."""
    return {name: value.shape for name, value in scene.parameters().items()}


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
        if isinstance(name, str) and name.endswith((".viscous_damping", ".dry_friction",
                                                    ".armature", ".spring_stiffness",
                                                    ".spring_reference")) \
                and name not in valid and name.split(".")[0] in scene.joint_names:
            raise ParameterError(
                f"{scene.source}: parameter {name!r} in {what}= does not exist because "
                f"no joint of this scene has bearing losses, armature or a spring (or it "
                f"is not a hinge or slider); give "
                f"'viscous_damping', 'dry_friction', 'armature' or 'spring_stiffness' > 0 "
                f"to a joint in the scene to enable them")
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
    values = scene.parameters()
    shapes = {name: value.shape for name, value in values.items()}
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
    """A numeric parameter value as float64, if finite, of the sign and
    within the bound its field requires (`FIELD_SIGNS`, `FIELD_MAXIMA`), and
    with a direction where it is one (a quaternion)."""
    if has_none(value):
        raise ParameterError(f"{scene.source}: parameter {name!r} is None; give a number or "
                             f"an array of numbers (leave the name out for its default)")
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
    maximum = FIELD_MAXIMA.get(name.rsplit(".", 1)[-1])
    if value.size and maximum is not None and value.max() > maximum:
        raise ParameterError(f"{scene.source}: parameter {name!r} must be at most "
                             f"{maximum:g}, got {value.max():g}")
    if name.endswith(".quaternion") and value.ndim and value.shape[-1] == 4 \
            and np.any(np.linalg.norm(value, axis=-1) < 1e-12):
        raise ParameterError(f"{scene.source}: parameter {name!r}: zero quaternion has no "
                             f"rotation; use [1, 0, 0, 0]")
    if name.endswith(".inertia") and value.ndim and value.shape[-1] == 3:
        def fail(why):
            raise ParameterError(f"{scene.source}: parameter {name!r}: {why}")
        check_inertia(value, fail)
    return value


def has_none(value) -> bool:
    """Whether `value` is None or a list or tuple holding one (numpy reads
    None as NaN)."""
    if value is None:
        return True
    return isinstance(value, (list, tuple)) and any(has_none(v) for v in value)


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


def with_values(scene: Scene, params: Mapping) -> Scene:
    """`scene` with the parameters named in `params` set to new defaults
    (one value of each parameter's base shape, checked as `params=` is):
    the scene a file with those numbers would give."""
    shapes = parameter_shapes(scene)
    values = {}
    for name in check_names(scene, check_mapping(scene, params).keys(), "params"):
        value = check_value(scene, name, params[name])
        if value.shape != shapes[name]:
            raise ParameterError(f"{scene.source}: parameter {name!r} must have shape "
                                 f"{shapes[name]} here (one world), got {value.shape}")
        values[name] = float(value) if value.ndim == 0 else tuple(value.tolist())

    def updated(items):
        """Bodies, geoms, joints or motors with their named fields replaced (a joint
        and its motor may share a name; their fields differ)."""
        out = []
        for item in items:
            own = {f.name for f in fields(item)}
            out.append(replace(item, **{k.split(".", 1)[1]: v for k, v in values.items()
                                        if k.split(".", 1)[0] == item.name
                                        and k.split(".", 1)[1] in own}))
        return tuple(out)

    ground = scene.ground and replace(scene.ground, **{
        k[len("ground."):]: v for k, v in values.items() if k.startswith("ground.")})
    solver = replace(scene.solver, **{k[len("solver."):]: v for k, v in values.items()
                                      if k.startswith("solver.")})
    return replace(scene, bodies=updated(scene.bodies), geoms=updated(scene.geoms),
                   joints=updated(scene.joints),
                   motors=updated(scene.motors), ground=ground, solver=solver,
                   gravity=values.get("world.gravity", scene.gravity))

