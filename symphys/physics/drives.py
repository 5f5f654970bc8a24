"""Rows on a joint's coordinate: motors (position and velocity servos,
torque motors with their feedback) and a hinge's or slider's bearing
losses, armature, spring and implicit motor (`joints` holds the joints
themselves)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytensor.tensor as pt

from symphys.physics.algebra import safe_div
from symphys.physics.contacts import Gather
from symphys.physics.joints import (JointBlock, JointFrames, MotorArrays, MotorBlock, _axis_row,
                                    _pose, coordinate, coordinate_axis)
from symphys.physics.model import State
from symphys.physics.solver import BoundedRow, Mobility, RowKind, velocity_matrix
from symphys.scene.elements import MotorMode
from symphys.scene.scene import Scene


def command_range(scene: Scene, motor_index: int):
    """(lo, hi) a motor's commands are clipped to: its `command_range`, else
    a position servo's joint limits, else None."""
    m = scene.motors[motor_index]
    if m.command_range is not None:
        return m.command_range
    if m.mode is MotorMode.POSITION:
        joint = scene.joints[scene.joint_names.index(m.joint)]
        return joint.limits
    return None


def motor_commands(block: MotorBlock, scene: Scene, action):
    """The block's commands (B, K) from action (B, M), clipped to each
    motor's command range."""
    return _commands(block.motors, scene, action)


def _commands(motors: tuple[int, ...], scene: Scene, action):
    """Commands (B, K) of the motors `motors` from action (B, M), clipped."""
    command = Gather(motors, len(scene.motors)).take(action)
    ranges = [command_range(scene, i) for i in motors]
    if all(r is None for r in ranges):
        return command
    inf = 1e30
    lo = np.array([r[0] if r else -inf for r in ranges])
    hi = np.array([r[1] if r else inf for r in ranges])
    return pt.clip(command, lo, hi)


def motor_rows(block: MotorBlock, scene: Scene, frames: JointFrames, motors: MotorArrays,
               mob: Mobility, state: State, action, dt: float):
    """(rows, impulse): servo rows of a position/velocity block, or for a
    torque block the row along the axis and the impulse it receives this
    step (clip(gain command - stiffness q - damping q', +-max_torque) dt,
    q and q' at the step's start), applied before the solve."""
    pose = _pose(block.joints, block.a, block.b, frames, state, len(scene.bodies),
                 len(scene.joints))
    gm = Gather(block.motors, len(scene.motors))
    max_impulse = gm.take(motors.max_torque) * dt
    command = motor_commands(block, scene, action)
    direction = coordinate_axis(block.joint_type, pose, block.axis)
    if block.mode is MotorMode.TORQUE:
        row = _axis_row(block.joint_type, RowKind.MOTOR, direction, pose, mob, 0.0)
        rate = row.velocity(velocity_matrix(state.velocity, state.angular_velocity))
        torque = (gm.take(motors.gain) * command
                  - gm.take(motors.stiffness) * coordinate(block.joint_type, pose, block.axis)
                  - gm.take(motors.damping) * rate)
        return row, pt.clip(torque * dt, -max_impulse, max_impulse)
    max_rate = gm.take(motors.max_velocity)
    if block.mode is MotorMode.POSITION:
        rate = gm.take(motors.gain) * (command - coordinate(block.joint_type, pose,
                                                            block.axis))
    else:
        rate = command
    target = pt.clip(rate, -max_rate, max_rate)
    row = _axis_row(block.joint_type, RowKind.MOTOR, direction, pose, mob, target)
    return BoundedRow(row, lower=-max_impulse, upper=max_impulse), None


def drag_rows(block: JointBlock, scene: Scene, frames: JointFrames, motors: MotorArrays | None,
              mob: Mobility, state: State, action) -> list[BoundedRow]:
    """Bearing losses, armature, a spring and an implicit motor on one block
    of hinges and sliders: two rows on the joint rate q', swept with the
    joints.

    Viscous damping c, armature I_a, a spring k and the joint's implicit
    motor (`Scene.implicit_motors`: gain g, stiffness kp, damping kv,
    command u clipped to its range; all 0 without one): a soft row whose
    sweeps converge to the impulse
    -(c + kv) dt q'_after - I_a (q'_after - q'_start)
    - k dt (q_start + dt q'_after - q_s) - kp dt (q_start + dt q'_after) + g u dt
    on the whole articulated chain (implicit, so stable for any gains;
    q_start, q'_start: at the step's start): softness gamma = 1 / K with
    K = I_a + (c + kv) dt + (k + kp) dt^2, target
    (I_a q'_start - k dt (q_start - q_s) - kp dt q_start + g u dt) / K; no
    impulse when K = 0 (so an implicit motor whose gains are set to 0 by
    parameters, on a joint without losses, acts no more). Dry friction f: a
    stiff row aiming at q' = 0 whose impulse stays within +-f dt (Coulomb
    friction: the joint sticks while its load is below f)."""
    dt = scene.dt
    pose = _pose(block.joints, block.a, block.b, frames, state, len(scene.bodies),
                 len(scene.joints))
    gj = Gather(block.joints, len(scene.joints))
    row = _axis_row(block.type, RowKind.MOTOR, pose.axis_b, pose, mob, 0.0)
    armature, spring = gj.take(frames.armature), gj.take(frames.spring_stiffness)
    viscous = gj.take(frames.viscous_damping)
    q = coordinate(block.type, pose)
    held = scene.implicit_motors
    drive = 0.0
    stiff = spring
    if any(j in held for j in block.joints):
        # Joints without an implicit motor read motor 0, times 0.
        index = tuple(held.get(j, 0) for j in block.joints)
        gm = Gather(index, len(scene.motors))
        mask = np.array([1.0 if j in held else 0.0 for j in block.joints])
        kp = mask * gm.take(motors.stiffness)
        viscous = viscous + mask * gm.take(motors.damping)
        stiff = spring + kp
        drive = mask * gm.take(motors.gain) * _commands(index, scene, action) * dt - kp * dt * q
    k = armature + viscous * dt + stiff * dt * dt
    rate = row.velocity(velocity_matrix(state.velocity, state.angular_velocity))
    stretch = q - gj.take(frames.spring_reference)
    soft = replace(row, m_soft=k * row.m_eff / (k + row.m_eff), gamma=safe_div(1.0, k),
                   target=safe_div(armature * rate - spring * dt * stretch + drive, k))
    bound = gj.take(frames.dry_friction) * dt
    return [BoundedRow(soft), BoundedRow(row, lower=-bound, upper=bound)]
