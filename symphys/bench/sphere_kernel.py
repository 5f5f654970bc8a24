"""A hand-written Numba kernel of sphere-on-ground scenes (`spheres16`):
the practical speed limit `symphys bench` compares the engine's forward
rollout with.

It repeats `symphys.physics.step.step` for scenes made only of spheres whose only
contacts are with the ground, as plain scalar loops over worlds, spheres and
steps (no PyTensor). Each sphere touches nothing but the ground, so every
sphere is simulated on its own, its state kept in registers for all steps.
Per step and sphere, as the engine does:

1. v += dt g (spheres are isotropic: the gyroscopic torque w x (I w) is 0);
2. ground contact at the lowest point (lever arm (0, 0, -r), normal z,
   tangents x and y): gap, approach speed vn0 = v_z, impact fraction tau;
   normal target from position feedback (penetrating), the time-of-impact
   rule (closing within the step) or the gap (not reaching), raised to the
   restitution bounce -e ramp vn0 when it hits; soft rows when the scene
   sets a constraint frequency;
3. `iterations` projected Gauss-Seidel sweeps: normal row (impulse >= 0),
   then friction (pyramid: x then y, each clamped to mu lambda_n; cone: both
   scaled into the circle), accumulated impulses clamped;
4. x += dt v_move, R <- renormalise(exp(dt [w_move]x) R), with
   v_move = v + tau (v_free - v) (the pre-impulse velocity for the fraction
   of the step before the contact closes).

Materials combine as in the engine: mu = sqrt(mu_body mu_ground),
e = max(e_body, e_ground). Expressions follow the engine's order of
operations, so results agree with `symphys.api.simulate` to round-off.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from symphys.errors import ParameterError, SceneError
from symphys.physics.algebra import EPS, quat_to_mat_array
from symphys.scene.elements import FrictionModel, Shape
from symphys.scene.params import parameter_shapes, resolve_values
from symphys.scene.reader import GROUND
from symphys.scene.scene import Scene

STATE_FIELDS = ("position", "velocity", "angular_velocity", "quaternion")


class SphereConstants(NamedTuple):
    """What the kernel reads besides the state: per-sphere arrays (N,) and
    scene-wide scalars. Build it with `prepare`."""

    inv_mass: np.ndarray         # (N,) 1 / m
    inv_inertia: np.ndarray      # (N,) 1 / (0.4 m r^2)
    radius: np.ndarray           # (N,)
    friction: np.ndarray         # (N,) combined with the ground's
    restitution: np.ndarray      # (N,) combined with the ground's
    contact: np.ndarray          # (N,) bool: the sphere has a ground contact pair
    m_tangent: np.ndarray        # (N,) effective mass of a friction row
    gamma: np.ndarray            # (N,) softness of a penetrating contact (0: stiff)
    m_soft_pen: np.ndarray       # (N,) normal row's (softened) mass when penetrating
    m_soft_free: np.ndarray      # (N,) ... when not (1 / (1/m) for stiff rows)
    gravity: np.ndarray          # (3,)
    ground_height: float
    dt: float
    beta: float                  # position feedback (stiff) or soft beta
    restitution_threshold: float
    iterations: int
    cone: bool                   # friction cone (else pyramid)
    renormalisation_iterations: int


def _safe_div(num, den):
    return num / den if abs(den) > EPS else 0.0


def check_scene(scene: Scene) -> None:
    """Raise `SceneError` naming the first thing in `scene` the kernel does
    not model: penalty contact, joints, motors, non-sphere bodies, contacts
    other than sphere-ground, rolling friction."""
    src = scene.source
    why = "is not modelled by the sphere kernel (symphys.bench.sphere_kernel)"
    if scene.solver.penalty:
        raise SceneError(f"contact model '{scene.solver.model.value}' {why}; it runs the "
                         f"impulse solver", source=src, item="solver", field="model")
    if scene.solver.velocity_damping > 0:
        raise SceneError(f"velocity damping {why}", source=src, item="solver",
                         field="velocity_damping")
    if scene.joints:
        j = scene.joints[0]
        raise SceneError(f"{j.type.value} joint {why}; it simulates free spheres only",
                         source=src, item=f"joint '{j.name}'", field="joints")
    if scene.motors:
        m = scene.motors[0]
        raise SceneError(f"motor {why}; it simulates free spheres only",
                         source=src, item=f"motor '{m.name}'", field="motors")
    for b in scene.bodies:
        if b.shape is not Shape.SPHERE:
            raise SceneError(f"shape '{b.shape.value}' {why}; only spheres are",
                             source=src, item=f"body '{b.name}'", field="shape")
        if b.rolling_friction > 0:
            raise SceneError(f"rolling friction {why}", source=src,
                             item=f"body '{b.name}'", field="rolling_friction")
    if scene.ground is not None and scene.ground.rolling_friction > 0:
        raise SceneError(f"rolling friction {why}", source=src, item="ground",
                         field="rolling_friction")
    for i, c in enumerate(scene.contacts):
        if c.b != GROUND:
            raise SceneError(f"contact {c.a}-{c.b} {why}; only sphere-ground contacts are",
                             source=src, item=f"contacts[{i}]", field="b")


def _scalar_values(scene: Scene, params: dict | None) -> dict:
    """Parameter values (defaults overridden by `params`); per-world values
    are accepted for the state fields only."""
    values, _ = resolve_values(scene, params)
    shapes = parameter_shapes(scene)
    for name, value in values.items():
        if value.ndim > len(shapes[name]) and name.rsplit(".", 1)[-1] not in STATE_FIELDS:
            raise ParameterError(
                f"{scene.source}: the sphere kernel takes per-world values only for "
                f"{list(STATE_FIELDS)}; {name!r} has a batch axis")
    return values


def prepare(scene: Scene, params: dict | None = None) -> SphereConstants:
    """The kernel's constants for `scene` (parameters from the scene, or
    from `params` where given, unbatched for anything but the state)."""
    check_scene(scene)
    values = _scalar_values(scene, params)
    n = len(scene.bodies)
    has_ground = scene.ground is not None
    mu_g = float(values["ground.friction"]) if has_ground else 0.0
    e_g = float(values["ground.restitution"]) if has_ground else 0.0
    height = float(values["ground.height"]) if has_ground else 0.0
    touching = {c.a for c in scene.contacts}
    dt = float(scene.dt)
    opts = scene.solver
    soft = opts.constraint_frequency is not None
    if soft:
        freq = float(values["solver.constraint_frequency"])
        damping = float(values["solver.constraint_damping"])
        omega = 2.0 * math.pi * freq
        beta = dt * omega / (2.0 * damping + dt * omega)
    else:
        beta = float(opts.position_feedback)
    arrays = {k: np.zeros(n) for k in ("inv_mass", "inv_inertia", "radius", "friction",
                                       "restitution", "m_tangent", "gamma", "m_soft_pen",
                                       "m_soft_free")}
    contact = np.zeros(n, dtype=np.bool_)
    for i, b in enumerate(scene.bodies):
        mass = float(values[f"{b.name}.mass"])
        r = float(values[f"{b.name}.radius"])
        inv_m = 1.0 / mass
        inv_i = 1.0 / (0.4 * mass * r ** 2)
        mu_b = float(values[f"{b.name}.friction"])
        prod = mu_b * mu_g
        m_n = _safe_div(1.0, inv_m)
        gamma = 0.0
        m_pen = m_free = m_n
        if soft:
            k = m_n * omega ** 2
            c = 2.0 * m_n * damping * omega
            gamma = _safe_div(1.0, dt * (c + dt * k))
            m_pen = _safe_div(1.0, 1.0 / m_n + gamma)
            m_free = _safe_div(1.0, 1.0 / m_n + 0.0)
        row = dict(inv_mass=inv_m, inv_inertia=inv_i, radius=r,
                   friction=math.sqrt(prod) if prod > 0 else 0.0,
                   restitution=max(float(values[f"{b.name}.restitution"]), e_g),
                   m_tangent=_safe_div(1.0, inv_m + r * (inv_i * r)),
                   gamma=gamma, m_soft_pen=m_pen, m_soft_free=m_free)
        for key, value in row.items():
            arrays[key][i] = value
        contact[i] = has_ground and b.name in touching
    return SphereConstants(
        contact=contact, gravity=np.asarray(values["world.gravity"], dtype=np.float64),
        ground_height=height, dt=dt, beta=beta,
        restitution_threshold=float(opts.restitution_threshold),
        iterations=int(opts.iterations), cone=opts.friction_model is FrictionModel.CONE,
        renormalisation_iterations=int(opts.renormalisation_iterations), **arrays)


@numba.njit(cache=True, inline="always")
def _rotation_coefficients(t2):
    """(sin t / t, (1 - cos t) / t^2) of t^2, as `algebra.rotation_coefficients`."""
    if t2 < 1e-2:
        return (1.0 - t2 / 6.0 * (1.0 - t2 / 20.0 * (1.0 - t2 / 42.0)),
                0.5 - t2 / 24.0 * (1.0 - t2 / 30.0 * (1.0 - t2 / 56.0)))
    t = math.sqrt(t2)
    return math.sin(t) / t, (1.0 - math.cos(t)) / t2


@numba.njit(cache=True, inline="always")
def _rotate_column(ax, ay, az, sinc, cosc, x, y, z):
    """exp([a]x) applied to the column (x, y, z)."""
    ox, oy, oz = ay * z - az * y, az * x - ax * z, ax * y - ay * x
    tx, ty, tz = ay * oz - az * oy, az * ox - ax * oz, ax * oy - ay * ox
    return x + sinc * ox + cosc * tx, y + sinc * oy + cosc * ty, z + sinc * oz + cosc * tz


@numba.njit(fastmath=False)
def _step(state, body, gx, gy, gz, height, dt, beta, u0, iterations, cone, renorm):
    """One step of one sphere: the 18 state scalars (position, rotation
    row-major, velocity, angular velocity) in and out; body: its constants
    (contact?, r, 1/m, r/I, mu, e, m_tangent, gamma, m_soft_pen, m_soft_free)."""
    (px, py, pz, r00, r01, r02, r10, r11, r12, r20, r21, r22, vx, vy, vz, wx, wy, wz) = state
    touches, r_i, inv_m, ang_i, mu, e, m_t, gamma_pen, m_soft_pen, m_soft_free = body
    # 1. external forces
    vx = vx + dt * gx
    vy = vy + dt * gy
    vz = vz + dt * gz
    mx, my, mz = vx, vy, vz
    nx, ny, nz = wx, wy, wz
    if touches:
        # 2. contact geometry and approach
        gap = pz - r_i - height
        vn0 = vz
        approach = -vn0 * dt
        reaches = gap > 0.0 and approach > gap
        if reaches:
            tau = gap / approach
        elif gap > 0.0:
            tau = 1.0
        else:
            tau = 0.0
        tau_b = 1.0 - (1.0 - tau)    # the body's earliest contact (one contact here)
        penetrating = gap < 0.0
        gamma = gamma_pen if penetrating else 0.0
        m_soft = m_soft_pen if penetrating else m_soft_free
        rest = 1.0 - tau_b if reaches else 1.0
        closing = vn0 * (tau - tau_b) / (rest if rest > 0.0 else 1.0)
        if penetrating:
            separation = -beta * gap / dt
        elif reaches:
            separation = closing
        else:
            separation = -gap / dt
        if u0 > 0.0:
            ramp = min(max((-vn0 - u0) / u0, 0.0), 1.0)
        else:
            ramp = 1.0 if vn0 < 0.0 else 0.0
        target = separation
        if gap + dt * vn0 < 0.0 and vn0 < -u0:
            bounce = -e * ramp * vn0
            target = bounce if bounce > separation else separation
        # 3. projected Gauss-Seidel
        fx, fy, fz, fwx, fwy = vx, vy, vz, wx, wy   # free (pre-solve) velocities
        lam_n = lam_1 = lam_2 = 0.0
        for _it in range(iterations):
            trial = lam_n + m_soft * (target - vz - gamma * lam_n)
            new_n = trial if trial > 0.0 else 0.0
            vz = vz + inv_m * (new_n - lam_n)
            lam_n = new_n
            bound = mu * new_n
            if cone:
                t1 = lam_1 - m_t * (vx + -r_i * wy)
                t2 = lam_2 - m_t * (vy + r_i * wx)
                mag_sq = t1 * t1 + t2 * t2
                scale = 1.0
                if mag_sq > bound * bound:
                    scale = bound / math.sqrt(mag_sq)
                new_1 = t1 * scale if bound > 0.0 else 0.0
                new_2 = t2 * scale if bound > 0.0 else 0.0
                d1 = new_1 - lam_1
                vx = vx + inv_m * d1
                wy = wy + -ang_i * d1
                d2 = new_2 - lam_2
                vy = vy + inv_m * d2
                wx = wx + ang_i * d2
            else:
                trial = lam_1 - m_t * (vx + -r_i * wy)
                new_1 = min(max(trial, -bound), bound) if bound > 0.0 else 0.0
                d1 = new_1 - lam_1
                vx = vx + inv_m * d1
                wy = wy + -ang_i * d1
                trial = lam_2 - m_t * (vy + r_i * wx)
                new_2 = min(max(trial, -bound), bound) if bound > 0.0 else 0.0
                d2 = new_2 - lam_2
                vy = vy + inv_m * d2
                wx = wx + ang_i * d2
            lam_1, lam_2 = new_1, new_2
        # velocities the body moves with (time-of-impact rule)
        mx = vx + tau * (fx - vx)
        my = vy + tau * (fy - vy)
        mz = vz + tau * (fz - vz)
        nx = wx + tau * (fwx - wx)
        ny = wy + tau * (fwy - wy)
    # 4. integrate
    px = px + mx * dt
    py = py + my * dt
    pz = pz + mz * dt
    ax, ay, az = nx * dt, ny * dt, nz * dt
    # exp([a]x) R = R + sinc [a]x R + cosc [a]x [a]x R, column by column
    sinc, cosc = _rotation_coefficients(ax * ax + ay * ay + az * az)
    r00, r10, r20 = _rotate_column(ax, ay, az, sinc, cosc, r00, r10, r20)
    r01, r11, r21 = _rotate_column(ax, ay, az, sinc, cosc, r01, r11, r21)
    r02, r12, r22 = _rotate_column(ax, ay, az, sinc, cosc, r02, r12, r22)
    for _k in range(renorm):   # R <- (3 R - R R^T R) / 2
        g00 = r00 * r00 + r01 * r01 + r02 * r02
        g11 = r10 * r10 + r11 * r11 + r12 * r12
        g22 = r20 * r20 + r21 * r21 + r22 * r22
        g01 = r00 * r10 + r01 * r11 + r02 * r12
        g02 = r00 * r20 + r01 * r21 + r02 * r22
        g12 = r10 * r20 + r11 * r21 + r12 * r22
        r00, r10, r20 = ((3.0 * r00 - (g00 * r00 + g01 * r10 + g02 * r20)) * 0.5,
                         (3.0 * r10 - (g01 * r00 + g11 * r10 + g12 * r20)) * 0.5,
                         (3.0 * r20 - (g02 * r00 + g12 * r10 + g22 * r20)) * 0.5)
        r01, r11, r21 = ((3.0 * r01 - (g00 * r01 + g01 * r11 + g02 * r21)) * 0.5,
                         (3.0 * r11 - (g01 * r01 + g11 * r11 + g12 * r21)) * 0.5,
                         (3.0 * r21 - (g02 * r01 + g12 * r11 + g22 * r21)) * 0.5)
        r02, r12, r22 = ((3.0 * r02 - (g00 * r02 + g01 * r12 + g02 * r22)) * 0.5,
                         (3.0 * r12 - (g01 * r02 + g11 * r12 + g12 * r22)) * 0.5,
                         (3.0 * r22 - (g02 * r02 + g12 * r12 + g22 * r22)) * 0.5)
    return (px, py, pz, r00, r01, r02, r10, r11, r12, r20, r21, r22, vx, vy, vz, wx, wy, wz)


@numba.njit(cache=True, fastmath=False)
def simulate(position, rotation, velocity, angular_velocity, steps, constants):
    """Advance B worlds of N spheres by `steps` steps.

    position, velocity, angular_velocity: (B, N, 3); rotation: (B, N, 3, 3)
    (body to world); constants: `prepare(scene)`. Returns new arrays
    (position, rotation, velocity, angular_velocity) of the same shapes;
    the inputs are not changed."""
    (inv_mass, inv_inertia, radius, friction, restitution, contact, m_tangent, gamma_pen,
     m_soft_pen, m_soft_free, gravity, height, dt, beta, u0, iterations, cone,
     renorm) = constants           # SphereConstants, in field order
    gx, gy, gz = gravity[0], gravity[1], gravity[2]
    n_worlds, n_bodies = position.shape[0], position.shape[1]
    pos_out = np.empty_like(position)
    rot_out = np.empty_like(rotation)
    vel_out = np.empty_like(velocity)
    ang_out = np.empty_like(angular_velocity)
    for w in range(n_worlds):
        for i in range(n_bodies):
            # Spheres touch only the ground: each one runs all its steps on its
            # own, its state in registers (18 scalars).
            p, R, v, om = position[w, i], rotation[w, i], velocity[w, i], angular_velocity[w, i]
            st = (p[0], p[1], p[2], R[0, 0], R[0, 1], R[0, 2], R[1, 0], R[1, 1], R[1, 2],
                  R[2, 0], R[2, 1], R[2, 2], v[0], v[1], v[2], om[0], om[1], om[2])
            body = (contact[i], radius[i], inv_mass[i], inv_inertia[i] * radius[i],
                    friction[i], restitution[i], m_tangent[i], gamma_pen[i], m_soft_pen[i],
                    m_soft_free[i])
            for _t in range(steps):
                st = _step(st, body, gx, gy, gz, height, dt, beta, u0, iterations, cone,
                           renorm)
            for k in range(3):
                pos_out[w, i, k] = st[k]
                vel_out[w, i, k] = st[12 + k]
                ang_out[w, i, k] = st[15 + k]
                for c in range(3):
                    rot_out[w, i, k, c] = st[3 + 3 * k + c]
    return pos_out, rot_out, vel_out, ang_out


class SphereState(NamedTuple):
    """Final state of B worlds: position, velocity, angular_velocity
    (B, N, 3); rotation (B, N, 3, 3). Bodies in scene order."""

    position: np.ndarray
    rotation: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray


def initial_state(scene: Scene, params: dict | None = None,
                  batch: int | None = None) -> SphereState:
    """The initial state of `batch` worlds from the scene and `params`
    ({'s0.position': (3,) or (B, 3), ...}, as `symphys.bench.runner._batched_params`
    gives; per-world values for position, velocity, angular_velocity and
    quaternion). batch None: the params' batch size, or 1."""
    values, size = resolve_values(scene, params)
    if batch is None:
        batch = size or 1
    elif size is not None and size != batch:
        raise ParameterError(f"{scene.source}: batch={batch} but the parameters carry "
                             f"{size} worlds")

    def field(name, width):
        out = np.empty((batch, len(scene.bodies), width))
        for i, b in enumerate(scene.bodies):
            out[:, i] = np.broadcast_to(values[f"{b.name}.{name}"], (batch, width))
        return out

    return SphereState(field("position", 3), quat_to_mat_array(field("quaternion", 4)),
                       field("velocity", 3), field("angular_velocity", 3))


def run(scene: Scene, params: dict | None = None, batch: int | None = None,
        steps: int = 200) -> SphereState:
    """Final state after `steps` steps of `batch` worlds (see `initial_state`
    for params and batch); arrays (B, N, 3) and rotation (B, N, 3, 3)."""
    constants = prepare(scene, params)
    state = initial_state(scene, params, batch)
    return SphereState(*simulate(*state, int(steps), constants))
