"""`symphys bench`: forward and gradient speed, measured side by side.

A case is (scene, batch, backend, rewrites on/off). Each runs in a child
process twice: first with empty PyTensor, Numba and symphys graph caches
(cold compile), then with the same caches again (warm compile: rewritten
graphs and Numba code come from disk). Numba and CVM functions serve every
batch size, so for those backends only a scene's first batched case (and
batch 1, whose graph is unbatched) compiles cold; later batches run warm
in its caches and report its cold figures (`compile_cold_from_batch`).
Run times are the median of several calls after the first. In the same
run, on the same scenes and batches,
the peers are timed in their own child processes: MuJoCo (`mj_step` in a
loop over worlds, and its threaded batched `rollout`; the `mujoco` package,
extra `symphys[bench]`) and, for the sphere scenes, the hand-written Numba
kernel (`symphys.sphere_kernel`), the practical limit.

Scenes: the shipped `ball`, `spheres16` (16 spheres; batch = worlds),
`arm` and `quadruped`, and `array`, a toy sphere step written with
(B, N, 3) arrays (`symphys.array_step`) that shows what symphys' rewrites do
for model code not written in components. Batches of a jointed scene move
each world's robot as a whole (one offset per world), so no joint is
pulled apart.

Results go to JSON (rows, peers, ratios, targets) and a PNG; `--resume`
keeps the cases already in the JSON, so the full matrix (hours: the
quadruped's cold Numba compile alone takes tens of minutes) can be run in
parts.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from symphys import camera_bench

STEPS = 200
REPEATS = 5
TIME_BUDGET_S = 30.0      # stop repeating a timed call after this long (at least one run)
SCENES = ("ball", "spheres16", "arm", "quadruped", "array")
BATCHES = (1, 16, 128, 1024)
# "numba": loops compiled (`Loops.COMPILED`, the steady state of the default
# `Loops.AUTO`); "numba-interpreted": loops in the Python VM, kernels compiled
# (what `Loops.AUTO` runs until a loop's compile ends).
BACKENDS = ("numba", "numba-interpreted", "jax", "cvm")
ARRAY_BODIES = 16                  # spheres per world in the `array` scene
QUICK_CASES = (("ball", 1, "numba", True), ("spheres16", 64, "numba", True),
               ("array", 64, "numba", True), ("array", 64, "numba", False))
SPHERE_SCENES = ("spheres16",)   # the kernel's scenes (ball.json has rolling friction)


def _batched_params(scene, batch: int, rng) -> dict:
    """Per-world initial positions (B, 3) of every body when batch > 1:
    each body jittered alone in a scene without joints, the whole body set
    moved by one offset per world in a jointed one (x, y within 5 cm, z up
    to 5 cm higher)."""
    if batch == 1:
        return {}

    def jitter():
        offset = rng.uniform(-0.05, 0.05, size=(batch, 3))
        offset[:, 2] = np.abs(offset[:, 2])
        return offset

    shared = jitter() if scene.joints else None
    return {f"{body.name}.position": np.asarray(body.position)
            + (shared if shared is not None else jitter()) for body in scene.bodies}


def bench_loss(tr):
    """Sum of every body's final state components (position, rotation,
    velocity, angular velocity), so no part of the step is dropped as unused."""
    return tr.states[..., -1, :, :].sum()


def _median_time(fn, args, repeats: int, budget_s: float = float("inf")) -> tuple[float, int]:
    """(median seconds of up to `repeats` calls, calls made): repeating
    stops once the calls made have taken `budget_s` (a 100 s call runs once)."""
    times = []
    while len(times) < repeats and sum(times) < budget_s:
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return float(np.median(times)), len(times)


def engine(bench_backend: str) -> tuple:
    """(symphys backend, `Loops`: how its loops run) of a bench backend name."""
    from symphys.compiled_loops import Loops

    backend, _, kind = bench_backend.partition("-")
    return backend, Loops(kind or Loops.COMPILED.value)


def _with_action(fn, action, *args):
    return fn(*args, action)


def _engine_functions(scene_name: str, batch: int, backend: str, steps: int = STEPS,
                      options=None):
    """(forward, gradient, args, bodies, forward s, gradient s) for a
    shipped scene, `steps` steps (reverse-pass `options`:
    `symphys.adjoint.LoopOptions`); the seconds run from asking for each
    function until its first call returned."""
    from symphys.adjoint import LoopOptions
    from symphys.api import parameter_values, value_and_grad_function, value_function
    from symphys.scene_io import load_scene

    scene = load_scene(scene_name)
    params = _batched_params(scene, batch, np.random.default_rng(0))
    args, batched = parameter_values(scene, params)
    loss = bench_loss
    wrt = [f"{scene.bodies[0].name}.velocity"]
    size = batch if batched else None
    start = time.perf_counter()
    options = options or LoopOptions()
    fwd = value_function(scene, steps, loss, batched, backend, batch=size, options=options)
    fwd(*args)
    compile_fwd = time.perf_counter() - start
    start = time.perf_counter()
    grad = value_and_grad_function(scene, steps, loss, wrt, batched, backend, batch=size,
                                   options=options)
    if scene.motors:          # the gradient function takes the motor commands: hold still
        grad = functools.partial(_with_action, grad, np.zeros(len(scene.motors)))
    grad(*args)
    return fwd, grad, args, len(scene.bodies), compile_fwd, time.perf_counter() - start


def _array_functions(batch: int, backend: str):
    """The same for the `array` scene (rewrites as switched by the caller)."""
    import pytensor

    from symphys import array_step
    from symphys.backends import compile

    args = array_step.initial_state(batch, ARRAY_BODIES)
    inputs = array_step.inputs()
    final = array_step.rollout(*inputs, STEPS)
    loss = array_step.loss(final)
    start = time.perf_counter()
    fwd = compile(inputs, loss, backend)
    fwd(*args)
    compile_fwd = time.perf_counter() - start
    start = time.perf_counter()
    grad = compile(inputs, [loss, pytensor.grad(loss, inputs[2])], backend)
    grad(*args)
    return fwd, grad, args, ARRAY_BODIES, compile_fwd, time.perf_counter() - start


def measure(scene_name: str, batch: int, backend: str, rewrites_on: bool = True,
            repeats: int = REPEATS, timed: bool = True) -> dict:
    """Compile and time one case in this process (called in a child).
    `timed=False`: a cold child, whose run times are not kept (one call of
    each function is timed, to take it out of the compile figure).

    Compile seconds run from asking for a function until its first call
    returns (JAX compiles on that call), less one call's run time: a
    quadruped gradient at 128 worlds runs for tens of seconds, which is not
    compiling. `first_call_*_s` keep the figures before the subtraction."""
    from symphys import function_store, rewrites
    from symphys.compiled_loops import loops

    kind, run_loops = engine(backend)
    with rewrites.switched(rewrites_on), loops(run_loops):
        if scene_name == "array":
            fwd, grad, args, n, c_fwd, c_grad = _array_functions(batch, kind)
        else:
            fwd, grad, args, n, c_fwd, c_grad = _engine_functions(scene_name, batch, kind)
    t_fwd, n_fwd = _median_time(fwd, args, repeats if timed else 1, TIME_BUDGET_S)
    t_grad, n_grad = _median_time(grad, args, repeats if timed else 1, TIME_BUDGET_S)
    compiled = {"compile_forward_s": c_fwd - t_fwd, "compile_gradient_s": c_grad - t_grad,
                "first_call_forward_s": c_fwd, "first_call_gradient_s": c_grad,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if not timed:
        return compiled
    world_steps = STEPS * batch
    return {"scene": scene_name, "batch": batch, "backend": backend,
            "rewrites": bool(rewrites_on), "bodies": n, "steps": STEPS,
            "forward_s": t_fwd, "gradient_s": t_grad,
            "forward_repeats": n_fwd, "gradient_repeats": n_grad,
            "forward_ns_per_world_step": t_fwd / world_steps * 1e9,
            "gradient_ns_per_world_step": t_grad / world_steps * 1e9,
            "gradient_over_forward": t_grad / t_fwd,
            **compiled, "source": function_store.source_digest()[:12]}


def _memory_mb(field: str) -> float:
    """A memory figure of this process from /proc (Linux), in MB: "VmRSS"
    (resident now) or "VmHWM" (peak since the last `_reset_peak`)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")      # Linux: VmHWM <- VmRSS


