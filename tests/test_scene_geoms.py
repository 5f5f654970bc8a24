"""Geoms in the scene layer: read from a file, written back, built in
Python, refused where they make no sense, in contact pairs and `auto`
contacts, and as `params=` overrides."""

import copy
import json
from dataclasses import replace

import pytest

from symphys.errors import ParameterError, SceneError
from symphys.physics.contacts import contact_blocks
from symphys.scene.builder import SceneBuilder
from symphys.scene.elements import ContactKind, Geom, Shape
from symphys.scene.reader import load_scene, overriding, scene_from_dict
from symphys.scene.writer import scene_to_dict, write_scene


def _doc():
    """A hopping leg and a box on the ground, a foot and a knee pad on the
    leg, a second shape on the box, and a wall fixed to the world."""
    return {
        "format": "symphys-scene/1", "name": "geoms",
        "ground": {"friction": 0.8},
        "bodies": [
            {"name": "leg", "shape": "capsule", "radius": 0.05, "length": 0.4, "mass": 1.0,
             "position": [0, 0, 0.5]},
            {"name": "crate", "shape": "box", "size": [0.2, 0.2, 0.2], "mass": 2.0,
             "position": [1, 0, 0.1]},
        ],
        "geoms": [
            {"name": "foot", "body": "leg", "shape": "sphere", "radius": 0.08,
             "position": [0, 0, 0.25], "friction": 1.5, "color": [0.1, 0.2, 0.3]},
            {"name": "pad", "body": "leg", "shape": "box", "size": [0.1, 0.1, 0.05],
             "position": [0.05, 0, 0.5], "quaternion": [2, 0, 0, 0]},
            {"name": "lid", "body": "crate", "shape": "capsule", "radius": 0.02,
             "length": 0.2, "position": [1, 0, 0.22], "quaternion": [1, 0, 1, 0],
             "restitution": 0.3},
            {"name": "wall", "body": "world", "shape": "box", "size": [0.1, 2, 1],
             "position": [2, 0, 0.5]},
        ],
    }


def _read(doc, source="test.json"):
    return scene_from_dict(copy.deepcopy(doc), source=source)


def _error(doc) -> str:
    with pytest.raises(SceneError) as info:
        _read(doc)
    return str(info.value)


def test_a_file_with_geoms_reads_and_writes_back_equal(tmp_path):
    scene = _read(_doc())
    foot, pad, lid, wall = scene.geoms
    assert scene.geom_names == ("foot", "pad", "lid", "wall")
    assert foot == Geom("foot", "leg", Shape.SPHERE, radius=0.08, position=(0.0, 0.0, 0.25),
                        quaternion=(1.0, 0.0, 0.0, 0.0), friction=1.5, color=(0.1, 0.2, 0.3))
    assert pad.quaternion == (1.0, 0.0, 0.0, 0.0)           # normalised
    assert lid.quaternion == pytest.approx((0.5 ** 0.5, 0.0, 0.5 ** 0.5, 0.0))
    assert lid.restitution == 0.3 and lid.length == 0.2 and wall.body == "world"
    assert scene.collider("lid") is lid and scene.collider("leg") is scene.bodies[0]
    again = load_scene(write_scene(scene, tmp_path / "geoms.json"))
    assert replace(again, source=scene.source) == scene and again.geoms == scene.geoms
    assert again.structure_key() == scene.structure_key()
    assert [g["name"] for g in scene_to_dict(scene)["geoms"]] == ["foot", "pad", "lid", "wall"]


def test_a_scene_without_geoms_writes_no_geoms_field():
    doc = _doc()
    del doc["geoms"]
    assert "geoms" not in scene_to_dict(_read(doc))


def test_position_and_quaternion_default_to_the_body_pose():
    doc = _doc()
    doc["bodies"][1]["quaternion"] = [0, 0, 0, 1]
    doc["geoms"] = [{"name": "g", "body": "crate", "shape": "sphere", "radius": 0.1},
                    {"name": "w", "body": "world", "shape": "sphere", "radius": 0.1}]
    g, w = _read(doc).geoms
    assert (g.position, g.quaternion) == ((1.0, 0.0, 0.1), (0.0, 0.0, 0.0, 1.0))
    assert (w.position, w.quaternion) == ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))


