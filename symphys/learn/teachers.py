"""The state-feedback teacher of A6 (`pendulum-camera`): energy-pumping
swing-up, then an LQR balance whose linear model is the engine's own step,
differentiated by central differences about the upright bar.

The cart's position servo makes the cart's velocity follow
gain x (command - rail position). While swinging, the command is an
absolute cart target, so a camera student need not read the cart's
position precisely (a target relative to the cart, x + v_des / gain,
needs x to about 1 cm, which camera students did not reach):

    u = -A tanh(k (w cos(theta) - lead Omega sin(theta))) d + kick exp(-E / (0.02 E_top))

with d = clip((E_top - E) / E_top, -1, 1) the bar's energy deficit (it
pumps energy in below the upright's and out above it, after Astrom &
Furuta 2000), Omega the hanging bar's natural frequency and the kick
moving the cart off a bar at rest. The target follows mostly the bar's
angle (lead 5): w alone (lead 0) feeds the bar's reaction to the cart's
own acceleration straight back and locked 5 of 16 starts into a fast
small cycle (lead 0: 11/16 starts balanced; lead 2: 15/16; lead 5: 16/16).
The swing (phase and energy) reads the bar's rate less its reaction to
the cart's velocity, w - beta cos(theta) v (beta = m c / I,
`BarModel.coupling`): the servo
sets the cart's velocity within a step, and a jump dv turns the bar by
beta cos(theta) dv at once, so a law reading w itself answered its own
push the same step and flipped its command sign every step from rest
(+0.40, -0.45, +0.87, -0.45, ...: labels no camera student can copy).
Reading the decoupled rate, the kick is one smooth push and the mean
command change per step falls from 0.026 to 0.005 m.
Inside a cone of half-angle `switch` about the upright, u = -K s. It
reads the joint state s = [x, v, theta, w] (x, v: the rail's position and
rate; theta: the hinge angle, 0 hanging; w: its rate), which the vision
controller never sees: it only labels what the camera controller should
do (`pendulum_camera`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
import scipy.linalg

from symphys.learn.closed_loop import closed_loop_function
from symphys.scene.elements import Sensor, SensorKind
from symphys.scene.scene import Scene

RAIL, PIVOT, CART, BAR = "rail", "pivot", "cart", "bar"
# The joint-state columns a teacher reads: x, v, theta, w.
STATE_SENSORS = ((RAIL, SensorKind.JOINT_ANGLE), (RAIL, SensorKind.JOINT_RATE),
                 (PIVOT, SensorKind.JOINT_ANGLE), (PIVOT, SensorKind.JOINT_RATE))
# Initial-state parameters given per world (`world_params`).
WORLD_STATE = ("cart.velocity", "bar.position", "bar.quaternion", "bar.velocity",
               "bar.angular_velocity")
Q_LQR = (100.0, 1.0, 10.0, 0.1)       # state weights: x, v, phi (from upright), w
R_LQR = 1.0
SWING = (0.5, 3.0, 5.0)               # A (m), k (s/rad), lead (of Omega sin(theta))
KICK = 0.4                            # m: the cart target of a bar at rest hanging
KICK_ENERGY = 0.02                    # of E_top: the kick fades above this energy
SWITCH_RAD = 0.8                      # balance inside this angle of the upright
LIMIT = 1.45                          # |command| (m): inside the student's tanh range 1.5


def state_scene(scene: Scene) -> Scene:
    """`scene` with the joint-state sensors (x, v, theta, w) instead of its own."""
    sensors = tuple(Sensor(name=f"{j}.{k.value}", kind=k, source=j) for j, k in STATE_SENSORS)
    return dataclasses.replace(scene, sensors=sensors)


@dataclass(frozen=True)
class BarModel:
    """The bar on its hinge, from the scene: pivot height (m), distance of
    the centre of mass from the pivot (m), mass (kg), inertia about the
    pivot (kg m^2), and the servo's gain (1/s)."""

    pivot_z: float
    com: float
    mass: float
    inertia: float
    gravity: float
    servo_gain: float

    @classmethod
    def of(cls, scene: Scene) -> "BarModel":
        bar = scene.bodies[scene.body_names.index(BAR)]
        pivot = scene.joints[scene.joint_names.index(PIVOT)]
        length = bar.size[2]
        com = float(np.linalg.norm(np.subtract(bar.position, pivot.anchor)))
        inertia = bar.mass * (length ** 2 / 12 + com ** 2)
        motor = next(m for m in scene.motors if m.joint == RAIL)
        return cls(float(pivot.anchor[2]), com, bar.mass, inertia, float(-scene.gravity[2]),
                   motor.gain)

    @property
    def coupling(self) -> float:
        """beta (rad/m): a jump dv of the cart's velocity turns the bar by
        dw = beta cos(theta) dv (the pivot's impulse on the bar)."""
        return self.mass * self.com / self.inertia

    def initial_state(self, v, theta, w) -> dict:
        """Per-world initial-state parameters (WORLD_STATE) for the cart at
        rest position 0 with velocity v (W,), the bar at hinge angle theta
        (W,) (0 hanging) turning at w (W,) rad/s about +y."""
        v, theta, w = (np.atleast_1d(np.asarray(a, float)) for a in (v, theta, w))
        n = len(theta)
        zero = np.zeros(n)
        s, c = np.sin(theta), np.cos(theta)
        r = np.stack([-self.com * s, zero, -self.com * c], 1)          # pivot -> bar centre
        return {"cart.velocity": np.stack([v, zero, zero], 1),
                "bar.position": np.stack([zero, zero, np.full(n, self.pivot_z)], 1) + r,
                "bar.quaternion": np.stack([np.cos(theta / 2), zero, np.sin(theta / 2), zero], 1),
                "bar.velocity": np.stack([v + w * r[:, 2], zero, -w * r[:, 0]], 1),
                "bar.angular_velocity": np.stack([zero, w, zero], 1)}

    def poses(self, x, theta):
        """Body positions (..., 2, 3) and rotations (..., 2, 3, 3) of cart and
        bar for rail positions x and hinge angles theta (same shapes)."""
        x, theta = np.broadcast_arrays(np.asarray(x, float), np.asarray(theta, float))
        s, c = np.sin(theta), np.cos(theta)
        zero, one = np.zeros_like(x), np.ones_like(x)
        cart = np.stack([x, zero, zero + self.pivot_z], -1)
        bar = np.stack([x - self.com * s, zero, self.pivot_z - self.com * c], -1)
        eye = np.broadcast_to(np.eye(3), x.shape + (3, 3))
        rot = np.stack([np.stack([c, zero, s], -1), np.stack([zero, one, zero], -1),
                        np.stack([-s, zero, c], -1)], -2)
        return np.stack([cart, bar], -2), np.stack([eye, rot], -3)


