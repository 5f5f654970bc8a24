"""Random scenes for checking the fused step kernels against the reference.

One builder, `build_random_scene(draws)`, makes every scene; `draws` is a
source of choices (`RandomDraws`: a seeded `random.Random`;
`HypothesisDraws`: a hypothesis `draw`, so examples shrink). `scenes()` is
the hypothesis strategy, `SMALL_SCENES` a fixed list of <= 3-body scenes
(chosen from seeded builds to cover every feature) for checks against the
slow-to-compile reference graph. Every scene uses the impulse contact model,
pyramid friction and `ITERATIONS` sweeps, so one compiled kernel serves all.

Sizes are multiples of 1/64 m and ground heights of 1/64 m, and resting
bodies take orientations whose rotation matrices are exact permutations, so
a body put on the ground (or a sphere on a resting body) has a gap of
exactly 0.0 in float64.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
from hypothesis import strategies as st

import symphys as sp
from symphys.physics import drives
from symphys.physics.algebra import quat_to_mat_array
from symphys.physics.contacts import contact_blocks
from symphys.physics.joints import articulated_bodies
from symphys.scene.elements import UNBOUNDED_TORQUE, MotorMode
from symphys.scene.scene import Scene

ITERATIONS = 4
SHAPES = ("sphere", "box", "capsule")
JOINT_TYPES = ("fixed", "hinge", "ball", "slider", "universal", "planar")
MOTOR_MODES = ("position", "velocity", "torque")
GRID = 1.0 / 64.0
# Orientations with exact 0/+-1 rotation matrices (axis permutations, flips).
REST_QUATERNIONS = ((1.0, 0.0, 0.0, 0.0), (0.5, 0.5, 0.5, 0.5), (0.5, -0.5, -0.5, -0.5),
                    (0.0, 1.0, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0), (0.0, 0.0, 0.0, 1.0))
_SUPPORTED = {("sphere", "sphere"), ("sphere", "box"), ("box", "sphere"),
              ("capsule", "sphere"), ("sphere", "capsule"), ("capsule", "capsule"),
              ("capsule", "box"), ("box", "capsule"), ("box", "box")}
# Geoms per generated scene, and contact pairs involving them.
MAX_GEOMS, MAX_GEOM_PAIRS = 2, 3
_AXES = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0),
         (-1.0, 0.0, 0.0), (0.0, -1.0, 0.0), (0.0, 0.0, -1.0))


class RandomDraws(random.Random):
    """Choices from a seeded `random.Random`: RandomDraws(seed); `uniform`
    and `choice` are random.Random's."""

    integer = random.Random.randint

    def chance(self, p):
        return self.random() < p


