"""Robots from MJCF and URDF files.

MuJoCo's own compiler reads the file (defaults, includes, frames, `fromto`,
inertias computed from geoms); `convert_model` turns the compiled model,
posed at its reference configuration `qpos0`, into a `symphys-scene/1`
document and reads that like any scene file, so an imported robot is an
ordinary `Scene`: its bodies, joints and actuators keep their names, and
`params={"thigh.mass": ...}` and gradients work on it as on a JSON robot.

What converts:
- bodies: mass, centre of mass and principal inertia (MuJoCo's, exactly);
  the symphys body frame is the body's principal frame, its shape the one
  geom that collides (or, with none, its one visual geom), which must sit
  at the centre of mass along principal axes (`shapes.body_frame`);
- joints (`joints.convert_joints`): free (no joint), hinge, slide and
  unlimited ball joints, one per body, or two perpendicular slides and a
  hinge about their normal as one planar joint; a body with no joint is
  welded to its parent (a fixed joint); a massless body with no joint and
  no shape is only a frame and is skipped. Ranges become limits measured
  from `qpos0` (symphys' q is 0 at the initial pose); damping,
  frictionloss, springs (stiffness, springref) and armature (up to
  `joints.ARMATURE_LIMIT` times what the joint turns) carry over;
- motor, position and velocity actuators on a joint, as torque motors with
  a gain, stiffness and damping (`actuators.convert_motors`); ctrlrange
  becomes the command range, forcerange the torque bound;
- a world plane facing +z becomes the ground; contact pairs follow MuJoCo's
  contype/conaffinity, parent filter, `exclude` and `pair` rules; shapes
  (and the ground) grow by their geoms' `margin`, where MuJoCo's contacts
  hold them apart (`shapes.shape_fields`);
- timestep and gravity. The solver keeps symphys' defaults.

Everything else is refused with one error naming the element, the
attribute and why. Geoms that cannot be a body's shape (visual-only extras,
meshes, geoms off the centre of mass) can be left out instead with
`on_unsupported="drop"`; the conversion lists what it dropped.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from symphys.errors import SceneError, member
from symphys.mjcf.actuators import convert_motors
from symphys.mjcf.converter import Converter, MjJoint, Obj, Unsupported, dof_count
from symphys.mjcf.joints import convert_joints
from symphys.mjcf.shapes import (body_frame, candidate_pairs, is_ground_plane, matrix_to_quaternion,
                                 shape_fields)
from symphys.scene.elements import GROUND
from symphys.scene.reader import FORMAT, scene_from_dict
from symphys.scene.scene import Scene


@dataclass(frozen=True)
class Conversion:
    """A converted model: the scene, its scene-file document, and one line
    per geom left out (`on_unsupported="drop"`)."""

    scene: Scene
    document: dict
    dropped: tuple[str, ...] = ()


def load_mjcf(source: str | Path, **options) -> Scene:
    """A symphys `Scene` from an MJCF file (a path, or the XML text itself).

    options (`convert_model`): on_unsupported="drop" leaves out the geoms
    that cannot be a body's shape, heavy_armature="drop" the armature
    heavier than symphys holds (each listed in a warning; "error", the
    default, refuses the file); cylinders_as_capsules=True collides
    cylinders as capsules of the same radius and axis segment."""
    text = str(source)
    if text.lstrip().startswith("<"):
        model, where = _compile(mujoco.MjModel.from_xml_string, text, "<MJCF text>")
    else:
        model, where = _compile(mujoco.MjModel.from_xml_path, _existing(source), str(source))
    return _finish(convert_model(model, source=where, **options))


def load_urdf(path: str | Path, **options) -> Scene:
    """A symphys `Scene` from a URDF file, read by MuJoCo's URDF compiler
    (its `<collision>` elements become geoms; the base link is fixed to the
    world unless the file gives it a floating joint). Options as `load_mjcf`."""
    model, where = _compile(mujoco.MjModel.from_xml_path, _existing(path), str(path))
    return _finish(convert_model(model, source=where, **options))


def _existing(path) -> str:
    p = Path(path)
    if not p.is_file():
        raise SceneError("file not found" if not p.exists() else "is not a file", source=str(p))
    return str(p)


def _compile(compile_fn, arg: str, where: str):
    try:
        return compile_fn(arg), where
    except ValueError as exc:          # MuJoCo's compiler errors
        raise SceneError(f"MuJoCo cannot compile it: {str(exc).strip()}", source=where) from None


def _finish(conversion: Conversion) -> Scene:
    if conversion.dropped:
        warnings.warn(f"{conversion.scene.source}: left out:\n  "
                      + "\n  ".join(conversion.dropped), stacklevel=3)
    return conversion.scene


def convert_model(model, *, source: str = "<model>",
                  on_unsupported: Unsupported | str = Unsupported.ERROR,
                  heavy_armature: Unsupported | str = Unsupported.ERROR,
                  cylinders_as_capsules: bool = False) -> Conversion:
    """`Conversion` of a compiled `mujoco.MjModel` (module docstring).

    on_unsupported: what to do with a geom that cannot be a body's shape;
    heavy_armature: with an armature above `joints.ARMATURE_LIMIT` times what its
    joint turns ("error": refuse; "drop": leave it out, listed)."""
    def policy(value, what):
        return member(value, Unsupported, what, lambda msg: SceneError(msg, source=source))

    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)        # poses at qpos0
    c = Converter(model, data, source,
                   policy(on_unsupported, "on_unsupported") is Unsupported.DROP,
                   cylinders_as_capsules,
                   policy(heavy_armature, "heavy_armature") is Unsupported.DROP)
    _check_model(c)
    ground, pairs, shape_geom = _collisions(c)
    bodies, kept = _bodies(c, shape_geom)
    pair_list = []
    for b1, b2, _, _ in pairs:
        names = [GROUND if b == 0 else kept.get(b) for b in (b1, b2)]
        if None in names or names[0] == names[1]:
            continue
        pair_list.append(sorted(names, key=lambda n: n == GROUND))
    doc = {"format": FORMAT, "name": _model_name(c, source), "dt": float(model.opt.timestep),
           "gravity": [float(x) for x in model.opt.gravity], "bodies": bodies,
           "joints": convert_joints(c, kept), "motors": convert_motors(c),
           "contacts": [{"a": a, "b": b} for a, b in dict.fromkeys(map(tuple, pair_list))]}
    if ground is not None:
        doc["ground"] = {"height": float(data.geom_xpos[ground][2] + model.geom_margin[ground]),
                         "friction": float(model.geom_friction[ground][0])}
    return Conversion(scene_from_dict(doc, source=source), doc, tuple(c.dropped))


def _model_name(c: Converter, source: str) -> str:
    name = c.m.names[:c.m.names.index(b"\0")].decode() if c.m.names else ""
    return name if name and name != "MuJoCo Model" else Path(source).stem


def _check_model(c: Converter) -> None:
    """Refuse what symphys cannot simulate at all (not a geom to drop)."""
    m = c.m
    for count, what in ((m.ntendon, "tendons"), (m.neq, "equality constraints"),
                        (m.nflex, "flexible bodies (flex)"), (m.nskin, "skins")):
        if count:
            c.refuse(f"{count} {what}", "not supported by symphys")
    for attr, what in (("density", "medium density"), ("viscosity", "medium viscosity")):
        if float(getattr(m.opt, attr)):
            c.refuse("option", f"attribute '{attr}' ({what}) is "
                     f"{float(getattr(m.opt, attr)):g}: fluid forces are not supported")
    for j in range(m.njnt):
        label = f"joint {c.name(Obj.JOINT, j, 'joint')!r}"
        if float(m.jnt_stiffness[j]) and MjJoint(int(m.jnt_type[j])) not in (
                MjJoint.HINGE, MjJoint.SLIDE):
            c.refuse(label, "attribute 'stiffness' (a spring) on a free or ball joint is not "
                     "supported")
        if MjJoint(int(m.jnt_type[j])) in (MjJoint.FREE, MjJoint.BALL):
            dofs = range(m.jnt_dofadr[j], m.jnt_dofadr[j] + dof_count(m.jnt_type[j]))
            if any(float(m.dof_armature[k]) for k in dofs):
                c.refuse(label, "attribute 'armature' on a free or ball joint is not "
                         "supported (symphys' armature acts on hinges and sliders)")


def _collisions(c: Converter):
    """(ground geom or None, body pairs (b1, b2) with 0 for the ground,
    {body: its shape geom}) from MuJoCo's candidate geom pairs."""
    m, d = c.m, c.d
    ground = None
    for g in range(m.ngeom):
        if is_ground_plane(m, d, g):
            if ground is None:
                ground = g
            else:
                c.unsupported_geom(g, "a second ground plane")
    pairs = candidate_pairs(m)
    touching: dict[int, set] = {}
    for g1, g2 in pairs:
        touching.setdefault(g1, set()).add(g2)
        touching.setdefault(g2, set()).add(g1)
    usable = set()
    for g in range(m.ngeom):
        if int(m.geom_bodyid[g]) == 0:
            if g != ground and g in touching:
                c.unsupported_geom(g, "a static geom of the world that touches bodies "
                                      "(symphys' only static shape is a ground plane facing +z)")
            continue
        usable.add(g)
    shape_geom: dict[int, int] = {}
    for b in range(1, m.nbody):
        geoms = [g for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b])
                 if g in usable]
        colliding = [g for g in geoms if touching.get(g, set()) & (usable | {ground})]
        chosen = colliding[:1] if colliding else geoms[:1] if len(geoms) == 1 else []
        for g in geoms:
            if g in chosen:
                continue
            why = ("a second colliding geom on its body (a symphys body has one shape)"
                   if g in colliding else "visual only, and its body has other geoms "
                   "(a symphys body has one shape)")
            c.unsupported_geom(g, why)
        if chosen:
            shape_geom[b] = chosen[0]
    body_pairs = []
    for g1, g2 in pairs:
        ends = []
        for g in (g1, g2):
            b = int(m.geom_bodyid[g])
            ends.append(0 if g == ground else b if shape_geom.get(b) == g else None)
        if None not in ends:
            body_pairs.append((*ends, g1, g2))
    return ground, body_pairs, shape_geom


