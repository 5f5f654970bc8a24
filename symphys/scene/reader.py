"""Reading scenes: `symphys-scene/1` JSON files and the Python builder.

Both paths go through `scene_from_dict`, the one validator, so a scene built
in a notebook and the same scene in a file give equal `Scene` objects and
the same error messages.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
from collections.abc import Mapping
from pathlib import Path

from symphys.errors import ParameterError, SceneError, closest
from symphys.scene.elements import (BODY_SENSORS, FEEDBACK_FIELDS, GROUND, GROUND_CHECKER,
                                    JOINT_SENSORS, MAX_ITERATIONS, MAX_RENORMALISATION,
                                    WORLD, Body, Camera, ContactModel, FrictionModel,
                                    Geom, Ground, Joint, JointType, Motor, MotorMode, Plane, Sensor,
                                    SensorKind, Shape, Sign, SolverMethod, SolverOptions,
                                    check_inertia)
from symphys.scene.fields import (BODY_KEYS, CAMERA_KEYS, GROUND_KEYS, JOINT_KEYS, MOTOR_KEYS,
                                  PLANE_KEYS, SENSOR_KEYS, SOLVER_KEYS, TOP_KEYS, Fields,
                                  check_finite, items, named_items, quaternion, shape_and_sizes,
                                  unit_axis, value_range)
from symphys.scene.geoms import read_contacts, read_geoms
from symphys.scene.params import with_values
from symphys.scene.scene import Scene
from symphys.scene.shipped import (available_scenes, scene_summary,  # noqa: F401
                                   scenes_dir, shipped)

FORMAT = "symphys-scene/1"

def _scene_path(path_or_name) -> Path:
    """The file `load_scene` reads: a bare name is a shipped scene's (a folder
    of that name does not hide it); a file of that name here is an error
    that says how to pick either."""
    path, ship = Path(path_or_name), shipped(path_or_name)
    if ship is not None:
        if path.is_file():
            raise SceneError(
                f"names both a file here ({path.resolve()}) and the shipped scene "
                f"'{ship.stem}'; give './{path_or_name}' for the file, or {ship} "
                f"for the shipped scene", source=str(path_or_name))
        return ship
    if not path.suffix and not path.exists():
        raise SceneError(
            f"no such scene; shipped scenes are {available_scenes()}"
            + closest(str(path_or_name), available_scenes()),
            source=str(path_or_name))
    if not path.exists():
        raise SceneError("file not found", source=str(path))
    if path.is_dir():
        raise SceneError("is a folder; give a scene file (.json) or a shipped scene's name",
                         source=str(path))
    return path


def _unique_keys(pairs: list) -> dict:
    """A JSON object's pairs as a dict; a key given twice is refused (json
    would keep the last one without a word)."""
    doc = {}
    for key, value in pairs:
        if key in doc:
            raise _DuplicateKey(key, next((v for k, v in pairs if k == "name"), None))
        doc[key] = value
    return doc


class _DuplicateKey(Exception):
    """A key given twice, and the name of the object that has it (or None)."""

    def __init__(self, key: str, owner):
        super().__init__(key)
        self.key, self.owner = key, owner


def load_scene(path_or_name: str | Path) -> Scene:
    """Load a scene from a JSON file path, or by name from the shipped graphs/."""
    path = _scene_path(path_or_name)
    if path.suffix.lower() in (".xml", ".mjcf", ".urdf"):
        raise SceneError("is a robot file (MJCF or URDF), not a scene file: read it with "
                         "sp.load_mjcf or sp.load_urdf", source=str(path))
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SceneError(f"cannot be read: {exc}", source=str(path)) from None
    try:
        # NaN and Infinity literals parse, and `check_finite` names their field.
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise SceneError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg}", source=str(path)) from None
    except _DuplicateKey as dup:
        owner = f"object '{dup.owner}'" if isinstance(dup.owner, str) else None
        raise SceneError(f"key '{dup.key}' is given twice in one object; give it once",
                         source=str(path), item=owner) from None
    return scene_from_dict(doc, source=str(path), raw=text)


# -- field readers ---------------------------------------------------------
def _volume(shape: Shape, radius: float, size, length: float) -> float:
    if shape is Shape.SPHERE:
        return 4.0 / 3.0 * math.pi * radius ** 3
    if shape is Shape.BOX:
        return size[0] * size[1] * size[2]
    return math.pi * radius ** 2 * length + 4.0 / 3.0 * math.pi * radius ** 3


def _mass_from_density(r: Fields, shape: Shape, radius: float, size, length: float) -> float:
    """density times the shape's volume, if that is a finite mass > 0."""
    density = r.number("density", sign=Sign.POSITIVE)
    try:
        mass = density * _volume(shape, radius, size, length)
    except OverflowError:
        mass = math.inf
    if not 0.0 < mass < math.inf:
        r.fail("density", f"density {density:g} kg/m^3 times the {shape.value}'s volume gives "
               f"a mass of {mass:g} kg; it must be finite and > 0 (give 'mass' instead)")
    return mass