def measure_memory(scene_name: str, batch: int, steps: int, backend: str,
                   checkpoint: int) -> dict:
    """Peak memory of one gradient call (compiled and run once before), with
    or without checkpoints (called in a child; Linux /proc)."""
    from symphys.adjoint import LoopOptions

    options = LoopOptions(checkpoint=checkpoint)
    _, grad, args, *_ = _engine_functions(scene_name, batch, backend, steps, options)
    before = _memory_mb("VmRSS")
    _reset_peak()
    t = time.perf_counter()
    out = grad(*args)
    seconds = time.perf_counter() - t
    peak = _memory_mb("VmHWM")
    return {"scene": scene_name, "batch": batch, "steps": steps, "backend": backend,
            "checkpoint": checkpoint, "rss_before_mb": before, "peak_mb": peak,
            "gradient_peak_extra_mb": peak - before, "gradient_s": seconds,
            "loss": float(out[0]), "gradient": np.asarray(out[1]).ravel().tolist()}


def memory_comparison(scene: str = "quadruped", batch: int = 128, seconds: float = 10.0,
                      backend: str = "jax", checkpoint: int = 50) -> list[dict]:
    """The memory figure: the gradient of a `seconds`-long rollout at
    `batch`, without and with checkpoints, each in its own child."""
    from symphys.scene_io import load_scene

    steps = int(round(seconds / load_scene(scene).dt))
    steps -= steps % checkpoint
    rows = []
    for k in (0, checkpoint):
        code = ("import json; from symphys.bench import measure_memory; print('RESULT' + "
                f"json.dumps(measure_memory({scene!r}, {batch}, {steps}, {backend!r}, {k})))")
        rows.append(_run_child(code, label=f"memory {scene}/{batch}/checkpoint={k}"))
    same = np.max(np.abs(np.asarray(rows[0]["gradient"]) - np.asarray(rows[1]["gradient"])))
    for r in rows:
        r["max_gradient_difference"] = float(same)
    return rows


