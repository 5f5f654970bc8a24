"""The differentiable camera: geometry against the pinhole model, textures,
gradients against finite differences, backends, and camera validation.

One scene (a sphere, a box and a capsule, all textured, and the ground) and
small images (64 x 32); each JAX function is compiled once per module and
serves every test that uses its camera (bodies not under test are moved out
of view).
"""

import json

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

import symphys as sp
from symphys.camera import geometry
from symphys.camera import image as C
from symphys.errors import SceneError
from symphys.scene.textures import texture_pixels

pytest.importorskip("jax")

W, H = 64, 32
AWAY = [30.0, 0.0, 0.5]            # out of every camera's view
CAM = {"name": "cam", "position": [0, -2, 0.5], "direction": [0, 1, 0], "up": [0, 0, 1],
       "focal_length": 0.018, "sensor_size": [0.036, 0.018], "resolution": [W, H],
       "background": [0, 0, 0]}
SOFT = dict(CAM, name="soft", soft_edge=0.5)
TINY = dict(CAM, name="tiny", resolution=[16, 8], rays_per_pixel=4, direction=[0.1, 1, -0.15])
BALL, CRATE, ROD = 0, 1, 2
# Grey squares: times a body's colour they keep it pure red or green.
CHECKER = {"checker": [[1, 1, 1], [0.5, 0.5, 0.5]], "scale": [0.25, 0.5]}


def _texture_image():
    """A 4 x 8 blue-only image (r = g = 0), smooth enough to differentiate."""
    i, j = np.mgrid[0:4, 0:8]
    blue = 0.4 + 0.6 * ((3 * i + 5 * j) % 8) / 7
    return np.stack([0 * blue, 0 * blue, blue], axis=-1)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    from matplotlib.image import imsave

    folder = tmp_path_factory.mktemp("camera")
    imsave(folder / "stripes.png", _texture_image())
    doc = {
        "format": "symphys-scene/1", "name": "camera-test", "ground": {},
        "bodies": [
            {"name": "ball", "shape": "sphere", "radius": 0.3, "mass": 1, "color": [1, 0, 0],
             "texture": CHECKER, "position": [0.1, 0, 0.5]},
            {"name": "crate", "shape": "box", "size": [0.6, 0.4, 0.4], "mass": 1,
             "color": [1, 1, 1], "texture": {"image": "stripes.png"}, "position": AWAY},
            {"name": "rod", "shape": "capsule", "radius": 0.05, "length": 0.4, "mass": 1,
             "color": [0, 1, 0], "texture": CHECKER, "position": [0.5, 0.5, 0.4],
             "quaternion": [0.9239, 0.3827, 0, 0]},
        ],
        "cameras": [CAM, SOFT, TINY],
    }
    path = folder / "scene.json"
    path.write_text(json.dumps(doc))
    return sp.load_scene(path)


def _image_and_grad(scene, camera):
    """Compiled (JAX) f(positions (1, 3, 3), rotations, ground height,
    target (1, H, W, 3)) -> [image, loss, d loss / d positions, d loss / d
    height], loss = sum((image - target)**2)."""
    pos = pt.tensor("pos", dtype="float64", shape=(1, 3, 3))
    rot = pt.tensor("rot", dtype="float64", shape=(1, 3, 3, 3))
    height = pt.dscalar("height")
    target = pt.tensor("target", dtype="float64", shape=(1, H, W, 3))
    image = C.render(scene, camera, pos, rot, {"ground.height": height})
    loss = ((image - target) ** 2).sum()
    return sp.compile([pos, rot, height, target], [image, loss, *pytensor.grad(loss, [pos, height])],
                      backend="jax")


@pytest.fixture(scope="module")
def hard(scene):
    return _image_and_grad(scene, "cam")


@pytest.fixture(scope="module")
def soft(scene):
    return _image_and_grad(scene, "soft")


def _poses(scene, **moved):
    """(positions (1, 3, 3), rotations (1, 3, 3, 3)): the scene's, with
    bodies in `moved` at new places (the rest out of view unless kept)."""
    from symphys.physics.algebra import quat_to_mat_array

    pos = np.array([AWAY] * 3, float)
    for name, value in moved.items():
        pos[scene.body_index(name)] = value
    rot = quat_to_mat_array(np.array([b.quaternion for b in scene.bodies]))
    return pos[None], rot[None]


