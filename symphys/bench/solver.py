"""`symphys bench-solver`: how the two solver methods converge, what a solve
costs, and how robots hold together against MuJoCo on the same file.

- convergence: the quadruped walking a sine gait (300 steps, as the paper's
  servos move it) and gymnasium's ant dropped on the floor (400 steps),
  each advanced by the Newton solve. At every step: the Newton iterations
  and the velocity residual it stopped at; projected Gauss-Seidel at the
  scene's sweeps against itself at 2,000 sweeps (max |v_K - v*| / max |v*|).
- cost: one world's solve, Newton against the scene's sweeps, timed side by
  side on the same rows (median over states along the run); and one step's
  three kernels forward and reversed with each method (`step_costs`), the
  gradient's cost over the forward's.
- fidelity: robots as MJCF, simulated by MuJoCo and by symphys with each
  method: the ant's torso height after 2 s, and a chain of three 50-g links
  carrying a 20-kg load (400 times heavier) swinging for 1 s.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from symphys.experiments.common import pyplot

CHAIN = """<mujoco><option timestep="0.002"/><worldbody>
 <body name="l1" pos="0 0 1"><joint name="j1" type="hinge" axis="0 1 0"/>
  <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.01" mass="0.05" contype="0"/>
  <body name="l2" pos="0.1 0 0"><joint name="j2" type="hinge" axis="0 1 0"/>
   <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.01" mass="0.05" contype="0"/>
   <body name="l3" pos="0.1 0 0"><joint name="j3" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.01" mass="0.05" contype="0"/>
    <body name="load" pos="0.1 0 0"><joint name="j4" type="hinge" axis="0 1 0"/>
     <geom type="sphere" size="0.05" mass="20" contype="0"/>
 </body></body></body></body></worldbody></mujoco>"""
PGS_REFERENCE_SWEEPS = 2000


def ant_xml() -> str:
    """gymnasium's ant without its armature."""
    from symphys.bench.cases import robot_file
    return robot_file("ant").read_text().replace('armature="1"', 'armature="0"')


def _with(scene, **solver):
    return dataclasses.replace(scene, solver=dataclasses.replace(scene.solver, **solver))


def convergence(scene, steps: int, gait: bool, timing_every: int = 50) -> dict:
    """Per-step Newton iterations and residuals, PGS errors and solve times
    along a run advanced by the Newton solve (module docstring)."""
    from symphys.compiler.reference_step import numeric_inputs
    from symphys.physics.kernels.integrate import integrate_numba
    from symphys.physics.kernels.layout import Option, build_layout
    from symphys.physics.kernels.rows import rows_numba
    from symphys.physics.kernels.solve import newton_numba as nw
    from symphys.physics.kernels.solve import pgs_numba as sn

    layout = build_layout(scene)
    x = numeric_inputs(scene)
    tables, table = layout.arrays(), layout.rows
    tree = nw.pattern(table, len(scene.bodies))
    sweeps = int(layout.options[Option.ITERATIONS])
    n_motors = len(scene.motors)
    phase = np.random.default_rng(0).uniform(0, 2 * np.pi, n_motors)
    state = x["state"].copy()
    out = {"iterations": [], "residual": [], "pgs_error": [], "newton_us": [], "pgs_us": [],
           "sweeps": sweeps, "rows": int(len(table)), "bodies": len(scene.bodies)}
    settings = (nw.STIFF, scene.solver.bound_softness, scene.solver.tolerance, 50)
    for t in range(steps):
        action = (0.4 * np.sin(2 * np.pi * 1.5 * t * scene.dt + phase) if gait
                  else np.zeros(n_motors))[None]
        v_free, rows, tau = rows_numba.rows(state, x["body"], x["world"], x["joint"],
                                            x["motor"], x["geom"], action, *tables)

        def newton():
            return nw.solve(v_free, rows, table, state, x["body"], layout.options,
                            *tree.arrays(), *settings[3:], *settings[:3])

        def pgs(k):
            return sn.solve(v_free, rows, table, k)

        v = newton()
        w = v[0]
        inv_i = np.empty((len(scene.bodies), 9))
        rows_numba.inverse_inertia(state[0], x["body"][0], layout.options, inv_i)
        its, residual = nw.newton_world(v_free[0], rows[0], table, x["body"][0][:, 0].copy(),
                                        inv_i, *tree.arrays(), *settings[:3], settings[3],
                                        w.copy())
        out["iterations"].append(int(its))
        out["residual"].append(float(residual))
        best = pgs(PGS_REFERENCE_SWEEPS)
        out["pgs_error"].append(float(np.abs(pgs(sweeps) - best).max() / np.abs(best).max()))
        if t % timing_every == 0:
            for key, call in (("newton_us", newton), ("pgs_us", lambda: pgs(sweeps))):
                call()
                start = time.perf_counter()
                for _ in range(200):
                    call()
                out[key].append((time.perf_counter() - start) / 200 * 1e6)
        state = integrate_numba.integrate(state, v, v_free, tau, layout.options,
                             int(layout.options[Option.RENORMALISE]))
    return out


