"""The generic stage-kernel Ops (`symphys.physics.kernels.ops`) on toy stages:
Numba == JAX, hand pullback == JAX's autodiff == finite differences, inside
loops, disconnected outputs, pickling and the Numba cache key."""

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import DisconnectedInputError

from symphys.compiler.backends import jax_with_float64
from symphys.adjoint import loop_with_adjoint
from symphys.physics.kernels.ops import In, Out, Stage, numba_cache_key, stage_ops


# -- toy stages ----------------------------------------------------------------------
# y = scale x s[:, None] + sin(x), z = c sum_k x^2: two outputs, an int table,
# a float option with a zero gradient, one differentiated input.
@numba.njit
def affine_nb(x, s, c, scale):
    y = np.empty_like(x)
    z = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        acc = 0.0
        for k in range(x.shape[1]):
            y[i, k] = scale * x[i, k] * s[i] + np.sin(x[i, k])
            acc += x[i, k] * x[i, k]
        z[i] = acc * c[()]
    return y, z


@numba.njit
def affine_vjp_nb(x, s, c, dy, dz, scale):
    dx = np.empty_like(x)
    for i in range(x.shape[0]):
        for k in range(x.shape[1]):
            dx[i, k] = (dy[i, k] * (scale * s[i] + np.cos(x[i, k]))
                        + dz[i] * 2.0 * x[i, k] * c[()])
    return dx


def affine_jax(x, s, c, scale):
    import jax.numpy as jnp
    return scale * x * s[:, None] + jnp.sin(x), (x * x).sum(axis=1) * c


AFFINE = Stage("ToyAffine",
               inputs=(In("x", 2), In("s", 1, "int64"), In("c", 0, grad="zero")),
               outputs=(Out("y", (("x", 0), ("x", 1))), Out("z", (("x", 0),))),
               numba_forward=affine_nb, numba_vjp=affine_vjp_nb, jax_forward=affine_jax,
               params=("scale",), version=1)
Affine, AffineGrad = stage_ops(AFFINE)


# A sequential loop (Gauss-Seidel-like): `iterations` sweeps of
# u[j] += w[j] sin(u[p]) over j = order[k], p = order[k - 1] (cyclic).
@numba.njit
def chain_nb(v, w, order, iterations):
    u = v.copy()
    n = order.shape[0]
    for _ in range(iterations):
        for k in range(n):
            j, p = order[k], order[k - 1]
            u[j] = u[j] + w[j] * np.sin(u[p])
    return u


@numba.njit
def chain_vjp_nb(v, w, order, du_out, iterations):
    n = order.shape[0]
    tape = np.empty(iterations * n)          # u[p] before each update
    u = v.copy()
    t = 0
    for _ in range(iterations):
        for k in range(n):
            j, p = order[k], order[k - 1]
            tape[t] = u[p]
            u[j] = u[j] + w[j] * np.sin(u[p])
            t += 1
    du = du_out.copy()
    dw = np.zeros_like(w)
    for t in range(iterations * n - 1, -1, -1):
        k = t % n
        j, p = order[k], order[k - 1]
        g = du[j]
        dw[j] += g * np.sin(tape[t])
        du[p] += g * w[j] * np.cos(tape[t])
    return du, dw


def chain_jax(v, w, order, iterations):
    import jax
    import jax.numpy as jnp
    n = order.shape[0]

    def body(t, u):
        k = t % n
        j, p = order[k], order[(k - 1) % n]
        return u.at[j].set(u[j] + w[j] * jnp.sin(u[p]))

    return jax.lax.fori_loop(0, iterations * n, body, v)


CHAIN = Stage("ToyChain", inputs=(In("v", 1), In("w", 1), In("order", 1, "int64")),
              outputs=(Out("u", (("v", 0),)),),
              numba_forward=chain_nb, numba_vjp=chain_vjp_nb, jax_forward=chain_jax,
              params=("iterations",), version=1)
Chain, ChainGrad = stage_ops(CHAIN)


# One input, one output, a pullback reading the output: y = exp(x), dx = dy y.
@numba.njit
def exp_nb(x):
    return np.exp(x)


@numba.njit
def exp_vjp_nb(x, y, dy):
    return (dy * y,)


def exp_jax(x):
    import jax.numpy as jnp
    return (jnp.exp(x),)


EXP = Stage("ToyExp", inputs=(In("x", 1),), outputs=(Out("y", (("x", 0),)),),
            numba_forward=exp_nb, numba_vjp=exp_vjp_nb, jax_forward=exp_jax,
            vjp_reads_outputs=True)
