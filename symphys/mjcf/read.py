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
- joints: free (no joint), hinge, slide and unlimited ball joints, one per
  body (armature up to ARMATURE_LIMIT times what the joint turns), or two
  perpendicular slides and a hinge about their normal as one planar joint; a body with no joint is welded to its parent (a fixed joint); a
  massless body with no joint and no shape is only a frame and is skipped.
  Ranges become limits measured from `qpos0` (symphys' q is 0 at the
  initial pose); damping, frictionloss, armature and springs (stiffness,
  springref) carry over;
- motor, position and velocity actuators on a joint, as torque motors with
  a gain, stiffness and damping (`_motors`); ctrlrange becomes the command
  range, forcerange the torque bound;
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

import enum
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from symphys.errors import SceneError, member
from symphys.mjcf.shapes import (body_frame, candidate_pairs, geom_label, is_ground_plane,
                                 matrix_to_quaternion, shape_fields)
from symphys.scene.elements import CONTACT_KINDS, GROUND, WORLD, JointType, MotorMode, Shape
from symphys.scene.reader import FORMAT, scene_from_dict
from symphys.scene.scene import Scene

# A motor whose file bounds neither its command nor its force gets this
# torque bound (N m or N): no limit in practice, and finite for the solver.
UNBOUNDED_TORQUE = 1e9
# The heaviest armature symphys takes, in times what its joint's row turns
# (`_row_inertia`). The armature row aims each step at the rate the joint
# had at its start, so a rotor much heavier than its links inherits the
# solver's leftover errors as momentum: gymnasium's ant (armature 1 on
# 40-g legs, 2,000-3,500 times) diverges at 8 and 16 sweeps and settles 20%
# low at 30-120; the double pendulum on its cart at 4 times matches MuJoCo.
ARMATURE_LIMIT = 10.0


class Unsupported(enum.Enum):
    """What a load does with a geom symphys cannot represent."""

    ERROR = "error"     # refuse the file, naming the geom and why
    DROP = "drop"       # leave the geom out, and list it


class Obj(enum.IntEnum):
    BODY = int(mujoco.mjtObj.mjOBJ_BODY)
    JOINT = int(mujoco.mjtObj.mjOBJ_JOINT)
    ACTUATOR = int(mujoco.mjtObj.mjOBJ_ACTUATOR)


class MjJoint(enum.IntEnum):
    FREE = int(mujoco.mjtJoint.mjJNT_FREE)
    BALL = int(mujoco.mjtJoint.mjJNT_BALL)
    SLIDE = int(mujoco.mjtJoint.mjJNT_SLIDE)
    HINGE = int(mujoco.mjtJoint.mjJNT_HINGE)


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


@dataclass
class _Converter:
    """The conversion's working state (one model)."""

    m: object
    d: object
    source: str
    drop: bool
    cylinders: bool
    drop_armature: bool = False
    dropped: list = field(default_factory=list)

    def name(self, obj: Obj, i: int, prefix: str) -> str:
        return mujoco.mj_id2name(self.m, int(obj), i) or f"{prefix}{i}"

    def refuse(self, item: str, why: str):
        raise SceneError(why, source=self.source, item=item)

    def unsupported_geom(self, g: int, why: str):
        """Drop geom g (listing it) or refuse the file."""
        if not self.drop:
            self.refuse(geom_label(self.m, g), why + "; load with on_unsupported='drop' to "
                        "leave it out")
        self.dropped.append(f"{geom_label(self.m, g)}: {why}")

    def unsupported_pair(self, g1: int, g2: int, kinds: list):
        """Leave the contact between geoms g1 and g2 out (listing it) or
        refuse the file."""
        what = (f"contact between {geom_label(self.m, g1)} and {geom_label(self.m, g2)}: "
                f"symphys has no {kinds[0].value}-{kinds[1].value} contact yet")
        if not self.drop:
            self.refuse("contact", what + "; load with on_unsupported='drop' to leave the "
                        "pair out")
        self.dropped.append(what)


