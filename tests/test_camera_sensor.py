"""The camera sensor: a scene camera's image as observation columns (JAX,
tiny images)."""

import numpy as np
import pytensor.tensor as pt
import pytest

import symphys as sp
from symphys.api import _inputs
from symphys.camera.image import render_state
from symphys.compiler.backends import compile as sp_compile
from symphys.errors import SceneError
from symphys.physics.model import build_model
from symphys.physics.sensors import observe
from symphys.scene.elements import SensorKind

RESOLUTION = (16, 8)           # width, height


def _builder(sensor_camera="cam"):
    """A cart on a rail (slider, position servo) carrying a hinged bar,
    filmed from the front; the only sensor is the camera."""
    return (sp.SceneBuilder("cart-camera", dt=0.01, iterations=8)
            .box("cart", size=[0.2, 0.1, 0.05], mass=1.0, position=[0, 0, 0.3],
                 color=[0.8, 0.3, 0.2])
            .box("bar", size=[0.04, 0.04, 0.6], mass=0.1, position=[0, 0, 0.0],
                 color=[0.2, 0.4, 0.8])
            .joint("rail", "slider", "world", "cart", anchor=[0, 0, 0.3], axis=[1, 0, 0])
            .joint("pivot", "hinge", "cart", "bar", anchor=[0, 0, 0.3], axis=[0, 1, 0])
            .motor("drive", "rail", "position", gain=20.0, max_velocity=3.0, max_torque=50.0)
            .camera("cam", position=[0, 2, 0.3], direction=[0, -1, 0], up=[0, 0, 1],
                    focal_length=0.018, sensor_size=[0.036, 0.018], resolution=list(RESOLUTION),
                    soft_edge=1.0)
            .sensor("camera", camera=sensor_camera)
            .contacts([]))


@pytest.fixture(scope="module")
def scene():
    return _builder().build()


def test_camera_sensor_width_and_errors(scene):
    (sensor,) = scene.sensors
    assert sensor.kind is SensorKind.CAMERA and sensor.source == "cam"
    assert sensor.width == RESOLUTION[0] * RESOLUTION[1] * 3 == scene.n_observations
    with pytest.raises(SceneError, match="sensor.*field 'camera'.*unknown camera 'cma'"):
        _builder("cma").build()


def test_camera_sensor_reads_the_rendered_image(scene):
    """The observation is the image sp.render gives, row-major."""
    sym = _inputs(scene, set())
    bodies, world, state = build_model(scene, sym, set())
    obs = observe(scene, state, pt.zeros((1, 1)), None, bodies, world, None, render=render_state)
    f = sp_compile(list(sym.values()), obs, backend="jax")
    values = scene.parameters()
    got = f(*[values[k] for k in sym])
    image = sp.render(scene, camera="cam", backend="jax")
    assert image.shape == (RESOLUTION[1], RESOLUTION[0], 3)
    np.testing.assert_allclose(np.asarray(got).reshape(-1), image.reshape(-1), atol=1e-12)
    assert image.std() > 0.01                                   # the bodies are in view


def test_the_camera_read_is_part_of_the_graph_key(scene):
    """The image is in the graph: changing the camera a sensor reads
    changes the structure key; a camera no sensor reads does not, nor does
    any camera without a camera sensor."""
    import dataclasses
    (cam,) = scene.cameras
    softer = dataclasses.replace(scene, cameras=(dataclasses.replace(cam, soft_edge=2.0),))
    assert softer.structure_key() != scene.structure_key()
    extra = dataclasses.replace(scene, cameras=(cam, dataclasses.replace(cam, name="cam2")))
    assert extra.structure_key() == scene.structure_key()
    assert dataclasses.replace(scene, sensors=()).structure_key() == \
        dataclasses.replace(softer, sensors=()).structure_key()


# A vision controller trained in the closed loop (gradients reaching the
# convolution weights through the rendered images): tests/test_pendulum_camera.py.