Exp, ExpGrad = stage_ops(EXP)

RNG = np.random.default_rng(0)
N, K = 3, 2
XV = RNG.normal(size=(N, K))
SV = np.array([1, -2, 3])
CV = np.array(0.7)
VV = RNG.normal(size=N)
WV = RNG.normal(size=N) * 0.5
ORDER = np.array([2, 0, 1])
BACKENDS = ("NUMBA", "JAX")


@pytest.fixture(scope="module", autouse=True)
def _jax64():
    jax_with_float64()


def _fd(f, x, eps=1e-6):
    """Central finite differences of scalar f at array x."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        g[idx] = (f(xp) - f(xm)) / (2 * eps)
    return g


def _symbols():
    return (pt.matrix("x"), pt.lvector("s"), pt.dscalar("c"), pt.vector("v"),
            pt.vector("w"), pt.lvector("order"))


def _step(x, s, c, v, w, order):
    """One toy 'physics step': both stages, coupled."""
    y, z = Affine(scale=0.5)(x, s, c)
    u = Chain(iterations=3)(v + 0.1 * z, w, order)
    return y * 0.9, u


# -- tests ---------------------------------------------------------------------------
def test_numba_equals_jax_equals_perform():
    x, s, c, v, w, order = _symbols()
    y, z = Affine(scale=0.5)(x, s, c)
    u = Chain(iterations=3)(v, w, order)
    assert y.type.shape == (None, None) and u.type.shape == (None,)
    outs = {}
    for mode in BACKENDS + ("FAST_RUN",):
        f = pytensor.function([x, s, c, v, w, order], [y, z, u], mode=mode)
        outs[mode] = [np.asarray(o) for o in f(XV, SV, CV, VV, WV, ORDER)]
    expect_y = 0.5 * XV * SV[:, None] + np.sin(XV)
    np.testing.assert_allclose(outs["NUMBA"][0], expect_y, rtol=1e-12)
    for mode in ("JAX", "FAST_RUN"):
        for a, b in zip(outs["NUMBA"], outs[mode]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    # static shapes follow the inputs'
    assert Affine(scale=0.5)(pt.tensor(shape=(4, 5)), s, c)[1].type.shape == (4,)


def _fd_checks(fn, vals, wrt, n_grads):
    """Compare fn's gradients (outputs 1..n_grads, of the loss, output 0)
    with central differences in the inputs at positions `wrt`."""
    got = fn(*vals)
    for g, k in zip(got[1:1 + n_grads], wrt):
        def loss(a, k=k):
            return float(fn(*vals[:k], a, *vals[k + 1:])[0])
        np.testing.assert_allclose(g, _fd(loss, vals[k]), rtol=1e-6, atol=1e-8)
    return got


def test_pullbacks_agree_with_jax_and_finite_differences():
    x, s, c, v, w, order = ins = _symbols()
    y, z = Affine(scale=0.5)(x, s, c)
    u = Chain(iterations=3)(v, w, order)
    e = Exp()(v)
    loss = ((y ** 2).sum() + (z * np.arange(1.0, N + 1)).sum() + (u ** 3).sum()
            + (e * w).sum())
    grads = pytensor.grad(loss, [x, v, w, c])
    vals = [XV, SV, CV, VV, WV, ORDER]
    got = {}
    for mode in BACKENDS:
        fn = pytensor.function(list(ins), [loss, *grads], mode=mode)
        got[mode] = _fd_checks(fn, vals, [0, 3, 4], 3)
        assert float(got[mode][4]) == 0.0         # "zero" gradient of the option c
    for a, b in zip(*got.values()):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    # the integer table is disconnected
    with pytest.raises(DisconnectedInputError):
        pytensor.grad(loss, order)


def test_grad_op_numba_equals_jax_vjp_directly():
    """The hand pullback (Numba) against `jax.vjp` of the JAX kernel, op by op."""
    v, w, order = pt.vector("v"), pt.vector("w"), pt.lvector("order")
    du = pt.vector("du")
    dv, dw = ChainGrad(iterations=4)(v, w, order, du)
    res = [pytensor.function([v, w, order, du], [dv, dw], mode=m)(VV, WV, ORDER, VV[::-1] + 1)
           for m in BACKENDS]
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    with pytest.raises(NotImplementedError, match="second derivatives"):
        pytensor.grad(dv.sum(), v)


def test_disconnected_outputs():
    """A loss reading only z: y's cotangent is disconnected (zeros); a loss
    reading nothing of the Chain stage leaves w disconnected."""
    x, s, c, v, w, order = _symbols()
    y, z = Affine(scale=0.5)(x, s, c)
    loss = (z ** 2).sum()
    gx = pytensor.grad(loss, x)
    expect = 2 * (CV * (XV ** 2).sum(1))[:, None] * CV * 2 * XV
    for mode in BACKENDS:
        np.testing.assert_allclose(pytensor.function([x, s, c], gx, mode=mode)(XV, SV, CV),
                                   expect, rtol=1e-12)
    gw = pytensor.grad((y ** 2).sum(), [x, w], disconnected_inputs="ignore",
                       return_disconnected="disconnected")
    assert type(gw[1].type).__name__ == "DisconnectedType"


def _scan_loss(ins, n_steps=4):
    x, s, c, v, w, order = ins

    def body(x_t, v_t, s, c, w, order):
        return _step(x_t, s, c, v_t, w, order)

    (xs, vs) = pytensor.scan(body, outputs_info=[x, v], non_sequences=[s, c, w, order],
                             n_steps=n_steps, return_updates=False)
    return (xs[-1] ** 2).sum() + (vs ** 2).sum()


def _adjoint_loss(ins, n_steps=4):
    x, s, c, v, w, order = ins

    def run(state, leaves):
        s, c, w, order = leaves
        return list(_step(state[0], s, c, state[1], w, order))

    xs, vs = loop_with_adjoint(run, [x, v], [s, c, w, order], n_steps)
    return (xs[-1] ** 2).sum() + (vs ** 2).sum()


@pytest.mark.parametrize("build", [_scan_loss, _adjoint_loss], ids=["scan", "adjoint"])
def test_gradient_through_loop(build):
    """pytensor.grad through a scan whose step holds the Ops (PyTensor's scan
    gradient; symphys' adjoint loop) on Numba and JAX."""
    ins = _symbols()
    loss = build(ins)
    x, s, c, v, w, order = ins
    grads = pytensor.grad(loss, [x, v, w])
    vals = [XV, SV, CV, VV, WV, ORDER]
    got = [_fd_checks(pytensor.function(list(ins), [loss, *grads], mode=mode), vals,
                      [0, 3, 4], 3) for mode in BACKENDS]
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)