@pytest.mark.parametrize("change, item, field, words", [
    ({"name": "crate"}, "geom 'crate'", "name", "already a body's name"),
    ({"name": "pad"}, "geom 'pad'", "name", "duplicate geom name"),
    ({"name": "world"}, "geom 'world'", "name", "'world' is reserved"),
    ({"name": "ground"}, "geom 'ground'", "name", "'ground' is reserved"),
    ({"body": "lag"}, "geom 'foot'", "body", "unknown body 'lag' (did you mean 'leg'?)"),
    ({"radius": 0.0}, "geom 'foot'", "radius", "must be > 0, got 0.0"),
    ({"radius": None}, "geom 'foot'", "radius", "missing"),
    ({"size": [1, 1, 1]}, "geom 'foot'", "size", "not used by a sphere"),
    ({"length": 0.1}, "geom 'foot'", "length", "not used by a sphere"),
    ({"friction": -1}, "geom 'foot'", "friction", "must be >= 0, got -1"),
    ({"restitution": -0.5}, "geom 'foot'", "restitution", "must be >= 0"),
    ({"rolling_friction": -0.01}, "geom 'foot'", "rolling_friction", "must be >= 0"),
    ({"quaternion": [0, 0, 0, 0]}, "geom 'foot'", "quaternion", "zero quaternion"),
    ({"position": [0, 0]}, "geom 'foot'", "position", "expected a list of 3 numbers"),
    ({"color": [2, 0, 0]}, "geom 'foot'", "color", "expected an RGB colour"),
    ({"shape": "cone"}, "geom 'foot'", "shape", "unknown value 'cone'"),
    ({"mass": 1.0}, "geom 'foot'", "mass", "unknown field"),
])
def test_geom_errors_name_the_geom_and_field(change, item, field, words):
    doc = _doc()
    doc["geoms"][0].update(change)
    doc["geoms"][0] = {k: v for k, v in doc["geoms"][0].items() if v is not None}
    if change.get("name") == "pad":
        doc["geoms"][0], doc["geoms"][1] = doc["geoms"][1], doc["geoms"][0]
    msg = _error(doc)
    assert f"test.json, {item}, field '{field}': " in msg and words in msg, msg


def test_an_unnamed_geom_is_named_by_its_index():
    doc = _doc()
    del doc["geoms"][2]["name"]
    assert "test.json, geoms[2], field 'name': missing" in _error(doc)


def test_geoms_must_be_a_list():
    doc = _doc()
    doc["geoms"] = {"name": "foot"}
    assert "field 'geoms': expected a list of geoms" in _error(doc)


def _pairs(doc) -> list[tuple[str, str]]:
    return [(c.a, c.b) for c in _read(doc).contacts]


@pytest.mark.parametrize("a, b, pair", [
    ("foot", "ground", ("foot", "ground")),
    ("ground", "lid", ("lid", "ground")),
    ("foot", "crate", ("foot", "crate")),          # sphere-box
    ("crate", "foot", ("foot", "crate")),
    ("lid", "foot", ("lid", "foot")),              # capsule-sphere
    ("foot", "lid", ("lid", "foot")),
    ("wall", "foot", ("foot", "wall")),            # the world geom is b
    ("wall", "leg", ("leg", "wall")),              # capsule-box
    ("pad", "crate", ("pad", "crate")),
])
def test_contact_pairs_name_geoms_and_are_ordered(a, b, pair):
    doc = _doc()
    doc["contacts"] = [{"a": a, "b": b}]
    assert _pairs(doc) == [pair]


@pytest.mark.parametrize("a, b, words", [
    ("foot", "fot", "unknown body or geom 'fot' (did you mean 'foot'?)"),
    ("foot", "leg", "both on body 'leg': a body's geoms cannot touch the body"),
    ("pad", "foot", "both on body 'leg': a body's geoms cannot touch the body"),
    ("wall", "ground", "'wall' and 'ground' are both fixed to the world; neither moves"),
    ("foot", "foot", "a geom cannot touch itself"),
])
def test_contact_pairs_of_geoms_are_refused(a, b, words):
    doc = _doc()
    doc["contacts"] = [{"a": a, "b": b}]
    msg = _error(doc)
    assert "test.json, contacts[0], field 'b': " in msg and words in msg, msg


