"""A scene as an MJCF model for MuJoCo: `to_mjcf(scene)` writes it,
`load_model(scene)` compiles it (the optional `mujoco` package, extra
`symphys[bench]`). MuJoCo is the reference on the same model in the tests
and the speed peer of `symphys bench`. What is exact and what is approximate:

* Exact: shapes and sizes (a capsule's axis is body z and symphys'
  `length`, the distance between its end-sphere centres, is twice MuJoCo's
  half-length), masses and principal inertias (explicit `inertial`
  elements from `symphys.physics.model.principal_inertia`, so MuJoCo does not
  derive them from the geoms), initial poses and velocities (velocities
  through the `initial` keyframe), timestep, gravity, joint anchors, axes
  and limits, and which pairs collide (explicit `<pair>`s for exactly
  `scene.contacts`; every geom has contype = conaffinity = 0).
* Kinematic tree: joints form a graph; each connected group of bodies
  hangs from the world if a joint reaches it, else from a free root (the
  first body in scene order that is no joint's child) with a freejoint. A
  fixed joint nests the child with no joint; a universal joint is two
  hinges in one body (`<name>:0` about `axis`, then `<name>:1` about
  `axis2`, which the first turns: fixed in the child). A joint met from
  its child's side is inverted (a hinge or slider about the negated axis,
  same coordinate). A closed loop or a soft joint (`frequency`) cannot be
  expressed: `SceneError` naming the joint.
* Contacts (approximate): MuJoCo's soft contacts, not symphys' impulses.
  Friction is symphys' sqrt(mu_a mu_b), rolling friction max(...) (condim 6
  when any is nonzero, torsional 0), the friction cone as the scene's
  (pyramidal or elliptic). Contact stiffness is MuJoCo's default, solref =
  (tau, 1) with tau = max(0.02 s, 2 dt): critically damped, so restitution
  is not modelled (nothing bounces). `MjcfOptions(restitution=True)` maps
  e = max(e_a, e_b) to the damping ratio zeta = -ln e / sqrt(pi^2 + ln^2 e)
  at the same natural frequency 1/tau (solref = (tau / zeta, zeta)); with
  a coarse dt such light damping makes a resting body chatter (the ball
  scene at dt = 0.01 s keeps hopping by ~1 mm), hence off by default.
  symphys' soft-contact settings (constraint_frequency) are not carried
  over.
* Motors (approximate): a position servo (target rate
  clip(g (u - q), +-v_max), torque within +-tau_max) becomes a `position`
  actuator kp (u - q) - kv qdot = kv (g (u - q) - qdot) with kv = c I / dt,
  I the subtree's inertia about the joint axis at the initial pose (mass
  for a slider; the base held fixed) and c = `MjcfOptions.servo_damping`,
  kp = g kv, forcerange +-tau_max, ctrlrange the command range. It tracks
  the same target rate but closes a fraction c / (1 + c) of the rate error
  per step (half at c = 1) rather than all of it, and the rate limit v_max
  is not modelled (only the torque limit). A
  velocity servo is a `velocity` actuator (same kv, ctrlrange +-v_max), a
  torque motor a `motor` (ctrlrange +-tau_max). The integrator is
  `implicitfast`, which treats the servo damping implicitly.
* The solver is MuJoCo's default (Newton, its own iterations and tolerance;
  `MjcfOptions` can change it), not symphys' PGS sweep count.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import deque
from dataclasses import dataclass

import numpy as np

from symphys.errors import SceneError, SymphysError
from symphys.physics.algebra import Vec3, quat_to_mat_array
from symphys.physics.joints import joint_frame
from symphys.physics.model import principal_inertia
from symphys.scene.elements import WORLD, FrictionModel, Joint, JointType, MotorMode, Shape
from symphys.scene.scene import Scene

GROUND_GEOM = "ground"
KEYFRAME = "initial"


class MujocoUnavailable(SymphysError, ImportError):
    """The optional `mujoco` package is not installed."""


def import_mujoco():
    """The `mujoco` module, or `MujocoUnavailable` saying how to install it."""
    try:
        import mujoco
    except ImportError as exc:
        raise MujocoUnavailable(
            "the MuJoCo speed peer needs the optional 'mujoco' package: "
            "pip install 'symphys[bench]' (or the dev extra, 'symphys[dev]')") from exc
    return mujoco


@dataclass(frozen=True)
class MjcfOptions:
    """Choices `to_mjcf` makes where the scene does not fix MuJoCo's model.

    integrator: MuJoCo integrator ("implicitfast": servo damping implicit).
    solver, iterations: MuJoCo constraint solver and its iteration cap
      (None: MuJoCo's defaults, Newton with 100 and early termination).
    servo_damping: c in kv = c * I / dt for servo actuators (see module doc).
    contact_timeconst: tau of the contact's natural period (None: max(0.02, 2 dt)).
    restitution: map restitution to contact damping (see module doc).
    """

    integrator: str = "implicitfast"
    solver: str | None = None
    iterations: int | None = None
    servo_damping: float = 1.0
    contact_timeconst: float | None = None
    restitution: bool = False


# -- small rigid-body helpers (NumPy, float64) ------------------------------
def _quat_mul(a, b) -> np.ndarray:
    """Hamilton product of quaternions (w, x, y, z): (4,), (4,) -> (4,)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw])


