"""The fused step in rollouts: a loop body of a few stage nodes whatever the
scene, built for Numba by default and for JAX when switched on; the
reference for the C VM."""

import numpy as np
import pytest
from pytensor.graph.traversal import applys_between, graph_inputs

import symphys as sp
from symphys.compiler import rewrites
from symphys.compiler.backends import interpreted
from symphys.physics.kernels.ops import StageOp


def loop_body_nodes(scene):
    """The nodes of the time loop's step (inside the loop wrapper and its
    scans) of a 10-step rollout of `scene`."""
    tr = sp.rollout(scene, 10, params=sp.symbols(scene, wrt=[]))
    outs = [tr.position[scene.body_names[0]]]
    inner = []
    for node in applys_between(list(graph_inputs(outs)), outs):
        fgraph = getattr(node.op, "fgraph", None)
        if fgraph is None:
            continue
        for sub in fgraph.apply_nodes:
            inner.append(sub)
            if getattr(sub.op, "fgraph", None) is not None:
                inner += list(sub.op.fgraph.apply_nodes)
    return inner


@pytest.mark.parametrize("backend, on", [("numba", None), ("jax", True)])
def test_the_loop_body_is_three_stage_ops_for_every_scene(backend, on):
    sizes = {}
    for name in ("ball", "arm", "quadruped"):
        with rewrites.switched(on), rewrites.for_backend(backend):
            nodes = loop_body_nodes(sp.load_scene(name))
        stages = sorted(type(n.op).__name__ for n in nodes if isinstance(n.op, StageOp))
        assert stages == ["Integrate", "Rows", "Solve"], name
        sizes[name] = len(nodes)
    assert len(set(sizes.values())) == 1, sizes
    assert sizes["ball"] < 20


@pytest.mark.parametrize("backend", ["cvm", "jax"])
def test_the_c_vm_and_jax_build_the_reference_by_default(backend):
    with rewrites.for_backend(backend):
        nodes = loop_body_nodes(sp.load_scene("arm"))
    assert not any(isinstance(n.op, StageOp) for n in nodes)
    assert len(nodes) > 1000


def test_fused_numba_and_jax_rollouts_match_the_reference():
    """The arm's fused rollouts against its reference graph, whose loops run
    in PyTensor's Python VM (the same graph the C VM compiles, without the
    minutes of compiling; test_backends runs the C VM)."""
    arm = sp.load_scene("arm")
    action = [0.4, -0.3, 0.2, 0.5]
    with rewrites.switched(False), interpreted():
        ref = sp.simulate(arm, 60, action=action, backend="cvm")
    for backend, on in (("numba", None), ("jax", True)):
        with rewrites.switched(on):
            tr = sp.simulate(arm, 60, action=action, backend=backend)
        for body in arm.body_names:
            np.testing.assert_allclose(tr.position[body], ref.position[body], rtol=0,
                                       atol=1e-10)
            np.testing.assert_allclose(tr.rotation[body], ref.rotation[body], rtol=0,
                                       atol=1e-10)