def joint_state(traj):
    """(..., T+1, 4) [x, v, theta, w] of a cart-and-bar trajectory (theta in
    (-pi, pi], 0 hanging)."""
    r = traj.rotation[BAR]
    theta = pt.arctan2(r[..., 0, 2], r[..., 2, 2])
    return pt.stack([traj.position[CART][..., 0], traj.velocity[CART][..., 0], theta,
                     traj.angular_velocity[BAR][..., 1]], axis=-1)


@dataclass(frozen=True)
class Hold:
    """A constant command per world (for the linearisation)."""

    n_out: int = 1

    def parameter_shapes(self):
        return {"hold.u": (1,)}

    def init(self, seed: int = 0):
        return {"hold.u": np.zeros(1)}

    def carry_sizes(self):
        return ()

    def apply(self, params, observation, carry, time):
        u = params["hold.u"]
        return pt.zeros_like(observation[:, :1]) + (u if u.ndim == 2 else u[None]), carry


def linearise(scene: Scene, backend: str = "numba", step: float = 1e-4):
    """(A (4, 4), B (4, 1)): one step of the engine about the upright bar at
    rest, s' = A s + B u, by central differences of the compiled step. The
    rail's servo and sensor both read x from the start, so the x column
    follows from translation invariance: f(x + h, u + h) = f(x, u) + h e_x."""
    model = BarModel.of(scene)
    rows = 8                                    # +-h in v, theta, w and u
    fn = closed_loop_function(state_scene(scene), 1, Hold(),
                              lambda traj, task: joint_state(traj)[:, -1], backend=backend,
                              population=rows, world_params=WORLD_STATE, gradient=False)
    base = np.tile([0.0, np.pi, 0.0, 0.0], (rows, 1))          # v, theta, w, u
    for k in range(4):
        base[2 * k, k] += step
        base[2 * k + 1, k] -= step
    init = model.initial_state(base[:, 0], base[:, 1], base[:, 2])
    out = np.array(fn(np.zeros((rows, 0)), base[:, 3:], *(init[k] for k in WORLD_STATE)))
    out[:, 2] = np.mod(out[:, 2], 2 * np.pi)                  # theta about pi
    cols = [(out[2 * k] - out[2 * k + 1]) / (2 * step) for k in range(4)]
    b = cols[3]
    a = np.stack([np.eye(4)[0] - b, *cols[:3]], 1)
    return a, b[:, None]