def measure_peer(kind: str, scene_name: str, batch: int) -> list[dict]:
    """Time a peer on a shipped scene (called in a child): kind "mujoco"
    (both methods) or "kernel" (the hand-written sphere kernel)."""
    from symphys.scene_io import load_scene

    scene = load_scene(scene_name)
    if kind == "mujoco":
        from symphys import mujoco_peer
        rows = [mujoco_peer.time_mj_step(scene, STEPS, batch),
                mujoco_peer.time_rollout(scene, STEPS, batch)]
        return [dict(r, scene=scene_name) for r in rows]     # the bench's name for it
    from symphys import sphere_kernel
    params = _batched_params(scene, batch, np.random.default_rng(0))
    constants = sphere_kernel.prepare(scene, params)
    state = sphere_kernel.initial_state(scene, params, batch)
    sphere_kernel.simulate(*state, STEPS, constants)             # compile
    seconds, _ = _median_time(lambda: sphere_kernel.simulate(*state, STEPS, constants), (),
                              REPEATS)
    return [{"engine": "kernel", "method": "hand-written numba", "scene": scene_name,
             "batch": batch, "steps": STEPS, "seconds": seconds,
             "ns_per_world_step": seconds / (STEPS * batch) * 1e9}]


def _run_child(code: str, env: dict | None = None, label: str = "") -> object:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    raise RuntimeError(f"benchmark child failed for {label}:\n{out.stderr[-3000:]}")