def convert_model(model, *, source: str = "<model>",
                  on_unsupported: Unsupported | str = Unsupported.ERROR,
                  heavy_armature: Unsupported | str = Unsupported.ERROR,
                  cylinders_as_capsules: bool = False) -> Conversion:
    """`Conversion` of a compiled `mujoco.MjModel` (module docstring).

    on_unsupported: what to do with a geom that cannot be a body's shape;
    heavy_armature: with an armature above ARMATURE_LIMIT times what its
    joint turns ("error": refuse; "drop": leave it out, listed)."""
    def policy(value, what):
        return member(value, Unsupported, what, lambda msg: SceneError(msg, source=source))

    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)        # poses at qpos0
    c = _Converter(model, data, source,
                   policy(on_unsupported, "on_unsupported") is Unsupported.DROP,
                   cylinders_as_capsules,
                   policy(heavy_armature, "heavy_armature") is Unsupported.DROP)
    _check_model(c)
    ground, pairs, shape_geom = _collisions(c)
    bodies, kept = _bodies(c, shape_geom)
    pair_list = []
    shapes = {doc["name"]: Shape(doc["shape"]) for doc in bodies}
    for b1, b2, g1, g2 in pairs:
        names = [GROUND if b == 0 else kept.get(b) for b in (b1, b2)]
        if None in names or names[0] == names[1]:
            continue
        kinds = [GROUND if n == GROUND else shapes[n] for n in names]
        if tuple(kinds) not in CONTACT_KINDS and tuple(kinds[::-1]) not in CONTACT_KINDS:
            c.unsupported_pair(g1, g2, kinds)
            continue
        pair_list.append(sorted(names, key=lambda n: n == GROUND))
    doc = {"format": FORMAT, "name": _model_name(c, source), "dt": float(model.opt.timestep),
           "gravity": [float(x) for x in model.opt.gravity], "bodies": bodies,
           "joints": _joints(c, kept), "motors": _motors(c),
           "contacts": [{"a": a, "b": b} for a, b in dict.fromkeys(map(tuple, pair_list))]}
    if ground is not None:
        doc["ground"] = {"height": float(data.geom_xpos[ground][2] + model.geom_margin[ground]),
                         "friction": float(model.geom_friction[ground][0])}
    return Conversion(scene_from_dict(doc, source=source), doc, tuple(c.dropped))


def _model_name(c: _Converter, source: str) -> str:
    name = c.m.names[:c.m.names.index(b"\0")].decode() if c.m.names else ""
    return name if name and name != "MuJoCo Model" else Path(source).stem


def _check_model(c: _Converter) -> None:
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
            dofs = range(m.jnt_dofadr[j], m.jnt_dofadr[j] + _dof_count(m.jnt_type[j]))
            if any(float(m.dof_armature[k]) for k in dofs):
                c.refuse(label, "attribute 'armature' on a free or ball joint is not "
                         "supported (symphys' armature acts on hinges and sliders)")


def _dof_count(kind) -> int:
    return {MjJoint.FREE: 6, MjJoint.BALL: 3}.get(MjJoint(int(kind)), 1)


def _collisions(c: _Converter):
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


def _bodies(c: _Converter, shape_geom: dict):
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


def _parent(c: _Converter, b: int, kept: dict) -> int:
    """The nearest kept ancestor of body b (0: the world)."""
    p = int(c.m.body_parentid[b])
    while p and p not in kept:
        p = int(c.m.body_parentid[p])
    return p


def _row_inertia(c: _Converter, bodies: tuple[int, int], hinge: bool, axis) -> float:
    """What a hinge's (slider's) axis row moves at the initial pose: the
    inertia 1 / (n.I_b^-1 n + n.I_p^-1 n) (the mass 1 / (1/m_b + 1/m_p)) of
    its two bodies (0: the world, which does not move)."""
    total = 0.0
    for body in bodies:
        if body == 0:
            continue
        if hinge:
            local = c.d.ximat[body].reshape(3, 3).T @ np.asarray(axis)
            total += float(np.sum(local ** 2 / c.m.body_inertia[body]))
        else:
            total += 1.0 / float(c.m.body_mass[body])
    return 1.0 / total


def _armature(c: _Converter, doc: dict, label: str, armature: float, moved: float) -> None:
    """Put `armature` on the joint document, unless it outweighs what the
    joint's row moves by more than ARMATURE_LIMIT (refused, or left out and
    listed with heavy_armature="drop")."""
    if armature <= ARMATURE_LIMIT * moved:
        doc["armature"] = armature
        return
    why = (f"attribute 'armature' {armature:g} is {armature / moved:.0f} times what the "
           f"joint turns ({moved:.3g} about its axis at the initial pose); symphys "
           f"holds armature up to {ARMATURE_LIMIT:g} times that (heavier rotors on "
           f"light links lose their momentum in the solver's sweeps and can diverge)")
    if not c.drop_armature:
        c.refuse(label, why + "; load with heavy_armature='drop' to leave it out")
    c.dropped.append(f"{label}: {why}: left out")