def lqr_gain(a, b, q=Q_LQR, r=R_LQR) -> np.ndarray:
    """K (4,) of the discrete LQR: u = -K s minimises sum s'Qs + r u^2."""
    q, r = np.diag(q), np.array([[r]])
    x = scipy.linalg.solve_discrete_are(a, b, q, r)
    return np.linalg.solve(r + b.T @ x @ b, b.T @ x @ a)[0]


@dataclass(frozen=True)
class Teacher:
    """The swing-up-and-balance law on joint states (numbers: `BarModel`,
    the LQR gain `K`, the swing gains). `command` is the NumPy law (labels
    for the student); `controller` the same law as a symphys controller."""

    model: BarModel
    gain: tuple[float, float, float, float]
    swing: tuple[float, float, float] = SWING
    switch: float = SWITCH_RAD
    kick: float = KICK
    limit: float = LIMIT
    decouple: bool = True           # the swing reads w - beta cos(theta) v (module doc)

    @classmethod
    def of(cls, scene: Scene, backend: str = "numba") -> "Teacher":
        a, b = linearise(scene, backend)
        return cls(BarModel.of(scene), tuple(float(k) for k in lqr_gain(a, b)))

    def _law(self, lib, x, v, theta, w):
        m = self.model
        phi = lib.arctan2(-lib.sin(theta), -lib.cos(theta))      # from the upright
        k = self.gain
        balance = -(k[0] * x + k[1] * v + k[2] * phi + k[3] * w)
        # The swing's rate: w less the bar's reaction to the cart's velocity.
        rate = w - m.coupling * lib.cos(theta) * v if self.decouple else w
        energy = (0.5 * m.inertia * rate ** 2
                  + m.mass * m.gravity * m.com * (1 - lib.cos(theta)))
        top = 2 * m.mass * m.gravity * m.com
        amplitude, k_swing, lead = self.swing
        deficit = lib.clip((top - energy) / top, -1.0, 1.0)
        omega = np.sqrt(m.mass * m.gravity * m.com / m.inertia)
        phase = rate * lib.cos(theta) - lead * omega * lib.sin(theta)
        swing = (-amplitude * lib.tanh(k_swing * phase) * deficit
                 + self.kick * lib.exp(-energy / (KICK_ENERGY * top)))
        near = self._balancing(lib, theta)
        chosen = lib.where(near, balance, swing) if lib is np else pt.switch(near, balance, swing)
        return lib.clip(chosen, -self.limit, self.limit)

    def _balancing(self, lib, theta):
        """Whether the bar is inside the balance cone (half-angle `switch`
        about the upright), where the law is the LQR."""
        return -lib.cos(theta) > np.cos(self.switch)

    def balancing(self, state: np.ndarray) -> np.ndarray:
        """state (..., 4) -> (...,) bool: the LQR's steps (`_balancing`)."""
        return self._balancing(np, np.asarray(state, float)[..., 2])

    def command(self, state: np.ndarray) -> np.ndarray:
        """state (..., 4) [x, v, theta, w] -> command (...,) (m)."""
        state = np.asarray(state, float)
        return self._law(np, *(state[..., k] for k in range(4)))

    @property
    def controller(self) -> "TeacherController":
        return TeacherController(self)


@dataclass(frozen=True)
class TeacherController:
    """`Teacher` as a symphys controller (no weights) for `state_scene`."""

    teacher: Teacher
    n_out: int = 1

    def parameter_shapes(self):
        return {}

    def init(self, seed: int = 0):
        return {}

    def carry_sizes(self):
        return ()

    def apply(self, params, observation, carry, time):
        cols = [observation[:, k] for k in range(4)]
        return self.teacher._law(pt, *cols)[:, None], carry
