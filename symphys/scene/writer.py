"""Scenes written back as `symphys-scene/1` documents: `scene_to_dict(scene)`
gives the document `scene_from_dict` reads into an equal `Scene`, and
`write_scene` saves it as JSON, so a scene built in Python (or converted
from another format) can be read, edited and shipped as a file.

Every value is written explicitly (the reader's defaults are not relied
on); contacts are written as the list of pairs, masses as `mass`.
"""

from __future__ import annotations

import enum
import json
from dataclasses import fields
from pathlib import Path

from symphys.scene.elements import (BODY_SENSORS, JOINT_SENSORS, Body, Camera, Geom, Joint,
                                    JointType, Motor, Sensor, SensorKind, Shape, SolverOptions,
                                    Texture, TextureKind)
from symphys.scene.reader import FORMAT
from symphys.scene.scene import Scene

# The fields a body's shape uses, beside those every body has.
_SHAPE_FIELDS = {Shape.SPHERE: ("radius",), Shape.BOX: ("size",),
                 Shape.CAPSULE: ("radius", "length")}
# The key naming a sensor's source, by kind (none for the others).
_SOURCE_KEYS = {**dict.fromkeys(JOINT_SENSORS, "joint"), **dict.fromkeys(BODY_SENSORS, "body"),
                SensorKind.CAMERA: "camera"}


def _plain(value):
    """A field's value as JSON holds it: enums by value, tuples as lists."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Texture):
        return _texture(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _texture(texture: Texture) -> dict:
    if texture.kind is TextureKind.CHECKER:
        return {"checker": _plain(texture.colors), "scale": _plain(texture.scale)}
    return {"image": texture.path, "scale": _plain(texture.scale)}


def _fields(item, names) -> dict:
    """{name: value} of `item`'s fields in `names`, None values left out."""
    return {k: _plain(getattr(item, k)) for k in names if getattr(item, k) is not None}


def _body(body: Body) -> dict:
    names = ("name", "shape", *_SHAPE_FIELDS[body.shape], "mass", "inertia", "position",
             "quaternion", "velocity", "angular_velocity", "friction", "restitution",
             "rolling_friction", "color")
    doc = _fields(body, names)
    doc["texture"] = _plain(body.texture)
    return doc


def _geom(geom: Geom) -> dict:
    return _fields(geom, ("name", "body", "shape", *_SHAPE_FIELDS[geom.shape], "position",
                          "quaternion", "friction", "restitution", "rolling_friction", "color"))


def _joint(joint: Joint) -> dict:
    names = ["name", "type", "parent", "child", "anchor"]
    if joint.type in (JointType.HINGE, JointType.SLIDER, JointType.UNIVERSAL,
                      JointType.PLANAR):
        names.append("axis")
    if joint.type is JointType.UNIVERSAL:
        names.append("axis2")
    if joint.type in (JointType.HINGE, JointType.SLIDER):
        names += ["limits", "viscous_damping", "dry_friction", "armature"]
        if joint.spring_stiffness or joint.spring_reference:
            names += ["spring_stiffness", "spring_reference"]
    if joint.type is JointType.BALL and joint.limits is not None:
        names.append("limits")
    if joint.frequency is not None:
        names += ["frequency", "damping"]
    return _fields(joint, names)


def _motor(motor: Motor, joints: dict) -> dict:
    doc = _fields(motor, ("name", "joint", "mode", "gain", "max_velocity", "max_torque",
                          "command_range"))
    if motor.feedback:
        doc.update(stiffness=motor.stiffness, damping=motor.damping)
    if joints[motor.joint].n_coordinates > 1:
        doc["axis"] = motor.axis
    return doc


def _sensor(sensor: Sensor) -> dict:
    doc = {"name": sensor.name, "type": sensor.kind.value}
    if sensor.kind in _SOURCE_KEYS:
        doc[_SOURCE_KEYS[sensor.kind]] = sensor.source
    if sensor.kind is SensorKind.TIME:
        doc["frequencies"] = list(sensor.frequencies)
    if sensor.kind is SensorKind.TARGET:
        doc["size"] = sensor.size
    if sensor.kind is SensorKind.CONTACT:
        doc["margin"] = sensor.margin
    return doc


def _camera(camera: Camera) -> dict:
    names = [f.name for f in fields(Camera) if f.name not in ("source", "planes")]
    doc = _fields(camera, names)
    doc["planes"] = [dict(_fields(p, ("point", "normal", "color")), texture=_plain(p.texture))
                     for p in camera.planes]
    return doc


def scene_to_dict(scene: Scene) -> dict:
    """The `symphys-scene/1` document of `scene` (JSON-ready)."""
    joints = {j.name: j for j in scene.joints}
    doc = {"format": FORMAT, "name": scene.name, "dt": scene.dt,
           "gravity": _plain(scene.gravity),
           "solver": _fields(scene.solver, [f.name for f in fields(SolverOptions)])}
    if scene.ground is not None:
        doc["ground"] = _fields(scene.ground, ("height", "friction", "restitution",
                                               "rolling_friction", "color"))
        doc["ground"]["texture"] = _plain(scene.ground.texture)
    doc["bodies"] = [_body(b) for b in scene.bodies]
    if scene.geoms:
        doc["geoms"] = [_geom(g) for g in scene.geoms]
    doc["contacts"] = [{"a": c.a, "b": c.b} for c in scene.contacts]
    doc["joints"] = [_joint(j) for j in scene.joints]
    doc["motors"] = [_motor(m, joints) for m in scene.motors]
    doc["sensors"] = [_sensor(s) for s in scene.sensors]
    doc["cameras"] = [_camera(c) for c in scene.cameras]
    return doc


def write_scene(scene: Scene, path: str | Path) -> Path:
    """`scene` saved as a scene file at `path` (folders made as needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(scene_to_dict(scene), indent=1) + "\n")
    return path