def _joints(c: _Converter, kept: dict) -> list[dict]:
    m, d = c.m, c.d
    docs = []
    for b, name in kept.items():
        parent_id = _parent(c, b, kept)
        parent = kept[parent_id] if parent_id else WORLD
        count = int(m.body_jntnum[b])
        first = int(m.body_jntadr[b])
        if count == 0:
            docs.append({"name": f"{name}_weld", "type": JointType.FIXED.value,
                         "parent": parent, "child": name,
                         "anchor": [float(x) for x in d.xipos[b]]})
            continue
        names = [c.name(Obj.JOINT, j, "joint") for j in range(first, first + count)]
        if count > 1:
            docs.append(_planar(c, name, parent, range(first, first + count), names))
            continue
        j, label = first, f"joint {names[0]!r}"
        kind = MjJoint(int(m.jnt_type[j]))
        if kind is MjJoint.FREE:
            continue
        doc = {"name": names[0], "parent": parent, "child": name,
               "anchor": [float(x) for x in d.xanchor[j]]}
        dof = int(m.jnt_dofadr[j])
        if kind is MjJoint.BALL:
            if m.jnt_limited[j]:
                c.refuse(label, "attribute 'range' on a ball joint (a cone limit) is not "
                         "supported")
            if float(m.dof_damping[dof]) or float(m.dof_frictionloss[dof]):
                c.refuse(label, "damping or frictionloss on a ball joint is not supported")
            docs.append({**doc, "type": JointType.BALL.value})
            continue
        doc.update(type=(JointType.HINGE if kind is MjJoint.HINGE else JointType.SLIDER).value,
                   axis=[float(x) for x in d.xaxis[j]])
        if m.jnt_limited[j]:
            q0 = float(m.qpos0[m.jnt_qposadr[j]])
            doc["limits"] = [float(m.jnt_range[j][0]) - q0, float(m.jnt_range[j][1]) - q0]
        if float(m.dof_damping[dof]):
            doc["viscous_damping"] = float(m.dof_damping[dof])
        if float(m.dof_frictionloss[dof]):
            doc["dry_friction"] = float(m.dof_frictionloss[dof])
        if float(m.jnt_stiffness[j]):
            doc["spring_stiffness"] = float(m.jnt_stiffness[j])
            doc["spring_reference"] = (float(m.qpos_spring[m.jnt_qposadr[j]])
                                       - float(m.qpos0[m.jnt_qposadr[j]]))
        if float(m.dof_armature[dof]):
            _armature(c, doc, label, float(m.dof_armature[dof]),
                      _row_inertia(c, (b, parent_id), kind is MjJoint.HINGE, d.xaxis[j]))
        docs.append(doc)
    return docs


def _planar(c: _Converter, body: str, parent: str, joints: range, names: list) -> dict:
    """One planar joint from a body's two perpendicular slides and a hinge
    about their normal (the root of gymnasium's hopper, walker and
    half-cheetah), named after the hinge; refused naming the body and its
    joints otherwise, or when any of them has a range, damping, friction
    loss, armature, a spring or an actuator."""
    m, d = c.m, c.d
    kinds = [MjJoint(int(m.jnt_type[j])) for j in joints]
    slides = [j for j, k in zip(joints, kinds) if k is MjJoint.SLIDE]
    hinges = [j for j, k in zip(joints, kinds) if k is MjJoint.HINGE]
    label = f"body {body!r}"
    listed = ", ".join(names)
    if len(joints) != 3 or len(slides) != 2 or len(hinges) != 1:
        c.refuse(label, f"has {len(joints)} joints ({listed}); symphys joins a body to its "
                 f"parent by one joint, or by a planar joint made of two slides and a hinge")
    n = np.asarray(d.xaxis[hinges[0]])
    a1, a2 = (np.asarray(d.xaxis[j]) for j in slides)
    if abs(a1 @ a2) > 1e-9 or np.linalg.norm(np.cross(np.cross(a1, a2), n)) > 1e-9:
        c.refuse(label, f"joints {listed}: the two slides must be perpendicular and the "
                 f"hinge turn about their common normal to make a planar joint")
    actuated = {int(m.actuator_trnid[u][0]) for u in range(m.nu)}
    for j in joints:
        dof = int(m.jnt_dofadr[j])
        extras = [what for what, value in (
            ("range", m.jnt_limited[j]), ("damping", m.dof_damping[dof]),
            ("frictionloss", m.dof_frictionloss[dof]), ("armature", m.dof_armature[dof]),
            ("stiffness", m.jnt_stiffness[j]), ("an actuator", j in actuated)) if value]
        if extras:
            c.refuse(f"joint {c.name(Obj.JOINT, j, 'joint')!r}", f"one of {body!r}'s planar "
                     f"joints ({listed}) has {', '.join(extras)}; a planar joint has none")
    hinge = hinges[0]
    return {"name": c.name(Obj.JOINT, hinge, "joint"), "type": JointType.PLANAR.value,
            "parent": parent, "child": body, "anchor": [float(x) for x in d.xanchor[hinge]],
            "axis": [float(x) for x in n]}