def _read_body(doc, source: str, index: int) -> Body:
    label = doc.get("name") if isinstance(doc, dict) else None
    item = f"body '{label}'" if isinstance(label, str) else f"bodies[{index}]"
    r = Fields(doc, source, item, BODY_KEYS)
    name = r.string("name")
    if name in ("world", GROUND):
        r.fail("name", f"'{name}' is reserved")
    shape, radius, size, length = shape_and_sizes(r)
    if r.has("mass") and r.has("density"):
        r.fail("mass", "give either mass or density, not both")
    if r.has("mass"):
        mass = r.number("mass")
    elif r.has("density"):
        mass = _mass_from_density(r, shape, radius, size, length)
    else:
        r.fail("mass", "missing (give 'mass' in kg or 'density' in kg/m^3)")
    return Body(
        name=name, shape=shape, mass=mass, radius=radius, size=size,
        length=length,
        position=r.vector("position", 3, (0.0, 0.0, 0.0)),
        quaternion=quaternion(r),
        velocity=r.vector("velocity", 3, (0.0, 0.0, 0.0)),
        angular_velocity=r.vector("angular_velocity", 3, (0.0, 0.0, 0.0)),
        friction=r.number("friction", 1.0),
        restitution=r.number("restitution", 0.0),
        rolling_friction=r.number("rolling_friction", 0.0),
        color=r.color("color", None) if r.has("color") else None,
        texture=r.texture("texture"),
        inertia=_inertia(r) if r.has("inertia") else None,
    )


def _inertia(r: Fields) -> tuple[float, float, float]:
    """Principal moments that a rigid body can have: each at most the sum
    of the other two (equal for a flat body)."""
    moments = r.vector("inertia", 3)
    check_inertia(moments, lambda why: r.fail("inertia", why))
    return moments


def _read_solver(doc, source: str) -> SolverOptions:
    r = Fields(doc, source, "solver", SOLVER_KEYS)
    d = SolverOptions()
    freq = r.number("constraint_frequency") if r.has(
        "constraint_frequency") else None
    return SolverOptions(
        model=r.enum("model", ContactModel, d.model),
        method=r.enum("method", SolverMethod, d.method),
        tolerance=r.number("tolerance", d.tolerance, sign=Sign.POSITIVE),
        bound_softness=r.number("bound_softness", d.bound_softness, sign=Sign.POSITIVE),
        iterations=r.number("iterations", d.iterations, sign=Sign.POSITIVE, integer=True,
                            maximum=MAX_ITERATIONS),
        newton_iterations=r.number("newton_iterations", d.newton_iterations, sign=Sign.POSITIVE,
                                   integer=True, maximum=MAX_ITERATIONS),
        constraint_frequency=freq,
        constraint_damping=r.number("constraint_damping", d.constraint_damping),
        position_feedback=r.number("position_feedback", d.position_feedback,
                                   sign=Sign.NONNEGATIVE),
        restitution_threshold=r.number("restitution_threshold",
                                       d.restitution_threshold, sign=Sign.NONNEGATIVE),
        friction_model=r.enum("friction_model", FrictionModel, d.friction_model),
        gyroscopic=r.boolean("gyroscopic", d.gyroscopic),
        renormalisation_iterations=r.number(
            "renormalisation_iterations", d.renormalisation_iterations,
            sign=Sign.NONNEGATIVE, integer=True, maximum=MAX_RENORMALISATION),
        contact_stiffness=r.number("contact_stiffness", d.contact_stiffness),
        contact_damping=r.number("contact_damping", d.contact_damping),
        contact_smoothing=r.number("contact_smoothing", d.contact_smoothing, sign=Sign.POSITIVE),
        velocity_damping=r.number("velocity_damping", d.velocity_damping),
        stiction_velocity=r.number("stiction_velocity", d.stiction_velocity,
                                   sign=Sign.NONNEGATIVE),
    )