def test_two_world_geoms_cannot_touch():
    doc = _doc()
    doc["geoms"].append({"name": "post", "body": "world", "shape": "sphere", "radius": 0.1})
    doc["contacts"] = [{"a": "post", "b": "wall"}]
    assert "'post' and 'wall' are both fixed to the world; neither moves" in _error(doc)


def test_a_box_against_a_world_sphere_keeps_the_box_as_a():
    """sphere-box takes the sphere first, but a world geom is always b: the
    pair stays (crate, post) and its block takes the two swapped."""
    doc = _doc()
    doc["geoms"].append({"name": "post", "body": "world", "shape": "sphere", "radius": 0.1})
    doc["contacts"] = [{"a": "post", "b": "crate"}]
    scene = _read(doc)
    assert [(p.a, p.b) for p in scene.contacts] == [("crate", "post")]
    (block,) = contact_blocks(scene)
    assert (block.kind, block.flip) == (ContactKind.SPHERE_BOX, True)


def test_auto_contacts_with_geoms():
    doc = _doc()
    doc["geoms"].append({"name": "post", "body": "world", "shape": "sphere", "radius": 0.1,
                         "position": [3, 0, 0]})
    assert _pairs(doc) == [
        # bodies as in a scene without geoms
        ("leg", "ground"), ("crate", "ground"), ("leg", "crate"),
        # moving geoms against the ground
        ("foot", "ground"), ("pad", "ground"), ("lid", "ground"),
        # colliders on different bodies, at least one a geom
        ("leg", "lid"), ("foot", "crate"), ("crate", "pad"), ("lid", "foot"), ("lid", "pad"),
        # every moving collider against every world geom (the boxes crate and pad
        # too against the world sphere: the step swaps them for sphere-box)
        ("leg", "wall"), ("crate", "wall"), ("foot", "wall"), ("pad", "wall"),
        ("lid", "wall"),
        ("leg", "post"), ("crate", "post"), ("foot", "post"), ("pad", "post"),
        ("lid", "post"),
    ]


def test_auto_contacts_skip_jointed_bodies_geoms():
    doc = _doc()
    doc["joints"] = [{"name": "j", "type": "ball", "parent": "leg", "child": "crate",
                      "anchor": [0.5, 0, 0.3]}]
    doc["geoms"] = doc["geoms"][:3]
    assert _pairs(doc) == [("leg", "ground"), ("crate", "ground"), ("foot", "ground"),
                           ("pad", "ground"), ("lid", "ground")]


def test_auto_contacts_of_scenes_without_geoms_are_unchanged():
    doc = _doc()
    del doc["geoms"]
    assert _pairs(doc) == [("leg", "ground"), ("crate", "ground"), ("leg", "crate")]


def _built():
    return (SceneBuilder("geoms").ground(friction=0.8)
            .capsule("leg", radius=0.05, length=0.4, mass=1.0, position=[0, 0, 0.5])
            .box("crate", size=[0.2, 0.2, 0.2], mass=2.0, position=[1, 0, 0.1])
            .geom("foot", "leg", "sphere", radius=0.08, position=[0, 0, 0.25], friction=1.5,
                  color=(0.1, 0.2, 0.3))
            .geom("pad", "leg", "box", size=(0.1, 0.1, 0.05), position=(0.05, 0, 0.5),
                  quaternion=[2, 0, 0, 0])
            .geom("lid", "crate", "capsule", radius=0.02, length=0.2, position=[1, 0, 0.22],
                  quaternion=[1, 0, 1, 0], restitution=0.3)
            .geom("wall", "world", "box", size=[0.1, 2, 1], position=[2, 0, 0.5]))


def test_builder_and_file_give_equal_scenes(tmp_path):
    path = tmp_path / "geoms.json"
    path.write_text(json.dumps(_doc()))
    built, loaded = _built().build(), load_scene(path)
    assert replace(built, source=loaded.source) == loaded
    assert len(built.geoms) == 4 and built.contacts == loaded.contacts


def test_builder_checks_geoms_as_a_file():
    builder = _built().geom("toe", "leg", "sphere", radius=0.02, size=[1, 1, 1])
    with pytest.raises(SceneError, match=r"geom 'toe', field 'size': not used by a sphere"):
        builder.build()