def _child_env(cache: str) -> dict:
    """This process's environment with PyTensor, Numba and symphys caches in `cache`."""
    env = dict(os.environ)
    env["PYTENSOR_FLAGS"] = f"base_compiledir={cache}"
    env["SYMPHYS_CACHE_DIR"] = os.path.join(cache, "symphys-graphs")
    env["NUMBA_CACHE_DIR"] = os.path.join(cache, "numba")
    return env


def _measure_code(scene: str, batch: int, backend: str, rewrites_on: bool,
                  timed: bool = True) -> str:
    return ("import json; from symphys.bench import measure; "
            f"print('RESULT' + json.dumps(measure({scene!r}, {batch}, {backend!r}, "
            f"{rewrites_on!r}, timed={timed!r})))")


def run_case(scene: str, batch: int, backend: str, rewrites_on: bool = True,
             cache: str | None = None, compiled: dict | None = None) -> dict:
    """One case, cold (compile only) then warm (compile and time), each in a
    fresh child with one cache folder
    (a new one, or `cache`). `compiled`: the row of a case already run in
    `cache` whose functions serve this one too (Numba and CVM compile one
    function for every batch size); only the warm child runs, and the cold
    figures are that row's (`compile_cold_from_batch` says which)."""
    code = _measure_code(scene, batch, backend, rewrites_on)
    cold_code = _measure_code(scene, batch, backend, rewrites_on, timed=False)
    label = f"{scene}/{batch}/{backend}/rewrites={'on' if rewrites_on else 'off'}"
    with tempfile.TemporaryDirectory(prefix="symphys-bench-") as fresh:
        env = _child_env(cache or fresh)
        if compiled is None:
            cold = _run_child(cold_code, env, label)
        else:
            cold = {"compile_gradient_s": compiled["compile_cold_s"],
                    "compile_forward_s": compiled["compile_forward_cold_s"],
                    "peak_mb": compiled["peak_mb_cold"]}
        warm = _run_child(code, env, label)
    row = dict(warm)
    if compiled is not None:
        row["compile_cold_from_batch"] = compiled["batch"]
    row["compile_cold_s"] = cold["compile_gradient_s"]
    row["compile_warm_s"] = warm["compile_gradient_s"]
    row["compile_forward_cold_s"] = cold["compile_forward_s"]
    row["compile_forward_warm_s"] = warm["compile_forward_s"]
    row["peak_mb_cold"] = cold["peak_mb"]
    return row


def run_cases(cases: list[tuple], record, progress=iter) -> None:
    """Run `cases` ((scene, batch, backend, rewrites_on)), passing each row
    (or the RuntimeError of a failed child) to `record(case, row_or_error)`.
    Numba and CVM functions serve any batch size, so those backends compile
    once per (scene, backend, rewrites) and batched or not (batch 1 builds
    an unbatched graph): later batches run warm from the first one's caches."""
    from symphys.backends import serves_any_batch

    caches: dict[tuple, tuple] = {}
    with tempfile.TemporaryDirectory(prefix="symphys-bench-shared-") as root:
        for case in progress(cases):
            scene, batch, backend, on = case
            shared = serves_any_batch(engine(backend)[0]) and scene != "array"
            group = (scene, backend, on, batch == 1)     # one world: an unbatched graph
            try:
                if shared and group in caches:
                    folder, first = caches[group]
                    row = run_case(*case, cache=folder, compiled=first)
                elif shared:
                    folder = os.path.join(root, "-".join(map(str, group)))
                    row = run_case(*case, cache=folder)
                    caches[group] = (folder, row)
                else:
                    row = run_case(*case)
            except RuntimeError as exc:
                record(case, exc)
                continue
            record(case, row)


def run_peers(scene: str, batch: int) -> tuple[list[dict], list[str]]:
    """(peer timings, notes on peers that could not run) for one scene and batch."""
    rows, notes = [], []
    if scene == "array":
        return rows, notes
    kinds = ["mujoco"] + (["kernel"] if scene in SPHERE_SCENES else [])
    for kind in kinds:
        code = ("import json; from symphys.bench import measure_peer; "
                f"print('RESULT' + json.dumps(measure_peer({kind!r}, {scene!r}, {batch})))")
        try:
            rows.extend(_run_child(code, label=f"{kind} {scene}/{batch}"))
        except RuntimeError as exc:
            notes.append(f"{kind} on {scene}/{batch} did not run: {str(exc)[-400:]}")
    return rows, notes