def test_pickle_and_props():
    op = Chain(iterations=3)
    assert op == Chain(iterations=3) and op != Chain(iterations=4)
    assert str(op) == "ToyChain{iterations=3}"
    assert pickle.loads(pickle.dumps(op)) == op
    assert pickle.loads(pickle.dumps(op.grad_op)) == ChainGrad(iterations=3)
    assert stage_ops(CHAIN) == (Chain, ChainGrad)
    with pytest.raises(TypeError):
        Chain()
    with pytest.raises(TypeError):
        Chain(iterations=np.zeros(3))


def test_numba_cache_key_is_scene_free():
    """Two 'scenes' (different tables and sizes) use Ops with the same props:
    one key; different props or stage: different keys; every node of a loop
    has a key, so the loop (and the whole function) is cacheable."""
    from pytensor.link.numba.dispatch.basic import numba_funcify_and_cache_key

    a, b = Chain(iterations=3), Chain(iterations=3)
    assert numba_cache_key(a) == numba_cache_key(b)
    assert numba_cache_key(a) != numba_cache_key(Chain(iterations=4))
    assert numba_cache_key(a) != numba_cache_key(a.grad_op)
    assert numba_cache_key(Affine(scale=0.5)) != numba_cache_key(Affine(scale=0.25))

    # the whole (rewritten) gradient graph through a scan has a key
    ins = _symbols()
    loss = _scan_loss(ins)
    f = pytensor.function(list(ins), pytensor.grad(loss, ins[3]), mode="NUMBA")
    _, key = numba_funcify_and_cache_key(f.maker.fgraph)
    assert key is not None


def test_kernel_called_from_python_reads_any_layout(monkeypatch):
    """`call_from_python` (the Python VMs' path) on C-contiguous arrays, on
    a strided one (made contiguous first) and with the array objects'
    layout unknown (pointers from `__array_interface__`): one answer, the
    kernel's."""
    from symphys.physics.kernels import entry_numba

    def call(x):
        return entry_numba.call_from_python(AFFINE, False, (0.5,), [x, SV, CV],
                                            [x.shape, x.shape[:1]])

    expect = affine_nb(XV, SV, CV, 0.5)
    strided = np.repeat(XV, 2, axis=1)[:, ::2]
    assert not strided.flags.c_contiguous
    assert entry_numba._layout_known()
    for x in (XV, strided):
        for got, want in zip(call(x), expect):
            np.testing.assert_array_equal(got, want)
    monkeypatch.setattr(entry_numba, "_layout_known", lambda: False)
    for x in (XV, strided):
        for got, want in zip(call(x), expect):
            np.testing.assert_array_equal(got, want)


