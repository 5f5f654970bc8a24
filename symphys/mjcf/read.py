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
  ball joints; two perpendicular slides and a hinge about their normal on
  one body as one planar joint, any other run of joints on one body
  through light links (`joints.chain`); a body with no joint is
  welded to its parent (a fixed joint); a massless body with no joint and
  no shape is only a frame and is skipped. Ranges become limits measured
  from `qpos0` (symphys' q is 0 at the initial pose); damping,
  frictionloss, springs (stiffness, springref) and armature carry over
  (with Gauss-Seidel, armature up to `joints.ARMATURE_LIMIT` times what
  the joint turns);
- motor, position and velocity actuators on a joint, as torque motors with
  a gain, stiffness and damping (`actuators.convert_motors`); ctrlrange
  becomes the command range, forcerange the torque bound;
- a world plane facing +z becomes the ground; contact pairs follow MuJoCo's
  contype/conaffinity, parent filter, `exclude` and `pair` rules; shapes
  (and the ground) grow by their geoms' `margin`, where MuJoCo's contacts
  hold them apart (`shapes.shape_fields`);
- timestep and gravity. The solver keeps symphys' defaults but for the method.

Everything else is refused: one error names every element refused, the
attribute and why, and the option that leaves it out where there is one.
Geoms that cannot be a body's shape (visual-only extras, meshes, geoms off
the centre of mass) can be left out instead with
`on_unsupported="drop"`, heavy armature with `heavy_armature="drop"`,
passive tendons with `passive_tendons="drop"`; the conversion lists what
it dropped.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from symphys.errors import SceneError, member
from symphys.mjcf.actuators import convert_motors
from symphys.mjcf.converter import Converter, MjJoint, Obj, Unsupported, WayOut, dof_count
from symphys.mjcf.files import robot_file
from symphys.mjcf.joints import LINK_SHARE, convert_joints, settle_armature
from symphys.mjcf.shapes import (GeomType, body_frame, candidate_pairs, geom_label, is_ground_plane,
                                 matrix_to_quaternion, plane_box, shape_fields)
from symphys.scene.elements import GROUND, WORLD, Shape, SolverMethod
from symphys.scene.geoms import Collider, oriented
from symphys.scene.reader import FORMAT, scene_from_dict
from symphys.scene.scene import Scene


