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
kernel (`symphys.bench.sphere_kernel`), the practical limit.

Scenes: the shipped `ball`, `spheres16` (16 spheres; batch = worlds),
`arm` and `quadruped`, and `array`, a toy sphere step written with
(B, N, 3) arrays (`symphys.bench.array_step`) that shows what symphys' rewrites do
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
import tempfile
import time
from pathlib import Path

import numpy as np

from symphys.api import parameter_values, value_and_grad_function, value_function
from symphys.bench import array_step
from symphys.bench import camera as camera_bench
from symphys.bench import mujoco_peer
from symphys.bench.cases import (ARRAY_BODIES, BACKENDS, REPEATS, SCENES, SPHERE_SCENES, STEPS,
                                 bench_scene, engine, robot_file, select_cases)
from symphys.bench.report import case_key, merge_into, plot, print_report, ratios, targets
from symphys.bench.timing import (TIME_BUDGET_S, child_env, median_time, memory_mb, reset_peak,
                                  run_child)
from symphys.compiler import rewrites
from symphys.compiler.backends import compile, serves_any_batch
from symphys.compiler.caches import function_files
from symphys.compiler.loops import loops
from symphys.errors import ParameterError
from symphys.adjoint import LoopOptions


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


def _with_action(fn, action, *args):
    return fn(*args, action)


def _engine_functions(scene_name: str, batch: int, backend: str, steps: int = STEPS,
                      options=None):
    """(forward, gradient, args, bodies, forward s, gradient s) for a
    shipped scene, `steps` steps (reverse-pass `options`:
    `symphys.adjoint.LoopOptions`); the seconds run from asking for each
    function until its first call returned."""
    scene = bench_scene(scene_name)
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
    kind, run_loops = engine(backend)
    with rewrites.switched(rewrites_on), loops(run_loops):
        if scene_name == "array":
            fwd, grad, args, n, c_fwd, c_grad = _array_functions(batch, kind)
        else:
            fwd, grad, args, n, c_fwd, c_grad = _engine_functions(scene_name, batch, kind)
    t_fwd, n_fwd = median_time(fwd, args, repeats if timed else 1, TIME_BUDGET_S)
    t_grad, n_grad = median_time(grad, args, repeats if timed else 1, TIME_BUDGET_S)
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
            **compiled, "source": function_files.source_digest()[:12]}


def measure_memory(scene_name: str, batch: int, steps: int, backend: str,
                   checkpoint: int) -> dict:
    """Peak memory of one gradient call (compiled and run once before), with
    or without checkpoints (called in a child; Linux /proc)."""
    options = LoopOptions(checkpoint=checkpoint)
    _, grad, args, *_ = _engine_functions(scene_name, batch, backend, steps, options)
    before = memory_mb("VmRSS")
    reset_peak()
    t = time.perf_counter()
    out = grad(*args)
    seconds = time.perf_counter() - t
    peak = memory_mb("VmHWM")
    return {"scene": scene_name, "batch": batch, "steps": steps, "backend": backend,
            "checkpoint": checkpoint, "rss_before_mb": before, "peak_mb": peak,
            "gradient_peak_extra_mb": peak - before, "gradient_s": seconds,
            "loss": float(out[0]), "gradient": np.asarray(out[1]).ravel().tolist()}


def memory_comparison(scene: str = "quadruped", batch: int = 128, seconds: float = 10.0,
                      backend: str = "jax", checkpoint: int = 50) -> list[dict]:
    """The memory figure: the gradient of a `seconds`-long rollout at
    `batch`, without and with checkpoints, each in its own child."""
    steps = int(round(seconds / bench_scene(scene).dt))
    steps -= steps % checkpoint
    rows = []
    for k in (0, checkpoint):
        code = ("import json; from symphys.bench.runner import measure_memory; print('RESULT' + "
                f"json.dumps(measure_memory({scene!r}, {batch}, {steps}, {backend!r}, {k})))")
        rows.append(run_child(code, label=f"memory {scene}/{batch}/checkpoint={k}"))
    same = np.max(np.abs(np.asarray(rows[0]["gradient"]) - np.asarray(rows[1]["gradient"])))
    for r in rows:
        r["max_gradient_difference"] = float(same)
    return rows


