"""Scenes built in Python: `SceneBuilder`, which writes the same document a
scene file holds and reads it with the same checks."""

from __future__ import annotations

import json

import numpy as np

from symphys.scene.reader import FORMAT, scene_from_dict
from symphys.scene.scene import Scene


def _plain(fields: dict) -> dict:
    """`fields` as a scene file holds them: arrays as lists of floats."""
    return {k: (list(np.asarray(v, float).ravel()) if np.ndim(v) else v)
            for k, v in fields.items()}


class SceneBuilder:
    """Build a scene in Python; `build()` validates exactly like a file.

    >>> scene = (SceneBuilder("drop", dt=0.01).ground(friction=0.5)
    ...          .sphere("ball", radius=0.1, mass=1.0, position=[0, 0, 1])
    ...          .build())
    """

    def __init__(self, name: str, *, dt: float = 0.01, gravity=(0.0, 0.0, -9.81),
                 **solver):
        self._doc: dict = {"format": FORMAT, "name": name, "dt": dt,
                           "gravity": list(gravity), "solver": dict(solver),
                           "bodies": []}

    def ground(self, height=0.0, friction=1.0, restitution=0.0,
               rolling_friction=0.0, **look) -> "SceneBuilder":
        """The ground; look: `color` and `texture` as cameras see it (see
        the scene format; default a grey checkerboard)."""
        self._doc["ground"] = {"height": height, "friction": friction,
                               "restitution": restitution,
                               "rolling_friction": rolling_friction, **look}
        return self

    def body(self, name: str, shape: str, **fields) -> "SceneBuilder":
        entry = {"name": name, "shape": shape}
        entry.update(_plain(fields))
        self._doc["bodies"].append(entry)
        return self

    def sphere(self, name, **fields):
        return self.body(name, "sphere", **fields)

    def box(self, name, **fields):
        return self.body(name, "box", **fields)

    def capsule(self, name, **fields):
        return self.body(name, "capsule", **fields)

    def geom(self, name: str, body: str, shape: str, *, radius=None, size=None, length=None,
             position=None, quaternion=None, friction=None, restitution=None,
             rolling_friction=None, color=None) -> "SceneBuilder":
        """A further collision shape fixed to `body` (or to "world"): the
        fields of a scene file's geom, position and quaternion in world
        coordinates at the initial pose; None: the field left out (its
        default, or an error where the shape needs it)."""
        fields = dict(radius=radius, size=size, length=length, position=position,
                      quaternion=quaternion, friction=friction, restitution=restitution,
                      rolling_friction=rolling_friction, color=color)
        entry = {"name": name, "body": body, "shape": shape}
        entry.update(_plain({k: v for k, v in fields.items() if v is not None}))
        self._doc.setdefault("geoms", []).append(entry)
        return self

    def joint(self, name: str, type: str, parent: str, child: str, **fields) -> "SceneBuilder":
        """A joint; fields: anchor, axis, axis2, limits, frequency, damping,
        viscous_damping, dry_friction (see the scene format)."""
        entry = {"name": name, "type": type, "parent": parent, "child": child}
        entry.update(_plain(fields))
        self._doc.setdefault("joints", []).append(entry)
        return self

    def motor(self, name: str, joint: str, mode: str = "position", **fields) -> "SceneBuilder":
        """A motor on a hinge, slider or universal joint; fields: gain,
        max_velocity, max_torque, command_range, axis (universal: 0 or 1)."""
        entry = {"name": name, "joint": joint, "mode": mode}
        entry.update(_plain(fields))
        self._doc.setdefault("motors", []).append(entry)
        return self

    def sensor(self, type: str, **fields) -> "SceneBuilder":
        """An observation block; fields: joint or body, frequencies, size,
        margin, name (see the scene format)."""
        entry = {"type": type}
        entry.update(_plain(fields))
        self._doc.setdefault("sensors", []).append(entry)
        return self

    def camera(self, name: str, **fields) -> "SceneBuilder":
        """A camera; fields as in the scene format (position, direction, up,
        focal_length, sensor_size, resolution, rays_per_pixel, soft_edge,
        light_direction, ambient, background, planes)."""
        entry = {"name": name}
        entry.update({k: (list(np.asarray(v).ravel().tolist()) if k != "planes" and np.ndim(v)
                          else v) for k, v in fields.items()})
        self._doc.setdefault("cameras", []).append(entry)
        return self

    def contacts(self, pairs) -> "SceneBuilder":
        """"auto" or a list of (a, b) name pairs."""
        self._doc["contacts"] = pairs if pairs == "auto" else [
            {"a": a, "b": b} for a, b in pairs]
        return self

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self._doc))

    def build(self) -> Scene:
        return scene_from_dict(self.to_dict(), source=f"<builder {self._doc['name']}>")
