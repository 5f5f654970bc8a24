"""One simulation step, a pure function state -> state.

1. external forces: v += dt g; gyroscopic torque on w (optional);
2. contact rows at the current pose; projected Gauss-Seidel impulses
   (with a penalty contact model, `symphys.physics.penalty`'s spring-damper
   impulses instead of contact rows);
3. x += dt v; R <- renormalise(exp(dt [w]x) R) (the exact rotation by dt w,
   `rotate_by`: a first-order R + dt [w]x R gained energy on a bar spinning
   at 20 rad/s with dt 0.01 s and diverged within 3 s), where a body whose first
   contact of the step closes only after a fraction tau of it moves with its
   pre-impulse velocity for that fraction (time-of-impact correction: the
   landing time, and with it the final state, varies continuously with the
   initial conditions instead of in whole steps).
Every state component is (B, N).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt

from symphys.physics import newton
from symphys.physics.algebra import Vec3, cross, matTvec, matvec, renormalise, rotate_by
from symphys.physics.contacts import STATIC, ContactBlock, Gather, contact_geometry
from symphys.physics.geoms import GeomArrays
from symphys.physics.drives import drag_rows, motor_rows
from symphys.physics.joints import JointBlock, JointFrames, MotorArrays, MotorBlock, joint_rows
from symphys.physics.model import BodyArrays, State, WorldArrays
from symphys.physics.penalty import apply_contact
from symphys.physics.solver import (approach, contact_rows, mobility, solve, velocity_components,
                                    velocity_matrix)
from symphys.scene.elements import SolverMethod
from symphys.scene.scene import Scene


@dataclass(frozen=True)
class StepModel:
    """Everything a step needs besides the state (built outside the loop).

    action: (B, M) motor commands for this step (required when the scene
    has motors; `rollout` supplies zeros when none are given)."""

    scene: Scene
    bodies: BodyArrays
    world: WorldArrays
    blocks: tuple[ContactBlock, ...]
    joint_blocks: tuple[JointBlock, ...] = ()
    motor_blocks: tuple[MotorBlock, ...] = ()
    frames: JointFrames | None = None
    motors: MotorArrays | None = None
    action: object = None
    articulated: tuple[int, ...] = ()   # bodies held by joints
    drag_blocks: tuple[JointBlock, ...] = ()   # hinges and sliders with a drag row
    geoms: GeomArrays | None = None           # the scene's geoms (None: none)

    @property
    def n_bodies(self) -> int:
        return len(self.scene.bodies)


def apply_forces(model: StepModel, state: State) -> tuple[Vec3, Vec3]:
    """Velocities after the drag, gravity and (optionally) the gyroscopic
    torque."""
    dt = model.scene.dt
    g = model.world.gravity
    v, w = state.velocity, state.angular_velocity
    if model.world.velocity_damping is not None:
        keep = 1.0 - model.world.velocity_damping * dt
        v, w = v.scale(keep), w.scale(keep)
    v = Vec3(v.x + dt * g.x, v.y + dt * g.y, v.z + dt * g.z)
    # w x (I w) vanishes for isotropic bodies (spheres): skip it when all are.
    isotropic = bool(model.bodies.isotropic) and all(model.bodies.isotropic)
    if model.scene.solver.gyroscopic and not isotropic:
        inertia, inv_i = model.bodies.inertia, model.bodies.inv_inertia
        wb = matTvec(state.rotation, w)
        torque = cross(wb, Vec3(inertia.x * wb.x, inertia.y * wb.y, inertia.z * wb.z))
        dwb = Vec3(-dt * torque.x * inv_i.x, -dt * torque.y * inv_i.y,
                   -dt * torque.z * inv_i.z)
        w = w + matvec(state.rotation, dwb)
    return v, w


def body_impact_fraction(model: StepModel, taus, like):
    """Per body, the fraction of the step before its first contact closes:
    the minimum of its contacts' fractions (1 for a free body touching
    nothing; 0 for a body held by a joint).
    A body appears at most once per block, so scattering (1 - tau) into zeros
    per block and taking the maximum over blocks gives 1 - min(tau).
    like: any (B, N) tensor; returns (B, N)."""
    late = None
    zeros = pt.zeros_like(like)
    for block, tau in zip(model.blocks, taus):
        sides = [block.a] if block.b[0] == STATIC else [block.a, block.b]
        for index in sides:
            part = Gather(index, model.n_bodies).add(zeros, 1.0 - tau)
            late = part if late is None else pt.maximum(late, part)
    tau = 1.0 - late
    # Bodies held by joints move with their solved velocity: their joint and
    # servo impulses come out of the same solve as the contact impulses, and
    # the pre-impulse velocity would leave them out (a jointed body touching
    # nothing would coast through the step as if its joints were not there).
    if model.articulated:
        tau = pt.set_subtensor(tau[:, np.asarray(model.articulated)], 0.0)
    return tau


def articulation_rows(model: StepModel, state: State, mob, V):
    """(rows, V): joint, limit, joint-friction and servo rows at the current
    pose, in the order the solver sweeps them, and the velocities V
    (B, N, 6) after direct-torque motors' impulses. The joints' drift
    correction reads the velocities before those impulses: a motor's
    impulse on a light link is taken back by its joint in the same solve,
    and the drift of the free spin it would give breaks the joint.

    Servo rows go last, so that when the sweeps stop a servo's rate and
    torque limits hold exactly; joint rows go before them, in reverse block
    order. On the A3 arm (20 sweeps) servos swept first turned at up to
    2.1 rad/s against their 0.79 rad/s limit; in this order, 0.79."""
    scene, dt = model.scene, model.scene.dt
    _, w = velocity_components(V)
    servos = []
    for block in model.motor_blocks:
        row, impulse = motor_rows(block, scene, model.frames, model.motors, mob, state,
                                  model.action, dt)
        if impulse is None:
            servos.append(row)
        else:
            V = row.apply(V, impulse)
    frictions = [row for block in model.drag_blocks
                 for row in drag_rows(block, scene, model.frames, model.motors, mob,
                                      state, model.action)]
    rows = []
    if model.joint_blocks:
        for block in model.joint_blocks:
            rows += joint_rows(block, scene, model.frames, mob, state, w,
                               scene.solver.position_feedback, dt)
    return rows[::-1] + frictions + servos[::-1], V


def step(model: StepModel, state: State) -> State:
    """Advance every world by one time step dt."""
    scene = model.scene
    options = scene.solver
    v, w = apply_forces(model, state)
    v_move, w_move = v, w
    if model.blocks or model.joint_blocks or model.motor_blocks:
        mob = mobility(model.bodies, state.rotation)
        rows, V = articulation_rows(model, state, mob, velocity_matrix(v, w))
        shared: dict = {}
        geometry = [contact_geometry(block, model.bodies, model.world, state.position,
                                     state.rotation, model.n_bodies, shared, model.geoms)
                    for block in model.blocks]
        if options.penalty:
            # Spring-dampers: impulses now, no contact rows (symphys.physics.penalty).
            start = velocity_matrix(state.velocity, state.angular_velocity)
            for block, geom in zip(model.blocks, geometry):
                V = apply_contact(block, geom, mob, V, start, model.world, options, scene.dt,
                                  model.n_bodies)
            geometry = []
        pre = [approach(block, geom, mob, V, scene.dt, model.n_bodies)
               for block, geom in zip(model.blocks, geometry)]
        tau = body_impact_fraction(model, [p.tau for p in pre], v.x) if pre else 0.0
        # Contacts first: the servos' limits should hold after the last sweep.
        rows = [contact_rows(p, tau, mob, options, model.world.constraint_frequency,
                             model.world.constraint_damping, scene.dt)
                for p in pre] + rows
        v_free, w_free = velocity_components(V)
        if rows:
            if options.method is SolverMethod.NEWTON:
                acting = [(p.geom.gap <= 0) | p.reaches for p in pre]
                V = newton.solve(rows, acting, V, mob, options.newton_iterations,
                                 options.bound_softness)
            else:
                V = solve(rows, V, options.iterations, options.friction_model)
        v, w = velocity_components(V)
        v_move, w_move = v, w
        if pre:
            v_move = Vec3(*(a + tau * (b - a) for a, b in zip(v, v_free)))
            w_move = Vec3(*(a + tau * (b - a) for a, b in zip(w, w_free)))
    dt = scene.dt
    position = state.position + v_move.scale(dt)
    rotation = rotate_by(w_move.scale(dt), state.rotation)
    rotation = renormalise(rotation, options.renormalisation_iterations)
    return State(position, rotation, v, w)
