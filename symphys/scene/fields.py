"""Typed access to a scene file's fields, each error naming the file, the
item and the field (`Fields`), and the fields each part of the format
allows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from symphys.errors import SceneError, closest
from symphys.scene.elements import FIELD_MAXIMA, FIELD_SIGNS, Shape, Sign, Texture, TextureKind, check_color
from symphys.scene.textures import texture_pixels

# The keys each part of a scene file may hold.
TOP_KEYS = {"format", "name", "dt", "gravity", "solver", "ground", "bodies", "geoms", "contacts",
            "joints", "motors", "sensors", "cameras", "description"}
BODY_KEYS = {"name", "shape", "radius", "size", "length", "mass", "density", "position",
             "quaternion", "velocity", "angular_velocity", "friction", "restitution",
             "rolling_friction", "color", "texture", "inertia"}
GEOM_KEYS = {"name", "body", "shape", "radius", "size", "length", "position", "quaternion",
             "friction", "restitution", "rolling_friction", "color"}
SOLVER_KEYS = {"model", "method", "tolerance", "bound_softness", "iterations", "newton_iterations", "constraint_frequency", "constraint_damping",
               "position_feedback", "restitution_threshold", "friction_model", "gyroscopic",
               "renormalisation_iterations", "contact_stiffness", "contact_damping",
               "velocity_damping", "stiction_velocity", "contact_smoothing"}
GROUND_KEYS = {"height", "friction", "restitution", "rolling_friction", "color", "texture"}
CAMERA_KEYS = {"name", "position", "direction", "up", "focal_length", "sensor_size", "resolution",
               "rays_per_pixel", "soft_edge", "light_direction", "ambient", "background", "planes"}
PLANE_KEYS = {"point", "normal", "color", "texture"}
TEXTURE_KEYS = {"image", "checker", "scale"}
JOINT_KEYS = {"name", "type", "parent", "child", "anchor", "axis", "axis2", "limits", "frequency",
              "damping", "viscous_damping", "dry_friction", "armature", "spring_stiffness",
              "spring_reference"}
SENSOR_KEYS = {"name", "type", "joint", "body", "camera", "frequencies", "size", "margin"}
MOTOR_KEYS = {"name", "joint", "mode", "gain", "max_velocity", "max_torque", "command_range",
              "axis", "stiffness", "damping"}


class Fields:
    """Reads fields of one JSON object, raising errors that name the place."""

    def __init__(self, doc: Any, source: str, item: str, allowed: set[str],
                 prefix: str = ""):
        # prefix: where a nested object sits in its item ("planes[0]."),
        # put before the field names that errors give.
        self.prefix = prefix
        if not isinstance(doc, dict):
            raise SceneError(f"expected an object, got {type(doc).__name__}",
                             source=source, item=item, field=prefix.rstrip(".") or None)
        self.doc, self.source, self.item = doc, source, item
        for key in doc:
            if key not in allowed:
                self.fail(key, "unknown field" + closest(key, allowed)
                          + f"; allowed: {sorted(allowed)}")

    def fail(self, field: str, message: str):
        raise SceneError(message, source=self.source, item=self.item,
                         field=self.prefix + field)

    def nested(self, key: str, allowed: set[str]) -> "Fields":
        """A reader of the object under `key`, naming errors `key.field`."""
        return Fields(self.doc[key], self.source, self.item, allowed,
                       prefix=f"{self.prefix}{key}.")

    def color(self, key: str, default):
        """An RGB colour, three numbers in [0, 1]."""
        value = self.vector(key, 3, default)
        check_color(value, self.fail, key)
        return value

    def texture(self, key: str, default=None) -> Texture | None:
        """A texture object (`{"image": file}` or `{"checker": [rgb, rgb]}`,
        with an optional "scale": [u, v] > 0), or null for none."""
        if key not in self.doc:
            return default
        if self.doc[key] is None:
            return None
        t = self.nested(key, TEXTURE_KEYS)
        if t.has("image") == t.has("checker"):
            self.fail(key, "give exactly one of 'image' (a file name) or 'checker' "
                      "(two colours)")
        scale = t.vector("scale", 2, (1.0, 1.0), sign=Sign.POSITIVE)
        if t.has("checker"):
            pair = t.doc["checker"]
            if not isinstance(pair, list) or len(pair) != 2:
                t.fail("checker", f"expected two RGB colours, got {pair!r}")
            sub = Fields({"[0]": pair[0], "[1]": pair[1]}, self.source, self.item,
                          {"[0]", "[1]"}, prefix=f"{t.prefix}checker")
            return Texture(TextureKind.CHECKER, colors=(sub.color("[0]", None),
                                                        sub.color("[1]", None)), scale=scale)
        path = resolve_path(t.string("image"), self.source)
        try:
            texture_pixels(Texture(TextureKind.IMAGE, path=str(path)))
        except (OSError, ValueError, SyntaxError) as exc:
            t.fail("image", f"cannot read image {str(path)!r}: {exc}")
        return Texture(TextureKind.IMAGE, path=str(path), scale=scale)

    def has(self, key: str) -> bool:
        return key in self.doc

    def number(self, key: str, default=None, *, sign: Sign | None = None,
               integer=False, maximum: float | None = None):
        """The number at `key` (`default` when absent; None: required), of
        `sign` and at most `maximum`, by default the field's sign in
        `FIELD_SIGNS` and its bound in `FIELD_MAXIMA`."""
        if key not in self.doc:
            if default is None:
                self.fail(key, "missing")
            return default
        value = self.doc[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"expected a number, got {value!r}")
        if not math.isfinite(value):
            self.fail(key, f"must be finite, got {value!r}")
        if integer and int(value) != value:
            self.fail(key, f"expected an integer, got {value!r}")
        sign = sign or FIELD_SIGNS.get(key)
        if sign is Sign.POSITIVE and value <= 0 or sign is Sign.NONNEGATIVE and value < 0:
            self.fail(key, f"must be {sign.value}, got {value!r}")
        maximum = FIELD_MAXIMA.get(key) if maximum is None else maximum
        if maximum is not None and value > maximum:
            self.fail(key, f"must be at most {maximum:g}, got {value!r}")
        return int(value) if integer else float(value)

    def vector(self, key: str, length: int, default=None, *, sign: Sign | None = None):
        """The list of `length` numbers at `key`, each of `sign`, by default
        the field's sign in `FIELD_SIGNS`."""
        if key not in self.doc:
            if default is None:
                self.fail(key, f"missing (a list of {length} numbers)")
            return tuple(float(x) for x in default)
        value = self.doc[key]
        if not isinstance(value, (list, tuple)) or len(value) != length:
            got = len(value) if isinstance(value, (list, tuple)) else type(value).__name__
            self.fail(key, f"expected a list of {length} numbers, got {got}"
                      + (" values" if isinstance(got, int) else ""))
        out, sign = [], sign or FIELD_SIGNS.get(key)
        for i, x in enumerate(value):
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                self.fail(key, f"element {i} is not a number: {x!r}")
            if not math.isfinite(x):
                self.fail(key, f"element {i} must be finite, got {x!r}")
            if sign is Sign.POSITIVE and x <= 0 or sign is Sign.NONNEGATIVE and x < 0:
                self.fail(key, f"element {i} must be {sign.value}, got {x!r}")
            out.append(float(x))
        return tuple(out)

    def string(self, key: str, default=None):
        if key not in self.doc:
            if default is None:
                self.fail(key, "missing")
            return default
        value = self.doc[key]
        if not isinstance(value, str) or not value:
            self.fail(key, f"expected a non-empty string, got {value!r}")
        return value

    def enum(self, key: str, kind, default):
        text = self.string(key, default.value)
        try:
            return kind(text)
        except ValueError:
            names = [m.value for m in kind]
            self.fail(key, f"unknown value {text!r}{closest(text, names)}; "
                      f"allowed: {names}")

    def boolean(self, key: str, default: bool) -> bool:
        value = self.doc.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {value!r}")
        return value