def _render(fn, scene, height=0.0, target=None, **moved):
    pos, rot = _poses(scene, **moved)
    target = np.zeros((1, H, W, 3)) if target is None else target
    image, loss, g_pos, g_height = fn(pos, rot, height, target)
    return image[0], float(loss), g_pos[0], float(g_height)


def _masks(image):
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    return {"ball": (r > 0) & (g == 0) & (b == 0), "crate": (b > 0) & (r == 0) & (g == 0),
            "rod": (g > 0) & (r == 0) & (b == 0), "ground": (r > 0) & (r == g) & (g == b),
            "none": (r == 0) & (g == 0) & (b == 0)}


def _bilinear(image, u, v):
    """NumPy bilinear sample of a repeating texture at (u, v)."""
    rows, cols = image.shape[:2]
    x, y = (u % 1.0) * cols - 0.5, (v % 1.0) * rows - 0.5
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = x - x0, y - y0
    i0, j0 = int(x0) % cols, int(y0) % rows
    i1, j1 = (i0 + 1) % cols, (j0 + 1) % rows
    return ((1 - fy) * ((1 - fx) * image[j0, i0] + fx * image[j0, i1])
            + fy * ((1 - fx) * image[j1, i0] + fx * image[j1, i1]))


def _shade(camera, normal):
    light = np.asarray(camera.light_direction) / np.linalg.norm(camera.light_direction)
    return camera.ambient + (1 - camera.ambient) * max(float(np.dot(normal, light)), 0.0)


def test_sphere_disc_matches_pinhole_projection(scene, hard):
    camera = scene.camera("cam")
    centre = np.array([0.1, 0.0, 0.5])
    image, *_ = _render(hard, scene, ball=centre)
    mask = _masks(image)["ball"]
    rows, cols = np.nonzero(mask)
    # The disc's centroid is the centre's projection; its area that of the
    # circle whose radius is the tangent cone's half-angle on the sensor.
    expected_col, expected_row = geometry.project(camera, centre)
    distance = np.linalg.norm(centre - camera.position)
    pitch = camera.sensor_size[0] / camera.resolution[0]
    radius = camera.focal_length * np.tan(np.arcsin(0.3 / distance)) / pitch
    assert abs(cols.mean() - expected_col) < 1.0
    assert abs(rows.mean() - expected_row) < 1.0
    assert abs(np.sqrt(mask.sum() / np.pi) - radius) < 1.0
    assert rows.max() - rows.min() + 1 == pytest.approx(2 * radius, abs=1.5)


def test_box_face_and_ground_where_projective_geometry_says(scene, hard):
    camera = scene.camera("cam")
    centre, half = np.array([0.2, 0.0, 0.5]), np.array([0.3, 0.2, 0.2])
    image, *_ = _render(hard, scene, crate=centre)
    masks = _masks(image)
    # Only the front face (y = -0.2) is visible from x = 0, z = 0.5: the
    # crate covers exactly the pixels whose centres fall inside its
    # projected rectangle.
    corners = geometry.project(camera, [centre + half * [-1, -1, 1], centre + half * [1, -1, -1]])
    (c0, r0), (c1, r1) = corners
    grid_r, grid_c = np.mgrid[0:H, 0:W]
    margins = np.abs(np.concatenate([np.arange(W) - c0, np.arange(W) - c1,
                                     np.arange(H) - r0, np.arange(H) - r1]))
    assert margins.min() > 1e-6          # no pixel centre on an edge
    inside = (grid_c > min(c0, c1)) & (grid_c < max(c0, c1)) & (grid_r > r0) & (grid_r < r1)
    np.testing.assert_array_equal(masks["crate"], inside)
    # The ground is every other pixel whose ray points down: the horizon
    # is the middle of the image (camera level, looking horizontally).
    down = geometry.ray_directions(camera)[:, 2].reshape(H, W) < 0
    np.testing.assert_array_equal(masks["ground"], down & ~inside)
    np.testing.assert_array_equal(masks["none"], ~down & ~inside)
    # Colours: texture sampled bilinearly at the hit point, times the light.
    d = geometry.ray_directions(camera).reshape(H, W, 3)
    texture = texture_pixels(scene.bodies[CRATE].texture)
    ground_texture = texture_pixels(scene.ground.texture)
    for row, col in [(13, 32), (15, 36), (18, 39)]:
        t = (centre[1] - half[1] - camera.position[1]) / d[row, col, 1]
        p = np.asarray(camera.position) + t * d[row, col] - centre
        expected = _bilinear(texture, p[0] / (2 * half[0]) + 0.5, 0.5 - p[2] / (2 * half[2]))
        np.testing.assert_allclose(image[row, col], expected * _shade(camera, [0, -1, 0]),
                                   atol=1e-12)
    for row, col in [(20, 3), (25, 10), (31, 60), (18, 62)]:
        t = -camera.position[2] / d[row, col, 2]
        p = np.asarray(camera.position) + t * d[row, col]
        # The ground's u axis is world x, v is -y (`camera.plane_axes`).
        expected = _bilinear(ground_texture, p[0], -p[1])
        np.testing.assert_allclose(image[row, col], expected * _shade(camera, [0, 0, 1]),
                                   atol=1e-12)


