"""How precisely does a vision controller read the A6 cart's position and
the bar's angle from one 96 x 32 image? (Session 23's diagnosis of the
distilled students; see README, Results, A6.)

Renders random poses (cart x uniform in [-1.2, 1.2] m, bar angle uniform
in [-pi, pi]), fits each network variant to (x, sin angle, cos angle) by
Adam on 64-image batches, and prints the held-out RMSE of each output
every 500 updates.

    python docs/a6_readout_precision.py [flatten] [keypoints]

One core, about 0.9 s per update. Measured here (6000 training images,
500 held out): flatten 8/16/16/16 after 500 updates x 0.020 m; keypoints
8/16/16 after 500 updates 0.024 m, after 1000 0.022 m.
"""

import sys
import time

import numpy as np
import pytensor.tensor as pt

from symphys.camera import render
from symphys.compiler.backends import compile
from symphys.experiments import pendulum_camera as pc
from symphys.learn import teachers as teaching
from symphys.learn import vision
from symphys.learn.imitation import Demonstrations, fit_demonstrations, imitation_function

STAGES, UPDATES, ROWS = 4, 500, 64


def images(rend, model, rng, n):
    """(n, 1, H W 3) images of random poses and their (n, 1, 3) targets."""
    x = rng.uniform(-1.2, 1.2, n)
    angle = rng.uniform(-np.pi, np.pi, n)
    pos, rot = model.poses(x, angle)
    out = np.concatenate([np.asarray(rend(pos[i:i + 500], rot[i:i + 500]))
                          for i in range(0, n, 500)])
    return out.reshape(n, 1, -1), np.stack([x, np.sin(angle), np.cos(angle)], -1)[:, None, :]


def main(which):
    scene = pc.camera_scene(pc.RESOLUTION)
    model = teaching.BarModel.of(scene)
    pos = pt.tensor("positions", dtype="float64", shape=(None, 2, 3))
    rot = pt.tensor("rotations", dtype="float64", shape=(None, 2, 3, 3))
    rend = compile([pos, rot], render(scene, scene.cameras[0], pos, rot), "jax")
    rng = np.random.default_rng(0)
    train_x, train_y = images(rend, model, rng, 6000)
    test_x, test_y = images(rend, model, rng, 500)
    w, h = pc.RESOLUTION
    variants = {
        "flatten": vision.VisionController((h, w, 3), 3, channels=(8, 16, 16, 16),
                                       output_scale=1.5, pool=vision.Pool.MEAN),
        "keypoints": vision.VisionController((h, w, 3), 3, channels=(8, 16, 16), output_scale=1.5,
                                         pool=vision.Pool.MEAN, readout=vision.Readout.KEYPOINTS),
    }
    for name in which or list(variants):
        ctrl = variants[name]
        fit = imitation_function(ctrl, ROWS, 1, train_x.shape[-1], 0, "jax")
        weights = {k: pt.tensor(k, dtype="float64", shape=s)
                   for k, s in ctrl.parameter_shapes().items()}
        obs = pt.matrix("observations", dtype="float64")
        carry = [pt.zeros((obs.shape[0], n)) for n in ctrl.carry_sizes()]
        predict = compile([obs, *weights.values()], ctrl.apply(weights, obs, carry, None)[0],
                          "jax")
        data = Demonstrations()
        data.add(train_x, train_y)
        values, start = ctrl.init(0), time.time()
        for stage in range(STAGES):
            values, losses = fit_demonstrations(fit, data, values, rows=ROWS, length=1,
                                                updates=UPDATES,
                                                learning_rate=1e-3 * 0.5 ** stage, rng=rng)
            guess = np.asarray(predict(test_x[:, 0].astype(float), *values.values()))
            rmse = np.sqrt(((guess - test_y[:, 0]) ** 2).mean(0))
            print(f"{name}: {UPDATES * (stage + 1)} updates, train mse {losses[-50:].mean():.5f}, "
                  f"held-out rmse x {rmse[0]:.4f} m, sin {rmse[1]:.4f}, cos {rmse[2]:.4f} "
                  f"({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
