"""symphys: a differentiable rigid-body physics engine built on PyTensor.

Stable surface (see README.md):

    import symphys as sp
    scene = sp.load_scene("ball")
    traj = sp.simulate(scene, steps=500)
    loss, grads = sp.value_and_grad(scene, 500, loss_fn, wrt=["ball.velocity"])
"""

from symphys import camera, nn, optim
from symphys.api import render, simulate, value_and_grad
from symphys.function_cache import clear_cache
from symphys.backends import Backend, compile
from symphys.compiled_loops import Loops, loops
from symphys.errors import (BackendError, ExportError, ParameterError, SceneError,
                            SymphysError)
from symphys.export import export, load_compiled
from symphys.params import symbols
from symphys.rollout import Trajectory, rollout
from symphys.scene import (Body, Camera, FrictionModel, Ground, Joint, JointType, Motor,
                           MotorMode, Plane, Scene, Sensor, SensorKind, Shape, SolverOptions,
                           Texture, TextureKind)
from symphys.timeloop import LoopOptions
from symphys.scene_io import SceneBuilder, available_scenes, load_scene, scene_from_dict

__version__ = "0.1.0"

__all__ = [
    "Backend", "BackendError", "Body", "Camera", "ExportError", "FrictionModel", "Ground",
    "Joint", "JointType", "LoopOptions", "Loops", "Motor", "MotorMode", "ParameterError", "Plane",
    "Scene", "SceneBuilder", "SceneError", "Sensor", "SensorKind", "Shape", "SolverOptions",
    "SymphysError", "Texture", "TextureKind", "Trajectory", "available_scenes", "camera",
    "clear_cache", "compile", "export", "load_compiled", "load_scene", "loops", "nn", "optim",
    "render",
    "rollout", "scene_from_dict", "simulate", "symbols", "value_and_grad",
]
