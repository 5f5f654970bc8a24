"""Camera rows of `symphys bench`: milliseconds per rendered image.

The scene is A6's (`graphs/pendulum_camera.json`: a cart, a bar, a
checker-textured back wall) seen by its 288 x 96 camera, the bar swung to a
different angle in each world. Each case (backend, batch, edges) runs in a
fresh child process with empty caches, like the physics cases:

- forward: the compiled render, (B, N, 3) positions and (B, N, 3, 3)
  rotations -> (B, 96, 288, 3) image;
- gradient: an image loss (mean squared difference to a reference image)
  and its gradient with respect to the body positions, the call a
  vision-in-the-loop gradient pays per frame.

Times are medians per call divided by the batch: ms per image.
"""

from __future__ import annotations

import enum
import time

import numpy as np

from symphys.bench.timing import TIME_BUDGET_S, child_env, median_time, run_child
from symphys.camera.image import RENDER_REWRITES, render
from symphys.compiler.backends import compile, static_batch
from symphys.scene.reader import load_scene

SCENE = "pendulum_camera"
CAMERA = "front"
BATCHES = (1, 16)
BACKENDS = ("numba", "jax")
REPEATS = 7
TARGET_MS = 5.0            # <= 5 ms per 288 x 96 image at batch 16
TARGET_BATCH = 16


class Edges(enum.Enum):
    HARD = "hard"          # nearest hit wins: outlines have no gradient
    SOFT = "soft"          # logistic coverage ramps, soft_edge = 1 px


EDGES = (Edges.HARD, Edges.SOFT)