def _microseconds(call, repeats: int = 300) -> float:
    call()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats * 1e6


def step_costs(scene, warm_steps: int = 150) -> dict:
    """One world's step as its three kernels, forward and reversed (each
    pullback with its cotangents), with the Newton solve and with the
    scene's sweeps, in microseconds, at a state `warm_steps` into the gait."""
    from symphys.compiler.reference_step import numeric_inputs
    from symphys.physics.kernels.integrate import integrate_grad, integrate_numba
    from symphys.physics.kernels.layout import Option, build_layout
    from symphys.physics.kernels.rows import rows_grad, rows_numba
    from symphys.physics.kernels.solve import newton_grad as ng
    from symphys.physics.kernels.solve import newton_numba as nw
    from symphys.physics.kernels.solve import pgs_grad as sg
    from symphys.physics.kernels.solve import pgs_numba as sn

    layout = build_layout(scene)
    x = numeric_inputs(scene)
    tables, table, options = layout.arrays(), layout.rows, layout.options
    tree = nw.pattern(table, len(scene.bodies)).arrays()
    sweeps = int(options[Option.ITERATIONS])
    settings = (50, nw.STIFF, scene.solver.bound_softness, scene.solver.tolerance)
    params = [x[k] for k in ("body", "world", "joint", "motor", "geom")]
    phase = np.random.default_rng(0).uniform(0, 2 * np.pi, len(scene.motors))
    state = x["state"].copy()
    for t in range(warm_steps + 1):
        action = (0.4 * np.sin(2 * np.pi * 1.5 * t * scene.dt + phase))[None]
        v_free, rows, tau = rows_numba.rows(state, *params, action, *tables)
        v = nw.solve(v_free, rows, table, state, x["body"], options, *tree, *settings)
        if t < warm_steps:
            state = integrate_numba.integrate(state, v, v_free, tau, options, 1)
    g_next = np.random.default_rng(1).normal(size=state.shape)
    g_state, g_v, g_vf, g_tau = integrate_grad.integrate_vjp(state, v, v_free, tau, options,
                                                             g_next, 1)
    g_vf_solve, g_rows = sg.solve_vjp(v_free, rows, table, g_v, sweeps)
    shared = {
        "rows": _microseconds(lambda: rows_numba.rows(state, *params, action, *tables)),
        "rows_reverse": _microseconds(lambda: rows_grad.rows_vjp(
            state, *params, action, *tables, g_vf + g_vf_solve, g_rows, g_tau)),
        "integrate": _microseconds(lambda: integrate_numba.integrate(state, v, v_free, tau,
                                                                     options, 1)),
        "integrate_reverse": _microseconds(lambda: integrate_grad.integrate_vjp(
            state, v, v_free, tau, options, g_next, 1)),
    }
    solves = {
        "newton": (_microseconds(lambda: nw.solve(v_free, rows, table, state, x["body"],
                                                  options, *tree, *settings)),
                   _microseconds(lambda: ng.solve_vjp(v_free, rows, table, state, x["body"],
                                                      options, *tree, v, g_v, *settings))),
        f"pgs-{sweeps}": (_microseconds(lambda: sn.solve(v_free, rows, table, sweeps)),
                          _microseconds(lambda: sg.solve_vjp(v_free, rows, table, g_v, sweeps))),
    }
    out = dict(shared)
    for name, (forward, reverse) in solves.items():
        step = shared["rows"] + forward + shared["integrate"]
        back = shared["rows_reverse"] + reverse + shared["integrate_reverse"]
        out[name] = {"solve": forward, "solve_reverse": reverse, "step": step,
                     "gradient_over_forward": (step + back) / step}
    return out