def _central_difference(f, x, eps):
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        out[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return out


def test_soft_edges_give_the_outline_gradient(scene, soft, hard):
    """With soft edges an image loss is smooth in where outlines lie: its
    gradient for every body kind matches central differences (float64)."""
    start = {"ball": [0.3, 0.0, 0.45], "crate": [-0.25, 0.3, 0.31], "rod": [0.0, -0.8, 0.4]}
    target = np.random.default_rng(3).uniform(0, 1, (1, H, W, 3))

    def soft_loss(flat):
        return _render(soft, scene, target=target, **dict(zip(start, flat.reshape(3, 3))))[1]

    x = np.array(list(start.values()), float).ravel()
    image, loss, g_pos, _ = _render(soft, scene, target=target, **start)
    fd = _central_difference(soft_loss, x, 1e-6).reshape(3, 3)
    assert np.isfinite(g_pos).all() and np.abs(g_pos).min() > 0
    np.testing.assert_allclose(g_pos, fd, rtol=1e-5, atol=1e-8 * np.abs(fd).max())
    # Hard edges, for the record (not asserted: it depends on which pixels
    # an outline crosses): the symbolic gradient has only the shading term;
    # finite differences a pixel wide see the outline move too.
    centre, moved = np.array([0.1, 0.0, 0.5]), np.array([0.13, 0.02, 0.53])
    hard_target = _render(hard, scene, ball=moved)[0][None]
    hard_grad = _render(hard, scene, target=hard_target, ball=centre)[2][BALL]
    hard_fd = _central_difference(
        lambda c: _render(hard, scene, target=hard_target, ball=c)[1], centre, 5e-3)
    print(f"\nsoft, all bodies: grad {g_pos.ravel()}\n  central difference {fd.ravel()}"
          f"\nhard, ball: grad {hard_grad}, difference over 5 mm {hard_fd}")


def test_gradient_through_texture_coordinates(scene, hard):
    """Hard edges: a textured box's and the checkered ground's colours move
    with their texture coordinates; with a step far below a pixel no
    outline crosses a pixel centre, so finite differences see only that."""
    rng = np.random.default_rng(0)
    target = rng.uniform(0, 1, (1, H, W, 3))
    start = np.array([0.2, 0.0, 0.5])
    _, loss, g_pos, g_height = _render(hard, scene, height=0.01, target=target, crate=start)

    def crate_loss(centre):
        return _render(hard, scene, height=0.01, target=target, crate=centre)[1]

    def ground_loss(height):
        return _render(hard, scene, height=float(height[0]), target=target, crate=start)[1]

    fd_pos = _central_difference(crate_loss, start, 1e-7)
    fd_height = _central_difference(ground_loss, np.array([0.01]), 1e-7)[0]
    assert np.abs(g_pos[CRATE]).min() > 0 and g_height != 0
    np.testing.assert_allclose(g_pos[CRATE], fd_pos, rtol=1e-5)
    assert g_height == pytest.approx(fd_height, rel=1e-5)


def test_numba_and_jax_images_agree(scene):
    """Tiny camera (16 x 8, 2 x 2 rays per pixel, turned), every body in
    view: one Numba function for the suite (about 100 s to compile cold)."""
    params = {"crate.position": [-0.3, 0.2, 0.2], "crate.quaternion": [0.92, 0.1, 0, 0.38],
              "ball.position": [0.3, 0.0, 0.35], "rod.position": [-0.3, -1.0, 0.4]}
    numba = sp.render(scene, "tiny", params, backend="numba")
    jax = sp.render(scene, "tiny", params, backend="jax")
    assert numba.shape == (8, 16, 3)
    assert 0 <= numba.min() and numba.max() <= 1
    np.testing.assert_allclose(numba, jax, atol=1e-10)
    red, green = numba[..., 0] - numba[..., 1:].max(-1), numba[..., 1] - numba[..., ::2].max(-1)
    assert red.max() > 0.1 and green.max() > 0.05        # the ball and the rod are in view


def test_render_batched_params(scene):
    heights = np.array([0.0, 0.05])
    batch = sp.render(scene, "tiny", {"ground.height": heights}, backend="jax")
    assert batch.shape == (2, 8, 16, 3)
    one = sp.render(scene, "tiny", {"ground.height": 0.05}, backend="jax")
    np.testing.assert_allclose(batch[1], one, atol=1e-12)
    assert not np.allclose(batch[0], batch[1])


# -- scene files and validation (no compiling) -----------------------------
def _doc(**camera):
    cam = dict(CAM, name="bad")
    cam.update(camera)
    return {"format": "symphys-scene/1", "name": "t",
            "bodies": [{"name": "b", "shape": "sphere", "radius": 0.1, "mass": 1.0}],
            "cameras": [cam]}


@pytest.mark.parametrize("change, field, words", [
    ({"direction": [0, 0, 0]}, "direction", "zero-length"),
    ({"focal_length": 0}, "focal_length", "> 0"),
    ({"focal_length": -0.01}, "focal_length", "> 0"),
    ({"up": [0, 2, 0]}, "up", "parallel"),
    ({"sensor_size": [0.036, 0]}, "sensor_size", "> 0"),
    ({"resolution": [64, 0]}, "resolution", "positive integer"),
    ({"resolution": [64.5, 32]}, "resolution", "positive integer"),
    ({"rays_per_pixel": 2}, "rays_per_pixel", "square"),
    ({"soft_edge": -1}, "soft_edge", ">= 0"),
    ({"ambient": 1.5}, "ambient", "[0, 1]"),
    ({"background": [0, 0, 2]}, "background", "RGB"),
    ({"focal": 0.02}, "focal", "did you mean 'focal_length'"),
    ({"planes": [{"point": [0, 1, 0], "normal": [0, 0, 0]}]}, "planes[0].normal", "zero"),
    ({"planes": [{"point": [0, 1, 0], "normal": [0, 1, 0], "colour": [1, 1, 1]}]},
     "planes[0].colour", "did you mean 'color'"),
    ({"planes": [{"point": [0, 1, 0], "normal": [0, 1, 0], "texture": {"image": "nope.png"}}]},
     "planes[0].texture.image", "cannot read image"),
])
def test_bad_camera_names_camera_and_field(change, field, words):
    with pytest.raises(SceneError) as info:
        sp.scene_from_dict(_doc(**change), source="cams.json")
    message = str(info.value)
    assert "cams.json" in message and "camera 'bad'" in message
    assert info.value.field == field and words in message


def test_camera_dataclass_checks_itself():
    with pytest.raises(SceneError, match="camera 'c'.*field 'direction'.*zero-length"):
        sp.Camera(name="c", position=(0, 0, 0), direction=(0, 0, 0))
    with pytest.raises(SceneError, match="field 'focal_length'"):
        sp.Camera(name="c", position=(0, 0, 0), direction=(1, 0, 0), focal_length=0.0)


def test_scene_file_cameras_colours_and_textures(scene):
    cam = scene.camera("cam")
    assert cam.resolution == (W, H) and cam.sensor_size == (0.036, 0.018)
    assert scene.bodies[BALL].color == (1.0, 0.0, 0.0)
    assert scene.bodies[CRATE].texture.kind is sp.TextureKind.IMAGE
    assert scene.ground.texture is not None               # the default checker
    with pytest.raises(SceneError, match="did you mean 'cam'"):
        scene.camera("cma")
    doc = _doc()
    doc["ground"] = {"color": [0.2, 0.5, 0.2], "texture": None}
    doc["bodies"][0]["texture"] = {"checker": [[1, 1, 1], [0, 0, 0]], "scale": [0.5, 0.5]}
    parsed = sp.scene_from_dict(doc)
    assert parsed.ground.texture is None and parsed.ground.color == (0.2, 0.5, 0.2)
    assert parsed.bodies[0].texture.scale == (0.5, 0.5)
    with pytest.raises(SceneError, match="field 'texture.checker\\[1\\]'"):
        doc["bodies"][0]["texture"] = {"checker": [[1, 1, 1], [0, 0, 3]]}
        sp.scene_from_dict(doc)
    # Cameras and colours shape no physics graph.
    plain = sp.scene_from_dict({k: v for k, v in _doc().items() if k != "cameras"})
    assert plain.structure_key() == sp.scene_from_dict(_doc()).structure_key()