def select_cases(quick: bool, scenes=None, batches=None, backends=None,
                 rewrites=("default",)) -> list[tuple]:
    """(scene, batch, backend, rewrites_on) cases to run; a rewrites setting
    is "default" (the backend's: `rewrites.default_for`), "on" or "off"."""
    from symphys.rewrites import default_for

    if quick and not (scenes or batches or backends):
        return list(QUICK_CASES)
    cases = []
    for s in scenes or SCENES:
        for b in batches or BATCHES:
            for k in backends or BACKENDS:
                for r in rewrites:
                    case = (s, b, k, default_for(engine(k)[0]) if r == "default"
                            else r == "on")
                    if case not in cases:
                        cases.append(case)
    return cases


def _is_default(row) -> bool:
    from symphys.rewrites import default_for
    return bool(row["rewrites"]) == default_for(engine(row["backend"])[0])


def ratios(rows: list[dict], peers: list[dict]) -> list[dict]:
    """The comparisons that matter, each measured in this run: numba / jax
    (each with its default rewrites), rewrites on / off (same backend), and
    each backend's forward against the peers."""
    out = []
    by = {(r["scene"], r["batch"], r["backend"], r["rewrites"]): r for r in rows}
    default = {(r["scene"], r["batch"], r["backend"]): r for r in rows if _is_default(r)}
    for (scene, batch, backend), r in sorted(default.items()):
        if backend == "numba" and (scene, batch, "jax") in default:
            jx = default[(scene, batch, "jax")]
            for kind in ("forward", "gradient"):
                out.append({"what": f"numba / jax {kind}", "scene": scene, "batch": batch,
                            "ratio": r[f"{kind}_ns_per_world_step"]
                            / jx[f"{kind}_ns_per_world_step"]})
    for (scene, batch, backend, on), r in sorted(by.items()):
        if on and (scene, batch, backend, False) in by:
            off = by[(scene, batch, backend, False)]
            for kind in ("forward", "gradient"):
                out.append({"what": f"{backend} rewrites on / off {kind}", "scene": scene,
                            "batch": batch, "ratio": r[f"{kind}_ns_per_world_step"]
                            / off[f"{kind}_ns_per_world_step"]})
    for (scene, batch, backend), r in sorted(default.items()):
        for p in peers:
            if p["scene"] == scene and p["batch"] == batch:
                out.append({"what": f"{backend} forward / {p['engine']} {p['method']}",
                            "scene": scene, "batch": batch,
                            "ratio": r["forward_ns_per_world_step"] / p["ns_per_world_step"]})
    return out


def _find(ratio_rows: list[dict], what: str, **match) -> list[dict]:
    return [r for r in ratio_rows if r["what"] == what
            and all(r.get(k) == v for k, v in match.items())]