def test_infer_shape_does_not_run_the_kernel():
    x, s, c, v, w, order = _symbols()
    y, z = Affine(scale=0.5)(x, s, c)
    f = pytensor.function([x, s, c], [y.shape, z.shape], mode="NUMBA")
    assert not any(isinstance(n.op, Affine) for n in f.maker.fgraph.apply_nodes)
    assert [list(a) for a in f(np.zeros((4, 5)), np.zeros(4, "int64"), 1.0)] == [[4, 5], [4]]


CACHE_SCRIPT = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {tests!r})
    import numpy as np, pytensor
    import test_kernel_ops as T
    ins = T._symbols()
    loss = T._scan_loss(ins)
    f = pytensor.function(list(ins), [loss, *pytensor.grad(loss, [ins[0], ins[3]])],
                          mode="NUMBA")
    t = time.perf_counter()
    out = f(T.XV, T.SV, T.CV, T.VV, T.WV, T.ORDER)   # Numba compiles (or loads) here
    t = time.perf_counter() - t
    stats = f.vm.jit_fn.stats
    print(json.dumps({{"call": t, "hits": sum(stats.cache_hits.values()),
                      "misses": sum(stats.cache_misses.values()),
                      "out": [np.asarray(o).tolist() for o in out]}}))
""")


def test_numba_disk_cache_second_process(tmp_path):
    """A loop's gradient compiled in one process is loaded from PyTensor's
    on-disk Numba cache by the next: no node reports "will not be cached",
    and the second process's whole function is a cache hit, not a compile.
    (PyTensor's default cache folder: a cold one costs minutes here.)"""
    script = tmp_path / "run.py"
    script.write_text(CACHE_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__))))
    flags = ",".join(f for f in (os.environ.get("PYTENSOR_FLAGS", ""), "compiler_verbose=True")
                     if f)
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=dict(os.environ, PYTENSOR_FLAGS=flags), timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "will not be cached" not in p.stdout + p.stderr
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert runs[0]["out"] == runs[1]["out"]
    assert runs[1]["hits"] >= 1 and runs[1]["misses"] == 0, runs[1]


def test_passes_must_name_an_input_and_an_output():
    """`Stage.passes` is checked when the stage is declared."""
    declare = dict(inputs=AFFINE.inputs, outputs=AFFINE.outputs, numba_forward=affine_nb,
                   numba_vjp=affine_vjp_nb, jax_forward=affine_jax, params=("scale",))
    with pytest.raises(ValueError, match="no output"):
        Stage("ToyPasses", passes=(("x", "w", 0, 1),), **declare)
    with pytest.raises(ValueError, match="no input"):
        Stage("ToyPasses", passes=(("q", "y", 0, 1),), **declare)
    stage = Stage("ToyPasses", passes=(("x", "y", 0, 1),), **declare)
    assert stage.passes == (("x", "y", 0, 1),)


def test_kernel_cache_folder_changes_with_any_source_a_kernel_reads(tmp_path, monkeypatch):
    """The worker processes that compile the stage entries keep the
    kernels' own Numba cache in a folder named for every source file the
    stages declare (Numba keys a cached function on its own file only, so a
    kernel cached before a module it calls changed would otherwise come
    back stale): the same sources give the same folder, an edit to a
    module in a stage's `depends` a new one."""
    import importlib
    import inspect

    from symphys.physics.kernels import entry_numba, stages

    keys = [entry_numba.entry_key(stages.ROWS, False, ""),
            entry_numba.entry_key(stages.ROWS, True, "")]
    before = entry_numba.kernel_cache_dir(keys)
    assert before == entry_numba.kernel_cache_dir(keys[::-1])
    helper = inspect.getsourcefile(
        importlib.import_module("symphys.physics.kernels.geometry.shapes_numba"))
    edited = tmp_path / "shapes_numba.py"
    edited.write_text(open(helper).read() + "\n# edited\n")
    real = inspect.getsourcefile
    monkeypatch.setattr(inspect, "getsourcefile",
                        lambda obj: str(edited) if real(obj) == helper else real(obj))
    # this process runs the code it imported: its key stays that code's
    assert entry_numba.kernel_cache_dir(keys) == before
    # a process started after the edit reads the edited sources
    monkeypatch.delitem(stages.ROWS.__dict__, "_source_hash")
    assert entry_numba.kernel_cache_dir(keys) != before
