"""MuJoCo joints as symphys joints (`convert_joints`): one per body (a weld
where a body has none), the planar root of two slides and a hinge, and any
other run of hinges, slides and balls in one body as a chain of light links
(`chain`); limits from qpos0, damping, friction loss, springs and armature."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from symphys.mjcf.converter import Converter, MjJoint, Obj, WayOut
from symphys.mjcf.shapes import body_frame, matrix_to_quaternion
from symphys.scene.elements import WORLD, JointType

# The heaviest armature Gauss-Seidel takes, in times what its joint's row
# turns (`row_inertia`). The armature row aims each step at the rate the
# joint had at its start, so with sweeps that stop short of convergence a
# rotor much heavier than its links inherits their leftover errors as
# momentum: gymnasium's ant (armature 1 on 40-g legs, 2,000-3,500 times)
# diverges at 8 and 16 sweeps and settles 20% low at 30-120. The Newton
# solve converges and takes any armature.
ARMATURE_LIMIT = 10.0

# What each link between a body's joints weighs, as a fraction of the
# body's mass and inertia (the body keeps the rest: `chain`).
LINK_SHARE = 1e-2


@dataclass(frozen=True)
class Heavy:
    """An armature above ARMATURE_LIMIT times what its joint turns: kept for
    the Newton solve; Gauss-Seidel refuses or drops it (`settle_armature`)."""

    joint: str
    armature: float
    moved: float


@dataclass(frozen=True)
class JointDocs:
    """The joints' scene-file documents, the links' body documents (`chain`),
    {body name: the fraction of its mass and inertia it keeps} and the
    armatures heavier than Gauss-Seidel holds."""

    joints: tuple
    links: tuple
    shares: dict
    heavy: tuple


def parent_of(c: Converter, b: int, kept: dict) -> int:
    """The nearest kept ancestor of body b (0: the world)."""
    p = int(c.m.body_parentid[b])
    while p and p not in kept:
        p = int(c.m.body_parentid[p])
    return p


def row_inertia(c: Converter, bodies, hinge: bool, axis) -> float:
    """What a hinge's (slider's) axis row moves at the initial pose: the
    inertia 1 / sum of n.I^-1 n (the mass 1 / sum of 1/m) over its two
    sides, each a (MuJoCo body id, fraction of it) pair (0: the world,
    which does not move)."""
    total = 0.0
    for body, share in bodies:
        if body == 0 or float(c.m.body_mass[body]) <= 0.0:   # the world (or a body refused)
            continue
        if hinge:
            local = c.d.ximat[body].reshape(3, 3).T @ np.asarray(axis)
            total += float(np.sum(local ** 2 / c.m.body_inertia[body])) / share
        else:
            total += 1.0 / (share * float(c.m.body_mass[body]))
    return 1.0 / total if total else math.inf


def settle_armature(c: Converter, joints: tuple, heavy, newton: bool) -> tuple:
    """The joint documents with their heavy armatures: all kept for the
    Newton solve; for Gauss-Seidel each taken off, refused (or listed, with
    heavy_armature="drop")."""
    if newton or not heavy:
        return joints
    for h in heavy:
        c.leave_out(f"joint {h.joint!r}", f"with Gauss-Seidel symphys holds armature up to "
                    f"{ARMATURE_LIMIT:g} times what its joint turns (heavier rotors on light "
                    f"links lose their momentum in the solver's sweeps and can diverge; "
                    f"the Newton solve, solver_method='newton' (symphys convert "
                    f"--solver-method newton), takes any)", WayOut.ARMATURE,
                    f"attribute 'armature' {h.armature:g} is {h.armature / h.moved:.0f} times "
                    f"what the joint turns ({h.moved:.3g} about its axis at the initial pose)")
    light = {h.joint for h in heavy}
    return tuple({k: v for k, v in doc.items() if k != "armature"} if doc["name"] in light
                 else doc for doc in joints)


def convert_joints(c: Converter, kept: dict, link_share: float = LINK_SHARE) -> JointDocs:
    """`JointDocs` of the kept bodies ({MuJoCo body id: symphys name})."""
    m = c.m
    docs, links, shares, heavy = [], [], {}, []
    for b, name in kept.items():
        parent_id = parent_of(c, b, kept)
        parent = kept[parent_id] if parent_id else WORLD
        count = int(m.body_jntnum[b])
        first = int(m.body_jntadr[b])
        if count == 0:
            docs.append({"name": f"{name}_weld", "type": JointType.FIXED.value,
                         "parent": parent, "child": name,
                         "anchor": [float(x) for x in c.d.xipos[b]]})
            continue
        joints = range(first, first + count)
        if count > 1 and is_planar(c, joints):
            docs.append(planar(c, name, parent, joints))
            continue
        if count > 1:
            chained = chain(c, b, name, parent, parent_id, joints, link_share, set(kept.values()))
            if chained is None:
                continue
            for doc, sides in chained[0]:
                _put_joint(c, doc, sides, heavy, docs)
            links += chained[1]
            shares[name] = 1.0 - (count - 1) * link_share
            continue
        doc = joint_doc(c, first, parent, name)
        if doc is not None:
            _put_joint(c, doc, ((b, 1.0), (parent_id, 1.0)), heavy, docs)
    return JointDocs(tuple(docs), tuple(links), shares, tuple(heavy))


def _put_joint(c: Converter, doc: dict, sides, heavy: list, docs: list) -> None:
    """Append a joint document; note its armature if Gauss-Seidel cannot hold it."""
    docs.append(doc)
    armature = doc.get("armature", 0.0)
    if armature and doc["type"] in (JointType.HINGE.value, JointType.SLIDER.value):
        moved = row_inertia(c, sides, doc["type"] == JointType.HINGE.value, doc["axis"])
        if armature > ARMATURE_LIMIT * moved:
            heavy.append(Heavy(doc["name"], armature, moved))


def joint_doc(c: Converter, j: int, parent: str, child: str) -> dict | None:
    """MuJoCo joint j between `parent` and `child` (symphys names) as a
    joint document at the initial pose (None: a free joint, no joint)."""
    m, d = c.m, c.d
    label = f"joint {c.name(Obj.JOINT, j, 'joint')!r}"
    kind = MjJoint(int(m.jnt_type[j]))
    if kind is MjJoint.FREE:
        return None
    doc = {"name": c.name(Obj.JOINT, j, "joint"), "parent": parent, "child": child,
           "anchor": [float(x) for x in d.xanchor[j]]}
    dof = int(m.jnt_dofadr[j])
    if kind is MjJoint.BALL:
        if float(m.dof_damping[dof]) or float(m.dof_frictionloss[dof]):
            c.refuse(label, "damping or frictionloss on a ball joint is not supported")
        if m.jnt_limited[j]:      # MuJoCo bounds the turn's angle by range[1]
            doc["limits"] = [0.0, min(float(m.jnt_range[j][1]), math.pi)]
        return {**doc, "type": JointType.BALL.value}
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
        doc["armature"] = float(m.dof_armature[dof])
    return doc


def chain(c: Converter, b: int, body: str, parent: str, parent_id: int, joints: range,
          share: float, taken: set):
    """A body's k joints in MJCF's order (the body's frame is its parent's
    moved by the first joint, then by the second about its own axis carried
    along, and so on) as k symphys joints through k - 1 links: link i hangs
    on joint i and carries joint i + 1, the body hangs on the last. Each
    link is a body of `share` of the body's mass and principal inertia at
    its centre of mass, the body keeping the rest (so the total is MuJoCo's
    at the initial pose, where all coincide). Each joint keeps its name,
    coordinate, limits, damping, friction, spring, armature and actuators.
    Returns ([(joint document, its two sides as (MuJoCo body id, share))],
    [link body documents]), or None (refused: a free joint among them)."""
    m, d = c.m, c.d
    names = [c.name(Obj.JOINT, j, "joint") for j in joints]
    if any(MjJoint(int(m.jnt_type[j])) is MjJoint.FREE for j in joints):
        c.refuse(f"body {body!r}", "a free joint cannot be composed with other joints",
                 f"has {len(joints)} joints ({', '.join(names)})")
        return None
    frame = body_frame(m, d, b, None, None)
    links = []
    for name in names[:-1]:
        link = f"{body}_{name}_link"
        while link in taken:
            link += "_"
        taken.add(link)
        links.append({"name": link, **frame.fields, "mass": share * float(m.body_mass[b]),
                      "inertia": [share * float(x) for x in frame.moments],
                      "position": [float(x) for x in d.xipos[b]],
                      "quaternion": matrix_to_quaternion(frame.rotation)})
    out = []
    ends = [parent] + [link["name"] for link in links] + [body]
    sides = [(parent_id, 1.0)] + [(b, share)] * len(links) + [(b, 1.0 - len(links) * share)]
    for i, j in enumerate(joints):
        doc = joint_doc(c, j, ends[i], ends[i + 1])
        out.append((doc, (sides[i + 1], sides[i])))
    return out, links


def is_planar(c: Converter, joints: range) -> bool:
    """Whether a body's joints are two perpendicular slides and a hinge about
    their normal, none with a range, damping, friction loss, armature, a
    spring or an actuator (the root of gymnasium's hopper, walker and
    half-cheetah): one exact planar joint (`planar`)."""
    m, d = c.m, c.d
    kinds = [MjJoint(int(m.jnt_type[j])) for j in joints]
    slides = [j for j, k in zip(joints, kinds) if k is MjJoint.SLIDE]
    hinges = [j for j, k in zip(joints, kinds) if k is MjJoint.HINGE]
    if len(joints) != 3 or len(slides) != 2 or len(hinges) != 1:
        return False
    n = np.asarray(d.xaxis[hinges[0]])
    a1, a2 = (np.asarray(d.xaxis[j]) for j in slides)
    if abs(a1 @ a2) > 1e-9 or np.linalg.norm(np.cross(np.cross(a1, a2), n)) > 1e-9:
        return False
    actuated = {int(m.actuator_trnid[u][0]) for u in range(m.nu)}
    for j in joints:
        dof = int(m.jnt_dofadr[j])
        if any((m.jnt_limited[j], m.dof_damping[dof], m.dof_frictionloss[dof],
                m.dof_armature[dof], m.jnt_stiffness[j], j in actuated)):
            return False
    return True


def planar(c: Converter, body: str, parent: str, joints: range) -> dict:
    """One planar joint from `is_planar` joints, named after the hinge."""
    m, d = c.m, c.d
    hinge = next(j for j in joints if MjJoint(int(m.jnt_type[j])) is MjJoint.HINGE)
    return {"name": c.name(Obj.JOINT, hinge, "joint"), "type": JointType.PLANAR.value,
            "parent": parent, "child": body, "anchor": [float(x) for x in d.xanchor[hinge]],
            "axis": [float(x) for x in d.xaxis[hinge]]}
