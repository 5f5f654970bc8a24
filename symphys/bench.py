"""`symphys bench`: speed of forward and gradient rollouts, measured side by side.

Each case (scene, batch, backend) runs in a child process twice: first
with empty PyTensor/Numba and symphys graph caches (cold compile), then
with the same caches again (warm compile: rewritten graphs and Numba code
come from disk). Run times are
the median of several calls after the first. Results are printed as a
table with the ratios that matter and written as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

STEPS = 200

CASES_QUICK = [("ball", 1), ("spheres16", 64)]
CASES_FULL = CASES_QUICK + [("spheres16", 1), ("spheres16", 16)]


def _batched_params(scene, batch: int, rng) -> dict:
    """Per-world initial positions (B, 3) for every body when batch > 1."""
    if batch == 1:
        return {}
    out = {}
    for body in scene.bodies:
        base = np.asarray(body.position)
        jitter = rng.uniform(-0.05, 0.05, size=(batch, 3))
        jitter[:, 2] = np.abs(jitter[:, 2])
        out[f"{body.name}.position"] = base + jitter
    return out


def bench_loss(names):
    """Sum of every final state component (position, rotation, velocity,
    angular velocity), so no part of the step is dropped as unused."""
    def loss(tr):
        import pytensor.tensor as pt
        terms = []
        for n in names:
            for field in (tr.position, tr.velocity, tr.angular_velocity):
                terms.append(field[n][..., -1, :].sum())
            terms.append(tr.rotation[n][..., -1, :, :].sum())
        return pt.stack(terms).sum()
    return loss


def measure(scene_name: str, batch: int, backend: str, repeats: int = 5) -> dict:
    """Compile and time one case in this process (called in a child)."""
    from symphys.api import parameter_values, value_and_grad_function, value_function
    from symphys.scene_io import load_scene

    scene = load_scene(scene_name)
    params = _batched_params(scene, batch, np.random.default_rng(0))
    args, batched = parameter_values(scene, params)
    loss = bench_loss(scene.body_names)
    wrt = [f"{scene.bodies[0].name}.velocity"]
    start = time.perf_counter()
    size = batch if batched else None
    fwd = value_function(scene, STEPS, loss, batched, backend, batch=size)
    fwd(*args)
    compile_fwd = time.perf_counter() - start
    start = time.perf_counter()
    grad = value_and_grad_function(scene, STEPS, loss, wrt, batched, backend, batch=size)
    grad(*args)
    compile_grad = time.perf_counter() - start

    def timed(fn):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t)
        return float(np.median(times))

    t_fwd, t_grad = timed(fwd), timed(grad)
    n = len(scene.bodies)
    world_steps = STEPS * batch
    import resource
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"scene": scene_name, "batch": batch, "backend": backend, "rewrites": False,
            "bodies": n, "steps": STEPS,
            "forward_ns_per_world_step": t_fwd / world_steps * 1e9,
            "gradient_ns_per_world_step": t_grad / world_steps * 1e9,
            "forward_ns_per_body_step": t_fwd / (world_steps * n) * 1e9,
            "gradient_ns_per_body_step": t_grad / (world_steps * n) * 1e9,
            "gradient_over_forward": t_grad / t_fwd,
            "compile_forward_s": compile_fwd, "compile_gradient_s": compile_grad,
            "peak_mb": peak_mb}


def _child(scene: str, batch: int, backend: str, cache_dir: str) -> dict:
    env = dict(os.environ)
    env["PYTENSOR_FLAGS"] = f"base_compiledir={cache_dir}"
    env["SYMPHYS_CACHE_DIR"] = os.path.join(cache_dir, "symphys-graphs")
    code = ("import json,sys; from symphys.bench import measure; "
            f"print('RESULT'+json.dumps(measure({scene!r}, {batch}, {backend!r})))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    raise RuntimeError(f"benchmark child failed for {scene}/{batch}/{backend}:\n"
                       f"{out.stderr[-3000:]}")


def run_case(scene: str, batch: int, backend: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="symphys-bench-") as cache:
        cold = _child(scene, batch, backend, cache)
        warm = _child(scene, batch, backend, cache)
    row = dict(warm)
    row["compile_cold_s"] = cold["compile_gradient_s"]
    row["compile_warm_s"] = warm["compile_gradient_s"]
    row["compile_forward_cold_s"] = cold["compile_forward_s"]
    row["compile_forward_warm_s"] = warm["compile_forward_s"]
    return row


def main(json_path: str | None = "results/bench.json", quick: bool = False,
         backends: str = "numba,jax") -> dict:
    from tqdm.auto import tqdm

    from symphys.experiments.common import table

    cases = [(s, b, k) for s, b in (CASES_QUICK if quick else CASES_FULL)
             for k in backends.split(",")]
    rows, failures = [], []
    for scene, batch, backend in tqdm(cases, desc="bench"):
        try:
            rows.append(run_case(scene, batch, backend))
        except RuntimeError as exc:   # keep the other cases' numbers
            failures.append({"scene": scene, "batch": batch, "backend": backend,
                             "error": str(exc)[-2000:]})
            print(f"bench case {scene}/{batch}/{backend} failed:\n{exc}")
    head = ["scene", "batch", "backend", "fwd ns/body-step", "grad ns/body-step",
            "grad/fwd", "compile cold s", "compile warm s", "peak MB"]
    body = [[r["scene"], r["batch"], r["backend"], f"{r['forward_ns_per_body_step']:.1f}",
             f"{r['gradient_ns_per_body_step']:.1f}", f"{r['gradient_over_forward']:.2f}",
             f"{r['compile_cold_s']:.1f}", f"{r['compile_warm_s']:.1f}",
             f"{r['peak_mb']:.0f}"] for r in rows]
    print(table(head, body))
    by = {(r["scene"], r["batch"], r["backend"]): r for r in rows}
    for scene, batch in {(r["scene"], r["batch"]) for r in rows}:
        nb, jx = by.get((scene, batch, "numba")), by.get((scene, batch, "jax"))
        if nb and jx:
            print(f"{scene} B={batch}: numba/jax forward time ratio "
                  f"{nb['forward_ns_per_body_step'] / jx['forward_ns_per_body_step']:.2f}, "
                  f"gradient {nb['gradient_ns_per_body_step'] / jx['gradient_ns_per_body_step']:.2f}")
    doc = {"steps": STEPS, "rows": rows, "peers": [], "failures": failures}
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(doc, indent=1))
        print(f"wrote {json_path}")
    return doc