def measure_peer(kind: str, scene_name: str, batch: int) -> list[dict]:
    """Time a peer on a shipped scene (called in a child): kind "mujoco"
    (both methods) or "kernel" (the hand-written sphere kernel)."""
    scene = bench_scene(scene_name)
    if kind == "mujoco":
        path = robot_file(scene_name)           # a robot file: MuJoCo reads that file
        rows = [mujoco_peer.time_mj_step(scene, STEPS, batch, model_file=path),
                mujoco_peer.time_rollout(scene, STEPS, batch, model_file=path)]
        return [dict(r, scene=scene_name) for r in rows]     # the bench's name for it
    from symphys.bench import sphere_kernel  # brings Numba in: only its peer rows need it

    params = _batched_params(scene, batch, np.random.default_rng(0))
    constants = sphere_kernel.prepare(scene, params)
    state = sphere_kernel.initial_state(scene, params, batch)
    sphere_kernel.simulate(*state, STEPS, constants)             # compile
    seconds, _ = median_time(lambda: sphere_kernel.simulate(*state, STEPS, constants), (),
                              REPEATS)
    return [{"engine": "kernel", "method": "hand-written numba", "scene": scene_name,
             "batch": batch, "steps": STEPS, "seconds": seconds,
             "ns_per_world_step": seconds / (STEPS * batch) * 1e9}]


def _measure_code(scene: str, batch: int, backend: str, rewrites_on: bool,
                  timed: bool = True) -> str:
    return ("import json; from symphys.bench.runner import measure; "
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
        env = child_env(cache or fresh)
        if compiled is None:
            cold = run_child(cold_code, env, label)
        else:
            cold = {"compile_gradient_s": compiled["compile_cold_s"],
                    "compile_forward_s": compiled["compile_forward_cold_s"],
                    "peak_mb": compiled["peak_mb_cold"]}
        warm = run_child(code, env, label)
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
        code = ("import json; from symphys.bench.runner import measure_peer; "
                f"print('RESULT' + json.dumps(measure_peer({kind!r}, {scene!r}, {batch})))")
        try:
            rows.extend(run_child(code, label=f"{kind} {scene}/{batch}"))
        except RuntimeError as exc:
            notes.append(f"{kind} on {scene}/{batch} did not run: {str(exc)[-400:]}")
    return rows, notes


def main(json_path: str | None = "results/bench.json", quick: bool = False,
         backends: str | None = None, scenes: str | None = None, batches: str | None = None,
         rewrites: str = "default", resume: bool = False, peers: bool = True,
         plot_path: str | None = None, report_only: bool = False,
         merge: tuple[str, ...] = (), camera: str | None = None) -> dict:
    """Run the selected cases and peers; print the tables; write JSON and PNG.
    `camera`: "on" (the camera cases too, `symphys.bench.camera`; the
    default of a full run), "off" (the default with --quick) or "only".
    `report_only`: run nothing, report what the JSON holds. `merge`: other
    bench JSONs (parts of a matrix run side by side) whose cases, peers and
    notes join this one's (a case or peer in a later file replaces an
    earlier one); merging runs nothing either (it used to go on to run
    every case the files lacked: the whole default matrix, hours)."""
    from symphys.progress import bar


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
        merge_into(doc, json_path)
    for path in merge:
        if not Path(path).exists():
            raise ParameterError(f"bench: --merge file {path} does not exist")
        merge_into(doc, path)
    done = {case_key(r) for r in doc["rows"]}
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

    run_cases(todo, record, lambda cases: bar(cases, "bench"))
    for case in bar(camera_todo, "bench camera"):
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