def resolve_path(name: str, source: str) -> Path:
    """`name` as a path: relative ones are relative to the scene file's
    folder (the working directory for scenes not read from a file)."""
    path = Path(name).expanduser()
    if not path.is_absolute():
        base = Path(source)
        path = (base.parent if base.is_file() else Path.cwd()) / path
    return path.resolve()


def check_finite(doc, source: str, path: str = "") -> None:
    """Reject NaN/inf anywhere (json.loads only accepts them as literals)."""
    if isinstance(doc, float) and not math.isfinite(doc):
        literal = "NaN" if math.isnan(doc) else ("Infinity" if doc > 0 else "-Infinity")
        raise SceneError(f"non-finite number {literal} is not allowed",
                         source=source, field=path or None)
    if isinstance(doc, dict):
        for k, v in doc.items():
            check_finite(v, source, f"{path}.{k}" if path else k)
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            name = v.get("name") if isinstance(v, dict) else None
            check_finite(v, source, f"{path}[{name if isinstance(name, str) else i}]")


def named_items(doc, source: str, key: str, label: str) -> list:
    """The list under `key` (absent or null: empty), items checked to be objects."""
    items = doc.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise SceneError(f"expected a list of {label}s", source=source, field=key)
    return items


def items(doc, source: str, key: str, kind: str, fields: set[str]):
    """(reader, name) for each object listed under `key`, names checked to
    be unique."""
    seen = set()
    for i, entry in enumerate(named_items(doc, source, key, kind)):
        label = entry.get("name") if isinstance(entry, dict) else None
        item = f"{kind} '{label}'" if isinstance(label, str) else f"{key}[{i}]"
        r = Fields(entry, source, item, fields)
        name = r.string("name")
        if name in seen:
            r.fail("name", f"duplicate {kind} name")
        seen.add(name)
        yield r, name


