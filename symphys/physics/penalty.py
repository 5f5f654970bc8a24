"""Spring-damper contact: forces from the depth instead of solver rows.

The contact models PENALTY and SMOOTH (`SolverOptions.model`) replace the
impulse solver's contact rows by a force along the normal, applied for the
step before joints and servos are solved:

    PENALTY: f_n = max(k d - c v_n, 0) where the depth d = -gap > 0, else 0;
    SMOOTH:  f_n = max(k s softplus(d / s) - c v_n sigmoid(d / s), 0),

with stiffness k and damping c (parameters `solver.contact_stiffness`,
`solver.contact_damping`), the normal approach velocity v_n (negative when
closing) and the smooth model's length s (`contact_smoothing`): SMOOTH
pushes a little before bodies touch, so the force, and every gradient, is
smooth in the positions. A body at rest sinks by m g / k.

Friction is Coulomb's, on the two tangent directions at once: the impulse
that would stop the sliding (m_eff v_t per direction), scaled down to the
cone μ f_n dt when it is larger. With a stiction velocity v_s
(`SolverOptions.stiction_velocity` > 0) the cone shrinks to
μ f_n dt min(|v_t| / v_s, 1): friction rises linearly with the slip speed
up to v_s (regularised Coulomb friction; the stopping impulse still caps
it, so it never reverses the slip within a step). The bounce comes from
the damping alone: restitution and the time-of-impact correction belong
to the impulse model.
"""

from __future__ import annotations

import pytensor.tensor as pt

from symphys.physics.algebra import Vec3, safe_div, safe_norm, tangent_basis
from symphys.physics.contacts import STATIC, ContactBlock, ContactGeometry, Gather
from symphys.physics.geoms import OWN
from symphys.physics.model import WorldArrays
from symphys.physics.solver import Mobility, RowKind, _point_row
from symphys.scene.elements import ContactModel, SolverOptions


def normal_force(depth, approach_velocity, stiffness, damping, options: SolverOptions):
    """f_n >= 0 (B, K) from the depth d (B, K; > 0 when penetrating) and
    the normal velocity v_n (B, K; < 0 when closing)."""
    if options.model is ContactModel.PENALTY:
        push = stiffness * depth - damping * approach_velocity
        return pt.switch(depth > 0, pt.maximum(push, 0.0), 0.0)
    s = options.contact_smoothing
    x = depth / s
    push = stiffness * s * pt.softplus(x) - damping * approach_velocity * pt.sigmoid(x)
    return pt.maximum(push, 0.0)


def apply_contact(block: ContactBlock, geom: ContactGeometry, mob: Mobility, V, V_start,
                  world: WorldArrays, options: SolverOptions, dt: float, n_bodies: int):
    """V (B, N, 6) after one block's spring-damper and friction impulses.

    The spring-damper reads the state's velocities V_start (B, N, 6), from
    before this step's gravity: a body at rest then sinks by exactly m g / k
    (damping gravity's increment would hold it higher, or, when stiff, float
    it). Friction stops the sliding of V, the velocities after gravity."""
    ga = Gather(block.a, n_bodies)
    gb = None if block.b[0] == STATIC else Gather(block.b, n_bodies)
    normal = _point_row(RowKind.NORMAL, geom.normal, geom.ra, geom.rb, ga, gb, mob, 0.0)
    force = normal_force(-geom.gap, normal.velocity(V_start), world.contact_stiffness,
                         world.contact_damping, options)
    if gb is None and block.gb[0] == OWN:
        # the ground: its normal is z, its tangents x and y
        one, zero = pt.constant(1.0), pt.constant(0.0)
        tangents = (Vec3(one, zero, zero), Vec3(zero, one, zero))
    else:
        tangents = tangent_basis(geom.normal)
    rows = [_point_row(RowKind.FRICTION, t, geom.ra, geom.rb, ga, gb, mob, 0.0)
            for t in tangents]
    stop = [-row.m_eff * row.velocity(V) for row in rows]       # impulses that stop sliding
    size = safe_norm(Vec3(stop[0], stop[1], pt.constant(0.0)))
    limit = geom.friction * force * dt
    if options.stiction_velocity > 0:
        # The slip speed at the start of the step, like the normal force's.
        slip = safe_norm(Vec3(rows[0].velocity(V_start), rows[1].velocity(V_start),
                              pt.constant(0.0)))
        limit = limit * pt.minimum(slip / options.stiction_velocity, 1.0)
    scale = pt.switch(size > limit, safe_div(limit, size), 1.0)
    V = normal.apply(V, force * dt)
    for row, impulse in zip(rows, stop):
        V = row.apply(V, impulse * scale)
    return V