class HypothesisDraws:
    """The same choices from a hypothesis `draw` (shrinking to 'feature off')."""

    def __init__(self, draw):
        self.draw = draw

    def uniform(self, lo, hi):
        # Magnitudes below 1e-9 (hypothesis likes 5e-284) become 0: a
        # damping of 1e-284 N m s is no physical value, only an overflow.
        x = self.draw(st.floats(lo, hi, allow_nan=False, allow_infinity=False,
                                allow_subnormal=False))
        return 0.0 if abs(x) < 1e-9 and lo <= 0.0 <= hi else x

    def integer(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def chance(self, p):
        return self.draw(st.integers(0, 99)) >= 100 - round(100 * p)

    def choice(self, seq):
        return self.draw(st.sampled_from(list(seq)))


def _unit(v, fallback):
    n = math.sqrt(sum(x * x for x in v))
    return tuple(x / n for x in v) if n > 0.2 else fallback


def _half_height(shape: str, dims: dict, rot: np.ndarray) -> float:
    """Distance from the centre to the lowest point (world z) at rotation rot."""
    if shape == "sphere":
        return dims["radius"]
    if shape == "box":
        return float(sum(abs(rot[2, i]) * dims["size"][i] / 2 for i in range(3)))
    return abs(rot[2, 2]) * dims["length"] / 2 + dims["radius"]


def _random_quaternion(d):
    return d.choice(REST_QUATERNIONS) if d.chance(0.15) else _unit(
        [d.uniform(-1.0, 1.0) for _ in range(4)], REST_QUATERNIONS[0])


def _vector(d, scale, p_zero=0.3):
    return (0.0, 0.0, 0.0) if d.chance(p_zero) else tuple(
        d.uniform(-scale, scale) for _ in range(3))


def _zero_or(d, p_zero, lo, hi):
    """Exactly 0.0 with probability p_zero, else uniform in [lo, hi]."""
    return 0.0 if d.chance(p_zero) else d.uniform(lo, hi)


def _dims(d, shape: str, smaller: int) -> dict:
    """Random sizes of a `shape` (multiples of GRID), at most 1/smaller of a body's."""
    if shape == "sphere":
        return {"radius": d.integer(3 if smaller == 1 else 2, 32 // smaller) * GRID}
    if shape == "box":
        return {"size": [d.integer(3, 64 // smaller) * GRID for _ in range(3)]}
    return {"radius": d.integer(2, 16 // smaller) * GRID,
            "length": d.integer(3, 48 // smaller) * GRID}


def build_random_scene(d, max_bodies: int = 4, *, name: str = "random") -> Scene:
    """A valid random scene from the choices `d` (`RandomDraws` or
    `HypothesisDraws`); at most `max_bodies` bodies b0, b1, ..."""
    solver = {"iterations": ITERATIONS, "gyroscopic": d.chance(0.7),
              "restitution_threshold": _zero_or(d, 0.2, 0.0, 1.0)}
    if d.chance(0.3):
        solver["constraint_frequency"] = d.uniform(5.0, 60.0)
        solver["constraint_damping"] = d.uniform(0.0, 1.5)
    if d.chance(0.3):
        solver["position_feedback"] = d.uniform(0.0, 0.5)
    if d.chance(0.3):
        solver["velocity_damping"] = d.uniform(0.01, 5.0)
    gravity = (0.0, 0.0, -9.81)
    if d.chance(0.2):
        gravity = (0.0, 0.0, 0.0) if d.chance(0.5) else (
            d.uniform(-3, 3), d.uniform(-3, 3), d.uniform(-12, 0))
    b = sp.SceneBuilder(name, dt=d.uniform(0.002, 0.02), gravity=gravity, **solver)
    rolling = d.chance(0.4)
    ground = d.chance(0.85)
    height = d.integer(-16, 16) * GRID if ground else 0.0
    if ground:
        b.ground(height=height, friction=_zero_or(d, 0.1, 0.0, 1.5),
                 restitution=_zero_or(d, 0.3, 0.0, 0.9),
                 rolling_friction=_zero_or(d, 0.3, 0.0, 0.05) if rolling else 0.0)
    bodies = []             # (name, shape, dims, position, rotation, resting)
    for i in range(d.integer(1, max_bodies)):
        shape = d.choice(SHAPES)
        dims = _dims(d, shape, 1)
        bases = [x for x in bodies if x[5] and x[1] in ("sphere", "box")]
        mode = "free" if not ground else "stack" if (
            bases and d.chance(0.4)) else d.choice(
            ("free", "rest", "near", "air"))
        x = [i * 0.5 + d.uniform(-0.3, 0.3), d.uniform(-0.3, 0.3), 0.0]
        resting = mode in ("rest", "stack")
        quat = d.choice(REST_QUATERNIONS) if resting else _random_quaternion(d)
        rot = quat_to_mat_array(np.asarray(quat, float))
        if mode == "stack":
            base = d.choice(bases)
            x = [base[3][0], base[3][1], base[3][2] + _half_height(base[1], base[2], base[4])
                 + _half_height(shape, dims, rot)]
        elif mode == "free":
            x[2] = height + d.uniform(-0.3, 1.0)
        else:
            gap = (0.0 if mode == "rest" else d.uniform(-0.01, 0.03) if mode == "near"
                   else d.uniform(0.03, 0.5))
            x[2] = height + _half_height(shape, dims, rot) + gap
        still = resting and not d.chance(0.3)
        v = (0.0, 0.0, 0.0) if still else (
            (d.uniform(-1, 1), d.uniform(-1, 1), 0.0) if resting else _vector(d, 3.0))
        w = (0.0, 0.0, 0.0) if resting else _vector(d, 5.0)
        fields = dict(dims, mass=d.uniform(0.1, 10.0), position=x, quaternion=quat,
                      velocity=v, angular_velocity=w, friction=_zero_or(d, 0.1, 0.0, 1.5),
                      restitution=_zero_or(d, 0.3, 0.0, 0.9))
        if rolling:
            fields["rolling_friction"] = _zero_or(d, 0.3, 0.0, 0.05)
        if d.chance(0.25):
            # Moments of some other mass distribution: a box's, any proportions.
            a, c, e = (d.uniform(0.05, 0.6) ** 2 for _ in range(3))
            fields["inertia"] = [fields["mass"] / 12 * s for s in (c + e, a + e, a + c)]
        b.body(f"b{i}", shape, **fields)
        bodies.append((f"b{i}", shape, dims, x, rot, resting and still))

    joined = set()
    joints = []             # (name, type)
    for i, (child, _, _, xc, _, _) in enumerate(bodies):
        if not d.chance(0.45):
            continue
        parent = "world" if i == 0 or d.chance(0.4) else f"b{d.integer(0, i - 1)}"
        kind = d.choice(JOINT_TYPES)
        xp = xc if parent == "world" else bodies[int(parent[1:])][3]
        fields = {}
        if kind != "fixed" or d.chance(0.5):      # a fixed joint's default: the child's centre
            fields["anchor"] = [(p + c) / 2 + d.uniform(-0.2, 0.2) for p, c in zip(xp, xc)]
        if kind in ("hinge", "slider", "universal", "planar"):
            coordinate = d.chance(0.4)
            axis = d.choice(_AXES) if coordinate else _unit(
                [d.uniform(-1, 1) for _ in range(3)], _AXES[2])
            fields["axis"] = axis
            if kind == "universal":     # axis2: axis x (a random or a coordinate vector)
                ref = np.cross(axis, [d.uniform(-1, 1) for _ in range(3)])
                if coordinate or np.linalg.norm(ref) < 0.1:
                    ref = np.cross(axis, (1.0, 0.0, 0.0) if abs(axis[0]) < 0.5 else (0, 1, 0))
                fields["axis2"] = list(ref / np.linalg.norm(ref))
            elif kind != "planar" and d.chance(0.5):
                lo = d.uniform(-2.5, 0.3) if kind == "hinge" else d.uniform(-0.4, 0.05)
                fields["limits"] = [lo, lo + (d.uniform(0.05, 3.0) if kind == "hinge"
                                              else d.uniform(0.01, 0.6))]
        if kind == "ball" and d.chance(0.5):       # a cone on the turn's angle
            fields["limits"] = [0.0, d.uniform(0.02, 1.5)]
        if d.chance(0.25):
            fields["frequency"] = d.uniform(1.0, 30.0)
            if d.chance(0.7):
                fields["damping"] = d.uniform(0.0, 2.0)
        if kind in ("hinge", "slider"):
            for key in ("viscous_damping", "dry_friction", "armature"):
                if d.chance(0.3):
                    fields[key] = _zero_or(d, 0.2, 0.0, 2.0)
            if d.chance(0.25):
                fields["spring_stiffness"] = d.uniform(0.5, 50.0)
                fields["spring_reference"] = d.uniform(-0.3, 0.3)
        b.joint(f"j{len(joints)}", kind, parent, child, **fields)
        joints.append((f"j{len(joints)}", kind))
        joined.add(frozenset((parent, child)))

    n_motors = 0
    for joint, kind in joints:
        axes = (0, 1) if kind == "universal" else (0,) if kind in ("hinge", "slider") else ()
        for axis in axes:
            if not d.chance(0.5 if kind != "universal" else 0.4):
                continue
            fields = {"axis": axis} if kind == "universal" and (axis or d.chance(0.5)) else {}
            for key, lo, hi in (("gain", 0.5, 20.0), ("max_velocity", 0.2, 10.0),
                                ("max_torque", 0.05, 20.0)):
                if d.chance(0.8):
                    fields[key] = d.uniform(lo, hi)
            if d.chance(0.4):
                lo = d.uniform(-3.0, 1.0)
                fields["command_range"] = [lo, lo + d.uniform(0.1, 4.0)]
            mode = d.choice(MOTOR_MODES)
            if mode == "torque" and d.chance(0.5):
                fields["stiffness"] = _zero_or(d, 0.3, 0.0, 30.0)
                fields["damping"] = _zero_or(d, 0.3, 0.0, 3.0)
            b.motor(f"m{n_motors}", joint, mode, **fields)
            n_motors += 1

    candidates = [(x[0], "ground") for x in bodies if ground]
    candidates += [(p[0], q[0]) for k, p in enumerate(bodies) for q in bodies[k + 1:]
                   if (p[1], q[1]) in _SUPPORTED and frozenset((p[0], q[0])) not in joined]
    if d.chance(0.25):
        b.contacts("auto")
    else:
        pairs = [(q, p) if d.chance(0.3) else (p, q) for p, q in candidates if d.chance(0.7)]
        if d.chance(0.3):
            pairs += _random_geoms(d, b, bodies, ground, height, rolling)
        b.contacts(pairs)
    return b.build()


def _random_geoms(d, b, bodies, ground: bool, height: float, rolling: bool) -> list:
    """Up to `MAX_GEOMS` geoms, on bodies or on the world, near the bodies
    (added to the builder `b`), and up to `MAX_GEOM_PAIRS` contact pairs
    that involve them."""
    geoms = []              # (name, owner, shape)
    for k in range(d.integer(1, MAX_GEOMS)):
        owner = d.choice([x[0] for x in bodies] + ["world"])
        shape = d.choice(SHAPES)
        dims = _dims(d, shape, 2)
        near = bodies[d.integer(0, len(bodies) - 1)][3]
        x = [c + d.uniform(-0.3, 0.3) for c in near]
        if owner == "world":
            x[2] = max(x[2], height + d.uniform(-0.05, 0.3))
        fields = dict(dims, position=x, quaternion=_random_quaternion(d),
                      friction=_zero_or(d, 0.1, 0.0, 1.5), restitution=_zero_or(d, 0.3, 0.0, 0.9))
        if rolling:
            fields["rolling_friction"] = _zero_or(d, 0.3, 0.0, 0.05)
        b.geom(f"g{k}", owner, shape, **fields)
        geoms.append((f"g{k}", owner, shape))
    shape_of = {x[0]: x[1] for x in bodies}
    owner_of = {x[0]: x[0] for x in bodies}
    for name, owner, shape in geoms:
        shape_of[name], owner_of[name] = shape, owner
    pairs, seen = [], set()
    for name, owner, shape in geoms:
        if ground and owner != "world":
            pairs.append((name, "ground"))
        for other in list(shape_of):
            o_owner = owner_of[other]
            if other == name or o_owner == owner or frozenset((name, other)) in seen:
                continue
            seen.add(frozenset((name, other)))
            if "world" in (owner, o_owner):
                if owner == o_owner:
                    continue
                moving, fixed = (other, name) if owner == "world" else (name, other)
                if (shape_of[moving], shape_of[fixed]) in _SUPPORTED:
                    pairs.append((moving, fixed))
            elif (shape_of[name], shape_of[other]) in _SUPPORTED:
                pairs.append((name, other))
    chosen = [p for p in pairs if d.chance(0.6)]
    return chosen[:MAX_GEOM_PAIRS]


@st.composite
def scenes(draw, max_bodies: int = 4, name: str = "random"):
    """Hypothesis strategy of valid random scenes (see `build_random_scene`)."""
    return build_random_scene(HypothesisDraws(draw), max_bodies, name=name)


def scene_from_seed(seed: int, max_bodies: int = 4) -> Scene:
    return build_random_scene(RandomDraws(seed), max_bodies, name=f"seed{seed}")


# -- extra states and actions -------------------------------------------------
def random_state(scene: Scene, rng: np.random.Generator, batch: int | None = None) -> dict:
    """Parameter overrides {"<body>.position" | quaternion | velocity |
    angular_velocity: array} for a random state of `scene`: free bodies at
    random poses near (resting on, touching, above) the ground, jointed
    bodies near their initial pose; velocities sometimes exactly zero.
    batch: a leading axis of that many independent states."""
    if batch is not None:
        states = [random_state(scene, rng) for _ in range(batch)]
        return {k: np.stack([s[k] for s in states]) for k in states[0]}
    held = set(articulated_bodies(scene))
    height = scene.ground.height if scene.ground is not None else 0.0
    out = {}
    for i, body in enumerate(scene.bodies):
        x, q = np.array(body.position), np.array(body.quaternion)
        mode = rng.choice(["keep", "perturb"] if i in held else
                          ["keep", "rest", "near", "air", "spin"])
        if mode == "perturb":
            x = x + rng.normal(scale=0.02, size=3)
            q = q + rng.normal(scale=0.05, size=4)
        elif mode in ("rest", "near", "air"):
            q = (np.array(REST_QUATERNIONS[rng.integers(len(REST_QUATERNIONS))])
                 if mode == "rest" else rng.normal(size=4))
            gap = {"rest": 0.0, "near": rng.uniform(-0.01, 0.03),
                   "air": rng.uniform(0.03, 0.5)}[mode]
            q /= np.linalg.norm(q)
            lowest = _half_height(body.shape.value, vars(body), quat_to_mat_array(q))
            x = np.array([x[0] + rng.uniform(-0.2, 0.2), x[1] + rng.uniform(-0.2, 0.2),
                          height + lowest + gap])
        elif mode == "spin":
            q = rng.normal(size=4)
        still = mode == "rest" or rng.random() < 0.25
        out[f"{body.name}.position"] = x
        out[f"{body.name}.quaternion"] = q / np.linalg.norm(q)
        out[f"{body.name}.velocity"] = np.where(still, 0.0, rng.normal(scale=1.0, size=3))
        out[f"{body.name}.angular_velocity"] = np.where(still, 0.0, rng.normal(scale=2.0, size=3))
    return out


def command_range(scene: Scene, index: int) -> tuple[float, float]:
    """The range commands of motor `index` are clipped to, or the one its
    actions are drawn around when unbounded."""
    m = scene.motors[index]
    return drives.command_range(scene, index) or {
        MotorMode.POSITION: (-2.0, 2.0), MotorMode.VELOCITY: (-m.max_velocity, m.max_velocity),
        MotorMode.TORQUE: (-m.max_torque, m.max_torque)}[m.mode]


def random_action(scene: Scene, rng: np.random.Generator, batch: int | None = None):
    """Commands (M,) (or (batch, M)): inside and beyond each motor's command
    range, sometimes exactly 0 or exactly at a bound."""
    if batch is not None:
        return np.stack([random_action(scene, rng) for _ in range(batch)])
    out = np.zeros(len(scene.motors))
    for k in range(len(scene.motors)):
        lo, hi = command_range(scene, k)
        u = rng.random()
        out[k] = (0.0 if u < 0.15 else lo if u < 0.22 else hi if u < 0.3 else
                  rng.uniform(lo - 0.5 * (hi - lo), hi + 0.5 * (hi - lo)))
    return out


# -- coverage ------------------------------------------------------------------
def scene_features(scene: Scene) -> Counter:
    """What a scene exercises, as feature -> count (the generator's coverage)."""
    f = Counter()
    for block in contact_blocks(scene):
        if block.point == 0:
            f[f"contact:{block.kind.value}"] += len(block.a)
    f["contacts:none"] += not scene.contacts
    for g in scene.geoms:
        f["geom:world" if g.body == "world" else "geom:body"] += 1
    for c in scene.contacts:
        f["contact:geom"] += c.a in scene.geom_names or c.b in scene.geom_names
    for j in scene.joints:
        f[f"joint:{j.type.value}"] += 1
        f["joint:world-parent" if j.parent == "world" else "joint:body-parent"] += 1
        f[f"limits:{j.type.value}"] += j.limits is not None
        f["joint:soft"] += j.frequency is not None
        f["joint:drag"] += j.has_drag
        f["joint:armature"] += j.armature > 0
        f["joint:spring"] += j.spring_stiffness > 0
    for m in scene.motors:
        joint = scene.joints[scene.joint_names.index(m.joint)]
        f[f"motor:{m.mode.value}"] += 1
        f[f"motor-on:{joint.type.value}"] += 1
        f["motor:universal-axis1"] += m.axis == 1
        f["motor:command-range"] += m.command_range is not None
        f["motor:feedback"] += m.feedback
    s = scene.solver
    f["rolling" if scene.has_rolling_friction else "no-rolling"] += 1
    f["ground" if scene.ground is not None else "no-ground"] += 1
    f["soft-contacts"] += s.constraint_frequency is not None
    f["velocity-damping"] += s.velocity_damping > 0
    f["gyroscopic" if s.gyroscopic else "no-gyroscopic"] += 1
    f["zero-gravity"] += scene.gravity == (0.0, 0.0, 0.0)
    f["all-isotropic"] += all(b.isotropic for b in scene.bodies)
    grounded = {c.a for c in scene.contacts if c.b == "ground"}
    for body in scene.bodies:
        f[f"shape:{body.shape.value}"] += 1
        f["explicit-inertia"] += body.inertia is not None
        still = body.velocity == (0.0,) * 3 and body.angular_velocity == (0.0,) * 3
        f["still-body"] += still
        f["stacked"] += still and any(o.name != body.name and o.position[:2] == body.position[:2]
                                      for o in scene.bodies)
        if scene.ground is None or body.name not in grounded:
            continue
        rot = quat_to_mat_array(np.asarray(body.quaternion))
        gap = (body.position[2] - scene.ground.height
               - _half_height(body.shape.value, vars(body), rot))
        f["resting" if gap == 0.0 and still else "ground-gap<0" if gap < 0 else
          "ground-gap<5cm" if gap < 0.05 else "ground-gap>=5cm"] += 1
    return f


def contact_points(scene: Scene) -> int:
    """How many contact points the scene has (what makes its reference
    graph slow to compile)."""
    return sum(len(block.a) for block in contact_blocks(scene))


CHEAP = 16


def _cover(pool: list[Scene], count: int, want: int = 2) -> list[Scene]:
    """`count` scenes of `pool`: greedily those adding most missing features
    (up to `want` of each; of equal gains, the one with the fewest contact
    points), then the rest in order, those with at most `CHEAP` points first."""
    features = [{k: min(v, want) for k, v in scene_features(s).items() if v} for s in pool]
    points = [contact_points(s) for s in pool]
    have, chosen = Counter(), []
    while len(chosen) < count:
        gain = [-1 if i in chosen else sum(max(0, min(want, have[k] + v) - have[k])
                                           for k, v in features[i].items())
                for i in range(len(pool))]
        best = max(range(len(pool)), key=lambda i: (gain[i], -points[i], -i))
        if gain[best] <= 0:
            break
        chosen.append(best)
        have.update(features[best])
    rest = [i for i in range(len(pool)) if i not in chosen]
    rest = [i for i in rest if points[i] <= CHEAP] + [i for i in rest if points[i] > CHEAP]
    chosen += rest[:count - len(chosen)]
    return [pool[i] for i in sorted(chosen)]


# <= 3 bodies each, for checks against the (slow to compile) reference graph.
SMALL_SCENES = _cover([scene_from_seed(seed, max_bodies=3) for seed in range(150)], 32)


# -- two hand-built scenes with every feature the shipped scenes lack ----------
# (kf-joints: an explicit, bounded PD torque motor on a soft hinge and an
# implicit, unbounded one on a hinge with losses and limits)
def features_contacts():
    return (sp.SceneBuilder("kf-contacts", dt=0.005, iterations=6, constraint_frequency=40.0,
                            constraint_damping=0.8, velocity_damping=0.3)
            .ground(friction=0.8, restitution=0.3, rolling_friction=0.002)
            .box("crate", size=[0.3, 0.3, 0.2], mass=3.0, position=[0, 0, 0.1],
                 rolling_friction=0.001)
            .sphere("ball", radius=0.1, mass=0.5, position=[-0.05, 0.02, 0.32],
                    velocity=[0.3, 0.0, 0.0], friction=0.6, restitution=0.5)
            .capsule("rod", radius=0.05, length=0.3, mass=0.4, position=[0.4, 0, 0.06],
                     quaternion=[0.7071067811865476, 0, 0.7071067811865476, 0],
                     velocity=[-0.5, 0, 0])
            .sphere("pebble", radius=0.06, mass=0.2, position=[0.62, 0.0, 0.06],
                    velocity=[-0.8, 0.0, 0.0])
            .build())


def features_joints():
    axis = [np.cos(0.5), 0.0, -np.sin(0.5)]
    return (sp.SceneBuilder("kf-joints", dt=0.004, iterations=10).ground(friction=0.7)
            .box("slide", size=[0.2, 0.1, 0.1], mass=1.5, position=[0, 0, 1])
            .box("frame", size=[0.3, 0.2, 0.1], mass=2.0, position=[5, 0, 1],
                 velocity=[1.0, 0.5, 0.3], angular_velocity=[1.0, 2.0, -0.5])
            .sphere("knob", radius=0.1, mass=0.7, position=[5.25, 0, 1.05])
            .box("flap", size=[0.4, 0.05, 0.2], mass=1.0, position=[10.2, 0, 1])
            .capsule("top", radius=0.03, length=0.6, mass=0.8, position=[15, 0, 0.7])
            .box("hand", size=[0.1, 0.2, 0.4], mass=1.0, position=[20, 0, 0.8])
            .box("foot", size=[0.2, 0.2, 0.1], mass=1.0, position=[25, 0, 0.2])
            .joint("slider", "slider", "world", "slide", anchor=[0, 0, 1], axis=axis,
                   limits=[-0.05, 0.05], viscous_damping=2.0, dry_friction=0.5)
            .joint("weld", "fixed", "frame", "knob", anchor=[5.25, 0, 1.05])
            .joint("hinge", "hinge", "world", "flap", anchor=[10, 0, 1], axis=[0, 1, 0],
                   limits=[-0.5, 0.5], viscous_damping=0.3, dry_friction=0.2)
            .joint("socket", "ball", "world", "top", anchor=[15, 0, 1.0])
            .joint("wrist", "universal", "world", "hand", anchor=[20, 0, 1.0], axis=[1, 0, 0],
                   axis2=[0, 1, 0])
            .joint("ankle", "hinge", "world", "foot", anchor=[25, 0, 0.5], axis=[1, 0, 0],
                   frequency=8.0, damping=0.7)
            .motor("push", "slider", "velocity", gain=5.0, max_velocity=1.0, max_torque=30.0)
            .motor("roll", "wrist", "position", axis=0, gain=10.0, max_velocity=2.0,
                   max_torque=20.0)
            .motor("pitch", "wrist", "velocity", axis=1, gain=10.0, max_velocity=2.0,
                   max_torque=20.0)
            .motor("kick", "ankle", "torque", gain=40.0, stiffness=40.0, damping=0.5,
                   max_torque=4.0)
            .motor("tilt", "hinge", "torque", gain=5.0, stiffness=5.0, damping=0.2,
                   max_torque=UNBOUNDED_TORQUE, command_range=[-0.3, 0.3])
            .contacts([("foot", "ground")])
            .build())


FEATURES = {"kf-contacts": features_contacts, "kf-joints": features_joints}