def targets(rows: list[dict], ratio_rows: list[dict]) -> list[dict]:
    """The speed and compile targets, each met / not met / not measured in this run
    (each backend with its default rewrites)."""
    def verdict(name, values, ok):
        if not values:
            return {"target": name, "status": "not measured", "values": []}
        return {"target": name, "status": "met" if all(ok(v) for v in values) else "not met",
                "values": values}

    quad = [r for r in rows if r["scene"] == "quadruped" and _is_default(r)]
    return [
        verdict("quadruped batch 128: forward+backward <= 3x forward",
                [r["gradient_over_forward"] for r in quad if r["batch"] == 128],
                lambda v: v <= 3),
        verdict("quadruped batch 128: forward+backward <= 1.01 ms per step",
                [r["gradient_s"] / STEPS * 1e3 for r in quad if r["batch"] == 128],
                lambda v: v <= 1.01),
        verdict("numba within 1.5x of jax at batch >= 16 (forward and gradient)",
                [r["ratio"] for r in ratio_rows if r["what"].startswith("numba / jax")
                 and r["batch"] >= 16], lambda v: v <= 1.5),
        verdict("numba faster than jax at batch 1 (forward and gradient)",
                [r["ratio"] for r in ratio_rows if r["what"].startswith("numba / jax")
                 and r["batch"] == 1], lambda v: v < 1),
        verdict("sphere scene forward within 1.5x of the hand-written kernel",
                [r["ratio"] for r in _find(ratio_rows, "numba forward / kernel hand-written numba",
                                           scene="spheres16")],
                lambda v: v <= 1.5),
        verdict("quadruped forward per world-step on numba at most MuJoCo's mj_step",
                [r["ratio"] for r in ratio_rows if r["scene"] == "quadruped"
                 and r["what"] == "numba forward / mujoco mj_step"], lambda v: v <= 1),
    ] + [target for backend in BACKENDS for target in (
        verdict(f"quadruped value_and_grad on {backend}: cold compile <= 30 s",
                _value_and_grad_compile(quad, backend, "cold"), lambda v: v <= 30),
        verdict(f"quadruped value_and_grad on {backend}: warm compile <= 2 s",
                _value_and_grad_compile(quad, backend, "warm"), lambda v: v <= 2))]


def _value_and_grad_compile(rows: list[dict], backend: str, which: str) -> list[float]:
    """Seconds to compile a scene's value and gradient functions (the
    forward's figure holds the kernels, compiled with it), at the smallest
    batch measured on `backend`: at large batches the figure is a long
    first call less a median call, mostly noise."""
    rows = [r for r in rows if r["backend"] == backend]
    if not rows:
        return []
    smallest = min(r["batch"] for r in rows)
    return [r[f"compile_forward_{which}_s"] + r[f"compile_{which}_s"]
            for r in rows if r["batch"] == smallest]


def _case_key(row) -> tuple:
    return (row["scene"], row["batch"], row["backend"], bool(row["rewrites"]))


def _peer_key(row) -> tuple:
    return (row["scene"], row["batch"], row["engine"], row["method"])


def _merge_into(doc: dict, path: str) -> None:
    """Add a bench JSON's rows, peers and notes to `doc`; its cases and peers
    replace those of `doc` with the same key."""
    from symphys.errors import ParameterError

    try:
        other = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ParameterError(f"bench: {path} is not valid JSON ({exc})") from None
    if other.get("steps", STEPS) != STEPS:
        raise ParameterError(f"bench: {path} was run with steps={other['steps']}, "
                             f"this bench runs {STEPS}")
    for field, key in (("rows", _case_key), ("peers", _peer_key),
                       ("camera_rows", camera_bench.case_key)):
        new = other.get(field, [])
        keys = {key(r) for r in new}
        doc[field] = [r for r in doc[field] if key(r) not in keys] + new
    doc["notes"] += [n for n in other.get("notes", []) if n not in doc["notes"]]


