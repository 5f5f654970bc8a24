"""Populations on a Ray cluster: a local cluster of 2 workers started here
gives the in-process results (CMA-ES on the thrown ball, the alpha-order
estimator, system identification from several starts), survives a worker
that dies, and an unreachable cluster is a clear error."""

import os
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
import scale_objectives
from test_sysid import COLUMNS, STEPS, bench_builder, recording, true_params

import symphys as sp
from symphys import sysid
from symphys.experiments import ball_throw
from symphys.learn.estimators import EstimatorOptions, estimate
from symphys.learn.optim import cmaes_minimise
from symphys.scale import ClusterError, InProcess, RayCluster, Recipe

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    ray.cloudpickle.register_pickle_by_value(scale_objectives)
    with RayCluster(workers=2, progress=False) as c:
        yield c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_cluster_is_a_clear_error():
    address = f"127.0.0.1:{_free_port()}"
    with pytest.raises(ClusterError, match=f"no Ray cluster answers at {address}"):
        RayCluster(address, timeout=1.0)
    with pytest.raises(ClusterError, match="expected host:port"):
        RayCluster("nowhere", timeout=1.0)


def test_a_recipe_must_pickle_and_an_executor_takes_recipes():
    with pytest.raises(sp.SymphysError, match="do not pickle"):
        Recipe(scale_objectives.bowl, (threading.Lock(),))
    with pytest.raises(ClusterError, match="Recipe"):
        cmaes_minimise(scale_objectives.bowl(), np.zeros(2), 1.0, 10, executor=InProcess())


def test_thrown_ball_populations_and_cmaes_match_the_in_process_run(cluster):
    """The ball's CMA-ES objective (one batched simulation of a population
    on each worker, its share padded to the compiled batch) gives the
    in-process losses bit for bit, and the experiment's CMA-ES run follows
    the same path on both."""
    scene = sp.load_scene("ball")
    recipe = Recipe(ball_throw.throw_losses, (scene, "numba", 10))
    xs = np.random.default_rng(0).normal(size=(23, 6))
    here = InProcess()
    np.testing.assert_allclose(cluster.evaluate(recipe, xs), here.evaluate(recipe, xs),
                               rtol=0, atol=1e-12)
    runs = [ball_throw._cmaes(scene, "numba", 60, 0, False, executor)
            for executor in (here, cluster)]
    assert runs[0].evaluations == runs[1].evaluations >= 60
    np.testing.assert_allclose(runs[1].best_curve, runs[0].best_curve, rtol=0, atol=1e-12)
    np.testing.assert_allclose(runs[1].x, runs[0].x, rtol=0, atol=1e-12)


def test_cmaes_and_the_estimators_take_an_executor(cluster):
    """cmaes_minimise and the alpha-order estimator with the same seeds:
    the same result in process and on the cluster (shares padded to the
    objective's rows)."""
    here = cmaes_minimise(Recipe(scale_objectives.bowl, (None, False)), np.zeros(3), 0.5, 200,
                          seed=3, executor=InProcess())
    there = cmaes_minimise(Recipe(scale_objectives.bowl, (7, False)), np.zeros(3), 0.5, 200,
                           seed=3, executor=cluster)
    assert here.evaluations == there.evaluations
    np.testing.assert_allclose(there.curve, here.curve, rtol=0, atol=1e-12)
    options = EstimatorOptions(samples=20, sigma=0.1)
    theta = np.array([0.3, -0.2, 0.9])
    a = estimate(scale_objectives.bowl(), theta, "alpha", options, np.random.default_rng(5))
    b = estimate(Recipe(scale_objectives.bowl, (7,)), theta, "alpha", options,
                 np.random.default_rng(5), executor=cluster)
    np.testing.assert_allclose(b.gradient, a.gradient, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.first, a.first, rtol=0, atol=1e-12)
    assert b.value == pytest.approx(a.value, abs=1e-12)


def test_a_worker_that_dies_is_restarted_and_the_run_completes(cluster, tmp_path):
    marker = tmp_path / "died"
    before = cluster.worker_pids()
    xs = np.arange(12.0).reshape(6, 2)
    out = cluster.evaluate(Recipe(scale_objectives.dies_once, (str(marker),)), xs)
    np.testing.assert_array_equal(out, np.sum(xs ** 2, axis=1))
    dead = int(marker.read_text())
    assert dead in before
    after = cluster.worker_pids()
    assert dead not in after and len(after) == 2


def test_sysid_from_several_starts_on_the_cluster(cluster):
    """The sysid bench's block friction fitted from 3 starts (the scene's
    value and two drawn ones): every start reaches the truth, and the
    cluster's fits equal the in-process ones."""
    scene = bench_builder().build()
    traj = sp.simulate(scene, STEPS, params=true_params(scene), backend="numba",
                       action=[2.0, 0.5])
    rows = np.arange(0, STEPS + 1, 10)
    values = np.stack([traj.position["block"][rows, 0], traj.position["rod"][rows, 0],
                       traj.position["rod"][rows, 2], traj.position["cart"][rows, 0],
                       traj.position["carriage"][rows, 0]], axis=1)
    assert values.shape[1] == len(COLUMNS)
    rec = recording(scene, traj.time[rows], values)
    options = dict(starts=3, seed=1, segment_steps=STEPS, chunk=16, max_evaluations=30,
                   uncertainty=False, progress=False,
                   params={k: v for k, v in true_params(scene).items()
                           if k != "block.friction"})
    here = sysid.fit_from_starts(scene, [rec], ["block.friction"], **options)
    there = sysid.fit_from_starts(scene, [rec], ["block.friction"], executor=cluster,
                                  **options)
    starts = [float(s["block.friction"]) for s in here.starts]
    assert starts[0] == scene.parameters()["block.friction"] and len(set(starts)) == 3
    for a, b in zip(here.results, there.results):
        assert float(a.values["block.friction"]) == pytest.approx(0.5, rel=1e-6)
        np.testing.assert_allclose(b.values["block.friction"], a.values["block.friction"],
                                   rtol=0, atol=1e-12)
    assert here.best.cost == there.best.cost


def test_the_command_line_says_which_experiments_take_a_cluster():
    result = subprocess.run([sys.executable, "-m", "symphys.cli.main", "experiment",
                             "quadruped-speed", "--quick", "--ray", "local"],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "evaluates no populations, so it takes no --ray" in result.stderr
    # the address from the environment reaches the experiment's executor
    address = f"127.0.0.1:{_free_port()}"
    result = subprocess.run([sys.executable, "-m", "symphys.cli.main", "experiment",
                             "ball-throw", "--quick"], capture_output=True, text=True,
                            env=dict(os.environ, SYMPHYS_RAY_ADDRESS=address))
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"symphys: error: no Ray cluster answers at {address}" in result.stderr
    assert "Traceback" not in result.stderr
