"""Implicit PD servos: an unbounded torque motor with stiffness kp and
damping kv on a hinge or slider acts in its joint's drag row, on q and q'
at the step's end (`drives.drag_rows`, `Scene.implicit_motors`).

- A rod (mass m, centre of mass d below a hinge) held by such a servo at
  command u settles where kp (u - q) = m g d sin q, as the same servo made
  explicit (bounded by a torque it never reaches) does; at 20 g the
  explicit one blows up at the same dt, the implicit one still settles
  there.
- A small quadruped on 20-g legs held by MJCF position servos
  (symphys/robots/servo_quadruped.xml) crouches and stands where MuJoCo's
  `implicitfast` does, within 1 cm with the Newton solve.

The kernels' agreement (Numba, JAX, the reference) and the rows pullback
cover the `kf-joints` scene of `kernel_scenes`, which carries two such
motors."""

import dataclasses

import mujoco
import numpy as np
import pytest
from scenes import BACKEND

import symphys as sp
from symphys.mjcf.files import robot_file
from symphys.physics.kernels.layout import Item, build_layout
from symphys.scene.elements import UNBOUNDED_TORQUE, SolverMethod

G, DT, KP, KV, COMMAND, D = 9.81, 0.01, 20.0, 4.0, 0.5, 0.5


def _rod(max_torque: float):
    """A 1-m capsule hanging from a hinge about y, held by a PD torque
    motor (gain = stiffness: the command is the target angle)."""
    return (sp.SceneBuilder(f"servo-rod-{max_torque:g}", dt=DT, iterations=100)
            .capsule("rod", radius=0.02, length=2 * D, mass=1.0, position=[0, 0, -D])
            .joint("pivot", "hinge", "world", "rod", anchor=[0, 0, 0], axis=[0, 1, 0])
            .motor("servo", "pivot", "torque", gain=KP, stiffness=KP, damping=KV,
                   max_torque=max_torque)
            .build())


@pytest.fixture(scope="module")
def rods():
    return _rod(UNBOUNDED_TORQUE), _rod(1e8)


def _equilibrium(mass: float) -> float:
    """q with kp (u - q) = m g d sin q (Newton's method)."""
    q = COMMAND
    for _ in range(50):
        f = KP * (COMMAND - q) - mass * G * D * np.sin(q)
        q -= f / (-KP - mass * G * D * np.cos(q))
    return q


def _final_angle(scene, mass: float, steps: int = 400, strict: bool = False) -> float:
    """The rod's angle about +y after `steps` (from its centre's position)."""
    traj = sp.simulate(scene, steps, params={"rod.mass": mass}, backend=BACKEND,
                       action=[COMMAND], strict=strict)
    x = traj.position["rod"][-1]
    return float(np.arctan2(-x[0], -x[2]))


def test_an_unbounded_pd_motor_is_implicit_and_gets_a_drag_row(rods):
    implicit, explicit = rods
    assert implicit.implicit_motors == {0: 0} and implicit.drag_row_joints == [0]
    assert explicit.implicit_motors == {} and explicit.drag_row_joints == []
    # no loss parameters appear; the drag row reads the motor's columns
    assert "pivot.viscous_damping" not in implicit.parameters()
    assert implicit.structure_key() != explicit.structure_key()
    layout = build_layout(implicit)
    assert len(layout.drags) == 1 and layout.drags[0, Item.IMPLICIT] == 0
    assert len(layout.torques) == 0
    assert len(build_layout(explicit).torques) == 1


def test_a_rod_held_by_the_servo_settles_at_the_static_equilibrium(rods):
    """kp (u - q) = m g d sin q: at 1 kg (q = 0.4037) both forms settle
    there; at 20 g the explicit form blows up at dt = 10 ms (kv dt / I = 6)
    and the implicit one settles at q = 0.4977."""
    implicit, explicit = rods
    for mass in (1.0, 0.02):
        assert _final_angle(implicit, mass) == pytest.approx(_equilibrium(mass), abs=1e-6)
    assert _final_angle(explicit, 1.0) == pytest.approx(_equilibrium(1.0), abs=1e-6)
    with pytest.raises(sp.SimulationError):
        _final_angle(explicit, 0.02, strict=True)


CROUCH = np.array([-0.8, 1.6, -0.8, 1.6, 0.8, -1.6, 0.8, -1.6])


def test_a_quadruped_on_position_servos_stands_where_mujocos_implicitfast_does():
    """servo_quadruped.xml, 1 s at 5 ms holding the crouch from standing:
    the torso's centre within 1 cm of MuJoCo's (implicitfast) with the
    Newton solve (MuJoCo's Euler blows up on this file)."""
    path = robot_file("servo_quadruped.xml")
    m = mujoco.MjModel.from_xml_path(str(path))
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    d = mujoco.MjData(m)
    d.ctrl[:] = CROUCH
    steps = int(round(1.0 / m.opt.timestep))
    for _ in range(steps):
        mujoco.mj_step(m, d)
    scene = sp.load_mjcf(path)
    assert len(scene.implicit_motors) == 8 and scene.dt == m.opt.timestep
    scene = dataclasses.replace(scene, solver=dataclasses.replace(
        scene.solver, method=SolverMethod.NEWTON, iterations=50))
    traj = sp.simulate(scene, steps, backend=BACKEND, action=CROUCH, strict=True)
    torso = traj.position["torso"][-1]
    assert np.abs(torso - d.xipos[1]).max() < 0.01, (torso, d.xipos[1])
    assert np.abs(traj.velocity["torso"][-1]).max() < 0.05
