"""Worlds split over JAX devices (`symphys.scale.sharding`): the sharded
call gives the unsharded values and per-world gradients, on 1 device here
and on 4 host devices in a child process (JAX fixes its device count when
it starts)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symphys as sp
from symphys.api import parameter_values, value_and_grad_function
from symphys.errors import ParameterError
from symphys.scale.sharding import shard_worlds

jax = pytest.importorskip("jax")

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax
    import symphys as sp
    from symphys.api import parameter_values, value_and_grad_function
    from symphys.compiler.caches.compiled_functions import clear_cache
    from symphys.scale.sharding import shard_worlds
    from symphys.experiments.ball_throw import loss

    B = 8
    scene = sp.load_scene("ball")
    xs = np.random.default_rng(0).normal(size=(B, 6))
    args, batched = parameter_values(scene, {"ball.velocity": xs[:, :3],
                                             "ball.angular_velocity": xs[:, 3:]})
    fn = value_and_grad_function(scene, 60, loss, ["ball.velocity"], batched, "jax",
                                 batch=B, per_world=True)
    plain = fn(*args)
    # read back from the store with XLA's executable, as a later process does
    clear_cache()
    again = value_and_grad_function(scene, 60, loss, ["ball.velocity"], batched, "jax",
                                    batch=B, per_world=True)(*args)
    assert all(np.array_equal(a, p) for a, p in zip(again, plain))
    sharded = shard_worlds(fn, B)
    out = sharded.call(*args)
    errors = [float(np.max(np.abs(np.asarray(o) - p))) for o, p in zip(out, plain)]
    print(json.dumps({"devices": len(jax.devices()), "errors": errors,
                      "spread": [len(o.sharding.device_set) for o in out],
                      "scale": [float(np.max(np.abs(p))) for p in plain]}))
""")


def test_one_device_is_the_same_code_path_and_bad_batches_are_named():
    from symphys.experiments.ball_throw import loss

    scene = sp.load_scene("ball")
    xs = np.random.default_rng(1).normal(size=(8, 6))
    args, batched = parameter_values(scene, {"ball.velocity": xs[:, :3],
                                             "ball.angular_velocity": xs[:, 3:]})
    # the child process below compiles the same function (read from the store)
    fn = value_and_grad_function(scene, 60, loss, ["ball.velocity"], batched, "jax",
                                 batch=8, per_world=True)
    for got, want in zip(shard_worlds(fn, 8, jax.devices()[:1])(*args), fn(*args)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    with pytest.raises(ParameterError, match="8 worlds do not split evenly over 3 devices"):
        shard_worlds(fn, 8, jax.devices()[:1] * 3)
    with pytest.raises(ParameterError, match="backend 'jax'"):
        shard_worlds(lambda *args: None, 8)


def test_worlds_split_over_four_host_devices_give_the_unsharded_results():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    import json
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["devices"] == 4
    # the per-world losses and their velocity gradients, each world on its device
    assert report["spread"] == [4, 4], report
    for error, scale in zip(report["errors"], report["scale"]):
        assert error <= 1e-12 * max(1.0, scale), report
