"""`symphys.tree`: model dataclasses flattened to leaves and rebuilt."""

import numpy as np
import pytest

import symphys as sp
from symphys.loop.rollout import full_parameters
from symphys.loop.timeloop import StepInputs
from symphys.physics.algebra import Mat3, Vec3
from symphys.physics.joints import build_joint_arrays
from symphys.physics.model import build_model
from symphys.scene.elements import Shape
from symphys.tree import LEAF, flatten, tree_map, unflatten


def _inputs(name):
    scene = sp.load_scene(name)
    p = full_parameters(scene, None)
    bodies, world, _ = build_model(scene, p, set())
    frames, motors = build_joint_arrays(scene, p)
    return scene, StepInputs(bodies, world, frames, motors, np.zeros((1, len(scene.motors))))


@pytest.mark.parametrize("name", ["ball", "arm"])
def test_step_inputs_round_trip_by_field(name):
    """Every named field comes back as the same object; optional fields
    absent from the scene are no leaves; static fields stay in the
    structure."""
    scene, inputs = _inputs(name)
    leaves, structure = flatten(inputs)
    assert structure.size == len(leaves)
    back = unflatten(structure, leaves)
    assert back.world.ground_friction is inputs.world.ground_friction
    spheres = tuple(b.shape is Shape.SPHERE for b in scene.bodies)
    assert back.bodies.isotropic == inputs.bodies.isotropic == spheres
    assert not any(x is inputs.bodies.isotropic for x in leaves)
    assert (back.frames is None) == (not scene.joints)
    if scene.joints:
        assert back.frames.frame_a.zy is inputs.frames.frame_a.zy
        assert back.motors.max_torque is inputs.motors.max_torque
    assert back.bodies.rolling_friction is inputs.bodies.rolling_friction


def test_tree_map_and_structure_checks():
    a = (Vec3(1.0, 2.0, 3.0), None, Mat3(*range(9)))
    b = tree_map(lambda x, y: x + y, a, a)
    assert b[0] == Vec3(2.0, 4.0, 6.0) and b[1] is None and b[2].zz == 16
    assert flatten(1.5) == ([1.5], LEAF)
    with pytest.raises(ValueError, match="differ in structure"):
        tree_map(lambda x, y: x, a, (Vec3(1, 2, 3), 0.0, Mat3(*range(9))))
    _, structure = flatten(a)
    with pytest.raises(ValueError, match="holds 12 leaves, got 11"):
        unflatten(structure, range(11))