def _read_joints(doc, source: str, bodies) -> tuple[Joint, ...]:
    by_name = {b.name: b for b in bodies}
    joints = []
    for r, name in items(doc, source, "joints", "joint", JOINT_KEYS):
        kind = r.enum("type", JointType, JointType.HINGE) if r.has("type") else r.fail(
            "type", f"missing; allowed: {[t.value for t in JointType]}")
        parent, child = r.string("parent"), r.string("child")
        if parent != WORLD and parent not in by_name:
            r.fail("parent", f"unknown body '{parent}'{closest(parent, list(by_name))}; "
                   f"use \"{WORLD}\" for the fixed world frame")
        if child not in by_name:
            r.fail("child", f"unknown body '{child}'{closest(child, list(by_name))}")
        if parent == child:
            r.fail("child", "a body cannot be jointed to itself")
        universal = kind is JointType.UNIVERSAL
        has_axis = kind in (JointType.HINGE, JointType.SLIDER, JointType.PLANAR) or universal
        used = {"axis": has_axis, "axis2": universal,
                "limits": kind in (JointType.HINGE, JointType.SLIDER, JointType.BALL)}
        for key, ok in used.items():
            if r.has(key) and not ok:
                hint = ("; bound its motors' command_range instead"
                        if universal and key == "limits" else "")
                r.fail(key, f"not used by a {kind.value} joint{hint}")
        anchor = (r.vector("anchor", 3, by_name[child].position) if kind is JointType.FIXED
                  else r.vector("anchor", 3))
        axis = unit_axis(r, "axis") if has_axis else (0.0, 0.0, 1.0)
        axis2 = None
        if universal:
            if not r.has("axis2"):
                r.fail("axis2", "missing: a universal joint needs its second axis")
            axis2 = unit_axis(r, "axis2")
            if abs(sum(a * b for a, b in zip(axis, axis2))) > 1e-6:
                r.fail("axis2", f"must be perpendicular to axis {list(axis)}, got "
                       f"{list(axis2)}")
        frequency = r.number("frequency", sign=Sign.POSITIVE) if r.has("frequency") else None
        if r.has("damping") and frequency is None:
            r.fail("damping", "only a soft joint has damping: give its frequency (Hz) too; "
                   "for bearing losses use viscous_damping or dry_friction")
        for key in ("viscous_damping", "dry_friction", "armature", "spring_stiffness",
                    "spring_reference"):
            if r.has(key) and kind not in (JointType.HINGE, JointType.SLIDER):
                r.fail(key, f"only hinges and sliders have bearing losses, armature and "
                       f"springs, not a {kind.value} joint")
        joints.append(Joint(name=name, type=kind, parent=parent, child=child,
                            anchor=anchor, axis=axis,
                            limits=_limits(r, kind) if used["limits"] else None,
                            axis2=axis2, frequency=frequency,
                            damping=r.number("damping", 0.0, sign=Sign.NONNEGATIVE),
                            viscous_damping=r.number("viscous_damping", 0.0),
                            dry_friction=r.number("dry_friction", 0.0),
                            armature=r.number("armature", 0.0),
                            spring_stiffness=r.number("spring_stiffness", 0.0),
                            spring_reference=r.number("spring_reference", 0.0, sign=None)))
    return tuple(joints)


