"""Bad scene input gives a SceneError naming the file, the body and the field."""

import json

import numpy as np
import pytest

import symphys as sp
from symphys.errors import ParameterError, SceneError
from symphys.scene.reader import overriding

from scenes import scene_doc


def _write(tmp_path, doc, name="scene.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _error(tmp_path, doc) -> str:
    path = _write(tmp_path, doc)
    with pytest.raises(SceneError) as info:
        sp.load_scene(path)
    assert isinstance(info.value, ValueError)
    assert str(path) in str(info.value)
    return str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(SceneError, match="file not found"):
        sp.load_scene(tmp_path / "nope.json")


def test_unknown_scene_name_suggests():
    with pytest.raises(SceneError, match="did you mean 'ball'"):
        sp.load_scene("bal")


def test_invalid_json_reports_line(tmp_path):
    msg = _error(tmp_path, '{\n  "format": "symphys-scene/1",\n  "bodies": [,]\n}')
    assert "line 3" in msg


def test_unknown_format(tmp_path):
    doc = scene_doc()
    doc["format"] = "symphys-scene/9"
    assert "unknown format version" in _error(tmp_path, doc)


def test_unknown_shape(tmp_path):
    msg = _error(tmp_path, scene_doc(shape="cone"))
    assert "body 'b'" in msg and "field 'shape'" in msg and "cone" in msg


@pytest.mark.parametrize("field,value", [("radius", 0.0), ("radius", -1.0),
                                         ("mass", 0.0), ("mass", -2.0)])
def test_non_positive(tmp_path, field, value):
    msg = _error(tmp_path, scene_doc(**{field: value}))
    assert f"field '{field}'" in msg and "must be > 0" in msg and "body 'b'" in msg


def test_non_positive_density_size_length(tmp_path):
    doc = scene_doc()
    doc["bodies"][0] = {"name": "crate", "shape": "box", "size": [1, 0, 1], "density": 10}
    assert "field 'size'" in _error(tmp_path, doc)
    doc["bodies"][0] = {"name": "crate", "shape": "box", "size": [1, 1, 1], "density": -10}
    assert "field 'density'" in _error(tmp_path, doc)
    doc["bodies"][0] = {"name": "rod", "shape": "capsule", "radius": 0.1, "length": 0,
                        "mass": 1}
    msg = _error(tmp_path, doc)
    assert "body 'rod'" in msg and "field 'length'" in msg


def test_missing_radius_and_mass(tmp_path):
    doc = scene_doc()
    del doc["bodies"][0]["radius"]
    assert "field 'radius'" in _error(tmp_path, doc) and "missing" in _error(tmp_path, doc)
    doc = scene_doc()
    del doc["bodies"][0]["mass"]
    assert "field 'mass'" in _error(tmp_path, doc)


def test_nan_and_inf_anywhere(tmp_path):
    """Literal NaN and Infinity in a file: the error names the field."""
    text = json.dumps(scene_doc()).replace('"position": [0, 0, 1]', '"position": [0, NaN, 1]')
    msg = _error(tmp_path, text)
    assert "NaN" in msg and "field 'bodies[b].position[1]'" in msg
    text = json.dumps(scene_doc()).replace('"friction": 0.5', '"friction": Infinity')
    msg = _error(tmp_path, text)
    assert "Infinity" in msg and "field 'ground.friction'" in msg


def test_a_folder_is_not_a_scene(tmp_path):
    with pytest.raises(SceneError, match="is a folder"):
        sp.load_scene(tmp_path)


def test_nan_from_builder():
    with pytest.raises(SceneError, match="non-finite"):
        sp.SceneBuilder("x").sphere("s", radius=0.1, mass=1.0,
                                    velocity=[0, float("nan"), 0]).build()


def test_wrong_vector_length(tmp_path):
    msg = _error(tmp_path, scene_doc(velocity=[1, 2]))
    assert "field 'velocity'" in msg and "3 numbers" in msg


def test_zero_quaternion(tmp_path):
    assert "zero quaternion" in _error(tmp_path, scene_doc(quaternion=[0, 0, 0, 0]))


def test_duplicate_names(tmp_path):
    doc = scene_doc()
    doc["bodies"].append(dict(doc["bodies"][0]))
    assert "duplicate body name" in _error(tmp_path, doc)


def test_contact_with_unknown_body(tmp_path):
    doc = scene_doc()
    doc["contacts"] = [{"a": "b", "b": "grund"}]
    msg = _error(tmp_path, doc)
    assert "unknown body or geom 'grund'" in msg and "did you mean 'ground'" in msg


def test_unknown_field_suggests(tmp_path):
    msg = _error(tmp_path, scene_doc(veloctiy=[0, 0, 0]))
    assert "did you mean 'velocity'" in msg


def test_unknown_parameter_names_suggest():
    scene = sp.load_scene("ball")
    with pytest.raises(ParameterError, match="did you mean 'ball.velocity'"):
        sp.value_and_grad(scene, 5, lambda tr: tr.position["ball"].sum(), wrt=["ball.velocty"])
    with pytest.raises(ParameterError, match="did you mean 'ball.mass'"):
        sp.simulate(scene, 5, params={"ball.mas": 1.0})


def test_param_value_of_wrong_shape():
    scene = sp.load_scene("ball")
    with pytest.raises(ParameterError, match=r"ball.velocity.*shape \(3,\)"):
        sp.simulate(scene, 5, params={"ball.velocity": [1.0, 2.0]})
    with pytest.raises(ParameterError, match="NaN"):
        sp.simulate(scene, 5, params={"ball.mass": float("nan")})


@pytest.mark.parametrize("name, value, words", [
    ("ball.mass", -1.0, "'ball.mass' must be > 0, got -1"),
    ("ball.mass", 0.0, "'ball.mass' must be > 0, got 0"),
    ("ball.radius", -0.5, "'ball.radius' must be > 0"),
    ("ground.friction", -0.1, "'ground.friction' must be >= 0"),
    ("ball.restitution", [0.2, -0.3], "'ball.restitution' must be >= 0, got -0.3"),
    ("ball.mass", "heavy", "'ball.mass' must be a number"),
])
def test_param_values_are_checked_like_scene_fields(name, value, words):
    """A `params=` override outside what the scene reader accepts is a
    ParameterError naming the parameter, numerically and in a graph."""
    scene = sp.load_scene("ball")
    with pytest.raises(ParameterError, match=words):
        sp.simulate(scene, 5, params={name: value})
    with pytest.raises(ParameterError, match=words):
        sp.rollout(scene, 5, params={name: value})


def test_params_must_be_a_mapping():
    scene = sp.load_scene("ball")
    with pytest.raises(ParameterError, match="params= must be a dict.*got a list"):
        sp.simulate(scene, 5, params=[("ball.mass", 1.0)])
    with pytest.raises(ParameterError, match="params= must be a dict"):
        sp.rollout(scene, 5, params=[("ball.mass", 1.0)])


def test_bad_backend():
    from symphys.errors import BackendError
    with pytest.raises(BackendError, match="did you mean 'numba'"):
        sp.simulate(sp.load_scene("ball"), 5, backend="numbaa")


def test_builder_equals_file(tmp_path):
    built = (sp.SceneBuilder("t", dt=0.01).ground(friction=0.5)
             .sphere("b", radius=0.1, mass=1.0, position=[0, 0, 1]).build())
    loaded = sp.load_scene(_write(tmp_path, scene_doc()))
    assert built.bodies == loaded.bodies and built.ground == loaded.ground
    assert built.structure_key() == loaded.structure_key()
    np.testing.assert_equal(built.parameters(), loaded.parameters())


# -- joints and motors ----------------------------------------------------------
def _jointed(joint=None, motor=None):
    doc = scene_doc()
    doc["bodies"].append({"name": "c", "shape": "box", "size": [0.1, 0.1, 0.1], "mass": 1.0,
                          "position": [0, 0, 0.5]})
    entry = {"name": "j", "type": "hinge", "parent": "b", "child": "c",
             "anchor": [0, 0, 0.75], "axis": [0, 1, 0]}
    entry.update(joint or {})
    doc["joints"] = [entry]
    if motor is not None:
        doc["motors"] = [dict({"name": "m", "joint": "j"}, **motor)]
    return doc


def test_valid_joint_and_motor_load(tmp_path):
    scene = sp.load_scene(_write(tmp_path, _jointed(motor={"gain": 5.0})))
    assert scene.joint_names == ("j",) and scene.motor_names == ("m",)
    # "auto" contacts skip the jointed pair (both still touch the ground).
    assert {(c.a, c.b) for c in scene.contacts} == {("b", "ground"), ("c", "ground")}
    assert "j.anchor" in scene.parameters() and "m.gain" in scene.parameters()


@pytest.mark.parametrize("joint, field, text", [
    ({"type": "screw"}, "type", "unknown value 'screw'"),
    ({"parent": "bb"}, "parent", "did you mean 'b'"),
    ({"child": "world"}, "child", "unknown body 'world'"),
    ({"child": "b"}, "child", "jointed to itself"),
    ({"axis": [0, 0, 0]}, "axis", "zero axis"),
    ({"axis": [0, 1]}, "axis", "list of 3 numbers"),
    ({"limits": [0.5, -0.5]}, "limits", "low < high"),
    ({"type": "ball", "axis": [0, 1, 0]}, "axis", "not used by a ball joint"),
    ({"type": "ball", "axis": None, "limits": [0.1, 0.5]}, "limits",
     "a ball joint's limits are [0, "),
    ({"type": "ball", "axis": None, "limits": [0, 4]}, "limits", "at most pi"),
    ({"type": "universal"}, "axis2", "missing"),
    ({"type": "universal", "axis2": [0, 0.6, 0.8]}, "axis2", "must be perpendicular"),
    ({"type": "universal", "axis2": [1, 0, 0], "limits": [-1, 1]}, "limits",
     "command_range instead"),
    ({"axis2": [1, 0, 0]}, "axis2", "not used by a hinge joint"),
    ({"anchor": None}, "anchor", "missing"),
])
def test_joint_errors_name_joint_and_field(tmp_path, joint, field, text):
    doc = _jointed({k: v for k, v in joint.items() if v is not None})
    for key in [k for k, v in joint.items() if v is None]:
        del doc["joints"][0][key]
    msg = _error(tmp_path, doc)
    assert "joint 'j'" in msg and f"field '{field}'" in msg and text in msg


def test_duplicate_joint_name(tmp_path):
    doc = _jointed()
    doc["joints"].append(dict(doc["joints"][0]))
    assert "duplicate joint name" in _error(tmp_path, doc)


@pytest.mark.parametrize("motor, field, text", [
    ({"joint": "k"}, "joint", "unknown joint 'k'"),
    ({"mode": "servo"}, "mode", "unknown value 'servo'"),
    ({"gain": -1}, "gain", "must be >= 0"),
    ({"max_torque": -1}, "max_torque", "must be >= 0"),
    ({"command_range": [1, 1]}, "command_range", "low < high"),
])
def test_motor_errors_name_motor_and_field(tmp_path, motor, field, text):
    msg = _error(tmp_path, _jointed(motor=motor))
    assert "motor 'm'" in msg and f"field '{field}'" in msg and text in msg


_UNIVERSAL = {"type": "universal", "axis2": [1, 0, 0]}


@pytest.mark.parametrize("joint, motors, field, text", [
    ({}, [{"axis": 1}], "axis", "not used on a hinge joint"),
    (_UNIVERSAL, [{"axis": 2}], "axis", "expected 0 (the joint's axis) or 1"),
    (_UNIVERSAL, [{"axis": 1}, {"name": "m2", "axis": 1}], "joint",
     "already has a motor on axis 1"),
])
def test_motor_axis_errors(tmp_path, joint, motors, field, text):
    doc = _jointed(joint, motor=motors[0])
    doc["motors"] += [dict({"name": "m", "joint": "j"}, **m) for m in motors[1:]]
    msg = _error(tmp_path, doc)
    assert f"field '{field}'" in msg and text in msg


def test_universal_joint_takes_a_motor_per_axis(tmp_path):
    doc = _jointed(_UNIVERSAL, motor={"axis": 0})
    doc["motors"].append({"name": "m2", "joint": "j", "axis": 1})
    scene = sp.load_scene(_write(tmp_path, doc))
    assert [m.axis for m in scene.motors] == [0, 1]
    assert scene.joints[0].n_coordinates == 2
    doc["sensors"] = [{"type": "joint_angle", "joint": "j"}]
    assert "joint sensors read hinges and sliders" in _error(tmp_path, doc)


def test_motor_on_a_ball_joint_is_refused(tmp_path):
    doc = _jointed({"type": "ball"}, motor={})
    del doc["joints"][0]["axis"]
    assert "motors drive hinge, slider and universal joints only" in _error(tmp_path, doc)


def test_unknown_joint_parameter_suggests(tmp_path):
    scene = sp.load_scene(_write(tmp_path, _jointed(motor={})))
    with pytest.raises(ParameterError, match="did you mean 'j.anchor'"):
        sp.simulate(scene, 2, params={"j.anchr": [0, 0, 0]})


def test_shipped_arm_scene():
    arm = sp.load_scene("arm")
    assert arm.motor_names == ("shoulder_yaw", "shoulder_pitch", "elbow_yaw", "elbow_pitch")
    assert arm.n_observations == 4 + 3 + 3 and arm.n_targets == 3
    assert arm.contacts == () and len(arm.bodies) == 5 and len(arm.joints) == 5


@pytest.mark.parametrize("sensor, field, text", [
    ({"type": "gyro"}, "type", "unknown value 'gyro'"),
    ({"type": "joint_angle", "joint": "k"}, "joint", "unknown joint 'k'"),
    ({"type": "position", "body": "cc"}, "body", "did you mean 'c'"),
    ({"type": "position", "joint": "j"}, "joint", "not used by a position sensor"),
    ({"type": "time", "frequencies": []}, "frequencies", "non-empty list"),
    ({"type": "target", "size": 0}, "size", "must be > 0"),
])
def test_sensor_errors_name_sensor_and_field(tmp_path, sensor, field, text):
    doc = _jointed()
    doc["sensors"] = [dict({"name": "s"}, **sensor)]
    msg = _error(tmp_path, doc)
    assert "sensor 's'" in msg and f"field '{field}'" in msg and text in msg


def test_shipped_quadruped_revisited_scene():
    """A5's quadruped: 13 bodies, 8 hip/knee servos at 4 N m, 28.7 kg,
    standing on its four feet."""
    a5 = sp.load_scene("quadruped_revisited")
    assert len(a5.bodies) == 13 and len(a5.motors) == 8
    assert all(m.max_torque == 4.0 and m.gain == 50 for m in a5.motors)
    assert sum(b.mass for b in a5.bodies) == pytest.approx(28.7, abs=0.02)
    feet = [b for b in a5.bodies if b.name.endswith("_foot")]
    assert len(feet) == 4 and all(b.position[2] == pytest.approx(b.radius) for b in feet)
    assert {(c.a, c.b) for c in a5.contacts} == {(b, "ground") for b in
                                                 ["spine", *(f.name for f in feet)]}
    assert a5.n_observations == 2 and a5.dt == 0.005


def test_target_distance_sensor_reads_three_task_inputs():
    scene = (sp.SceneBuilder("t").sphere("s", radius=0.1, mass=1.0)
             .sphere("t", radius=0.1, mass=1.0, position=[1, 0, 0])
             .joint("j", "hinge", parent="s", child="t", anchor=[0.5, 0, 0], axis=[0, 1, 0])
             .motor("m", joint="j")
             .sensor("target_distance", body="t").sensor("target", size=2).build())
    assert scene.n_observations == 1 + 2 and scene.n_targets == 3 + 2


@pytest.mark.parametrize("damping,words", [(-1.0, "must be >= 0"), (100.0, "below 1"),
                                           (150.0, "below 1")])
def test_velocity_damping_out_of_range(tmp_path, damping, words):
    """A negative drag, or one that would reverse velocities in a step
    (λ dt >= 1, here dt = 0.01), is refused naming the solver field."""
    doc = scene_doc()
    doc["solver"] = {"velocity_damping": damping}
    msg = _error(tmp_path, doc)
    assert "solver" in msg and "field 'velocity_damping'" in msg and words in msg


def test_velocity_damping_is_a_parameter_only_when_present():
    builder = lambda d: (sp.SceneBuilder("d", dt=0.01, velocity_damping=d)
                         .sphere("b", radius=0.1, mass=1.0, position=[0, 0, 1]).build())
    assert "solver.velocity_damping" not in builder(0.0).parameters()
    assert builder(2.0).parameters()["solver.velocity_damping"] == 2.0
    # Its value is an input: two drags share one graph; none is another.
    assert builder(2.0).structure_key() == builder(3.0).structure_key()
    assert builder(2.0).structure_key() != builder(0.0).structure_key()


def test_stiction_velocity_needs_a_penalty_model(tmp_path):
    doc = scene_doc()
    doc["solver"] = {"stiction_velocity": 0.1}
    msg = _error(tmp_path, doc)
    assert "field 'stiction_velocity'" in msg and "penalty" in msg
    doc["solver"]["model"] = "penalty"
    assert sp.scene_from_dict(doc).solver.stiction_velocity == 0.1


def test_overriding_sets_defaults_of_scenes_read_within():
    """Within `overriding`, a file, a dict and a builder scene get the named
    values as defaults, checked like `params=`; outside, nothing changes."""
    with overriding({"ball.mass": 2.0, "ground.friction": 0.25,
                     "world.gravity": [0, 0, -5]}):
        ball = sp.load_scene("ball")
        built = (sp.SceneBuilder("b").ground().body("ball", "sphere", radius=0.1, mass=1.0)
                 .build())
    assert ball.bodies[0].mass == 2.0 and ball.ground.friction == 0.25
    assert ball.gravity == (0.0, 0.0, -5.0) and built.gravity == (0.0, 0.0, -5.0)
    assert built.bodies[0].mass == 2.0
    assert sp.load_scene("ball").bodies[0].mass != 2.0
    with pytest.raises(ParameterError, match="'ball.mass' must be > 0"):
        with overriding({"ball.mass": -1}):
            sp.load_scene("ball")
    with pytest.raises(ParameterError, match="no scene this run read"):
        with overriding({"crate.mass": 1}):
            sp.load_scene("ball")
