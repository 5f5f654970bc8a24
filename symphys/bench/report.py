"""What `symphys bench` makes of its rows: the ratios to the peers (MuJoCo,
the hand-written kernel) and between backends, the targets with their
verdicts, the printed tables, the PNG, and merging runs made in parts.
"""

from __future__ import annotations

import json
from pathlib import Path

from symphys.bench import camera as camera_bench
from symphys.bench.cases import BACKENDS, SCENES, STEPS, engine
from symphys.compiler.rewrites import default_for
from symphys.errors import ParameterError
from symphys.experiments.common import pyplot, table


def _is_default(row) -> bool:
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


def case_key(row) -> tuple:
    return (row["scene"], row["batch"], row["backend"], bool(row["rewrites"]))


def peer_key(row) -> tuple:
    return (row["scene"], row["batch"], row["engine"], row["method"])


def merge_into(doc: dict, path: str) -> None:
    """Add a bench JSON's rows, peers and notes to `doc`; its cases and peers
    replace those of `doc` with the same key."""
    try:
        other = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ParameterError(f"bench: {path} is not valid JSON ({exc})") from None
    if other.get("steps", STEPS) != STEPS:
        raise ParameterError(f"bench: {path} was run with steps={other['steps']}, "
                             f"this bench runs {STEPS}")
    for field, key in (("rows", case_key), ("peers", peer_key),
                       ("camera_rows", camera_bench.case_key)):
        new = other.get(field, [])
        keys = {key(r) for r in new}
        doc[field] = [r for r in doc[field] if key(r) not in keys] + new
    doc["notes"] += [n for n in other.get("notes", []) if n not in doc["notes"]]


def print_report(doc: dict) -> None:
    head = ["scene", "B", "backend", "rewrites", "fwd ns/world-step", "grad ns/world-step",
            "grad/fwd", "compile cold s (fwd+grad)", "warm s", "peak MB"]
    body = [[r["scene"], r["batch"], r["backend"], "on" if r["rewrites"] else "off",
             f"{r['forward_ns_per_world_step']:.0f}", f"{r['gradient_ns_per_world_step']:.0f}",
             f"{r['gradient_over_forward']:.1f}",
             f"{r['compile_forward_cold_s']:.1f}+{r['compile_cold_s']:.1f}",
             f"{r['compile_forward_warm_s']:.1f}+{r['compile_warm_s']:.1f}",
             f"{r['peak_mb']:.0f}"]
            for r in sorted(doc["rows"], key=case_key)]
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