def _quat_conj(q) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


def _fmt(values) -> str:
    """Space-separated shortest round-trip reprs, so MuJoCo reads the same floats."""
    return " ".join(repr(float(v) + 0.0) for v in np.ravel(values))


def principal_moments(body) -> np.ndarray:
    """(3,) principal inertia of a body, as symphys takes it."""
    if body.inertia is not None:
        return np.array(body.inertia, dtype=np.float64)
    return np.array([float(c) for c in principal_inertia(
        body.shape, body.mass, body.radius, Vec3(*map(float, body.size)), body.length)])


# -- the kinematic tree -------------------------------------------------------
@dataclass(frozen=True)
class TreeEdge:
    """How a body hangs in MuJoCo's tree.

    parent: the MuJoCo parent (a body name or "world"); joint: the symphys
    joint that links them (None: a free root, with a freejoint); reversed:
    the joint was met from its child's side (the MuJoCo child is the symphys
    parent)."""

    body: str
    parent: str
    joint: Joint | None
    reversed: bool = False


@dataclass(frozen=True)
class MjHinge:
    """One MuJoCo joint made from a symphys joint: `kind` is an MJCF joint
    type, `axis` (3,) world direction at the initial pose (None for ball),
    `coordinate` which symphys coordinate it carries (0 or 1)."""

    name: str
    kind: str
    axis: tuple[float, float, float] | None
    coordinate: int = 0


def kinematic_tree(scene: Scene) -> list[TreeEdge]:
    """Bodies in a parent-before-child order with their MuJoCo parent.

    Raises SceneError naming the joint that closes a loop or cannot be
    expressed."""
    for j in scene.joints:
        if j.frequency is not None:
            raise SceneError(
                f"a soft joint (frequency {j.frequency} Hz) cannot be expressed in "
                "MuJoCo's joint tree (its joints are stiff); make it stiff to compare "
                "with MuJoCo", source=scene.source, item=f"joint '{j.name}'")
        if j.type not in (JointType.FIXED, JointType.HINGE, JointType.BALL,
                          JointType.SLIDER, JointType.UNIVERSAL, JointType.PLANAR):
            raise SceneError(f"joint type '{j.type.value}' has no MJCF counterpart here",
                             source=scene.source, item=f"joint '{j.name}'")
    incident: dict[str, list[Joint]] = {WORLD: [], **{b.name: [] for b in scene.bodies}}
    for j in scene.joints:
        incident[j.parent].append(j)
        incident[j.child].append(j)
    edges: list[TreeEdge] = []
    placed: set[str] = set()
    used: set[str] = set()

    def grow(root: str) -> None:
        queue = deque([root])
        while queue:
            node = queue.popleft()
            for j in incident[node]:
                if j.name in used:
                    continue
                used.add(j.name)
                other = j.child if j.parent == node else j.parent
                if other in placed or other == WORLD:
                    raise SceneError(
                        f"closes a kinematic loop ('{j.parent}' and '{j.child}' are "
                        "already connected through other joints or the world); MuJoCo "
                        "models a tree of joints", source=scene.source,
                        item=f"joint '{j.name}'")
                placed.add(other)
                edges.append(TreeEdge(other, node, j, reversed=j.child != other))
                queue.append(other)

    grow(WORLD)
    children = {j.child for j in scene.joints}
    while len(placed) < len(scene.bodies):
        rest = [b.name for b in scene.bodies if b.name not in placed]
        component = _component(rest[0], incident)
        root = next((n for n in rest if n in component and n not in children), rest[0])
        placed.add(root)
        edges.append(TreeEdge(root, WORLD, None))
        grow(root)
    return edges