def poses(scene, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions (B, N, 3), rotations (B, N, 3, 3)): the scene's initial
    poses with the bar turned about its hinge by a different angle per world."""
    n = len(scene.bodies)
    pos = np.repeat(np.array([b.position for b in scene.bodies], float)[None], batch, 0)
    rot = np.repeat(np.eye(3)[None, None], batch, 0).repeat(n, 1)
    bar = scene.body_names.index("bar")
    hinge = np.array(scene.joints[scene.joint_names.index("pivot")].anchor, float)
    for b, angle in enumerate(np.linspace(0.0, np.pi, batch)):
        c, s = np.cos(angle), np.sin(angle)
        r = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
        rot[b, bar] = r
        pos[b, bar] = hinge + r @ (pos[b, bar] - hinge)
    return pos, rot


def _functions(backend: str, batch: int, edges: Edges, resolution=None):
    """(scene, camera, forward, gradient) compiled for one case (`resolution`
    (W, H): another than the camera's, for tests)."""
    import dataclasses

    import pytensor
    import pytensor.tensor as pt


    scene = load_scene(SCENE)
    camera = scene.camera(CAMERA)
    if edges is Edges.SOFT:
        camera = dataclasses.replace(camera, soft_edge=1.0)
    if resolution is not None:
        camera = dataclasses.replace(camera, resolution=tuple(resolution))
    n = len(scene.bodies)
    # Numba compiles the render graph far faster with a dynamic batch axis
    # (see `symphys.api.render`); JAX needs it static.
    size = static_batch(backend, True, batch)
    positions = pt.tensor("positions", dtype="float64", shape=(size, n, 3))
    rotations = pt.tensor("rotations", dtype="float64", shape=(size, n, 3, 3))
    image = render(scene, camera, positions, rotations)
    forward = compile([positions, rotations], image, backend, disk_cache=False,
                      rewrites_on=RENDER_REWRITES)
    w, h = camera.resolution
    reference = pt.tensor("reference", dtype="float64", shape=(size, h, w, 3))
    loss = pt.mean((image - reference) ** 2)
    gradient = compile([positions, rotations, reference],
                       [loss, pytensor.grad(loss, positions)], backend, disk_cache=False,
                       rewrites_on=RENDER_REWRITES)
    return scene, camera, forward, gradient


def measure(backend: str, batch: int, edges: str, resolution=None) -> dict:
    """One camera case (run in a child process): compile and time."""
    edges = Edges(edges)
    start = time.perf_counter()
    scene, camera, forward, gradient = _functions(backend, batch, edges, resolution)
    pos, rot = poses(scene, batch)
    image = forward(pos, rot)
    compile_forward = time.perf_counter() - start
    reference = image[::-1].copy()         # another world's bar: a nonzero loss
    start = time.perf_counter()
    _, image_gradient = gradient(pos, rot, reference)
    compile_gradient = time.perf_counter() - start
    fwd_s, fwd_n = median_time(forward, (pos, rot), REPEATS, TIME_BUDGET_S)
    grad_s, grad_n = median_time(gradient, (pos, rot, reference), REPEATS, TIME_BUDGET_S)
    w, h = camera.resolution
    return {"backend": backend, "batch": batch, "edges": edges.value, "width": w, "height": h,
            "forward_ms_per_image": fwd_s / batch * 1e3,
            "gradient_ms_per_image": grad_s / batch * 1e3,
            "forward_calls": fwd_n, "gradient_calls": grad_n,
            "compile_forward_s": compile_forward, "compile_gradient_s": compile_gradient,
            "image_mean": float(np.mean(image)),
            "gradient_norm": float(np.linalg.norm(image_gradient))}


def cases(backends=None, batches=None) -> list[tuple[str, int, str]]:
    """(backend, batch, edges) cases, every combination (None: the defaults;
    an empty list: no cases)."""
    backends = BACKENDS if backends is None else backends
    batches = BATCHES if batches is None else batches
    return [(k, b, e.value) for k in backends for b in batches for e in EDGES]


def run_case(backend: str, batch: int, edges: str) -> dict:
    """One case in a fresh child with empty caches (RuntimeError if it fails)."""
    import tempfile

    code = ("import json; from symphys.bench.camera import measure; "
            f"print('RESULT' + json.dumps(measure({backend!r}, {batch}, {edges!r})))")
    with tempfile.TemporaryDirectory(prefix="symphys-camera-bench-") as fresh:
        return run_child(code, child_env(fresh), f"camera {backend}/{batch}/{edges}")


def target(rows: list[dict]) -> dict:
    """The camera target, met / not met / not measured: every backend's hard
    render at batch 16 within TARGET_MS per image."""
    name = f"camera 288x96 at batch {TARGET_BATCH}: render <= {TARGET_MS:g} ms per image"
    values = [r["forward_ms_per_image"] for r in rows
              if r["batch"] == TARGET_BATCH and r["edges"] == Edges.HARD.value]
    if not values:
        return {"target": name, "status": "not measured", "values": []}
    return {"target": name, "status": "met" if max(values) <= TARGET_MS else "not met",
            "values": values}


def ratios(rows: list[dict]) -> list[dict]:
    """numba / jax per image, same batch and edges, both measured in this run."""
    by = {(r["backend"], r["batch"], r["edges"]): r for r in rows}
    out = []
    for (backend, batch, edges), r in sorted(by.items()):
        other = by.get(("jax", batch, edges))
        if backend == "numba" and other:
            for kind in ("forward", "gradient"):
                out.append({"what": f"camera numba / jax {kind} ({edges} edges)",
                            "scene": SCENE, "batch": batch,
                            "ratio": r[f"{kind}_ms_per_image"] / other[f"{kind}_ms_per_image"]})
    return out


def case_key(row: dict) -> tuple[str, int, str]:
    return (row["backend"], row["batch"], row["edges"])


def plot(ax, rows: list[dict]) -> None:
    """Bars of ms per image, render and loss+grad, per case; the target as a line."""
    rows = sorted(rows, key=case_key)
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["forward_ms_per_image"] for r in rows], 0.4, label="render")
    ax.bar(x + 0.2, [r["gradient_ms_per_image"] for r in rows], 0.4, label="loss + grad")
    ax.axhline(TARGET_MS, color="k", ls=":", lw=1, label=f"target {TARGET_MS:g} ms (B 16)")
    ax.set_xticks(x, [f"{r['backend']}\nB{r['batch']} {r['edges']}" for r in rows],
                  fontsize=6)
    ax.set_yscale("log")
    ax.set_ylabel("ms per image")
    ax.set_title(f"camera {rows[0]['width']}x{rows[0]['height']}")
    ax.legend(fontsize=6)


def table_rows(rows: list[dict]) -> list[list]:
    return [[r["backend"], r["batch"], r["edges"], f"{r['width']}x{r['height']}",
             f"{r['forward_ms_per_image']:.2f}", f"{r['gradient_ms_per_image']:.2f}",
             f"{r['compile_forward_s']:.1f}", f"{r['compile_gradient_s']:.1f}"]
            for r in sorted(rows, key=lambda r: (r["backend"], r["batch"], r["edges"]))]


TABLE_HEAD = ["backend", "B", "edges", "image", "render ms/image", "loss+grad ms/image",
              "compile render s", "compile grad s"]


__all__ = ["Edges", "case_key", "cases", "measure", "plot", "poses", "ratios", "run_case",
           "target"]