def unit(values: tuple, norm: float) -> tuple:
    """`values` divided by their `norm`, unless they are a unit vector to
    within rounding already (a file symphys wrote reads back bit for bit)."""
    return values if abs(norm - 1.0) < 1e-14 else tuple(v / norm for v in values)


def unit_axis(r: Fields, key: str) -> tuple[float, float, float]:
    axis = r.vector(key, 3)
    n = math.sqrt(sum(a * a for a in axis))
    if n < 1e-9:
        r.fail(key, "zero axis has no direction")
    return unit(axis, n)


def value_range(r: Fields, key: str) -> tuple[float, float] | None:
    if not r.has(key) or r.doc[key] is None:
        return None
    lo, hi = r.vector(key, 2)
    if not lo < hi:
        r.fail(key, f"expected [low, high] with low < high, got [{lo}, {hi}]")
    return lo, hi


def shape_and_sizes(r: Fields) -> tuple[Shape, float, tuple, float]:
    """(shape, radius, size, length) of a body or geom: the sizes its shape
    needs are required, the others refused."""
    if not r.has("shape"):
        r.fail("shape", f"missing; allowed: {[s.value for s in Shape]}")
    shape = r.enum("shape", Shape, Shape.SPHERE)
    needed = {"radius": shape in (Shape.SPHERE, Shape.CAPSULE),
              "length": shape is Shape.CAPSULE, "size": shape is Shape.BOX}
    radius = r.number("radius") if needed["radius"] else 0.0
    length = r.number("length") if needed["length"] else 0.0
    size = r.vector("size", 3) if needed["size"] else (0.0, 0.0, 0.0)
    for key in ("radius", "length", "size"):
        if r.has(key) and not needed[key]:
            r.fail(key, f"not used by a {shape.value}")
    return shape, radius, size, length


def quaternion(r: Fields, key: str = "quaternion",
               default=(1.0, 0.0, 0.0, 0.0)) -> tuple[float, float, float, float]:
    """The unit quaternion (w, x, y, z) at `key` (default: no rotation)."""
    quat = r.vector(key, 4, default)
    norm = math.sqrt(sum(q * q for q in quat))
    if norm < 1e-12:
        r.fail(key, "zero quaternion has no rotation; use [1, 0, 0, 0]")
    return unit(quat, norm)
