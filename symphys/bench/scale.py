"""`symphys bench-scale`: CMA-ES generation throughput in this process and
on a Ray cluster with 1 and 2 workers, and what 64 workers would give.

The objective is the thrown ball's (experiment ball-throw: 500 steps, one
batched Numba simulation per share). For each population size it times a
generation (median of `repeats` after a warm-up) in process and with each
worker count, and measures what a model of larger clusters needs:
- the cost of one simulated world, c (in-process time / population);
- the cost of a round of dispatch, d(k) = a + b k for k shares of a
  trivial objective (Ray's per-call overhead, measured on the cluster);
- the bytes sent per generation (candidates, P x 6 x 8) and returned (P x 8).
A generation on W workers then takes about d(W) + ceil(P / W) c; the plan
in the JSON evaluates that for W = 64.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from symphys.bench.timing import median_time
from symphys.experiments.common import pyplot

POPULATIONS = (16, 128, 1024)
WORKERS = (1, 2)
PLAN_WORKERS = 64
PLAN_POPULATIONS = (64, 256, 1024, 4096)


def trivial():
    """An objective that does nothing: what a round of dispatch costs."""
    def objective(thetas):
        return np.zeros(len(thetas))
    return objective


def _median_seconds(call, repeats: int) -> float:
    """Median seconds of `repeats` calls after one that builds the objective
    where it runs."""
    call()
    return median_time(call, (), repeats)[0]


def measure(populations=POPULATIONS, workers=WORKERS, repeats: int = 3,
            backend: str = "numba", show: bool = True) -> dict:
    """The measurements and the plan, as the JSON holds them."""
    import ray

    from symphys.compiler.loops import Loops, loops
    from symphys.experiments.ball_throw import STEPS, throw_losses
    from symphys.scale import InProcess, RayCluster, Recipe
    from symphys.scene.reader import load_scene

    scene = load_scene("ball")
    rng = np.random.default_rng(0)
    started = not ray.is_initialized()
    if started:
        # every process runs the ball's loop compiled (not interpreted while
        # a background process compiles it)
        ray.init(num_cpus=max(workers), include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR",
                 runtime_env={"env_vars": {"SYMPHYS_LOOPS": Loops.COMPILED.value}})
    rows = []
    try:
        here = InProcess()
        for count in populations:
            thetas = rng.normal(size=(count, 6))
            recipe = Recipe(throw_losses, (scene, backend, count))
            with loops(Loops.COMPILED):
                here.evaluate(recipe, thetas)
            row = {"population": count,
                   "in_process_s": _median_seconds(lambda: here.evaluate(recipe, thetas),
                                                   repeats)}
            for w in workers:
                with RayCluster(None, workers=w, progress=False) as cluster:
                    shared = Recipe(throw_losses, (scene, backend, cluster.share_rows(count)))
                    row[f"ray_{w}_s"] = _median_seconds(
                        lambda: cluster.evaluate(shared, thetas), repeats)
            rows.append(row)
            if show:
                print("population {population}: in process {in_process_s:.3f} s".format(**row)
                      + "".join(f", {w} workers {row[f'ray_{w}_s']:.3f} s" for w in workers))
        with RayCluster(None, workers=max(workers), progress=False) as cluster:
            dispatch = []
            for shares in (1, 2, 4, 8):
                cluster.shares = shares
                count = shares * cluster.workers
                dispatch.append((count, _median_seconds(
                    lambda: cluster.evaluate(Recipe(trivial), np.zeros((count, 6))),
                    max(repeats, 5))))
    finally:
        if started:
            ray.shutdown()
    k, d = np.array(dispatch).T
    b, a = np.polyfit(k, d, 1)
    world_s = min(r["in_process_s"] / r["population"] for r in rows)
    plan = []
    for count in PLAN_POPULATIONS:
        seconds = a + b * PLAN_WORKERS + math.ceil(count / PLAN_WORKERS) * world_s
        plan.append({"population": count, "workers": PLAN_WORKERS,
                     "generation_s": seconds, "generations_per_s": 1.0 / seconds,
                     "in_process_s": count * world_s,
                     "speedup": count * world_s / seconds,
                     "bytes_out": count * 6 * 8, "bytes_back": count * 8})
    return {"objective": f"ball-throw losses, {STEPS} steps, {backend}",
            "rows": rows, "world_seconds": world_s,
            "dispatch": {"calls": k.tolist(), "seconds": d.tolist(),
                         "fixed_s": float(a), "per_call_s": float(b)},
            "plan": plan}


def plot(result: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    pops = [r["population"] for r in result["rows"]]
    ax[0].plot(pops, [1 / r["in_process_s"] for r in result["rows"]], "o-", label="in process")
    for key in result["rows"][0]:
        if key.startswith("ray_"):
            w = key.split("_")[1]
            ax[0].plot(pops, [1 / r[key] for r in result["rows"]], "s-",
                       label=f"Ray, {w} worker{'s' if w != '1' else ''}")
    ax[0].set(xscale="log", yscale="log", xlabel="population", ylabel="generations / s",
              title="measured (2-core machine)")
    ax[0].legend()
    plan = result["plan"]
    ax[1].plot([p["population"] for p in plan], [p["speedup"] for p in plan], "o-")
    ax[1].axhline(PLAN_WORKERS, ls=":", c="gray")
    ax[1].set(xscale="log", xlabel="population", ylabel="speed-up over one process",
              title=f"model, {PLAN_WORKERS} workers")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(json_path="results/bench-scale.json", plot_path=None, populations=POPULATIONS,
         repeats: int = 3) -> dict:
    result = measure(populations, repeats=repeats)
    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=1))
    plot_path = plot_path or json_path.with_suffix(".png")
    plot(result, plot_path)
    d = result["dispatch"]
    print(f"one world: {result['world_seconds'] * 1e3:.2f} ms; a round of dispatch: "
          f"{d['fixed_s'] * 1e3:.1f} ms + {d['per_call_s'] * 1e3:.2f} ms per call")
    for p in result["plan"]:
        print(f"{PLAN_WORKERS} workers, population {p['population']}: "
              f"{p['generation_s']:.3f} s a generation, {p['speedup']:.1f}x one process, "
              f"{p['bytes_out']} B out and {p['bytes_back']} B back")
    print(f"wrote {json_path} and {plot_path}")
    return result