def _motors(c: _Converter) -> list[dict]:
    """Actuators on a joint as torque motors. MuJoCo's actuator force is
    gainprm[0] ctrl + biasprm[1] length + biasprm[2] velocity (length =
    gear q, with q absolute), the joint's torque gear times it: so gain =
    gear gainprm[0], stiffness = -gear^2 biasprm[1], damping = -gear^2
    biasprm[2] (a <motor>: 0, 0; a <position>: kp, kv; a <velocity>: 0,
    kv); the command range is ctrlrange, the torque bound gear forcerange."""
    m = c.m
    docs = []
    for u in range(m.nu):
        name = c.name(Obj.ACTUATOR, u, "actuator")
        label = f"actuator {name!r}"
        if int(m.actuator_trntype[u]) != int(mujoco.mjtTrn.mjTRN_JOINT):
            c.refuse(label, "only actuators on a joint are supported (not on a tendon, "
                     "site or body)")
        if int(m.actuator_dyntype[u]) != int(mujoco.mjtDyn.mjDYN_NONE):
            c.refuse(label, "actuator dynamics (dyntype) are not supported")
        if int(m.actuator_gaintype[u]) != int(mujoco.mjtGain.mjGAIN_FIXED) or int(
                m.actuator_biastype[u]) not in (int(mujoco.mjtBias.mjBIAS_NONE),
                                                int(mujoco.mjtBias.mjBIAS_AFFINE)):
            c.refuse(label, "only motor, position and velocity actuators (a fixed gain and "
                     "an affine bias) are supported")
        j = int(m.actuator_trnid[u][0])
        if MjJoint(int(m.jnt_type[j])) not in (MjJoint.HINGE, MjJoint.SLIDE):
            c.refuse(label, "drives a free or ball joint; symphys motors drive hinges "
                     "and sliders")
        gear = float(m.actuator_gear[u][0])
        bias = [float(x) for x in m.actuator_biasprm[u][:3]]
        if int(m.actuator_biastype[u]) == int(mujoco.mjtBias.mjBIAS_NONE):
            bias = [0.0, 0.0, 0.0]
        gain, stiffness, damping = (gear * float(m.actuator_gainprm[u][0]),
                                    -gear * gear * bias[1], -gear * gear * bias[2])
        q0 = float(m.qpos0[m.jnt_qposadr[j]])
        if gain < 0 or stiffness < 0 or damping < 0:
            c.refuse(label, f"gain {gain:g}, stiffness {stiffness:g} and damping {damping:g} "
                     f"(from gear, gainprm and biasprm) must not be negative in symphys")
        if bias[0] or (stiffness and q0):
            c.refuse(label, "a constant bias (biasprm[0], or kp times a joint 'ref') is not "
                     "supported")
        doc = {"name": name, "joint": c.name(Obj.JOINT, j, "joint"),
               "mode": MotorMode.TORQUE.value, "gain": gain}
        if stiffness or damping:
            doc.update(stiffness=stiffness, damping=damping)
        bound = UNBOUNDED_TORQUE
        if m.actuator_ctrllimited[u]:
            lo, hi = (float(x) for x in m.actuator_ctrlrange[u])
            doc["command_range"] = [lo, hi]
            if not (stiffness or damping):
                bound = gain * max(abs(lo), abs(hi))
        if m.actuator_forcelimited[u]:
            lo, hi = (float(x) for x in m.actuator_forcerange[u])
            if lo != -hi:
                c.refuse(label, f"attribute 'forcerange' [{lo:g}, {hi:g}] is not symmetric "
                         f"about 0; symphys bounds a motor's torque by +-max_torque")
            bound = min(bound, abs(gear) * hi)
        doc["max_torque"] = bound
        docs.append(doc)
    return docs