def _limits(r, kind: JointType) -> tuple[float, float] | None:
    """A joint's `limits`: [lo, hi] on its coordinate; a ball joint's are
    [0, the largest angle (rad, at most pi) its child turns from its
    initial pose]."""
    limits = value_range(r, "limits")
    if kind is JointType.BALL and limits is not None and (limits[0] != 0.0
                                                         or limits[1] > math.pi):
        r.fail("limits", f"a ball joint's limits are [0, largest turn (rad, at most pi)], got "
               f"{list(limits)}")
    return limits


def _read_motors(doc, source: str, joints) -> tuple[Motor, ...]:
    by_name = {j.name: j for j in joints}
    motors, driven = [], set()
    d = Motor(name="", joint="")
    for r, name in items(doc, source, "motors", "motor", MOTOR_KEYS):
        joint = r.string("joint")
        if joint not in by_name:
            r.fail("joint", f"unknown joint '{joint}'{closest(joint, list(by_name))}")
        n_coords = by_name[joint].n_coordinates
        if not n_coords:
            r.fail("joint", f"joint '{joint}' is a {by_name[joint].type.value} joint; "
                   "motors drive hinge, slider and universal joints only")
        axis = 0
        if r.has("axis"):
            if n_coords < 2:
                r.fail("axis", f"not used on a {by_name[joint].type.value} joint (one "
                       "coordinate)")
            axis = r.number("axis", integer=True)
            if axis not in (0, 1):
                r.fail("axis", f"expected 0 (the joint's axis) or 1 (its axis2), got {axis!r}")
        if (joint, axis) in driven:
            r.fail("joint", f"joint '{joint}' already has a motor"
                   + (f" on axis {axis}" if n_coords > 1 else ""))
        driven.add((joint, axis))
        mode = r.enum("mode", MotorMode, d.mode)
        for key in FEEDBACK_FIELDS:
            if r.has(key) and mode is not MotorMode.TORQUE:
                r.fail(key, f"only a torque motor has {key} (a {mode.value} servo's rows "
                       f"aim at a rate)")
        motors.append(Motor(
            name=name, joint=joint, mode=mode,
            gain=r.number("gain", d.gain),
            max_velocity=r.number("max_velocity", d.max_velocity),
            max_torque=r.number("max_torque", d.max_torque),
            command_range=value_range(r, "command_range"), axis=axis,
            stiffness=r.number("stiffness", 0.0), damping=r.number("damping", 0.0)))
    return tuple(motors)


def _read_sensors(doc, source: str, bodies, joints, cameras=()) -> tuple[Sensor, ...]:
    body_names = [b.name for b in bodies]
    camera_by_name = {c.name: c for c in cameras}
    joint_by_name = {j.name: j for j in joints}
    sensors, seen = [], set()
    for i, entry in enumerate(named_items(doc, source, "sensors", "sensor")):
        label = entry.get("name") if isinstance(entry, dict) else None
        item = f"sensor '{label}'" if isinstance(label, str) else f"sensors[{i}]"
        r = Fields(entry, source, item, SENSOR_KEYS)
        kind = r.enum("type", SensorKind, SensorKind.TIME) if r.has("type") else r.fail(
            "type", f"missing; allowed: {[k.value for k in SensorKind]}")
        source_name, frequencies, size = "", (), 0
        wanted = {"joint": kind in JOINT_SENSORS, "body": kind in BODY_SENSORS,
                  "frequencies": kind is SensorKind.TIME, "size": kind is SensorKind.TARGET,
                  "margin": kind is SensorKind.CONTACT, "camera": kind is SensorKind.CAMERA}
        for key, used in wanted.items():
            if r.has(key) and not used:
                r.fail(key, f"not used by a {kind.value} sensor")
        if kind in JOINT_SENSORS:
            source_name = r.string("joint")
            if source_name not in joint_by_name:
                r.fail("joint", f"unknown joint '{source_name}'"
                       + closest(source_name, list(joint_by_name)))
            if joint_by_name[source_name].n_coordinates != 1:
                r.fail("joint", f"joint '{source_name}' is a "
                       f"{joint_by_name[source_name].type.value} joint; joint sensors "
                       "read hinges and sliders")
        elif kind in BODY_SENSORS:
            source_name = r.string("body")
            if source_name not in body_names:
                r.fail("body", f"unknown body '{source_name}'"
                       + closest(source_name, body_names))
        elif kind is SensorKind.CAMERA:
            source_name = r.string("camera")
            if source_name not in camera_by_name:
                r.fail("camera", f"unknown camera '{source_name}'"
                       + closest(source_name, list(camera_by_name)))
            width, height = camera_by_name[source_name].resolution
            size = int(width * height * 3)
        elif kind is SensorKind.TIME:
            values = r.doc.get("frequencies")
            if not isinstance(values, list) or not values:
                r.fail("frequencies", "expected a non-empty list of frequencies (Hz)")
            frequencies = r.vector("frequencies", len(values), sign=Sign.POSITIVE)
        else:
            size = r.number("size", integer=True)
        name = r.string("name", f"{kind.value}:{source_name}" if source_name else kind.value)
        if name in seen:
            r.fail("name", f"duplicate sensor name '{name}'")
        seen.add(name)
        sensors.append(Sensor(name=name, kind=kind, source=source_name,
                              frequencies=frequencies, size=size,
                              margin=r.number("margin", 0.005, sign=Sign.NONNEGATIVE)))
    return tuple(sensors)


