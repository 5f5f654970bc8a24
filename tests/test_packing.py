"""The kernels' packed parameters and initial state built field by field
(`physics.kernels.packing`) against the reference's per-body graph
(`model.build_model`, `joints.build_joint_arrays`, `graph.pack_inputs`):
values on every shipped scene and the feature scenes, gradients on all but
the A5 quadruped and the pendulum-camera (the reference's gradient graph of a
robot is slow to build), with parameters shared by all worlds, given per
world, and mixed."""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from kernel_scenes import FEATURES, random_state
from pytensor.graph.traversal import applys_between, graph_inputs

import symphys as sp
from symphys.compiler.backends import interpreted_mode
from symphys.physics.joints import build_joint_arrays
from symphys.physics.kernels.graph import pack_inputs, pack_state
from symphys.physics.geoms import build_geoms
from symphys.physics.kernels.packing import gather, packed_model
from symphys.physics.model import build_model, zero_template

SHIPPED = ["ball", "arm", "quadruped_revisited", "quadruped", "pendulum_camera", "spheres16"]
WORLDS = 3


def _reference(scene, p):
    batched = {k for k, v in p.items() if v.ndim == len(scene.parameters()[k].shape) + 1}
    bodies, world, state = build_model(scene, p, batched)
    frames, motors = build_joint_arrays(scene, p)
    packed = pack_inputs(bodies, world, frames, motors, len(scene.joints), len(scene.motors),
                         build_geoms(scene, p, batched))
    return (*packed, pack_state(state))


def _values(scene, rng, batched: str):
    """Parameter values: random states over the defaults, with `batched`
    "none", "all" or "some" of them given per world (jittered)."""
    values = {k: np.asarray(v, float) for k, v in scene.parameters().items()}
    values.update({k: np.asarray(v, float) for k, v in random_state(scene, rng).items()})
    names = sorted(values)
    chosen = {"none": [], "all": names, "some": names[::3]}[batched]
    for k in chosen:
        jitter = 1.0 + 0.05 * rng.standard_normal((WORLDS,) + values[k].shape)
        values[k] = values[k][None] * jitter
    return values


# Robots: parameters mixed only (the reference's gradient graph is large),
# and gradients on the arm and the quadruped (joints, motors, boxes).
ROBOTS = ("arm", "quadruped_revisited", "quadruped", "pendulum_camera")
VALUES_ONLY = ("quadruped_revisited", "pendulum_camera")


def _geoms_scene():
    """Geoms of every shape on two bodies (one turned) and on the world."""
    b = sp.SceneBuilder("geoms", dt=0.01).ground()
    b.body("crate", "box", mass=2.0, size=[0.3, 0.2, 0.2], position=[0.1, 0.0, 0.3],
           quaternion=[0.9, 0.1, 0.3, 0.2])
    b.body("arm", "capsule", mass=1.0, radius=0.03, length=0.4, position=[0.0, 0.4, 0.3])
    b.geom("paw", "arm", "box", size=[0.08, 0.06, 0.05], position=[0.13, 0.4, 0.31],
           quaternion=[0.8, 0.4, 0.2, 0.1], friction=0.5)
    b.geom("claw", "arm", "capsule", radius=0.02, length=0.1, position=[0.15, 0.45, 0.4])
    b.geom("knob", "crate", "sphere", radius=0.05, position=[0.2, 0.1, 0.45], restitution=0.3)
    b.geom("wall", "world", "box", size=[0.1, 1.0, 1.0], position=[0.5, 0.0, 0.5],
           quaternion=[0.99, 0.0, 0.1, 0.0])
    b.contacts([("crate", "wall"), ("paw", "wall"), ("knob", "ground"), ("claw", "crate")])
    return b.build()


def _cases():
    scenes = [(name, sp.load_scene(name)) for name in SHIPPED] + [
        (name, build()) for name, build in FEATURES.items()] + [("geoms", _geoms_scene())]
    return [pytest.param(name, scene, batched, id=f"{name}-{batched}")
            for name, scene in scenes
            for batched in (("some",) if name in ROBOTS else ("none", "some", "all"))]


