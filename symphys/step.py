"""One simulation step, a pure function state -> state.

1. external forces: v += dt g; gyroscopic torque on w (optional);
2. contact rows at the current pose; projected Gauss-Seidel impulses;
3. x += dt v; R <- renormalise(R + dt [w]x R).
Every state component is (B, N).
"""

from __future__ import annotations

from dataclasses import dataclass

from symphys.algebra import Vec3, add_mat, cross, matTvec, matvec, renormalise, skew_times
from symphys.contacts import ContactBlock, contact_geometry
from symphys.model import BodyArrays, State, WorldArrays
from symphys.scene import Scene
from symphys.solver import contact_rows, solve


@dataclass(frozen=True)
class StepModel:
    """Everything a step needs besides the state (built outside the loop)."""

    scene: Scene
    bodies: BodyArrays
    world: WorldArrays
    blocks: tuple[ContactBlock, ...]

    @property
    def n_bodies(self) -> int:
        return len(self.scene.bodies)


def apply_forces(model: StepModel, state: State) -> tuple[Vec3, Vec3]:
    """Velocities after gravity and (optionally) the gyroscopic torque."""
    dt = model.scene.dt
    g = model.world.gravity
    v = Vec3(state.velocity.x + dt * g.x, state.velocity.y + dt * g.y,
             state.velocity.z + dt * g.z)
    w = state.angular_velocity
    if model.scene.solver.gyroscopic:
        inertia, inv_i = model.bodies.inertia, model.bodies.inv_inertia
        wb = matTvec(state.rotation, w)
        torque = cross(wb, Vec3(inertia.x * wb.x, inertia.y * wb.y, inertia.z * wb.z))
        dwb = Vec3(-dt * torque.x * inv_i.x, -dt * torque.y * inv_i.y,
                   -dt * torque.z * inv_i.z)
        w = w + matvec(state.rotation, dwb)
    return v, w


def step(model: StepModel, state: State) -> State:
    """Advance every world by one time step dt."""
    scene = model.scene
    options = scene.solver
    v, w = apply_forces(model, state)
    rows = []
    for block in model.blocks:
        geom = contact_geometry(block, model.bodies, model.world, state.position,
                                state.rotation, model.n_bodies)
        rows.append(contact_rows(block, geom, model.bodies, state.rotation, v, w,
                                 options, model.world.constraint_frequency,
                                 model.world.constraint_damping, scene.dt,
                                 model.n_bodies))
    if rows:
        v, w = solve(rows, v, w, options.iterations, options.friction_model)
    dt = scene.dt
    position = state.position + v.scale(dt)
    rotation = add_mat(state.rotation, skew_times(w.scale(dt), state.rotation))
    rotation = renormalise(rotation, options.renormalisation_iterations)
    return State(position, rotation, v, w)