def scene_from_dict(doc: dict, source: str = "<dict>", raw: str = "") -> Scene:
    """Validate a `symphys-scene/1` document into a `Scene`."""
    check_finite(doc, source)
    r = Fields(doc, source, "", TOP_KEYS)
    r.item = None
    fmt = r.string("format", "")
    if fmt != FORMAT:
        r.fail("format", f"unknown format version {fmt!r}; this symphys reads {FORMAT!r}")
    name = r.string("name", Path(source).stem if source else "scene")
    dt = r.number("dt", 0.01, sign=Sign.POSITIVE)
    gravity = r.vector("gravity", 3, (0.0, 0.0, -9.81))
    solver = _read_solver(doc.get("solver", {}), source)
    ground = None
    if "ground" in doc and doc["ground"] is not None:
        g = Fields(doc["ground"], source, "ground", GROUND_KEYS)
        ground = Ground(height=g.number("height", 0.0),
                        friction=g.number("friction", 1.0),
                        restitution=g.number("restitution", 0.0),
                        rolling_friction=g.number("rolling_friction", 0.0),
                        color=g.color("color", (1.0, 1.0, 1.0)),
                        texture=g.texture("texture", GROUND_CHECKER))
    bodies_doc = doc.get("bodies")
    if not isinstance(bodies_doc, list) or not bodies_doc:
        r.fail("bodies", "expected a non-empty list of bodies")
    bodies = tuple(_read_body(b, source, i) for i, b in enumerate(bodies_doc))
    seen = set()
    for b in bodies:
        if b.name in seen:
            raise SceneError("duplicate body name", source=source,
                             item=f"body '{b.name}'", field="name")
        seen.add(b.name)
    geoms = read_geoms(doc, source, bodies)
    joints = _read_joints(doc, source, bodies)
    motors = _read_motors(doc, source, joints)
    cameras = _read_cameras(doc, source)
    sensors = _read_sensors(doc, source, bodies, joints, cameras)
    contacts = read_contacts(doc.get("contacts", "auto"), source, bodies, ground is not None,
                             joints, geoms)
    _check_penalty_fields(solver, ground, bodies + geoms, source)
    if solver.velocity_damping * dt >= 1.0:
        raise SceneError(f"velocity_damping {solver.velocity_damping} (1/s) times dt {dt} is "
                         f"{solver.velocity_damping * dt:g}; it must be below 1 (each step "
                         f"scales velocities by 1 - damping * dt)", source=source,
                         item="solver", field="velocity_damping")
    scene = Scene(name=name, dt=dt, gravity=gravity, solver=solver, ground=ground,
                  bodies=bodies, contacts=contacts, joints=joints, motors=motors,
                  sensors=sensors, source=source, raw=raw, cameras=cameras, geoms=geoms)
    return _overridden(scene)


# Set by `overriding`: {"params": {name: value}, "used": names applied, "scenes": names read}
_OVERRIDES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("overrides",
                                                                         default=None)