@pytest.mark.parametrize("name, scene, batched", _cases())
def test_packed_model_is_the_reference_packing(name, scene, batched):
    rng = np.random.default_rng(7)
    values = _values(scene, rng, batched)
    sym = {k: pt.tensor(k, dtype="float64", shape=(None,) * v.ndim) for k, v in values.items()}
    new, ref = packed_model(scene, sym), _reference(scene, sym)
    # The state is broadcast against everything batched (as rollouts do).
    def with_full_state(outs):
        arrays = [x[:, :1, :1] if x.ndim == 3 else x[:, :1, None] for x in outs[:5]]
        sizes = [1, 1, len(scene.joints), len(scene.motors), len(scene.geoms)]
        template = zero_template([a for a, k in zip(arrays, sizes) if k])
        return list(outs[:5]) + [outs[5] + template]

    new, ref = with_full_state(new), with_full_state(ref)
    # A random linear functional of all outputs, differentiated w.r.t. every parameter.
    weights = [pt.constant(rng.standard_normal((WORLDS, 20, 30))) for _ in new]

    def functional(outs):
        return sum((o * w[:o.shape[0], :o.shape[1], :o.shape[2]] if o.ndim == 3
                    else o * w[:o.shape[0], 0, :o.shape[1]]).sum() for o, w in zip(outs, weights))

    names = list(sym)
    outs = new + ref
    if name not in VALUES_ONLY:
        outs += pytensor.grad(functional(new), [sym[k] for k in names],
                              disconnected_inputs="ignore", return_disconnected="zero") \
            + pytensor.grad(functional(ref), [sym[k] for k in names],
                            disconnected_inputs="ignore", return_disconnected="zero")
    fn = pytensor.function([sym[k] for k in names], outs, mode=interpreted_mode(),
                           on_unused_input="ignore")
    got = fn(*[values[k] for k in names])
    n = len(new)
    for label, a, b in zip(("body", "world", "joint", "motor", "geom", "state"), got[:n],
                           got[n:2 * n]):
        b = np.broadcast_to(b, a.shape) if a.size else b
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13, err_msg=f"{name}: {label}")
    grads = got[2 * n:]
    for k, (a, b) in enumerate(zip(grads[:len(names)], grads[len(names):])):
        assert np.all(np.isfinite(a)), names[k]
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11, err_msg=f"{name}: d/d{names[k]}")


def test_gather_keeps_its_node_count_whatever_the_count():
    """Shared values, per-world values, or both: the same few nodes for 3
    values as for 40."""
    def nodes(k, per_world):
        xs = [pt.tensor(f"x{i}", shape=(None, 3) if i in per_world else (3,)) for i in range(k)]
        out = gather(xs, (3,))
        return len(list(applys_between(list(graph_inputs([out])), [out])))

    for per_world in (lambda k: set(), lambda k: set(range(k)), lambda k: {0, k - 1}):
        # (one value alone needs no join: at most one node more for 40)
        assert nodes(40, per_world(40)) - nodes(3, per_world(3)) <= 1


def test_gather_orders_mixed_values():
    a, b, c = np.arange(3.0), np.arange(6.0).reshape(2, 3) + 10, np.arange(3.0) + 20
    out = gather([pt.constant(a), pt.constant(b), pt.constant(c)], (3,)).eval()
    np.testing.assert_array_equal(out, np.stack([np.stack([a, b[w], c]) for w in range(2)]))


@pytest.mark.parametrize("name", ["arm", "quadruped"])
def test_static_batch_sizes_pack_as_unknown_ones(name):
    """Parameters with their sizes known in the graph (JAX's static batch):
    positions per world beside shared rotations join along the body axis,
    and the packing is the one of the same values with unknown sizes."""
    scene = sp.load_scene(name)
    rng = np.random.default_rng(3)
    values = _values(scene, rng, "none")
    for body in scene.bodies:
        key = f"{body.name}.position"
        values[key] = values[key][None] + 0.01 * rng.standard_normal((WORLDS, 3))
    names = sorted(values)
    results = []
    for static in (True, False):
        sym = {k: pt.tensor(k, dtype="float64", shape=v.shape if static else (None,) * v.ndim)
               for k, v in values.items()}
        fn = pytensor.function([sym[k] for k in names], list(packed_model(scene, sym)),
                               mode=interpreted_mode(), on_unused_input="ignore")
        results.append(fn(*[values[k] for k in names]))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
