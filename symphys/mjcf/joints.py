"""MuJoCo joints as symphys joints: one per body (a weld where a body has
none), the planar root of two slides and a hinge, limits from qpos0,
damping, friction loss, springs and armature (`convert_joints`)."""

from __future__ import annotations

import math

import numpy as np

from symphys.mjcf.converter import Converter, MjJoint, Obj, WayOut
from symphys.scene.elements import WORLD, JointType

# The heaviest armature symphys takes, in times what its joint's row turns
# (`row_inertia`). The armature row aims each step at the rate the joint
# had at its start, so a rotor much heavier than its links inherits the
# solver's leftover errors as momentum: gymnasium's ant (armature 1 on
# 40-g legs, 2,000-3,500 times) diverges at 8 and 16 sweeps and settles 20%
# low at 30-120; the double pendulum on its cart at 4 times matches MuJoCo.
ARMATURE_LIMIT = 10.0


def parent_of(c: Converter, b: int, kept: dict) -> int:
    """The nearest kept ancestor of body b (0: the world)."""
    p = int(c.m.body_parentid[b])
    while p and p not in kept:
        p = int(c.m.body_parentid[p])
    return p


def row_inertia(c: Converter, bodies: tuple[int, int], hinge: bool, axis) -> float:
    """What a hinge's (slider's) axis row moves at the initial pose: the
    inertia 1 / (n.I_b^-1 n + n.I_p^-1 n) (the mass 1 / (1/m_b + 1/m_p)) of
    its two bodies (0: the world, which does not move)."""
    total = 0.0
    for body in bodies:
        if body == 0 or float(c.m.body_mass[body]) <= 0.0:   # the world (or a body refused)
            continue
        if hinge:
            local = c.d.ximat[body].reshape(3, 3).T @ np.asarray(axis)
            total += float(np.sum(local ** 2 / c.m.body_inertia[body]))
        else:
            total += 1.0 / float(c.m.body_mass[body])
    return 1.0 / total if total else math.inf


def put_armature(c: Converter, doc: dict, label: str, armature: float, moved: float) -> None:
    """Put `armature` on the joint document, unless it outweighs what the
    joint's row moves by more than ARMATURE_LIMIT (refused, or left out and
    listed with heavy_armature="drop")."""
    if armature <= ARMATURE_LIMIT * moved:
        doc["armature"] = armature
        return
    c.leave_out(label, f"symphys holds armature up to {ARMATURE_LIMIT:g} times what its joint "
                f"turns (heavier rotors on light links lose their momentum in the solver's "
                f"sweeps and can diverge)", WayOut.ARMATURE,
                f"attribute 'armature' {armature:g} is {armature / moved:.0f} times what the "
                f"joint turns ({moved:.3g} about its axis at the initial pose)")


def convert_joints(c: Converter, kept: dict) -> list[dict]:
    m, d = c.m, c.d
    docs = []
    for b, name in kept.items():
        parent_id = parent_of(c, b, kept)
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
            doc = planar(c, name, parent, range(first, first + count), names)
            if doc is not None:
                docs.append(doc)
            continue
        j, label = first, f"joint {names[0]!r}"
        kind = MjJoint(int(m.jnt_type[j]))
        if kind is MjJoint.FREE:
            continue
        doc = {"name": names[0], "parent": parent, "child": name,
               "anchor": [float(x) for x in d.xanchor[j]]}
        dof = int(m.jnt_dofadr[j])
        if kind is MjJoint.BALL:
            if float(m.dof_damping[dof]) or float(m.dof_frictionloss[dof]):
                c.refuse(label, "damping or frictionloss on a ball joint is not supported")
            if m.jnt_limited[j]:      # MuJoCo bounds the turn's angle by range[1]
                doc["limits"] = [0.0, min(float(m.jnt_range[j][1]), math.pi)]
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
            put_armature(c, doc, label, float(m.dof_armature[dof]),
                         row_inertia(c, (b, parent_id), kind is MjJoint.HINGE, d.xaxis[j]))
        docs.append(doc)
    return docs


def planar(c: Converter, body: str, parent: str, joints: range, names: list) -> dict | None:
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
        c.refuse(label, "symphys joins a body to its parent by one joint, or by a planar "
                 "joint made of two slides and a hinge", f"has {len(joints)} joints ({listed})")
        return None
    n = np.asarray(d.xaxis[hinges[0]])
    a1, a2 = (np.asarray(d.xaxis[j]) for j in slides)
    if abs(a1 @ a2) > 1e-9 or np.linalg.norm(np.cross(np.cross(a1, a2), n)) > 1e-9:
        c.refuse(label, "the two slides must be perpendicular and the hinge turn about "
                 "their common normal to make a planar joint", f"joints {listed}")
    actuated = {int(m.actuator_trnid[u][0]) for u in range(m.nu)}
    for j in joints:
        dof = int(m.jnt_dofadr[j])
        extras = [what for what, value in (
            ("range", m.jnt_limited[j]), ("damping", m.dof_damping[dof]),
            ("frictionloss", m.dof_frictionloss[dof]), ("armature", m.dof_armature[dof]),
            ("stiffness", m.jnt_stiffness[j]), ("an actuator", j in actuated)) if value]
        if extras:
            c.refuse(f"joint {c.name(Obj.JOINT, j, 'joint')!r}", "a planar joint has no range, "
                     "damping, frictionloss, armature, spring or actuator",
                     f"has {', '.join(extras)} (a planar joint of body {body!r}: {listed})")
    hinge = hinges[0]
    return {"name": c.name(Obj.JOINT, hinge, "joint"), "type": JointType.PLANAR.value,
            "parent": parent, "child": body, "anchor": [float(x) for x in d.xanchor[hinge]],
            "axis": [float(x) for x in n]}