# The most Newton iterations of a scene whose conversion chose the Newton
# solve (it stops at its tolerance: 2-3 on gymnasium's ant).
NEWTON_ITERATIONS = 50


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
    heavier than Gauss-Seidel holds, passive_tendons="drop" the tendons no
    actuator drives (each listed in a warning; "error", the default,
    refuses the file, naming every element refused in one SceneError);
    cylinders_as_capsules=True collides
    cylinders as capsules of the same radius and axis segment;
    solver_method="pgs" or "newton" sets the scene's solve (default: Newton
    where the model needs it)."""
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
    p = robot_file(path)
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
                  passive_tendons: Unsupported | str = Unsupported.ERROR,
                  cylinders_as_capsules: bool = False,
                  solver_method: SolverMethod | str | None = None,
                  link_share: float = LINK_SHARE) -> Conversion:
    """`Conversion` of a compiled `mujoco.MjModel` (module docstring).

    on_unsupported: what to do with a geom that cannot be a body's shape;
    heavy_armature: with an armature above `joints.ARMATURE_LIMIT` times what its
    joint turns when the solve is Gauss-Seidel; passive_tendons: with a
    tendon no actuator drives ("error": refuse; "drop": leave it out,
    listed). Everything refused is named in one SceneError.
    solver_method: the scene's `SolverMethod`; None: Newton (at most
    NEWTON_ITERATIONS) where the model needs it (armature Gauss-Seidel
    cannot hold and heavy_armature is not "drop", or a body with several
    joints), else symphys' default. link_share: the mass of each link
    between a body's joints, as a fraction of the body's (`joints.chain`)."""
    def policy(value, what):
        return member(value, Unsupported, what, lambda msg: SceneError(msg, source=source))

    method = None if solver_method is None else member(
        solver_method, SolverMethod, "solver_method", lambda msg: SceneError(msg, source=source))
    if not 0.0 < link_share < 0.5:
        raise SceneError(f"link_share must be in (0, 0.5), got {link_share!r}", source=source)

    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)        # poses at qpos0
    c = Converter(model, data, source,
                   policy(on_unsupported, "on_unsupported") is Unsupported.DROP,
                   cylinders_as_capsules,
                   policy(heavy_armature, "heavy_armature") is Unsupported.DROP,
                   policy(passive_tendons, "passive_tendons") is Unsupported.DROP)
    _check_model(c)
    colliders = _collisions(c)
    ground = colliders.ground
    bodies, kept = _bodies(c, colliders.shape_geom, set(colliders.geoms.values()))
    joints = convert_joints(c, kept, link_share)
    geoms, names = _geoms(c, colliders, kept, {link["name"] for link in joints.links})
    if method is None and (joints.links or (joints.heavy and not c.drop_armature)):
        method = SolverMethod.NEWTON
    joint_docs = settle_armature(c, joints.joints, joints.heavy, method is SolverMethod.NEWTON)
    doc = {"format": FORMAT, "name": _model_name(c, source), "dt": float(model.opt.timestep),
           "gravity": [float(x) for x in model.opt.gravity],
           "bodies": [_shared(body, joints.shares) for body in bodies] + list(joints.links),
           "joints": list(joint_docs), "motors": convert_motors(c),
           "contacts": _pairs(c, colliders, names)}
    if method is SolverMethod.NEWTON:
        doc["solver"] = {"method": method.value, "newton_iterations": NEWTON_ITERATIONS}
    elif method is not None:
        doc["solver"] = {"method": method.value}
    if geoms:
        doc["geoms"] = geoms
    if ground is not None:
        doc["ground"] = {"height": float(data.geom_xpos[ground][2] + model.geom_margin[ground]),
                         "friction": float(model.geom_friction[ground][0])}
    c.check()
    return Conversion(scene_from_dict(doc, source=source), doc, tuple(c.dropped))


def _shared(body: dict, shares: dict) -> dict:
    """A body document with the share of its mass and inertia its links leave it."""
    share = shares.get(body["name"])
    if share is None:
        return body
    return {**body, "mass": share * body["mass"], "inertia": [share * x for x in body["inertia"]]}


def _model_name(c: Converter, source: str) -> str:
    name = c.m.names[:c.m.names.index(b"\0")].decode() if c.m.names else ""
    return name if name and name != "MuJoCo Model" else Path(source).stem


def _check_model(c: Converter) -> None:
    """Refuse what symphys cannot simulate at all (not a geom to drop)."""
    m = c.m
    _check_tendons(c)
    for e in range(m.neq):
        c.refuse(f"equality {c.name(Obj.EQUALITY, e, '#')!r}",
                 "equality constraints are not supported by symphys")
    for count, what in ((m.nflex, "flexible bodies (flex)"), (m.nskin, "skins")):
        if count:
            c.refuse(f"{count} {what}", f"{what.split(' (')[0]} are not supported by symphys")
    for attr, what in (("density", "medium density"), ("viscosity", "medium viscosity")):
        if float(getattr(m.opt, attr)):
            c.refuse("option", "fluid forces are not supported by symphys",
                     f"attribute '{attr}' ({what}) is {float(getattr(m.opt, attr)):g}")
    for j in range(m.njnt):
        label = f"joint {c.name(Obj.JOINT, j, 'joint')!r}"
        if float(m.jnt_stiffness[j]) and MjJoint(int(m.jnt_type[j])) not in (
                MjJoint.HINGE, MjJoint.SLIDE):
            c.refuse(label, "a spring on a free or ball joint is not supported",
                     "attribute 'stiffness'")
        if MjJoint(int(m.jnt_type[j])) in (MjJoint.FREE, MjJoint.BALL):
            dofs = range(m.jnt_dofadr[j], m.jnt_dofadr[j] + dof_count(m.jnt_type[j]))
            if any(float(m.dof_armature[k]) for k in dofs):
                c.refuse(label, "armature on a free or ball joint is not supported (symphys' "
                         "armature acts on hinges and sliders)", "attribute 'armature'")


def _check_tendons(c: Converter) -> None:
    """symphys has no tendons: a passive one (no actuator drives it) can be
    left out, with what it did (stiffness, damping, friction, a range) said;
    one an actuator drives is refused."""
    m = c.m
    drivers: dict[int, list] = {}
    for u in range(m.nu):
        if int(m.actuator_trntype[u]) == int(mujoco.mjtTrn.mjTRN_TENDON):
            drivers.setdefault(int(m.actuator_trnid[u][0]), []).append(
                c.name(Obj.ACTUATOR, u, "actuator"))
    for t in range(m.ntendon):
        item = f"tendon {c.name(Obj.TENDON, t, '#')!r}"
        if t in drivers:
            c.refuse(item, "symphys has no tendons, and an actuator drives this one",
                     f"driven by {', '.join(map(repr, drivers[t]))}")
            continue
        acts = [f"{what} {float(value):g}" for what, value in (
            ("stiffness", m.tendon_stiffness[t]), ("damping", m.tendon_damping[t]),
            ("frictionloss", m.tendon_frictionloss[t])) if float(value)]
        if m.tendon_limited[t]:
            acts.append("a range")
        c.leave_out(item, "symphys has no tendons (a passive one can be left out: the "
                    "motion then lacks its forces)", WayOut.TENDONS,
                    f"passive, with {', '.join(acts)}" if acts else "passive, exerting no force")


@dataclass(frozen=True)
class Colliders:
    """How a model's geoms convert: the ground plane (or None), each body's
    own-shape geom, the geoms that become scene geoms (body id, 0 for the
    world, per geom id) and the contact pairs between colliders (MuJoCo geom
    ids, the ground's included)."""

    ground: int | None
    shape_geom: dict
    geoms: dict
    pairs: list
    fields: dict          # geom id -> its shape's scene-file fields
    centres: dict         # geom id -> a centre other than MuJoCo's (planes as boxes)


def _collisions(c: Converter) -> Colliders:
    """`Colliders` from MuJoCo's candidate geom pairs. A body whose one
    geom (colliding, or else its only one) fits as its shape
    (`shapes.body_frame`) keeps it as such; every other primitive geom of a
    body, and every primitive world geom that touches a body, becomes a
    scene geom."""
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
    fields: dict[int, dict] = {}
    centres: dict[int, list] = {}
    for g in range(m.ngeom):
        if g == ground or (int(m.geom_bodyid[g]) == 0 and g not in touching):
            continue
        if int(m.geom_type[g]) == GeomType.PLANE and int(m.geom_bodyid[g]) == 0:
            fields[g], centres[g] = plane_box(m, d, g)
            continue
        f = shape_fields(m, g, c.cylinders)
        if isinstance(f, str):
            c.unsupported_geom(g, f)
        else:
            fields[g] = f
    shape_geom, geoms = {}, {}
    for b in range(1, m.nbody):
        own = [g for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b])
               if g in fields]
        colliding = [g for g in own if touching.get(g, set()) & (set(fields) | {ground})]
        single = colliding if len(colliding) == 1 else own if len(own) == 1 and not colliding \
            else []
        if single and not isinstance(body_frame(m, d, b, single[0], fields[single[0]]), str):
            shape_geom[b] = single[0]
        for g in own:
            if shape_geom.get(b) != g:
                geoms[g] = b
    for g in fields:
        if int(m.geom_bodyid[g]) == 0:
            geoms[g] = 0
    kept = set(shape_geom.values()) | set(geoms) | ({ground} if ground is not None else set())
    return Colliders(ground, shape_geom, geoms,
                     [(g1, g2) for g1, g2 in pairs if g1 in kept and g2 in kept], fields, centres)


