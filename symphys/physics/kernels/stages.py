"""The three stages of the fused step as PyTensor Ops (`ops.Stage`), and
the step built from them.

    v_free, rows, tau = Rows()(state, body, world, joint, motor, geom, action, *tables)
    v = Solve(iterations=K)(v_free, rows, rows_table)
    state = Integrate(renormalise=n)(state, v, v_free, tau, options)

Shapes are the package docstring's. Each Op runs its Numba kernel on the
Numba backend, its JAX kernel on JAX, and its Numba kernel from Python
under the C VM (`perform`); its pullback is the hand-made Numba VJP or
JAX's autodiff of the JAX kernel.
"""

from __future__ import annotations

import importlib
from dataclasses import fields

import pytensor.tensor as pt

from symphys.physics.kernels.integrate import integrate_grad, integrate_numba
from symphys.physics.kernels.layout import ROW, STATE, Option, StepLayout
from symphys.physics.kernels.ops import In, Out, Stage, stage_ops
from symphys.physics.kernels.rows import rows_grad, rows_numba
from symphys.physics.kernels.solve import newton_grad, newton_numba, pgs_grad, pgs_numba


def _kernels(*names: str) -> tuple[str, ...]:
    """Module names under symphys.physics.kernels, for `Stage.depends`."""
    return tuple(f"symphys.physics.kernels.{name}" for name in names)


def _jax(module: str, name: str):
    """The JAX kernel `module.name`, imported when first called (JAX is an
    optional dependency: a Numba user never imports it)."""
    def forward(*args):
        kernels = importlib.import_module(f"symphys.physics.kernels.{module}")
        return getattr(kernels, name)(*args)

    forward.__name__ = name
    return forward


_TABLES = tuple(In(f.name, 1 if f.name in ("articulated", "options") else 2,
                   "float64" if f.name in ("joint_consts", "motor_consts", "articulated",
                                           "options") else "int64",
                   grad="disconnected")
                for f in fields(StepLayout))
_WORLDS, _BODIES = ("state", 0), ("state", 1)

ROWS = Stage(
    "Rows",
    inputs=(In("state", 3), In("body", 3), In("world", 2), In("joint", 3), In("motor", 3),
            In("geom", 3), In("action", 2), *_TABLES),
    outputs=(Out("v_free", (_WORLDS, _BODIES, 6)),
             Out("rows", (_WORLDS, ("rows", 0), ROW.width)),
             Out("tau", (_WORLDS, _BODIES))),
    numba_forward=rows_numba.rows, numba_vjp=rows_grad.rows_vjp,
    jax_forward=_jax("rows.rows_jax", "rows"),
    depends=(*_kernels("vec_numba", "layout", "geometry.shapes_numba", "geometry.shapes_grad",
                       "geometry.geometry_grad", "geometry.contact_geometry_grad",
                       "geometry.geoms_numba", "geometry.geoms_grad", "rows.contacts_numba",
                       "rows.contacts_grad", "rows.joints_numba", "solve.pgs_numba",
                       "solve.pgs_grad"), "symphys.physics.shapes"),
    version=2, home=__name__)

SOLVE = Stage(
    "Solve",
    inputs=(In("v_free", 3), In("rows", 3), In("rows_table", 2, "int64")),
    outputs=(Out("v", (("v_free", 0), ("v_free", 1), 6)),),
    numba_forward=pgs_numba.solve, numba_vjp=pgs_grad.solve_vjp,
    jax_forward=_jax("solve.pgs_jax", "solve"), params=("iterations",),
    depends=_kernels("vec_numba", "layout"),
    version=1, home=__name__)


_PATTERN = tuple(In(name, 2 if name == "pair" else 1, "int64", grad="disconnected")
                 for name in ("order", "pair", "later", "nb_ptr", "nb"))
NEWTON = Stage(
    "NewtonSolve",
    inputs=(In("v_free", 3), In("rows", 3), In("rows_table", 2, "int64"), In("state", 3),
            In("body", 3), In("options", 1, grad="disconnected"), *_PATTERN),
    outputs=(Out("v", (("v_free", 0), ("v_free", 1), 6)),),
    numba_forward=newton_numba.solve, numba_vjp=newton_grad.solve_vjp,
    jax_forward=_jax("solve.newton_jax", "solve"), params=("iterations", "stiff", "soft", "tolerance"),
    vjp_reads_outputs=True,
    depends=_kernels("vec_numba", "layout", "rows.rows_numba", "rows.rows_grad",
                     "rows.contacts_numba", "solve.pgs_numba", "solve.newton_numba"),
    version=1, home=__name__)

INTEGRATE = Stage(
    "Integrate",
    inputs=(In("state", 3), In("v", 3), In("v_free", 3), In("tau", 2),
            In("options", 1, grad="disconnected")),
    outputs=(Out("next_state", (("state", 0), ("state", 1), 18)),),
    numba_forward=integrate_numba.integrate, numba_vjp=integrate_grad.integrate_vjp,
    jax_forward=_jax("integrate.integrate_jax", "integrate"), params=("renormalise",),
    depends=_kernels("vec_numba", "layout"),
    version=1, home=__name__,
    # The next state's velocities are the solved v: a reverse step reads
    # them there instead of solving again.
    passes=(("v", "next_state", STATE.at("velocity"), STATE.at("velocity") + 6),))

Rows, RowsGrad = stage_ops(ROWS)
Solve, SolveGrad = stage_ops(SOLVE)
NewtonSolve, NewtonSolveGrad = stage_ops(NEWTON)
Integrate, IntegrateGrad = stage_ops(INTEGRATE)


def fused_step(state, body, world, joint, motor, geom, action, layout: StepLayout,
               tables=None):
    """The next packed state (B, N, 18): the three stage Ops.

    tables: the layout's arrays as tensors (default: constants)."""
    tables = layout.arrays() if tables is None else tables
    tables = [pt.as_tensor_variable(t) for t in tables]
    v_free, rows, tau = Rows()(state, body, world, joint, motor, geom, action, *tables)
    rows_table = tables[[f.name for f in fields(StepLayout)].index("rows")]
    if layout.options[Option.NEWTON]:
        tree = newton_numba.pattern(layout.rows, len(layout.articulated))
        v = NewtonSolve(iterations=int(layout.options[Option.NEWTON_ITERATIONS]),
                        stiff=newton_numba.STIFF,
                        soft=float(layout.options[Option.BOUND_SOFTNESS]),
                        tolerance=float(layout.options[Option.TOLERANCE]))(
            v_free, rows, rows_table, state, body, tables[-1],
            *(pt.as_tensor_variable(a) for a in tree.arrays()))
    else:
        v = Solve(iterations=int(layout.options[Option.ITERATIONS]))(v_free, rows, rows_table)
    return Integrate(renormalise=int(layout.options[Option.RENORMALISE]))(
        state, v, v_free, tau, tables[-1])
