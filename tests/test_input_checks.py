"""Input that once slipped through: each is refused with a SceneError or
ParameterError naming the file or scene, the item and the field (no NaN,
no raw traceback). Nothing here compiles."""

import json
import warnings

import numpy as np
import pytest

import symphys as sp
from symphys.errors import ParameterError, SceneError
from symphys.scene.elements import MAX_ITERATIONS
from symphys.scene.shipped import scenes_dir

from scenes import scene_doc


def _error(tmp_path, doc, error=SceneError) -> str:
    path = tmp_path / "scene.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(error) as info:
        sp.load_scene(path)
    assert str(path) in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("radius,density,mass", [(1e200, 1e300, "inf"), (1e-10, 1e-300, "0")])
def test_mass_from_density_is_finite_and_positive(tmp_path, radius, density, mass):
    doc = scene_doc(radius=radius, density=density)
    del doc["bodies"][0]["mass"]
    msg = _error(tmp_path, doc)
    assert "body 'b'" in msg and "field 'density'" in msg and f"mass of {mass} kg" in msg


def test_solver_iterations_are_bounded(tmp_path):
    doc = scene_doc()
    doc["solver"] = {"iterations": MAX_ITERATIONS}
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(doc))
    assert sp.load_scene(path).solver.iterations == MAX_ITERATIONS
    doc["solver"] = {"iterations": 10 ** 12}
    msg = _error(tmp_path, doc)
    assert "solver" in msg and "field 'iterations'" in msg and f"at most {MAX_ITERATIONS}" in msg
    doc["solver"] = {"renormalisation_iterations": 10 ** 12}
    assert "field 'renormalisation_iterations'" in _error(tmp_path, doc)


def test_restitution_above_one_is_refused(tmp_path):
    msg = _error(tmp_path, scene_doc(restitution=1.5))
    assert "body 'b'" in msg and "field 'restitution'" in msg and "at most 1" in msg
    doc = scene_doc()
    doc["ground"]["restitution"] = 2.0
    msg = _error(tmp_path, doc)
    assert "ground" in msg and "field 'restitution'" in msg
    doc = scene_doc()
    doc["geoms"] = [{"name": "g", "body": "b", "shape": "sphere", "radius": 0.05,
                     "position": [0, 0, 1], "restitution": 1.01}]
    assert "geom 'g'" in _error(tmp_path, doc)
    scene = sp.load_scene("ball")
    assert sp.scene.params.with_values(scene, {"ball.restitution": 1.0})
    for name in ("ball.restitution", "ground.restitution"):
        with pytest.raises(ParameterError, match=f"'{name}' must be at most 1, got 1.2"):
            sp.simulate(scene, 5, params={name: [0.5, 1.2]})


def test_zero_quaternion_in_params_is_refused_as_in_a_file():
    scene = sp.load_scene("ball")
    for call in (sp.simulate, sp.rollout):
        with pytest.raises(ParameterError, match="'ball.quaternion': zero quaternion"):
            call(scene, 5, params={"ball.quaternion": [[1, 0, 0, 0], [0, 0, 0, 0]]})
    with pytest.raises(ParameterError, match="zero quaternion"):
        sp.scene.params.with_values(scene, {"ball.quaternion": [0, 0, 0, 0]})


@pytest.mark.parametrize("value", [None, [0.0, None, 1.0]])
def test_none_is_reported_as_none(value):
    scene = sp.load_scene("ball")
    name = "ball.mass" if value is None else "ball.position"
    with pytest.raises(ParameterError, match=f"'{name}' is None") as info:
        sp.simulate(scene, 5, params={name: value})
    assert "NaN" not in str(info.value)
    arm = sp.load_scene("arm")
    with pytest.raises(ParameterError, match="action holds None"):
        sp.simulate(arm, 5, action=[0.0, None, 0.0, 0.0])


def test_duplicate_key_in_a_scene_file(tmp_path):
    text = json.dumps(scene_doc()).replace('"mass": 1.0', '"mass": 1.0, "mass": 2.0')
    msg = _error(tmp_path, text)
    assert "object 'b'" in msg and "key 'mass' is given twice" in msg
    text = json.dumps(scene_doc()).replace('{"name": "b"', '{"shape": "box", "shape": "x", "name": "b"')
    assert "object 'b'" in _error(tmp_path, text)         # named by a later "name"


def test_a_local_folder_does_not_hide_a_shipped_scene(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ball").mkdir()
    assert sp.load_scene("ball").body_names == ("ball",)


def test_a_local_file_named_like_a_shipped_scene_says_how_to_pick(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ball").write_text(json.dumps(scene_doc()))
    with pytest.raises(SceneError) as info:
        sp.load_scene("ball")
    msg = str(info.value)
    assert "shipped scene 'ball'" in msg and "'./ball'" in msg
    assert str(scenes_dir() / "ball.json") in msg
    assert sp.load_scene("./ball").name == "t"
    assert sp.load_scene(scenes_dir() / "ball.json").name == "ball"


def test_shipped_scenes_are_named_as_their_files():
    names = sp.available_scenes()
    assert "hopper" not in names and "quadruped_revisited" in names
    for name in names:
        assert sp.load_scene(name).name == name


def test_the_old_hopper_name_loads_with_a_warning():
    with pytest.warns(FutureWarning, match="'hopper' is now called 'quadruped_revisited'"):
        scene = sp.load_scene("hopper")
    assert scene.name == "quadruped_revisited"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sp.load_scene("quadruped_revisited")


def test_messages_count_in_the_singular_and_plural():
    from symphys.errors import counted
    from symphys.scale.recipe import pad
    assert [counted(1, "motor"), counted(2, "motor"), counted(0, "output")] == [
        "1 motor", "2 motors", "0 outputs"]
    assert counted(1, "body", "bodies") == "1 body" and counted(3, "body", "bodies") == "3 bodies"
    with pytest.raises(ParameterError, match="^2 vectors for a function of 1 row$"):
        pad(np.zeros((2, 3)), 1)


def test_a_fitted_restitution_is_bounded_by_1():
    """System identification bounds a fitted restitution to [0, 1] as the
    scene reader does, unless told otherwise."""
    from symphys.sysid.data import scene_variables
    scene = sp.load_scene("ball")
    values = scene.parameters()
    (v,) = scene_variables(scene, ["ball.restitution"], values)
    assert (v.lower, v.upper) == (0.0, 1.0)
    (v,) = scene_variables(scene, ["ball.mass"], values)
    assert (v.lower, v.upper) == (0.0, np.inf)