def _component(start: str, incident) -> set[str]:
    seen, stack = {start}, [start]
    while stack:
        for j in incident[stack.pop()]:
            for n in (j.parent, j.child):
                if n != WORLD and n not in seen:
                    seen.add(n)
                    stack.append(n)
    return seen


def mj_joints(edge: TreeEdge, taken: frozenset[str] = frozenset()) -> list[MjHinge]:
    """The MuJoCo joints (in body order) that express `edge`'s symphys joint;
    a free root's joint is named after its body (`<body>:free` if `taken`,
    the symphys joint names, has that name)."""
    j = edge.joint
    if j is None:
        name = edge.body if edge.body not in taken else f"{edge.body}:free"
        return [MjHinge(name, "free", None)]
    sign = -1.0 if edge.reversed else 1.0
    axis = tuple(sign * a for a in j.axis)
    if j.type is JointType.FIXED:
        return []
    if j.type is JointType.BALL:
        return [MjHinge(j.name, "ball", None)]
    if j.type is JointType.HINGE:
        return [MjHinge(j.name, "hinge", axis)]
    if j.type is JointType.SLIDER:
        return [MjHinge(j.name, "slide", axis)]
    if j.type is JointType.PLANAR:        # two slides across the normal, a turn about it
        frame = np.array(joint_frame(j.axis, None), dtype=float).reshape(3, 3)
        slides = [MjHinge(f"{j.name}:{k}", "slide", tuple(sign * frame[:, k]))
                  for k in (1, 2)]
        return slides + [MjHinge(f"{j.name}:turn", "hinge", axis)]
    first = MjHinge(f"{j.name}:0", "hinge", axis, 0)
    second = MjHinge(f"{j.name}:1", "hinge", tuple(sign * a for a in j.axis2), 1)
    # Inverted: R^-1 = R(-axis2, q1) R(-axis, q0), the child-fixed axis turns first.
    return [second, first] if edge.reversed else [first, second]


def _subtree(edges: list[TreeEdge]) -> dict[str, list[str]]:
    """Body -> its MuJoCo subtree (itself and all descendants)."""
    kids: dict[str, list[str]] = {}
    for e in edges:
        kids.setdefault(e.parent, []).append(e.body)
    out: dict[str, list[str]] = {}
    for e in reversed(edges):
        out[e.body] = [e.body] + [n for k in kids.get(e.body, []) for n in out[k]]
    return out


def reflected_inertia(scene: Scene, bodies: list[str], axis, anchor, slide: bool) -> float:
    """Inertia (kg m^2, or kg for a slider) of `bodies` about a world axis
    (3,) through `anchor` (3,) at the initial pose, the rest held fixed."""
    by_name = {b.name: b for b in scene.bodies}
    if slide:
        return float(sum(by_name[n].mass for n in bodies))
    w = np.asarray(axis, float)
    total = 0.0
    for n in bodies:
        b = by_name[n]
        rot = quat_to_mat_array(np.asarray(b.quaternion, dtype=float))
        local = rot.T @ w
        r = np.asarray(b.position) - np.asarray(anchor)
        r_perp = r - (r @ w) * w
        total += float(local @ (principal_moments(b) * local) + b.mass * (r_perp @ r_perp))
    return total


def _initial_velocity_check(scene: Scene, edges: list[TreeEdge]) -> None:
    """Joint rates start at 0 in MJCF: every jointed body must move rigidly
    with its tree's root (the world or a free body)."""
    by_name = {b.name: b for b in scene.bodies}
    root_of: dict[str, str] = {}
    for e in edges:
        root_of[e.body] = e.body if e.joint is None else root_of.get(e.parent, WORLD)
    for e in edges:
        if e.joint is None:
            continue
        b = by_name[e.body]
        root = root_of[e.body]
        if root == WORLD:
            v_exp, w_exp = np.zeros(3), np.zeros(3)
        else:
            r = by_name[root]
            w_exp = np.asarray(r.angular_velocity)
            v_exp = np.asarray(r.velocity) + np.cross(
                w_exp, np.asarray(b.position) - np.asarray(r.position))
        if (np.abs(np.asarray(b.velocity) - v_exp).max() > 1e-12
                or np.abs(np.asarray(b.angular_velocity) - w_exp).max() > 1e-12):
            raise SceneError(
                "its initial velocity is not that of a rigid motion with "
                f"{'the world' if root == WORLD else repr(root)}; MJCF starts joint "
                "rates at 0", source=scene.source, item=f"body '{b.name}'",
                field="velocity")


