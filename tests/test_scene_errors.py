"""Bad scene input gives a SceneError naming the file, the body and the field."""

import json

import numpy as np
import pytest

import symphys as sp
from symphys.errors import ParameterError, SceneError


def _doc(**body):
    base = {"name": "b", "shape": "sphere", "radius": 0.1, "mass": 1.0,
            "position": [0, 0, 1]}
    base.update(body)
    return {"format": "symphys-scene/1", "name": "t", "dt": 0.01,
            "ground": {"friction": 0.5}, "bodies": [base]}


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
    doc = _doc()
    doc["format"] = "symphys-scene/9"
    assert "unknown format version" in _error(tmp_path, doc)


def test_unknown_shape(tmp_path):
    msg = _error(tmp_path, _doc(shape="cone"))
    assert "body 'b'" in msg and "field 'shape'" in msg and "cone" in msg


@pytest.mark.parametrize("field,value", [("radius", 0.0), ("radius", -1.0),
                                         ("mass", 0.0), ("mass", -2.0)])
def test_non_positive(tmp_path, field, value):
    msg = _error(tmp_path, _doc(**{field: value}))
    assert f"field '{field}'" in msg and "must be > 0" in msg and "body 'b'" in msg


def test_non_positive_density_size_length(tmp_path):
    doc = _doc()
    doc["bodies"][0] = {"name": "crate", "shape": "box", "size": [1, 0, 1], "density": 10}
    assert "field 'size'" in _error(tmp_path, doc)
    doc["bodies"][0] = {"name": "crate", "shape": "box", "size": [1, 1, 1], "density": -10}
    assert "field 'density'" in _error(tmp_path, doc)
    doc["bodies"][0] = {"name": "rod", "shape": "capsule", "radius": 0.1, "length": 0,
                        "mass": 1}
    msg = _error(tmp_path, doc)
    assert "body 'rod'" in msg and "field 'length'" in msg


def test_missing_radius_and_mass(tmp_path):
    doc = _doc()
    del doc["bodies"][0]["radius"]
    assert "field 'radius'" in _error(tmp_path, doc) and "missing" in _error(tmp_path, doc)
    doc = _doc()
    del doc["bodies"][0]["mass"]
    assert "field 'mass'" in _error(tmp_path, doc)


def test_nan_and_inf_anywhere(tmp_path):
    text = json.dumps(_doc()).replace('"position": [0, 0, 1]', '"position": [0, NaN, 1]')
    assert "NaN" in _error(tmp_path, text)
    text = json.dumps(_doc()).replace('"friction": 0.5', '"friction": Infinity')
    assert "Infinity" in _error(tmp_path, text)


def test_nan_from_builder():
    with pytest.raises(SceneError, match="non-finite"):
        sp.SceneBuilder("x").sphere("s", radius=0.1, mass=1.0,
                                    velocity=[0, float("nan"), 0]).build()


def test_wrong_vector_length(tmp_path):
    msg = _error(tmp_path, _doc(velocity=[1, 2]))
    assert "field 'velocity'" in msg and "3 numbers" in msg


def test_zero_quaternion(tmp_path):
    assert "zero quaternion" in _error(tmp_path, _doc(quaternion=[0, 0, 0, 0]))


def test_duplicate_names(tmp_path):
    doc = _doc()
    doc["bodies"].append(dict(doc["bodies"][0]))
    assert "duplicate body name" in _error(tmp_path, doc)


def test_contact_with_unknown_body(tmp_path):
    doc = _doc()
    doc["contacts"] = [{"a": "b", "b": "grund"}]
    msg = _error(tmp_path, doc)
    assert "unknown body 'grund'" in msg and "did you mean 'ground'" in msg


def test_unknown_field_suggests(tmp_path):
    msg = _error(tmp_path, _doc(veloctiy=[0, 0, 0]))
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


def test_bad_backend():
    from symphys.errors import BackendError
    with pytest.raises(BackendError, match="did you mean 'numba'"):
        sp.simulate(sp.load_scene("ball"), 5, backend="numbaa")


def test_builder_equals_file(tmp_path):
    built = (sp.SceneBuilder("t", dt=0.01).ground(friction=0.5)
             .sphere("b", radius=0.1, mass=1.0, position=[0, 0, 1]).build())
    loaded = sp.load_scene(_write(tmp_path, _doc()))
    assert built.bodies == loaded.bodies and built.ground == loaded.ground
    assert built.structure_key() == loaded.structure_key()
    np.testing.assert_equal(built.parameters(), loaded.parameters())