@contextlib.contextmanager
def overriding(params: Mapping):
    """Within, every scene read (a file, a dict or a `SceneBuilder`) gets those
    of `params` that name its parameters as new defaults (`with_values`):
    how `symphys experiment --param` reaches the scenes an experiment loads.
    A name that no scene read had is a ParameterError at the end."""
    state = {"params": dict(params), "used": set(), "scenes": []}
    token = _OVERRIDES.set(state)
    try:
        yield
    finally:
        _OVERRIDES.reset(token)
    unused = sorted(set(state["params"]) - state["used"])
    if unused:
        raise ParameterError(f"--param {', '.join(unused)}: no scene this run read has "
                             f"{'this parameter' if len(unused) == 1 else 'these parameters'}"
                             f" (scenes read: {sorted(set(state['scenes'])) or 'none'})")


def _overridden(scene: Scene) -> Scene:
    state = _OVERRIDES.get()
    if not state:
        return scene
    state["scenes"].append(scene.name)
    known = scene.parameters()
    mine = {k: v for k, v in state["params"].items() if k in known}
    state["used"] |= set(mine)
    return with_values(scene, mine) if mine else scene


def _read_cameras(doc, source: str) -> tuple[Camera, ...]:
    """The `cameras` list; geometry is checked by `Camera` itself."""
    cameras = []
    d = Camera(name="", position=(0.0, 0.0, 0.0), direction=(1.0, 0.0, 0.0))
    for r, name in items(doc, source, "cameras", "camera", CAMERA_KEYS):
        resolution = r.vector("resolution", 2)
        for i, value in enumerate(resolution):
            if value != int(value) or value < 1:
                r.fail("resolution", f"element {i} must be a positive integer (pixels), "
                       f"got {value!r}")
        if r.doc.get("planes") is not None and not isinstance(r.doc["planes"], list):
            r.fail("planes", "expected a list of planes ({\"point\", \"normal\", ...})")
        planes = []
        for i, entry in enumerate(named_items(r.doc, source, "planes", "plane")):
            p = Fields(entry, source, r.item, PLANE_KEYS, prefix=f"planes[{i}].")
            planes.append(Plane(point=p.vector("point", 3), normal=p.vector("normal", 3),
                                color=p.color("color", (1.0, 1.0, 1.0)),
                                texture=p.texture("texture")))
        cameras.append(Camera(
            name=name, position=r.vector("position", 3), direction=r.vector("direction", 3),
            up=r.vector("up", 3, d.up),
            focal_length=r.number("focal_length", sign=Sign.POSITIVE),
            sensor_size=r.vector("sensor_size", 2, sign=Sign.POSITIVE),
            resolution=tuple(int(v) for v in resolution),
            rays_per_pixel=r.number("rays_per_pixel", d.rays_per_pixel, sign=Sign.POSITIVE,
                                    integer=True),
            soft_edge=r.number("soft_edge", d.soft_edge, sign=Sign.NONNEGATIVE),
            light_direction=r.vector("light_direction", 3, d.light_direction),
            ambient=r.number("ambient", d.ambient, sign=Sign.NONNEGATIVE),
            background=r.color("background", d.background),
            planes=tuple(planes), source=source))
    return tuple(cameras)


def _check_penalty_fields(solver: SolverOptions, ground, colliders, source: str) -> None:
    """Spring-damper contacts have no rolling-resistance rows: refuse a
    rolling friction they would ignore, naming where it is set."""
    if not solver.penalty:
        if solver.stiction_velocity > 0:
            raise SceneError(f"stiction_velocity applies to the 'penalty' and 'smooth' contact "
                             f"models; the '{solver.model.value}' solver's friction rows "
                             f"stick exactly: set it to 0 or choose a penalty model",
                             source=source, item="solver", field="stiction_velocity")
        return
    places = [("ground", ground.rolling_friction)] if ground is not None else []
    places += [(f"{'geom' if isinstance(c, Geom) else 'body'} '{c.name}'", c.rolling_friction)
               for c in colliders]
    for item, value in places:
        if value > 0:
            raise SceneError(f"rolling friction {value} is not modelled by the "
                             f"'{solver.model.value}' contact model (only 'impulse'); set it "
                             f"to 0", source=source, item=item, field="rolling_friction")