def _bodies(c: Converter, shape_geom: dict):
    """(body documents, {MuJoCo body id: symphys name} of the bodies kept)."""
    m, d = c.m, c.d
    docs, kept = [], {}
    for b in range(1, m.nbody):
        name = c.name(Obj.BODY, b, "body")
        g = shape_geom.get(b)
        if float(m.body_mass[b]) <= mujoco.mjMINVAL:
            if m.body_jntnum[b] == 0 and g is None:
                continue                                     # a frame: its children hang on
            c.refuse(f"body {name!r}", "has no mass; symphys needs a mass on every body "
                     "that moves or collides")
        fields = None
        if g is not None:
            fields = shape_fields(m, g, c.cylinders)
            if isinstance(fields, str):
                c.unsupported_geom(g, fields)
                g, fields = None, None
        frame = body_frame(m, d, b, g, fields)
        if isinstance(frame, str):
            c.unsupported_geom(g, frame)
            frame = body_frame(m, d, b, None, None)
        doc = {"name": name, **frame.fields, "mass": float(m.body_mass[b]),
               "inertia": [float(x) for x in frame.moments],
               "position": [float(x) for x in d.xipos[b]],
               "quaternion": matrix_to_quaternion(frame.rotation)}
        if g is not None:
            doc["friction"] = float(m.geom_friction[g][0])
            doc["color"] = [float(x) for x in np.clip(m.geom_rgba[g][:3], 0.0, 1.0)]
        docs.append(doc)
        kept[b] = name
    return docs, kept