def fidelity(xml: str, steps: int, dt: float, body: str, sweeps=(None, 100)) -> dict:
    """{method: max distance (m) over the run of `body`'s centre of mass from
    MuJoCo's, and its final height}, MuJoCo at its defaults."""
    import mujoco

    from symphys.api import simulate
    from symphys.mjcf import load_mjcf
    from symphys.scene.elements import SolverMethod

    model = mujoco.MjModel.from_xml_string(xml)
    model.opt.timestep = dt
    data = mujoco.MjData(model)
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    theirs = []
    for _ in range(steps):
        mujoco.mj_step(model, data)
        theirs.append(data.xipos[index].copy())
    theirs = np.array(theirs)
    scene = dataclasses.replace(load_mjcf(xml), dt=dt)
    runs = {f"pgs-{k or scene.solver.iterations}": _with(scene, iterations=k or
                                                         scene.solver.iterations)
            for k in sweeps}
    runs["newton"] = _with(scene, method=SolverMethod.NEWTON, newton_iterations=50)
    out = {"mujoco_final_height": float(theirs[-1, 2])}
    for name, s in runs.items():
        mine = simulate(s, steps).position[body][1:]
        out[name] = {"max_distance": float(np.abs(mine - theirs).max()),
                     "final_height": float(mine[-1, 2])}
    return out


def measure(steps: int = 300) -> dict:
    from symphys.bench.mujoco_peer import time_mj_step
    from symphys.mjcf import load_mjcf
    from symphys.scene.reader import load_scene

    quadruped = load_scene("quadruped")
    ant = load_mjcf(ant_xml())
    ant = dataclasses.replace(ant, dt=0.005)
    return {
        "quadruped": convergence(quadruped, steps, gait=True),
        "step_costs": step_costs(quadruped),
        "ant": convergence(ant, steps + 100, gait=False),
        "mj_step_us": {"quadruped": time_mj_step(quadruped)["ns_per_world_step"] / 1e3},
        "fidelity": {"ant": fidelity(ant_xml(), 400, 0.005, "torso"),
                     "chain": fidelity(CHAIN, 500, 0.002, "load")},
    }


def _summary(values) -> str:
    v = np.asarray(values, float)
    return f"median {np.median(v):.3g}, p90 {np.quantile(v, 0.9):.3g}, max {v.max():.3g}"


def report(result: dict) -> str:
    lines = []
    for name in ("quadruped", "ant"):
        r = result[name]
        lines += [f"{name} ({r['bodies']} bodies, {r['rows']} rows):",
                  f"  newton iterations: {_summary(r['iterations'])}",
                  f"  newton residual:   {_summary(r['residual'])}",
                  f"  pgs {r['sweeps']} sweeps, error against {PGS_REFERENCE_SWEEPS}: "
                  f"{_summary(r['pgs_error'])}",
                  f"  solve time (us, one world): newton {np.median(r['newton_us']):.1f}, "
                  f"pgs {np.median(r['pgs_us']):.1f}"]
    costs = result["step_costs"]
    for name, r in costs.items():
        if isinstance(r, dict):
            lines.append(f"quadruped step with {name}: forward {r['step']:.1f} us (solve "
                         f"{r['solve']:.1f}, its pullback {r['solve_reverse']:.1f}); gradient "
                         f"{r['gradient_over_forward']:.2f}x the forward")
    lines.append(f"MuJoCo mj_step (quadruped, whole step): "
                 f"{result['mj_step_us']['quadruped']:.1f} us")
    for name, r in result["fidelity"].items():
        parts = ", ".join(f"{k} {v['max_distance'] * 100:.2f} cm" for k, v in r.items()
                          if isinstance(v, dict))
        lines.append(f"{name} against MuJoCo (largest distance over the run): {parts}")
    return "\n".join(lines)


def plot(result: dict, path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, colour in (("quadruped", "C0"), ("ant", "C1")):
        r = result[name]
        axes[0].hist(r["iterations"], bins=np.arange(0.5, max(r["iterations"]) + 1.5),
                     alpha=0.6, color=colour, label=f"{name}")
        axes[1].plot(r["pgs_error"], color=colour, label=f"{name}: pgs {r['sweeps']} sweeps")
    axes[0].set(xlabel="Newton iterations per step", ylabel="steps",
                title="converged solve")
    axes[1].set(xlabel="step", ylabel="max |v_K - v*| / max |v*|", yscale="log",
                title=f"PGS against {PGS_REFERENCE_SWEEPS} sweeps")
    for ax in axes:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(json_path="results/bench-solver.json", plot_path=None, steps: int = 300) -> dict:
    result = measure(steps)
    print(report(result))
    path = Path(json_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    plot(result, plot_path or path.with_suffix(".png"))
    print(f"wrote {path} and {plot_path or path.with_suffix('.png')}")
    return result
