"""Sensors: the observation tensor a controller reads each step.

`observe` concatenates the scene's sensors, in the order of
`scene.sensors`, into one (B, n_obs) tensor (`Sensor.width` columns each):

    joint_angle, joint_rate   q and dq/dt of a hinge or slider      1 each
    position, velocity        a body's centre and its velocity      3 each
    angular_velocity          world frame                           3
    orientation               rotation matrix, row-major            9
    contact                   1.0 within `margin` of the ground     1
    time                      sin(2 pi f t), cos(2 pi f t) per f    2 per f
    target                    task inputs given per world           size
    target_distance           |body centre - task point| (3 inputs) 1
    camera                    a scene camera's image, row-major     H W 3

Task inputs (B, n_targets) are consumed in sensor order: a target sensor
reads `size` of them, a target_distance sensor reads 3 (the point).

A contact flag is a step function: its gradient is 0.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytensor.tensor as pt

from symphys.errors import SceneError
from symphys.physics.algebra import safe_vector_norm
from symphys.physics.joints import JointFrames, _joint_items, _pose, coordinate, joint_rate
from symphys.physics.model import BodyArrays, State, WorldArrays
from symphys.scene.elements import SensorKind, Shape
from symphys.scene.scene import Scene


def time_features(time, frequencies) -> list:
    """[sin(2 pi f t), cos(2 pi f t)] for each frequency f (Hz); time (B, 1)."""
    out = []
    for f in frequencies:
        phase = 2.0 * np.pi * f * time
        out += [pt.sin(phase), pt.cos(phase)]
    return out


def _column(x, i: int):
    """(B, N) -> (B, 1): body i."""
    return x[:, i:i + 1]


def _lowest_gap(scene: Scene, i: int, bodies: BodyArrays, world: WorldArrays, state: State):
    """Height of body i's lowest point above the ground, (B, 1)."""
    shape = scene.bodies[i].shape
    z = _column(state.position.z, i)
    rot = state.rotation
    if shape is Shape.SPHERE:
        reach = _column(bodies.radius, i)
    elif shape is Shape.BOX:
        h = bodies.half_size
        reach = sum(pt.abs(_column(r, i)) * _column(c, i)
                    for r, c in zip((rot.zx, rot.zy, rot.zz), h))
    else:
        reach = pt.abs(_column(rot.zz, i)) * _column(bodies.half_length, i) + _column(
            bodies.radius, i)
    return z - reach - world.ground_height


def observe(scene: Scene, state: State, time, task, bodies: BodyArrays, world: WorldArrays,
            frames: JointFrames | None, v=None, w=None, render: Callable | None = None):
    """Observation (B, n_obs) of `state` at time `time` (B, 1); task:
    (B, n_targets) or None; v, w: velocities to read (default the state's);
    render(scene, camera name, state) -> image (B, H, W, 3): how camera
    sensors see (the loop passes `symphys.camera.image.render_state`)."""
    v = state.velocity if v is None else v
    w = state.angular_velocity if w is None else w
    body_index = {b.name: i for i, b in enumerate(scene.bodies)}
    joint_index = {j.name: i for i, j in enumerate(scene.joints)}
    joints = _joint_items(scene)
    columns, target_at = [], 0
    like = state.position.x[:, :1]
    for sensor in scene.sensors:
        kind = sensor.kind
        if kind in (SensorKind.JOINT_ANGLE, SensorKind.JOINT_RATE):
            item = joints[joint_index[sensor.source]]
            joint = scene.joints[item["joint"]]
            parent = None if item["b"] is None else (item["b"],)
            pose = _pose((item["joint"],), (item["a"],), parent, frames, state,
                         len(scene.bodies), len(scene.joints))
            value = (coordinate(joint.type, pose) if kind is SensorKind.JOINT_ANGLE
                     else joint_rate(joint.type, pose, v, w))
            columns.append(value)
        elif kind is SensorKind.TIME:
            columns += time_features(time, sensor.frequencies)
        elif kind is SensorKind.TARGET:
            columns.append(task[:, target_at:target_at + sensor.size])
            target_at += sensor.size
        elif kind is SensorKind.CAMERA:
            if render is None:
                raise SceneError(f"camera sensor {sensor.source!r}: observe needs `render`, "
                                 "the renderer the time loop passes")
            image = render(scene, sensor.source, state)             # (B, H, W, 3)
            columns.append(image.reshape((image.shape[0], sensor.size)))
        elif kind is SensorKind.TARGET_DISTANCE:
            i = body_index[sensor.source]
            point = task[:, target_at:target_at + 3]
            gap = [_column(c, i) - point[:, k:k + 1] for k, c in enumerate(state.position)]
            columns.append(safe_vector_norm(pt.concatenate(gap, axis=1), axis=1)[:, None])
            target_at += 3
        else:
            i = body_index[sensor.source]
            if kind is SensorKind.POSITION:
                columns += [_column(c, i) for c in state.position]
            elif kind is SensorKind.VELOCITY:
                columns += [_column(c, i) for c in v]
            elif kind is SensorKind.ANGULAR_VELOCITY:
                columns += [_column(c, i) for c in w]
            elif kind is SensorKind.ORIENTATION:
                columns += [_column(c, i) for c in state.rotation]
            else:
                gap = _lowest_gap(scene, i, bodies, world, state)
                columns.append(pt.switch(gap < sensor.margin, 1.0, 0.0))
    if not columns:
        return pt.zeros_like(like)[:, :0]     # no sensors: (B, 0), for open-loop controllers
    columns = [c + pt.zeros_like(like) for c in columns]
    return pt.concatenate(columns, axis=1)
