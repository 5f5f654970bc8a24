"""symphys: a differentiable rigid-body physics engine built on PyTensor.

Stable surface (see README.md):

    import symphys as sp
    scene = sp.load_scene("ball")
    traj = sp.simulate(scene, steps=500)
    loss, grads = sp.value_and_grad(scene, 500, loss_fn, wrt=["ball.velocity"])
"""

from symphys import camera
from symphys.api import render, simulate, value_and_grad
from symphys.compiler.backends import Backend, compile
from symphys.compiler.caches.compiled_functions import clear_cache
from symphys.compiler.export.read import load_compiled
from symphys.compiler.export.write import export
from symphys.compiler.loops import Loops, loops
from symphys.errors import (BackendError, ExportError, ParameterError, SceneError,
                            SimulationError, SimulationWarning, SymphysError)
from symphys.learn import nn, optim
from symphys.loop.rollout import Trajectory, rollout
from symphys.loop.timeloop import LoopOptions
from symphys.mjcf import load_mjcf, load_urdf
from symphys.scene.builder import SceneBuilder
from symphys.scene.elements import (Body, Camera, FrictionModel, Ground, Joint, JointType, Motor,
                                    MotorMode, Plane, Sensor, SensorKind, Shape, SolverOptions,
                                    Texture, TextureKind)
from symphys.scene.params import symbols
from symphys.scene.reader import available_scenes, load_scene, scene_from_dict
from symphys.scene.scene import Scene
from symphys.scene.writer import scene_to_dict, write_scene
from symphys.version import __version__

__all__ = [
    "__version__",
    "Backend", "BackendError", "Body", "Camera", "ExportError", "FrictionModel", "Ground",
    "Joint", "JointType", "LoopOptions", "Loops", "Motor", "MotorMode", "ParameterError", "Plane",
    "Scene", "SceneBuilder", "SceneError", "Sensor", "SimulationError", "SimulationWarning", "SensorKind", "Shape", "SolverOptions",
    "SymphysError", "Texture", "TextureKind", "Trajectory", "available_scenes", "camera",
    "clear_cache", "compile", "export", "load_compiled", "load_mjcf", "load_scene", "load_urdf",
    "loops", "nn", "optim",
    "render",
    "rollout", "scene_from_dict", "scene_to_dict", "simulate", "symbols", "value_and_grad",
    "write_scene",
]
