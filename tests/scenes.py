"""Small test scenes, built with the Python builder.

Each scene's structure (shapes, contacts, dt, solver options) is fixed so
one compiled function per scene serves every test that uses it; tests vary
parameters (positions, velocities, gravity, ground height), not structure.
"""

import symphys as sp

BACKEND = "numba"


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
