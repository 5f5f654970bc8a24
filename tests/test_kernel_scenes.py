"""The random scene generator of the kernel checks (`kernel_scenes`): every
scene it makes is valid, uses what the fused kernels model, and together
they cover every contact kind, joint type, motor mode and solver feature."""

from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from kernel_scenes import (ITERATIONS, SMALL_SCENES, command_range, random_action, random_state,
                           scene_features, scene_from_seed, scenes)

from symphys.physics.kernels.layout import Option, build_layout
from symphys.scene.elements import ContactModel, FrictionModel
from symphys.scene.params import resolve_values

# Features each of SMALL_SCENES and SMALL_SCENES + a seeded sample must hold
# in at least (1, 3) scenes.
REQUIRED = (
    [f"contact:{k}" for k in ("sphere-ground", "box-ground", "capsule-ground",
                              "sphere-sphere", "sphere-box", "capsule-sphere",
                              "capsule-capsule", "capsule-box", "box-box")]
    + [f"joint:{t}" for t in ("fixed", "hinge", "ball", "slider", "universal", "planar")]
    + [f"motor:{m}" for m in ("position", "velocity", "torque")]
    + [f"motor-on:{t}" for t in ("hinge", "slider", "universal")]
    + ["limits:hinge", "limits:slider", "limits:ball", "joint:soft", "joint:drag",
       "joint:armature", "joint:spring", "joint:world-parent",
       "joint:body-parent", "motor:universal-axis1", "motor:command-range", "motor:feedback", "rolling",
       "no-rolling", "ground", "no-ground", "soft-contacts", "velocity-damping",
       "gyroscopic", "no-gyroscopic", "zero-gravity", "all-isotropic", "contacts:none",
       "resting", "stacked", "ground-gap<0", "ground-gap<5cm", "ground-gap>=5cm",
       "shape:sphere", "shape:box", "shape:capsule", "explicit-inertia"])


def check_scene(scene, max_bodies):
    assert 1 <= len(scene.bodies) <= max_bodies
    assert scene.solver.iterations == ITERATIONS
    assert scene.solver.model is ContactModel.IMPULSE
    assert scene.solver.friction_model is FrictionModel.PYRAMID
    assert 0.002 <= scene.dt <= 0.02
    children = [j.child for j in scene.joints]
    assert len(children) == len(set(children))            # a forest: one parent each
    names = scene.body_names
    for j in scene.joints:                                # parents come first: no cycles
        assert j.parent == "world" or names.index(j.parent) < names.index(j.child)
    layout = build_layout(scene)                          # UnsupportedByKernels: fails
    assert layout.options[Option.ITERATIONS] == ITERATIONS


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenes())
def test_generated_scenes_build(scene):
    check_scene(scene, 4)
    rng = np.random.default_rng(0)
    values, batch = resolve_values(scene, random_state(scene, rng))
    assert batch is None
    assert random_action(scene, rng).shape == (len(scene.motors),)


def test_small_scenes():
    assert len(SMALL_SCENES) >= 30
    assert len({s.name for s in SMALL_SCENES}) == len(SMALL_SCENES)
    for scene in SMALL_SCENES:
        check_scene(scene, 3)
        seed = int(scene.name[len("seed"):])
        assert scene_from_seed(seed, max_bodies=3) == scene   # deterministic


def test_coverage():
    small, both = Counter(), Counter()
    for scene in SMALL_SCENES:
        small.update({k: 1 for k, v in scene_features(scene).items() if v})
    both.update(small)
    for seed in range(200):
        scene = scene_from_seed(10_000 + seed)
        check_scene(scene, 4)
        both.update({k: 1 for k, v in scene_features(scene).items() if v})
    assert not [k for k in REQUIRED if small[k] < 1], small
    assert not [k for k in REQUIRED if both[k] < 3], both


def test_random_states_and_actions():
    rng = np.random.default_rng(1)
    inside = beyond = 0
    for scene in SMALL_SCENES:
        state = random_state(scene, rng)
        resolve_values(scene, state)
        for body in scene.body_names:
            assert abs(np.linalg.norm(state[f"{body}.quaternion"]) - 1) < 1e-12
        values, batch = resolve_values(scene, random_state(scene, rng, batch=3))
        assert batch == 3
        actions = random_action(scene, rng, batch=20)
        assert actions.shape == (20, len(scene.motors))
        for k in range(len(scene.motors)):
            lo, hi = command_range(scene, k)
            inside += np.sum((actions[:, k] >= lo) & (actions[:, k] <= hi))
            beyond += np.sum((actions[:, k] < lo) | (actions[:, k] > hi))
    assert inside > 20 and beyond > 20
