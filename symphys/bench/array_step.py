"""A sphere step written the plain way, for measuring symphys' rewrites.

The engine itself holds 3-vectors and 3x3 matrices as components
(`symphys.physics.algebra`). Users' own model code usually does not: this module is
such code, a toy step of N spheres on a plane written with (B, N, 3)
vectors, (B, N, 3, 3) rotations, matrix products, cross products built by
stacking, and sums over the last axis (the toy scene: gravity, a
penalty-free velocity-level ground contact with a few friction sweeps, and
the rotation update R <- renormalise(R + dt skew(w) R)). `symphys bench`
compiles it with the rewrites on and off; tests check both give the same
numbers.

Shapes: position, velocity, angular_velocity (B, N, 3); rotation
(B, N, 3, 3).
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt

from symphys.compiler.backends import loop_mode

DT = 0.005
RADIUS = 0.1
FRICTION = 0.5
SWEEPS = 4
GRAVITY = (0.0, 0.0, -9.81)


def cross(a, b):
    """a x b over the last axis: (..., 3), (..., 3) -> (..., 3)."""
    return pt.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
                     a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                     a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)


def skew(w):
    """(..., 3) -> (..., 3, 3) with skew(w) @ v = w x v."""
    zero = pt.zeros_like(w[..., 0])
    return pt.stack([pt.stack([zero, -w[..., 2], w[..., 1]], axis=-1),
                     pt.stack([w[..., 2], zero, -w[..., 0]], axis=-1),
                     pt.stack([-w[..., 1], w[..., 0], zero], axis=-1)], axis=-2)


def normalise(v):
    return v / pt.sqrt((v * v).sum(-1, keepdims=True))


def orthonormalise(rot):
    """Gram-Schmidt on the rows of (..., 3, 3) rotations."""
    r0 = normalise(rot[..., 0, :])
    r1 = rot[..., 1, :] - (rot[..., 1, :] * r0).sum(-1, keepdims=True) * r0
    r1 = normalise(r1)
    return pt.stack([r0, r1, cross(r0, r1)], axis=-2)


def step(position, rotation, velocity, angular_velocity):
    """One step of the toy scene: (state) -> (state)."""
    up = pt.constant(np.array([0.0, 0.0, 1.0]))
    velocity = velocity + DT * pt.constant(np.array(GRAVITY))
    lever = -RADIUS * up                                     # contact point, body to ground
    touching = pt.lt(position[..., 2], RADIUS + 1e-3)[..., None]
    for _ in range(SWEEPS):
        point_velocity = velocity + cross(angular_velocity, lever)
        normal_speed = (point_velocity * up).sum(-1, keepdims=True)
        push = pt.switch(touching, pt.maximum(-normal_speed, 0.0), 0.0)
        velocity = velocity + push * up
        point_velocity = velocity + cross(angular_velocity, lever)
        slip = point_velocity - (point_velocity * up).sum(-1, keepdims=True) * up
        limit = FRICTION * push
        slip_speed = pt.sqrt((slip * slip).sum(-1, keepdims=True) + 1e-12)
        impulse = -slip * pt.minimum(1.0, limit / slip_speed) / 3.5    # sphere: 1 + 5/2
        impulse = pt.switch(touching, impulse, 0.0)
        velocity = velocity + impulse
        angular_velocity = angular_velocity + 2.5 / RADIUS ** 2 * cross(lever, impulse)
    position = position + DT * velocity
    rotation = orthonormalise(rotation + DT * skew(angular_velocity) @ rotation)
    return position, rotation, velocity, angular_velocity


def rollout(position, rotation, velocity, angular_velocity, steps: int):
    """Final state after `steps` steps (a scan over `step`)."""
    outs = pytensor.scan(lambda *s: list(step(*s)),
                         outputs_info=[position, rotation, velocity, angular_velocity],
                         n_steps=steps, return_updates=False, mode=loop_mode(),
                         name="array_step")
    return [o[-1] for o in outs]


def inputs():
    """Symbolic (position, rotation, velocity, angular_velocity)."""
    return [pt.tensor("position", shape=(None, None, 3)),
            pt.tensor("rotation", shape=(None, None, 3, 3)),
            pt.tensor("velocity", shape=(None, None, 3)),
            pt.tensor("angular_velocity", shape=(None, None, 3))]


def initial_state(batch: int, n: int, seed: int = 0) -> list[np.ndarray]:
    """Spheres dropped from 0.1-0.5 m with sideways speeds, (B, N, ...)."""
    rng = np.random.default_rng(seed)
    position = rng.uniform(-1, 1, size=(batch, n, 3))
    position[..., 2] = rng.uniform(RADIUS + 0.01, 0.5, size=(batch, n))
    velocity = rng.normal(scale=0.5, size=(batch, n, 3))
    rotation = np.broadcast_to(np.eye(3), (batch, n, 3, 3)).copy()
    return [position, rotation, velocity, np.zeros((batch, n, 3))]


def loss(final) -> object:
    """Sum of every final state entry (nothing is dropped as unused)."""
    return sum(f.sum() for f in final)
