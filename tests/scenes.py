"""Small test scenes, built with the Python builder.

Each scene's structure (shapes, contacts, dt, solver options) is fixed so
one compiled function per scene serves every test that uses it; tests vary
parameters (positions, velocities, gravity, ground height), not structure.
"""

import numpy as np

import symphys as sp

# Analytic tests run on numba, the default backend (loops interpreted:
# tests/conftest.py). test_backends holds it to JAX and the C VM.
BACKEND = "numba"


def scene_doc(**body):
    """A scene file's content: one sphere on the ground, its fields
    replaced or added by `body`."""
    base = {"name": "b", "shape": "sphere", "radius": 0.1, "mass": 1.0,
            "position": [0, 0, 1]}
    base.update(body)
    return {"format": "symphys-scene/1", "name": "t", "dt": 0.01,
            "ground": {"friction": 0.5}, "bodies": [base]}


def flight():
    """One sphere, no ground, no contacts: free flight and spin."""
    return (sp.SceneBuilder("flight", dt=0.002, iterations=1)
            .sphere("ball", radius=0.1, mass=1.0, position=[0, 0, 1.1]).build())


def drop():
    """One sphere above the ground (stiff contacts)."""
    return (sp.SceneBuilder("drop", dt=0.002, iterations=1).ground(friction=0.5)
            .sphere("ball", radius=0.1, mass=1.0, position=[0, 0, 1.1]).build())


def box(iterations: int = 8):
    """One box on the ground."""
    return (sp.SceneBuilder("box", dt=0.002, iterations=iterations).ground(friction=0.5)
            .box("crate", size=[0.2, 0.2, 0.2], mass=2.0, position=[0, 0, 0.1]).build())


def pair():
    """Two spheres, no ground: head-on collisions."""
    return (sp.SceneBuilder("pair", dt=0.002, iterations=1, gravity=(0, 0, 0))
            .sphere("a", radius=0.1, mass=1.0, position=[-0.5, 0, 0], velocity=[2, 0, 0],
                    restitution=0.6)
            .sphere("b", radius=0.15, mass=3.0, position=[0.5, 0, 0], velocity=[-1, 0, 0],
                    restitution=0.6)
            .build())


def mixed():
    """Sphere, box and capsule on the ground, touching each other: every
    contact kind (sphere/box/capsule-ground, sphere-box, capsule-sphere,
    sphere-sphere)."""
    return (sp.SceneBuilder("mixed", dt=0.005, iterations=1).ground(friction=0.8, restitution=0.1)
            .box("crate", size=[0.3, 0.3, 0.2], mass=3.0, position=[0, 0, 0.1])
            .sphere("ball", radius=0.1, mass=0.5, position=[-0.05, 0.02, 0.32],
                    velocity=[0.3, 0.0, 0.0], friction=0.6)
            .capsule("rod", radius=0.05, length=0.3, mass=0.4, position=[0.4, 0, 0.06],
                     quaternion=[0.7071067811865476, 0, 0.7071067811865476, 0],
                     velocity=[-0.5, 0, 0])
            .sphere("pebble", radius=0.06, mass=0.2, position=[0.62, 0.0, 0.06],
                    velocity=[-0.8, 0.0, 0.0])
            .build())


def rod():
    """A capsule lying on the ground (two end-sphere contacts)."""
    return (sp.SceneBuilder("rod", dt=0.002, iterations=1).ground(friction=0.3)
            .capsule("rod", radius=0.05, length=0.4, mass=1.0, position=[0, 0, 0.05],
                     quaternion=[0.7071067811865476, 0, 0.7071067811865476, 0])
            .build())


def knock():
    """A sphere strikes a free box off-centre (no gravity, no ground): the
    sphere-box contact alone."""
    return (sp.SceneBuilder("knock", dt=0.005, iterations=1, gravity=(0, 0, 0))
            .box("crate", size=[0.4, 0.3, 0.2], mass=2.0, position=[0, 0, 0],
                 friction=0.5, restitution=0.4)
            .sphere("ball", radius=0.1, mass=0.5, position=[-0.6, 0.07, 0.03],
                    velocity=[2.0, 0.0, 0.0], friction=0.5, restitution=0.3)
            .contacts([("ball", "crate")])
            .build())


# -- articulated scenes -------------------------------------------------------
ROD_LENGTH = 1.0


def pendulum():
    """A capsule hinged to the world at its top end, with a position servo
    on the hinge (its `pivot.max_torque` parameter set to 0 frees it)."""
    half = ROD_LENGTH / 2
    return (sp.SceneBuilder("pendulum", dt=0.001, iterations=8)
            .capsule("rod", radius=0.02, length=ROD_LENGTH, mass=1.0, position=[0, 0, -half])
            .joint("pivot", "hinge", "world", "rod", anchor=[0, 0, 0], axis=[0, 1, 0])
            .motor("servo", "pivot", "position", gain=10.0, max_velocity=2.0, max_torque=3.0)
            .build())


