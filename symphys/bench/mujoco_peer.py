"""MuJoCo as a speed peer of `symphys bench`, on the same scene as an MJCF
model (`symphys.mjcf.write`), or on the very file a robot was read from
(`model_file`): `time_mj_step` (a Python loop of
`mujoco.mj_step` over B `MjData`) and `time_rollout` (`mujoco.rollout`, C++
threads). Both report nanoseconds per world-step (one world advanced by dt).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from symphys.mjcf.write import MjcfOptions, import_mujoco, load_model
from symphys.scene.reader import load_scene
from symphys.scene.scene import Scene


@dataclass(frozen=True)
class PeerTiming:
    """One MuJoCo timing: `seconds` per run of `steps` steps of `batch`
    worlds (median of `repeats` runs after a warm-up)."""

    method: str
    scene: str
    batch: int
    steps: int
    seconds: float
    repeats: int
    nthread: int
    mujoco_version: str
    times: tuple[float, ...] = field(default=(), repr=False)

    @property
    def ns_per_world_step(self) -> float:
        return self.seconds / (self.steps * self.batch) * 1e9

    def as_dict(self) -> dict:
        return {"engine": "mujoco", "method": self.method, "scene": self.scene,
                "batch": self.batch, "steps": self.steps, "seconds": self.seconds,
                "ns_per_world_step": self.ns_per_world_step,
                "ns_per_step": self.seconds / self.steps * 1e9,
                "repeats": self.repeats, "nthread": self.nthread,
                "mujoco_version": self.mujoco_version, "times": list(self.times)}


def initial_states(model, data, batch: int, seed: int = 0) -> np.ndarray:
    """(batch, nstate) full-physics states: the initial keyframe, and for
    batch > 1 each free root's position jittered like `symphys bench`
    (uniform +-5 cm, z only upwards)."""
    mujoco = import_mujoco()
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    rng = np.random.default_rng(seed)
    states = np.empty((batch, mujoco.mj_stateSize(model, spec)))
    free = [model.jnt_qposadr[j] for j in range(model.njnt)
            if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    for i in range(batch):
        if model.nkey:
            mujoco.mj_resetDataKeyframe(model, data, 0)
        else:
            mujoco.mj_resetData(model, data)
        if batch > 1:
            for adr in free:
                jitter = rng.uniform(-0.05, 0.05, size=3)
                jitter[2] = abs(jitter[2])
                data.qpos[adr:adr + 3] += jitter
        mujoco.mj_getState(model, data, states[i], spec)
    return states


def _time(run, repeats: int) -> tuple[float, tuple[float, ...]]:
    run()                                    # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return statistics.median(times), tuple(times)


def _model(scene: Scene, options: MjcfOptions, model_file):
    """(MjModel, MjData): the scene written as MJCF, or `model_file` as read."""
    if model_file is None:
        return load_model(scene, options)
    mujoco = import_mujoco()
    model = mujoco.MjModel.from_xml_path(str(model_file))
    return model, mujoco.MjData(model)


def time_mj_step(scene: Scene, steps: int = 200, batch: int = 1, *, repeats: int = 5,
                 options: MjcfOptions = MjcfOptions(), model_file=None) -> dict:
    """Time a Python loop of `mujoco.mj_step` over `batch` MjData for `steps`
    steps (controls 0: servos hold the initial pose). Returns
    `PeerTiming.as_dict()`: ns_per_world_step, mujoco_version, ..."""
    mujoco = import_mujoco()
    model, data = _model(scene, options, model_file)
    states = initial_states(model, data, batch)
    datas = [mujoco.MjData(model) for _ in range(batch)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    step = mujoco.mj_step

    def run():
        for d, s in zip(datas, states):
            mujoco.mj_setState(model, d, s, spec)
            d.ctrl[:] = 0.0
        for _ in range(steps):
            for d in datas:
                step(model, d)

    seconds, times = _time(run, repeats)
    return PeerTiming("mj_step", scene.name, batch, steps, seconds, repeats, 1,
                      mujoco.__version__, times).as_dict()


def time_rollout(scene: Scene, steps: int = 200, batch: int = 1, *, repeats: int = 5,
                 nthread: int | None = None, options: MjcfOptions = MjcfOptions(),
                 model_file=None) -> dict:
    """Time `mujoco.rollout` of `batch` worlds for `steps` steps (controls 0)
    on a pool of `nthread` threads (default: the CPU count when batch > 1,
    else 0 = the calling thread); output arrays are allocated once, outside
    the timing. Returns `PeerTiming.as_dict()`."""
    mujoco = import_mujoco()
    from mujoco import rollout

    model, data = _model(scene, options, model_file)
    states = initial_states(model, data, batch)
    if nthread is None:
        nthread = min(os.cpu_count() or 1, batch) if batch > 1 else 0
    datas = [mujoco.MjData(model) for _ in range(max(1, nthread))]
    control = np.zeros((batch, steps, model.nu))
    nstate = states.shape[1]
    out_state = np.empty((batch, steps, nstate))
    out_sensor = np.empty((batch, steps, model.nsensordata))
    with rollout.Rollout(nthread=nthread) as pool:
        def run():
            pool.rollout(model, datas, states, control, nstep=steps,
                         state=out_state, sensordata=out_sensor)

        seconds, times = _time(run, repeats)
    return PeerTiming("rollout", scene.name, batch, steps, seconds, repeats, nthread,
                      mujoco.__version__, times).as_dict()


def measure(scene_name: str, batch: int, steps: int = 200, repeats: int = 5) -> dict:
    """Both MuJoCo timings of a shipped scene: {"mj_step": ..., "rollout": ...}."""
    scene = load_scene(scene_name)
    return {"mj_step": time_mj_step(scene, steps, batch, repeats=repeats),
            "rollout": time_rollout(scene, steps, batch, repeats=repeats)}


def main(cases=(("quadruped", 1), ("quadruped", 16), ("spheres16", 64)),
         steps: int = 200) -> list[dict]:
    """Print ns per world-step of both MuJoCo methods for each (scene, batch)."""
    rows = []
    print(f"{'scene':<12} {'batch':>5} {'mj_step ns/ws':>14} {'rollout ns/ws':>14}")
    for name, batch in cases:
        r = measure(name, batch, steps)
        rows.append(r)
        print(f"{name:<12} {batch:>5} {r['mj_step']['ns_per_world_step']:>14.0f} "
              f"{r['rollout']['ns_per_world_step']:>14.0f}  "
              f"(mujoco {r['mj_step']['mujoco_version']}, "
              f"rollout threads {r['rollout']['nthread']})")
    return rows


if __name__ == "__main__":
    main()
