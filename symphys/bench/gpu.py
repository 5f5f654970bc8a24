"""The GPU benchmark: the quadruped on the jax backend at large batches.

`symphys bench-gpu [--batches 1024,4096,16384] [--steps 200]
[--scene quadruped] [--json results/gpu_bench.json]` compiles the forward
rollout and its gradient once per batch size (JAX specialises shapes) and
reports world-steps per second for each, with the device JAX ran on. It
runs on whatever device JAX picks: a GPU where `jax[cuda]` is installed and
one is present, else the CPU (docs/benchmarks.md says which it was run on).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from symphys.bench import runner, timing


def measure(scene: str, batch: int, steps: int, repeats: int = 3) -> dict:
    """World-steps per second forward and forward+backward at one batch."""
    import jax

    start = time.perf_counter()
    fwd, grad, args, _, c_fwd, c_grad = runner._engine_functions(scene, batch, "jax", steps)
    compile_s = time.perf_counter() - start
    t_fwd, _ = timing.median_time(fwd, args, repeats)
    t_grad, _ = timing.median_time(grad, args, repeats)
    world_steps = batch * steps
    return {"scene": scene, "batch": batch, "steps": steps,
            "device": str(jax.devices()[0]), "platform": jax.default_backend(),
            "forward_s": t_fwd, "gradient_s": t_grad,
            "forward_world_steps_per_s": world_steps / t_fwd,
            "gradient_world_steps_per_s": world_steps / t_grad,
            "compile_forward_s": c_fwd, "compile_gradient_s": c_grad,
            "compile_s": compile_s}


def main(scene: str = "quadruped", batches=(1024, 4096, 16384), steps: int = 200,
         json_path: str | None = "results/gpu_bench.json") -> list[dict]:
    """`measure` at each batch size, printed as it goes and written to
    `json_path` after each."""
    rows = []
    for batch in batches:
        row = measure(scene, batch, steps)
        rows.append(row)
        print(f"{row['scene']} B={batch} on {row['device']}: forward "
              f"{row['forward_world_steps_per_s']:.3g} world-steps/s, with gradient "
              f"{row['gradient_world_steps_per_s']:.3g} (compile {row['compile_s']:.0f} s)",
              flush=True)
        if json_path:
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(json_path).write_text(json.dumps(rows, indent=1))
    return rows