# -- MJCF ------------------------------------------------------------------
def restitution_damping(e: float) -> float:
    """Damping ratio of a spring-damper whose bounce keeps a fraction e of the
    approach speed: -ln e / sqrt(pi^2 + ln^2 e); 1 for e <= 0 (floor 0.05)."""
    if e <= 0.0:
        return 1.0
    log_e = math.log(min(e, 0.999))
    return max(0.05, min(1.0, -log_e / math.sqrt(math.pi ** 2 + log_e ** 2)))


def to_mjcf(scene: Scene, options: MjcfOptions = MjcfOptions()) -> str:
    """An MJCF model (XML text) of `scene`; see the module doc for what is
    exact and what is approximated. Body, geom and actuator names are the
    symphys body and motor names; the ground plane is geom "ground"; the
    keyframe "initial" holds the initial velocities."""
    if scene.solver.velocity_damping > 0:
        raise SceneError("velocity damping has no MJCF counterpart here", source=scene.source,
                         item="solver", field="velocity_damping")
    edges = kinematic_tree(scene)
    _initial_velocity_check(scene, edges)
    by_name = {b.name: b for b in scene.bodies}
    taken = frozenset(scene.joint_names)
    joints_of = {e.body: mj_joints(e, taken) for e in edges}
    subtree = _subtree(edges)

    root = ET.Element("mujoco", model=scene.name)
    ET.SubElement(root, "compiler", angle="radian", inertiafromgeom="false",
                  autolimits="false")
    opt = {"timestep": repr(float(scene.dt)), "gravity": _fmt(scene.gravity),
           "integrator": options.integrator,
           "cone": "elliptic" if scene.solver.friction_model is FrictionModel.CONE
           else "pyramidal"}
    if options.solver is not None:
        opt["solver"] = options.solver
    if options.iterations is not None:
        opt["iterations"] = str(options.iterations)
    ET.SubElement(root, "option", opt)
    world = ET.SubElement(root, "worldbody")
    if scene.ground is not None:
        ET.SubElement(world, "geom", name=GROUND_GEOM, type="plane",
                      pos=_fmt((0.0, 0.0, scene.ground.height)), size="0 0 1",
                      contype="0", conaffinity="0")

    elements = {WORLD: world}
    qvel: list[float] = []
    for e in edges:                     # parents come before children
        b = by_name[e.body]
        q_world = np.asarray(b.quaternion, float)
        if e.parent == WORLD:
            pos, quat = np.asarray(b.position, float), q_world
        else:
            p = by_name[e.parent]
            rp = quat_to_mat_array(np.asarray(p.quaternion, dtype=float))
            pos = rp.T @ (np.asarray(b.position) - np.asarray(p.position))
            quat = _quat_mul(_quat_conj(p.quaternion), q_world)
        el = ET.SubElement(elements[e.parent], "body", name=b.name, pos=_fmt(pos),
                           quat=_fmt(quat))
        elements[e.body] = el
        rot = quat_to_mat_array(np.asarray(b.quaternion, dtype=float))
        for mj in joints_of[e.body]:
            if mj.kind == "free":
                ET.SubElement(el, "freejoint", name=mj.name)
                qvel += list(b.velocity) + list(rot.T @ np.asarray(b.angular_velocity))
                continue
            attrs = {"name": mj.name, "type": mj.kind,
                     "pos": _fmt(rot.T @ (np.asarray(e.joint.anchor) - np.asarray(b.position)))}
            if mj.axis is not None:
                attrs["axis"] = _fmt(rot.T @ np.asarray(mj.axis))
            if e.joint.limits is not None and mj.kind in ("hinge", "slide"):
                attrs["limited"] = "true"
                attrs["range"] = _fmt(e.joint.limits)
            if mj.kind in ("hinge", "slide"):
                # Bearing losses and armature: MuJoCo's damping (implicit
                # under its Euler integrator, as symphys'), frictionloss and
                # armature.
                if e.joint.spring_stiffness:
                    if e.reversed:
                        raise SceneError("a spring on a joint met from its child's side has "
                                         "no MJCF counterpart here", source=scene.source,
                                         item=f"joint '{e.joint.name}'")
                    attrs.update(stiffness=_fmt([e.joint.spring_stiffness]),
                                 springref=_fmt([e.joint.spring_reference]))
                for key, value in (("damping", e.joint.viscous_damping),
                                   ("frictionloss", e.joint.dry_friction),
                                   ("armature", e.joint.armature)):
                    if value:
                        attrs[key] = _fmt([value])
            ET.SubElement(el, "joint", attrs)
            qvel += [0.0] * (3 if mj.kind == "ball" else 1)
        ET.SubElement(el, "inertial", pos="0 0 0", mass=repr(float(b.mass)),
                      diaginertia=_fmt(principal_moments(b)))
        geom = {"name": b.name, "contype": "0", "conaffinity": "0"}
        if b.shape is Shape.SPHERE:
            geom.update(type="sphere", size=_fmt([b.radius]))
        elif b.shape is Shape.BOX:
            geom.update(type="box", size=_fmt(0.5 * np.asarray(b.size)))
        else:
            geom.update(type="capsule", size=_fmt([b.radius, 0.5 * b.length]))
        ET.SubElement(el, "geom", geom)

    if scene.contacts:
        contact = ET.SubElement(root, "contact")
        tau = options.contact_timeconst or max(0.02, 2.0 * scene.dt)
        for pair in scene.contacts:
            a = by_name[pair.a]
            other = by_name.get(pair.b)
            mat = scene.ground if other is None else other
            mu = math.sqrt(a.friction * mat.friction)
            roll = max(a.rolling_friction, mat.rolling_friction)
            zeta = (restitution_damping(max(a.restitution, mat.restitution))
                    if options.restitution else 1.0)
            ET.SubElement(contact, "pair", geom1=a.name,
                          geom2=GROUND_GEOM if other is None else other.name,
                          condim="6" if roll > 0 else "3",
                          friction=_fmt([mu, mu, 0.0, roll, roll]),
                          solref=_fmt([tau / zeta, zeta]))

    if scene.motors:
        act = ET.SubElement(root, "actuator")
        edge_of = {e.joint.name: e for e in edges if e.joint is not None}
        joints = {j.name: j for j in scene.joints}
        for m in scene.motors:
            e = edge_of[m.joint]
            mj = next(h for h in joints_of[e.body] if h.coordinate == m.axis)
            attrs = {"name": m.name, "joint": mj.name}
            if m.mode is MotorMode.TORQUE:
                lo, hi = m.command_range or (-m.max_torque, m.max_torque)
                attrs.update(ctrllimited="true", ctrlrange=_fmt((lo, hi)), forcelimited="true",
                             forcerange=_fmt((-m.max_torque, m.max_torque)))
                if m.feedback:      # gain command - stiffness q - damping q'
                    attrs.update(gaintype="fixed", biastype="affine", gainprm=_fmt([m.gain]),
                                 biasprm=_fmt([0.0, -m.stiffness, -m.damping]))
                    ET.SubElement(act, "general", attrs)
                else:
                    ET.SubElement(act, "motor", dict(attrs, gear=_fmt([m.gain])))
                continue
            inertia = reflected_inertia(scene, subtree[e.body], mj.axis,
                                        joints[m.joint].anchor, mj.kind == "slide")
            kv = options.servo_damping * inertia / scene.dt
            attrs.update(kv=repr(kv), forcelimited="true",
                         forcerange=_fmt((-m.max_torque, m.max_torque)))
            if m.mode is MotorMode.VELOCITY:
                lo, hi = m.command_range or (-m.max_velocity, m.max_velocity)
                attrs.update(ctrllimited="true", ctrlrange=_fmt((lo, hi)))
                ET.SubElement(act, "velocity", attrs)
            else:
                limits = m.command_range or joints[m.joint].limits
                attrs["kp"] = repr(m.gain * kv)
                if limits is not None:
                    attrs.update(ctrllimited="true", ctrlrange=_fmt(limits))
                ET.SubElement(act, "position", attrs)

    keyframe = ET.SubElement(root, "keyframe")
    ET.SubElement(keyframe, "key", {"name": KEYFRAME, **({"qvel": _fmt(qvel)} if qvel else {})})
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def load_model(scene: Scene, options: MjcfOptions = MjcfOptions()):
    """(MjModel, MjData) of `scene`, the data reset to the initial keyframe."""
    mujoco = import_mujoco()
    model = mujoco.MjModel.from_xml_string(to_mjcf(scene, options))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_forward(model, data)
    return model, data


# -- timing ------------------------------------------------------------------