def _bodies(c: Converter, shape_geom: dict, with_geoms: set):
    """(body documents, {MuJoCo body id: symphys name} of the bodies kept)."""
    m, d = c.m, c.d
    docs, kept = [], {}
    for b in range(1, m.nbody):
        name = c.name(Obj.BODY, b, "body")
        g = shape_geom.get(b)
        if float(m.body_mass[b]) <= mujoco.mjMINVAL:
            if m.body_jntnum[b] == 0 and g is None and b not in with_geoms:
                continue                                     # a frame: its children hang on
            c.refuse(f"body {name!r}", "a body without mass: symphys needs a mass on every "
                     "body that moves or collides")
            kept[b] = name                                   # named, and not converted
            continue
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


def _geoms(c: Converter, colliders: Colliders, kept: dict,
           links: set) -> tuple[list, dict]:
    """(geom documents, {MuJoCo geom id: the collider name contact pairs
    use}): bodies' own shapes by their body's name, scene geoms by their
    own (MuJoCo's, made unique beside the body and link names)."""
    m, d = c.m, c.d
    names = {g: kept[b] for b, g in colliders.shape_geom.items()}
    if colliders.ground is not None:
        names[colliders.ground] = GROUND
    taken = set(kept.values()) | links | {GROUND, WORLD}
    docs = []
    for g, b in sorted(colliders.geoms.items()):
        body = WORLD if b == 0 else kept[b]
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"{body}_geom{g}"
        while name in taken:
            name += "_geom"
        taken.add(name)
        names[g] = name
        doc = {"name": name, "body": body, **colliders.fields[g],
               "position": colliders.centres.get(g, [float(x) for x in d.geom_xpos[g]]),
               "quaternion": matrix_to_quaternion(d.geom_xmat[g].reshape(3, 3)),
               "friction": float(m.geom_friction[g][0]),
               "color": [float(x) for x in np.clip(m.geom_rgba[g][:3], 0.0, 1.0)]}
        docs.append(doc)
    return docs, names


def _pairs(c: Converter, colliders: Colliders, names: dict) -> list:
    """The scene's contact pairs, each once, oriented as the scene reader
    orients them (`scene.geoms.oriented`: a fixed collider as b); a pair no
    routine takes, or of two fixed colliders, is refused, or listed as
    dropped."""
    m = c.m
    shape = {g: GROUND if g == colliders.ground else Shape(colliders.fields[g]["shape"])
             for g in names}
    out, seen = [], set()
    for g1, g2 in colliders.pairs:
        a, b = names[g1], names[g2]
        if a == b or frozenset((a, b)) in seen:
            continue
        seen.add(frozenset((a, b)))
        fixed = {g for g in (g1, g2) if g == colliders.ground or
                 (g in colliders.geoms and colliders.geoms[g] == 0)}
        one, two = (Collider(names[g], shape[g], WORLD if g in fixed else names[g])
                    for g in (g1, g2))
        pair = None if len(fixed) == 2 else oriented(one, two)
        if pair is None:
            what = " and a ".join(("fixed " if g in fixed else "moving ")
                                  + getattr(shape[g], "value", str(shape[g])) for g in (g1, g2))
            c.unsupported_pair(f"{geom_label(m, g1)} against {geom_label(m, g2)}",
                               f"symphys has no contact between a {what}")
            continue
        out.append({"a": pair.a, "b": pair.b})
    return out