def double_pendulum(theta1: float = 0.6, theta2: float = -0.4):
    """Two boxes hinged about y, hanging from the world, released at angles
    theta1, theta2 (absolute, from straight down; x = d sin(theta))."""
    length, width = 0.5, 0.05
    builder = sp.SceneBuilder("double-pendulum", dt=0.0001, iterations=20, gravity=(0, 0, -9.81))
    elbow = np.array([length * np.sin(theta1), 0.0, -length * np.cos(theta1)])
    for name, theta, top in (("upper", theta1, np.zeros(3)), ("lower", theta2, elbow)):
        down = np.array([np.sin(theta), 0.0, -np.cos(theta)])
        # Box long axis along body z; rotation about y by -theta takes -z to `down`.
        quat = [np.cos(-theta / 2), 0.0, np.sin(-theta / 2), 0.0]
        builder.box(name, size=[width, width, length], mass=1.0 if name == "upper" else 0.6,
                    position=top + down * length / 2, quaternion=quat)
    return (builder.joint("shoulder", "hinge", "world", "upper", anchor=[0, 0, 0], axis=[0, 1, 0])
            .joint("elbow", "hinge", "upper", "lower", anchor=elbow, axis=[0, 1, 0])
            .build())


def chain(links: int = 5):
    """A chain of capsules joined by ball joints, hanging from the world by
    a hinge, released from horizontal (along x)."""
    length = 0.3
    builder = sp.SceneBuilder("chain", dt=0.002, iterations=20)
    quat = [np.cos(np.pi / 4), 0.0, np.sin(np.pi / 4), 0.0]   # body z along world x
    for i in range(links):
        builder.capsule(f"link{i}", radius=0.03, length=length, mass=0.5,
                        position=[(i + 0.5) * length, 0, 0], quaternion=quat)
    builder.joint("j0", "hinge", "world", "link0", anchor=[0, 0, 0], axis=[0, 1, 0])
    for i in range(1, links):
        builder.joint(f"j{i}", "ball", f"link{i - 1}", f"link{i}", anchor=[i * length, 0, 0])
    return builder.build()


SLIDE_ANGLE = np.radians(30.0)
FLAP_LIMITS = (-0.5, 0.5)


def gadgets():
    """Four independent mechanisms in one scene (one compile), no ground:

    slide: a box on a frictionless slider to the world, axis 30 degrees below
      horizontal; pair: a box welded to a sphere (fixed joint), thrown
      spinning; flap: a box hinged to the world at one edge, limits +-0.5
      rad; top: a capsule on a ball joint to the world (spherical pendulum).
    """
    axis = [np.cos(SLIDE_ANGLE), 0.0, -np.sin(SLIDE_ANGLE)]
    tilt = [np.cos(np.pi / 8), np.sin(np.pi / 8), 0.0, 0.0]   # 45 degrees about x
    return (sp.SceneBuilder("gadgets", dt=0.002, iterations=8)
            .box("slide", size=[0.2, 0.1, 0.1], mass=1.5, position=[0, 0, 0])
            .box("frame", size=[0.3, 0.2, 0.1], mass=2.0, position=[5, 0, 0],
                 velocity=[1.0, 0.5, 3.0], angular_velocity=[1.0, 2.0, -0.5])
            .sphere("knob", radius=0.1, mass=0.7, position=[5.25, 0, 0.05],
                    velocity=[1.1, 0.325, 2.5],   # frame's v + w x (0.25, 0, 0.05)
                    angular_velocity=[1.0, 2.0, -0.5])
            .box("flap", size=[0.4, 0.05, 0.2], mass=1.0, position=[10.2, 0, 0])
            .capsule("top", radius=0.03, length=0.6, mass=0.8,
                     position=[15, 0.3 * np.sin(np.pi / 4), -0.3 * np.cos(np.pi / 4)],
                     quaternion=tilt, angular_velocity=[0.0, 0.0, 3.0])
            .joint("slider", "slider", "world", "slide", anchor=[0, 0, 0], axis=axis)
            .joint("weld", "fixed", "frame", "knob", anchor=[5.25, 0, 0.05])
            .joint("hinge", "hinge", "world", "flap", anchor=[10, 0, 0], axis=[0, 1, 0],
                   limits=list(FLAP_LIMITS))
            .joint("socket", "ball", "world", "top", anchor=[15, 0, 0])
            .contacts([])
            .build())


def servo_pendulum():
    """The pendulum with sensors for a controller: joint angle and rate,
    the rod's position, time features and a 1-D target."""
    half = ROD_LENGTH / 2
    return (sp.SceneBuilder("servo-pendulum", dt=0.01, iterations=4)
            .capsule("rod", radius=0.02, length=ROD_LENGTH, mass=1.0, position=[0, 0, -half])
            .joint("pivot", "hinge", "world", "rod", anchor=[0, 0, 0], axis=[0, 1, 0])
            .motor("servo", "pivot", "position", gain=10.0, max_velocity=2.0, max_torque=3.0)
            .sensor("joint_angle", joint="pivot").sensor("joint_rate", joint="pivot")
            .sensor("position", body="rod").sensor("time", frequencies=[1.0])
            .sensor("target", size=1)
            .build())


def wrist():
    """A box hanging from the world on a universal joint (axis x, then the
    box's own y), a position servo on each axis; no ground."""
    return (sp.SceneBuilder("wrist", dt=0.005, iterations=10)
            .box("hand", size=[0.1, 0.2, 0.4], mass=1.0, position=[0, 0, -0.2])
            .joint("wrist", "universal", "world", "hand", anchor=[0, 0, 0], axis=[1, 0, 0],
                   axis2=[0, 1, 0])
            .motor("roll", "wrist", "position", axis=0, gain=10.0, max_velocity=2.0,
                   max_torque=20.0)
            .motor("pitch", "wrist", "position", axis=1, gain=10.0, max_velocity=2.0,
                   max_torque=20.0)
            .contacts([])
            .build())
