"""Scenes written back as scene files (`symphys.scene.writer`) read into
equal scenes: every shipped scene, the test scenes built in Python (every
joint, motor, sensor and contact kind, textures and cameras) and the
generated ones."""

import json

import pytest
from kernel_scenes import FEATURES, SMALL_SCENES
from scenes import drop, gadgets, knock, mixed, pendulum, rod, servo_pendulum, wrist

import symphys as sp
from symphys.scene.reader import scene_from_dict
from symphys.scene.writer import scene_to_dict, write_scene

BUILT = {"drop": drop, "mixed": mixed, "rod": rod, "knock": knock, "pendulum": pendulum,
         "gadgets": gadgets, "servo_pendulum": servo_pendulum, "wrist": wrist,
         **FEATURES}


def _round_trip(scene):
    doc = json.loads(json.dumps(scene_to_dict(scene)))       # what a file holds
    return scene_from_dict(doc, source=scene.source)


@pytest.mark.parametrize("name", sp.available_scenes())
def test_shipped_scenes_round_trip(name):
    scene = sp.load_scene(name)
    again = _round_trip(scene)
    assert again == scene
    assert again.structure_key() == scene.structure_key()
    assert again.values_key() == scene.values_key()


@pytest.mark.parametrize("name", sorted(BUILT))
def test_built_scenes_round_trip(name):
    scene = BUILT[name]()
    assert _round_trip(scene) == scene


def test_generated_scenes_round_trip():
    for scene in SMALL_SCENES:
        assert _round_trip(scene) == scene, scene.name


def test_a_written_file_loads_with_new_values(tmp_path):
    """A scene with new defaults (`with_values`) saved as a file loads with
    them, and the file names each body, joint and motor as the scene does."""
    from symphys.scene.params import with_values

    arm = sp.load_scene("arm")
    changed = with_values(arm, {"elbow.mass": 0.7, "shoulder_yaw.gain": 3.0,
                                "world.gravity": [0.0, 0.0, -5.0]})
    path = write_scene(changed, tmp_path / "out" / "arm2.json")
    loaded = sp.load_scene(path)
    assert loaded.parameters()["elbow.mass"] == 0.7
    assert loaded.parameters()["shoulder_yaw.gain"] == 3.0
    assert loaded.gravity == (0.0, 0.0, -5.0)
    assert (loaded.body_names, loaded.joint_names, loaded.motor_names) == \
        (arm.body_names, arm.joint_names, arm.motor_names)