def print_report(doc: dict) -> None:
    from symphys.experiments.common import table

    head = ["scene", "B", "backend", "rewrites", "fwd ns/world-step", "grad ns/world-step",
            "grad/fwd", "compile cold s (fwd+grad)", "warm s", "peak MB"]
    body = [[r["scene"], r["batch"], r["backend"], "on" if r["rewrites"] else "off",
             f"{r['forward_ns_per_world_step']:.0f}", f"{r['gradient_ns_per_world_step']:.0f}",
             f"{r['gradient_over_forward']:.1f}",
             f"{r['compile_forward_cold_s']:.1f}+{r['compile_cold_s']:.1f}",
             f"{r['compile_forward_warm_s']:.1f}+{r['compile_warm_s']:.1f}",
             f"{r['peak_mb']:.0f}"]
            for r in sorted(doc["rows"], key=_case_key)]
    if body:
        print(table(head, body))
    if doc.get("camera_rows"):
        print(f"\ncamera: {camera_bench.SCENE} seen by its {camera_bench.CAMERA!r} camera, "
              "ms per image (median per call / batch)")
        print(table(camera_bench.TABLE_HEAD, camera_bench.table_rows(doc["camera_rows"])))
    if doc["peers"]:
        print("\npeers (same scenes and batches, this run)")
        print(table(["scene", "B", "peer", "ns/world-step"],
                    [[p["scene"], p["batch"], f"{p['engine']} {p['method']}",
                      f"{p['ns_per_world_step']:.0f}"] for p in doc["peers"]]))
    if doc["ratios"]:
        print("\nratios (measured side by side in this run)")
        print(table(["what", "scene", "B", "ratio"],
                    [[r["what"], r["scene"], r["batch"], f"{r['ratio']:.2f}"]
                     for r in doc["ratios"]]))
    print("\ntargets")
    print(table(["target", "status", "values"],
                [[t["target"], t["status"], ", ".join(f"{v:.3g}" for v in t["values"])]
                 for t in doc["targets"]]))
    for note in doc["notes"]:
        print("note:", note)