def test_a_params_override_lands_on_a_geom():
    with overriding({"foot.radius": 0.05, "lid.position": [1.0, 0.0, 0.3]}):
        scene = _read(_doc())
    assert scene.collider("foot").radius == 0.05
    assert scene.collider("lid").position == (1.0, 0.0, 0.3)
    assert scene.parameters()["foot.radius"] == 0.05
    assert scene.bodies == _read(_doc()).bodies


def test_a_params_override_on_a_geom_is_checked():
    with pytest.raises(ParameterError, match=r"'foot.radius' must be > 0"):
        with overriding({"foot.radius": -0.05}):
            _read(_doc())


def test_rolling_friction_on_a_geom_with_a_penalty_model():
    doc = _doc()
    doc["solver"] = {"model": "penalty"}
    doc["geoms"][2]["rolling_friction"] = 0.01
    assert "geom 'lid', field 'rolling_friction': rolling friction 0.01 is not modelled" \
        in _error(doc)


def _camera_scene():
    """A small box body with a ball geom 0.5 m above it, and a capsule post
    fixed to the world; a 16 x 8 camera looking along +y at z = 0.5."""
    cam = dict(position=[0, -2, 0.5], direction=[0, 1, 0], up=[0, 0, 1], focal_length=0.018,
               sensor_size=[0.036, 0.018], resolution=[16, 8], background=[0, 0, 0],
               ambient=1.0)
    return (SceneBuilder("look").box("arm", size=[0.02] * 3, mass=1, position=[30, 0, 0.5],
                                     color=[0, 0, 1])
            .geom("hand", "arm", "sphere", radius=0.3, position=[30, 0, 1.0], color=[1, 0, 0])
            .geom("post", "world", "capsule", radius=0.2, length=0.2, position=[-0.6, 0, 0.5],
                  color=[0, 1, 0])
            .geom("thumb", "arm", "sphere", radius=0.1, position=[30, 0, 0.5])
            .camera("c", **cam).build())


def test_geom_colours_default_to_their_body():
    from symphys.camera.image import PALETTE, body_colour

    scene = _camera_scene()
    assert [body_colour(scene, i) for i in range(4)] == [
        (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]
    plain = replace(scene, geoms=(replace(scene.geoms[1], color=None),))
    assert body_colour(plain, 1) == PALETTE[1]
    assert scene.appearance_key(scene.cameras[0]) != plain.appearance_key(scene.cameras[0])


def test_cameras_see_geoms_move_with_their_body():
    """The hand is drawn where the arm's pose puts it; the post stays put."""
    pytest.importorskip("jax")
    import numpy as np
    import pytensor.tensor as pt

    import symphys as sp
    from symphys.camera import image as C
    from symphys.physics.algebra import quat_to_mat_array

    scene = _camera_scene()
    pos = pt.tensor("pos", dtype="float64", shape=(None, 1, 3))
    rot = pt.tensor("rot", dtype="float64", shape=(None, 1, 3, 3))
    render = sp.compile([pos, rot], C.render(scene, "c", pos, rot), backend="jax")

    def seen(centre, quaternion, channel):
        image = render(np.array([[centre]], float),
                       quat_to_mat_array(np.array([quaternion], float))[None])[0]
        return {tuple(int(i) for i in ij) for ij in np.argwhere(image[..., channel] > 0.5)}

    # Pixel (row, col) of world (x, z) at depth 2 m: 2 pixels per 0.5 m.
    upright = seen([0, 0, 0], [1, 0, 0, 0], 0)             # hand at (0, 0, 0.5)
    assert upright == {(3, 7), (3, 8), (4, 7), (4, 8)}
    turned = seen([0, 0, 0], [0.5 ** 0.5, 0, 0.5 ** 0.5, 0], 0)   # about y: hand at (0.5, 0, 0)
    assert turned == {(5, 9), (5, 10), (6, 9), (6, 10)}
    post = {(3, 5), (4, 5)}
    assert seen([0, 0, 0], [1, 0, 0, 0], 1) == seen([0.3, 0, 0], [1, 0, 0, 0], 1) == post