def plot(doc: dict, path: str) -> None:
    """One panel per scene: ns per world-step against batch, forward and
    gradient per backend (rewrites on; off dashed), peers as markers."""
    from symphys.experiments.common import pyplot

    plt = pyplot()
    scenes = [s for s in SCENES if any(r["scene"] == s for r in doc["rows"])]
    cameras = doc.get("camera_rows", [])
    panels = len(scenes) + bool(cameras)
    if not panels:
        return
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.8), squeeze=False)
    if cameras:
        camera_bench.plot(axes[0][-1], cameras)
    for ax, scene in zip(axes[0], scenes):
        for (backend, on), colour in zip(
                [(b, o) for b in BACKENDS for o in (True, False)],
                [f"C{k // 2}" for k in range(2 * len(BACKENDS))]):
            rs = sorted((r for r in doc["rows"] if r["scene"] == scene
                         and r["backend"] == backend and r["rewrites"] == on),
                        key=lambda r: r["batch"])
            if not rs:
                continue
            b = [r["batch"] for r in rs]
            style = "-" if on else "--"
            tag = "" if on else " (no rewrites)"
            ax.plot(b, [r["forward_ns_per_world_step"] for r in rs], style + "o", color=colour,
                    label=f"{backend} forward{tag}")
            ax.plot(b, [r["gradient_ns_per_world_step"] for r in rs], style + "s", color=colour,
                    alpha=0.5, label=f"{backend} fwd+bwd{tag}")
        markers = {"kernel": "*", "mj_step": "^", "rollout": "v"}
        for p in (p for p in doc["peers"] if p["scene"] == scene):
            marker = markers["kernel"] if p["engine"] == "kernel" else markers.get(p["method"], "^")
            ax.plot([p["batch"]], [p["ns_per_world_step"]], marker, color="k", ms=9,
                    label=f"{p['engine']} {p['method']}")
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), fontsize=6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (worlds)")
        ax.set_ylabel("ns per world-step")
        ax.set_title(f"{scene}, {STEPS} steps")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(json_path: str | None = "results/bench.json", quick: bool = False,
         backends: str | None = None, scenes: str | None = None, batches: str | None = None,
         rewrites: str = "default", resume: bool = False, peers: bool = True,
         plot_path: str | None = None, report_only: bool = False,
         merge: tuple[str, ...] = (), camera: str | None = None) -> dict:
    """Run the selected cases and peers; print the tables; write JSON and PNG.
    `camera`: "on" (the camera cases too, `symphys.camera_bench`; the
    default of a full run), "off" (the default with --quick) or "only".
    `report_only`: run nothing, report what the JSON holds. `merge`: other
    bench JSONs (parts of a matrix run side by side) whose cases, peers and
    notes join this one's (a case or peer in a later file replaces an
    earlier one); merging runs nothing either (it used to go on to run
    every case the files lacked: the whole default matrix, hours)."""
    from tqdm.auto import tqdm

    from symphys.errors import ParameterError

    def names(text, allowed, what):
        if text is None:
            return None
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in allowed]
        if bad:
            raise ParameterError(f"bench: unknown {what} {bad}; choose from {list(allowed)}")
        return items

    scene_list = names(scenes, SCENES, "scenes")
    backend_list = names(backends, BACKENDS, "backends")
    rewrite_list = names(rewrites, ("default", "on", "off"), "rewrites settings")
    try:
        batch_list = None if batches is None else [int(b) for b in batches.split(",")]
    except ValueError:
        raise ParameterError(f"bench: batches must be integers, got {batches!r}") from None
    if batch_list is not None and min(batch_list) < 1:
        raise ParameterError(f"bench: batches must be >= 1, got {batch_list}")
    camera = camera or ("off" if quick else "on")
    if camera not in ("on", "off", "only"):
        raise ParameterError(f"bench: camera must be on, off or only, got {camera!r}")
    cases = [] if camera == "only" else select_cases(quick, scene_list, batch_list,
                                                     backend_list, rewrite_list)
    camera_cases = [] if camera == "off" else camera_bench.cases(
        [b for b in backend_list or camera_bench.BACKENDS if b in camera_bench.BACKENDS],
        batch_list)

    doc = {"steps": STEPS, "rows": [], "peers": [], "failures": [], "notes": [],
           "camera_rows": []}
    if (resume or report_only) and json_path and Path(json_path).exists():
        _merge_into(doc, json_path)
    for path in merge:
        if not Path(path).exists():
            raise ParameterError(f"bench: --merge file {path} does not exist")
        _merge_into(doc, path)
    done = {_case_key(r) for r in doc["rows"]}
    peer_done = {(p["scene"], p["batch"]) for p in doc["peers"]}
    todo = [] if report_only or merge else [c for c in cases if c not in done]
    camera_done = {camera_bench.case_key(r) for r in doc["camera_rows"]}
    camera_todo = [] if report_only or merge else [c for c in camera_cases
                                                   if c not in camera_done]
    if report_only and not merge and not (json_path and Path(json_path).exists()):
        raise ParameterError(f"bench: nothing to report, {json_path} does not exist")

    def save():
        doc["ratios"] = ratios(doc["rows"], doc["peers"]) + camera_bench.ratios(
            doc["camera_rows"])
        doc["targets"] = targets(doc["rows"], doc["ratios"]) + [
            camera_bench.target(doc["camera_rows"])]
        if json_path:
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(str(json_path) + ".tmp")
            tmp.write_text(json.dumps(doc, indent=1))
            tmp.replace(json_path)

    def record(case, row):
        scene, batch, backend, on = case
        if isinstance(row, Exception):   # keep the other cases' numbers
            doc["failures"].append({"scene": scene, "batch": batch, "backend": backend,
                                    "rewrites": on, "error": str(row)[-2000:]})
            print(f"bench case {scene}/{batch}/{backend} failed:\n{row}")
        else:
            doc["rows"].append(row)
        if peers and (scene, batch) not in peer_done:
            rows, notes = run_peers(scene, batch)
            doc["peers"].extend(rows)
            doc["notes"].extend(notes)
            peer_done.add((scene, batch))
        save()

    run_cases(todo, record, lambda cases: tqdm(cases, desc="bench"))
    for case in tqdm(camera_todo, desc="bench camera"):
        try:
            doc["camera_rows"].append(camera_bench.run_case(*case))
        except RuntimeError as exc:
            doc["failures"].append({"camera": list(case), "error": str(exc)[-2000:]})
            print(f"bench camera case {'/'.join(map(str, case))} failed:\n{exc}")
        save()
    save()
    print_report(doc)
    if json_path:
        print(f"wrote {json_path}")
    if plot_path is None and json_path:
        plot_path = str(Path(json_path).with_suffix(".png"))
    if plot_path:
        plot(doc, plot_path)
        print(f"wrote {plot_path}")
    return doc
