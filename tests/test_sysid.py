"""System identification: recordings, synthetic recovery, multiple shooting,
uncertainty and the `symphys sysid` command.

The bench scene holds four independent mechanisms, one per kind of
parameter, so one compiled function serves every recovery test:

- a block sliding to a stop on the ground: `block.friction`;
- a rod on a hinge, released from a tilt: the pivot's position
  (`pivot.anchor[0]`, `pivot.anchor[2]`), i.e. the link length;
- a cart on a slider pushed by a constant force motor: `cart.mass`;
- a carriage on a slider with a position servo: `servo.gain`.

Data are simulated at perturbed "true" values and fitted from the scene's
nominal ones (20-30% off).
"""

import json

import numpy as np
import pytest

import symphys as sp
from symphys import sysid
from symphys.errors import DataError
from symphys.sysid import fitting
from symphys.sysid.recordings import read_recording, recording_from_arrays, write_recording

BACKEND = "numba"
DT, STEPS, EVERY = 0.005, 200, 10
CHUNK = 128
TILT = 0.6
TRUTH = {"block.friction": 0.5, "pivot.anchor[0]": 2.05, "pivot.anchor[2]": 1.58,
         "cart.mass": 1.3, "servo.gain": 4.0}
FORCE, SERVO_TARGET = 2.0, 0.5
COLUMNS = ("block.x", "rod.x", "rod.z", "cart.x", "carriage.x")
# Every fit also fits the cart's start per segment (it slides along its rail,
# so any start is consistent with the joint): all fits then share one
# compiled function.
SEGMENT_FIT = ["cart.position[0]", "cart.velocity[0]"]


def fit_bench(scene, recordings, **options):
    return sysid.fit(scene, recordings, list(TRUTH), segment_fit=SEGMENT_FIT,
                     segment_steps=STEPS, backend=BACKEND, chunk=CHUNK, progress=False,
                     **options)


def bench_builder():
    half = 0.4
    centre = [2.0 + half * np.sin(TILT), 0.0, 1.5 - half * np.cos(TILT)]
    # capsule axis (body z) along the rod: a turn of -TILT about y takes -z there
    quat = [np.cos(-TILT / 2), 0.0, np.sin(-TILT / 2), 0.0]
    return (sp.SceneBuilder("sysid-bench", dt=DT, iterations=8).ground(friction=1.0)
            .box("block", size=[0.2, 0.2, 0.2], mass=1.0, position=[0, 0, 0.1],
                 velocity=[3.0, 0, 0], friction=0.36)
            .capsule("rod", radius=0.03, length=2 * half, mass=1.0, position=centre,
                     quaternion=quat)
            .joint("pivot", "hinge", "world", "rod", anchor=[2.0, 0, 1.5], axis=[0, 1, 0])
            .box("cart", size=[0.2, 0.2, 0.2], mass=1.0, position=[4.0, 0, 1.0])
            .joint("rail", "slider", "world", "cart", anchor=[4.0, 0, 1.0], axis=[1, 0, 0])
            .motor("push", "rail", "torque", max_torque=10.0)
            .box("carriage", size=[0.2, 0.2, 0.2], mass=1.0, position=[6.0, 0, 1.0])
            .joint("track", "slider", "world", "carriage", anchor=[6.0, 0, 1.0],
                   axis=[1, 0, 0])
            .motor("servo", "track", "position", gain=3.0, max_velocity=10.0,
                   max_torque=100.0, command_range=[-5, 5])
            .contacts([("block", "ground")]))


@pytest.fixture(scope="module")
def bench():
    return bench_builder().build()


def true_params(scene):
    values = scene.parameters()
    anchor = values["pivot.anchor"].copy()
    anchor[0], anchor[2] = TRUTH["pivot.anchor[0]"], TRUTH["pivot.anchor[2]"]
    return {"block.friction": TRUTH["block.friction"], "pivot.anchor": anchor,
            "cart.mass": TRUTH["cart.mass"], "servo.gain": TRUTH["servo.gain"]}


@pytest.fixture(scope="module")
def clean(bench):
    """The true trajectory's observed columns every EVERY steps, (rows, 5)."""
    traj = sp.simulate(bench, STEPS, params=true_params(bench), backend=BACKEND,
                       action=[FORCE, SERVO_TARGET])
    rows = np.arange(0, STEPS + 1, EVERY)
    cols = [traj.position["block"][rows, 0], traj.position["rod"][rows, 0],
            traj.position["rod"][rows, 2], traj.position["cart"][rows, 0],
            traj.position["carriage"][rows, 0]]
    return traj.time[rows], np.stack(cols, axis=1)


def recording(scene, time, values):
    data = {name: values[:, k] for k, name in enumerate(COLUMNS)}
    data["push.command"] = np.full(len(time), FORCE)
    data["servo.command"] = np.full(len(time), SERVO_TARGET)
    return recording_from_arrays(scene, time, data, source="bench")


def link_length(anchor_x, anchor_z, scene):
    centre = scene.parameters()["rod.position"]
    return float(np.hypot(centre[0] - anchor_x, centre[2] - anchor_z))


def check_recovered(result, scene, rel):
    for name, truth in TRUTH.items():
        got = float(result.values[name])
        assert got == pytest.approx(truth, rel=rel), (name, got, truth)
    length = link_length(result.values["pivot.anchor[0]"], result.values["pivot.anchor[2]"],
                         scene)
    true_length = link_length(TRUTH["pivot.anchor[0]"], TRUTH["pivot.anchor[2]"], scene)
    assert length == pytest.approx(true_length, rel=rel)


def test_nominal_values_are_off_and_the_data_informative(bench, clean):
    """The start is 20-30% off the truth, and it predicts the data badly."""
    nominal = sp.simulate(bench, STEPS, backend=BACKEND, action=[FORCE, SERVO_TARGET])
    rows = np.arange(0, STEPS + 1, EVERY)
    assert abs(nominal.position["cart"][rows[-1], 0] - clean[1][-1, 3]) > 0.1
    assert abs(nominal.position["block"][rows[-1], 0] - clean[1][-1, 0]) > 0.05
    assert bench.parameters()["servo.gain"] == 3.0


def test_recovers_parameters_from_noise_free_data_within_1_percent(bench, clean):
    result = fit_bench(bench, [recording(bench, *clean)])
    assert result.success, result.message
    check_recovered(result, bench, rel=0.01)
    assert result.cost < 1e-10 < result.initial_cost
    for name in TRUTH:
        assert result.stderr[name] < 1e-3


def test_recovers_within_5_percent_with_1mm_noise_and_reports_its_uncertainty(bench, clean):
    time, values = clean
    rng = np.random.default_rng(1)
    sigma = 0.001
    noisy = values + rng.normal(0.0, sigma, values.shape)
    result = fit_bench(bench, [recording(bench, time, noisy)],
                       noise={c: sigma for c in COLUMNS})
    check_recovered(result, bench, rel=0.05)
    # Residuals at the noise level, and the truth inside 4 standard errors.
    for col in COLUMNS:
        assert 0.5 * sigma < result.rms[col] < 1.6 * sigma, (col, result.rms[col])
    for name, truth in TRUTH.items():
        err = float(result.stderr[name])
        assert 0 < err and abs(float(result.values[name]) - truth) < 4 * err, name


def test_lbfgs_on_the_exact_gradient_agrees(bench, clean):
    result = fit_bench(bench, [recording(bench, *clean)], method="lbfgs",
                       max_evaluations=300, uncertainty=False)
    check_recovered(result, bench, rel=0.01)


def test_cost_gradient_and_jacobian_match_central_differences(bench, clean):
    """The compiled derivatives against finite differences of the residuals."""
    scene = bench
    data = sysid.segment_data(scene, [recording(scene, *clean)], None)
    base = scene.parameters()
    variables = (sysid.scene_variables(scene, list(TRUTH), base)
                 + sysid.scene_variables(scene, SEGMENT_FIT, base, per_segment=True,
                                         segments=1))
    fn = sysid.residual_function(scene, variables, data.columns, data.steps, CHUNK, base,
                                 backend=BACKEND)
    packing = fitting._Packing(tuple(variables), 1)
    ev = fitting._Evaluator(fn, packing, data, CHUNK)
    x = packing.pack({v.name: v.initial for v in variables}) * 1.05 + 0.01
    r, grad = ev.residuals(x, with_gradient=True)
    J = ev.jacobian(x)
    np.testing.assert_allclose(grad, J.T @ r, rtol=1e-9, atol=1e-12)
    for i in range(len(x)):
        h = 1e-6 * max(1.0, abs(x[i]))
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        numeric = (ev.residuals(up)[0] - ev.residuals(down)[0]) / (2 * h)
        np.testing.assert_allclose(J[:, i], numeric, rtol=1e-4, atol=1e-6 * np.abs(J).max())


def test_multiple_shooting_fits_each_segment_its_own_start(bench):
    """Three runs, the cart started differently in each: each segment fits
    its own cart start (initialised from the data) while the shared
    parameters are recovered from all three. (Cutting one long recording
    into segments is exercised on the real double pendulum.)"""
    truth = true_params(bench)
    starts = [(4.0, 0.0), (4.5, -1.0), (3.8, 2.0)]
    rows = np.arange(0, STEPS + 1, EVERY)
    runs = []
    for x, v in starts:
        traj = sp.simulate(bench, STEPS, params=dict(truth, **{
            "cart.position": [x, 0.0, 1.0], "cart.velocity": [v, 0.0, 0.0]}),
            backend=BACKEND, action=[FORCE, SERVO_TARGET])
        values = np.stack([traj.position["block"][rows, 0], traj.position["rod"][rows, 0],
                           traj.position["rod"][rows, 2], traj.position["cart"][rows, 0],
                           traj.position["carriage"][rows, 0]], axis=1)
        runs.append(recording(bench, traj.time[rows], values))
    result = fit_bench(bench, runs, uncertainty=False)
    check_recovered(result, bench, rel=0.01)
    np.testing.assert_allclose(result.values["cart.position[0]"], [x for x, _ in starts],
                               atol=1e-4)
    np.testing.assert_allclose(result.values["cart.velocity[0]"], [v for _, v in starts],
                               atol=1e-3)


def test_recording_files_round_trip_and_bad_files_are_named(bench, clean, tmp_path):
    rec = recording(bench, *clean)
    path = write_recording(tmp_path / "run.csv", rec, bench)
    back = read_recording(path, bench)
    np.testing.assert_array_equal(back.observed, rec.observed)
    np.testing.assert_array_equal(back.commands, rec.commands)
    lines = path.read_text().splitlines()

    def bad(text, match):
        p = tmp_path / "bad.csv"
        p.write_text(text)
        with pytest.raises(DataError, match=match):
            read_recording(p, bench)

    head = lines[0]
    bad("\n".join([head.replace("time", "t")] + lines[1:]), "no 'time' column")
    bad("\n".join([head.replace("rod.z", "rood.z")] + lines[1:]), r"unknown column 'rood.z'")
    bad("\n".join([head, lines[1], lines[2].replace(lines[2].split(",")[0], "0.0071", 1)]),
        r"row 3, column 'time'.*step grid")
    row = lines[2].split(",")
    row[1] = "abc"
    bad("\n".join([head, lines[1], ",".join(row)]), r"row 3, column 'block.x': not a number")
    row = lines[2].split(",")
    row[-1] = ""
    bad("\n".join([head, lines[1], ",".join(row)]), r"'servo.command': a command cannot be")
    # An empty observation cell is a missing value, not an error.
    row = lines[2].split(",")
    row[2] = ""
    p = tmp_path / "partial.csv"
    p.write_text("\n".join([head, lines[1], ",".join(row)] + lines[3:]))
    assert np.isnan(read_recording(p, bench).observed[1, 1])


def test_cli_fits_a_scene_file_to_a_csv(bench, clean, tmp_path, capsys):
    from symphys.cli.main import main

    scene_path = tmp_path / "bench.json"
    scene_path.write_text(json.dumps(bench_builder().to_dict()))
    data = write_recording(tmp_path / "run.csv", recording(bench, *clean), bench)
    out_json, out_png = tmp_path / "fit.json", tmp_path / "fit.png"
    code = main(["sysid", str(scene_path), str(data), "--fit", ",".join(TRUTH),
                 "--segment-fit", ",".join(SEGMENT_FIT), "--segment-steps", str(STEPS),
                 "--backend", BACKEND, "--chunk", str(CHUNK), "--json", str(out_json),
                 "--plot", str(out_png)])
    assert code == 0
    doc = json.loads(out_json.read_text())
    for name, truth in TRUTH.items():
        assert doc["values"][name] == pytest.approx(truth, rel=0.01)
    assert out_png.stat().st_size > 10_000
    assert "servo.gain" in capsys.readouterr().out
    assert main(["sysid", str(scene_path), str(data), "--fit", "servo.gian",
                 "--backend", BACKEND]) == 2
    assert "servo.gain" in capsys.readouterr().err


def test_double_pendulum_experiment_quick_reads_other_data(tmp_path, capsys):
    """The real-data experiment end to end at quick size, on recordings read
    from another folder (--data); a folder without them is refused."""
    import shutil

    from symphys.cli.main import main
    from symphys.experiments import double_pendulum_sysid as dp

    data = tmp_path / "recordings"
    data.mkdir()
    for i in dp.QUICK["fit_recordings"] + dp.QUICK["test_recordings"]:
        shutil.copy(dp.DATA_DIR / f"{i}.csv.gz", data)
    js, png = tmp_path / "dp.json", tmp_path / "dp.png"
    assert main(["experiment", "double-pendulum-sysid", "--quick", "--no-progress",
                 "--backend", "numba", "--data", str(data), "--json", str(js),
                 "--plot", str(png)]) == 0
    doc = json.loads(js.read_text())
    m = doc["metrics"]
    for prefix in ("", "constant_velocity_", "no_damping_"):
        for h in ("0.1", "0.25", "0.5"):
            assert np.isfinite(m[f"{prefix}rmse_{h}"]) and m[f"{prefix}rmse_{h}"] > 0
    # Fitted from the closed-form start on two recordings, the model predicts
    # a held-out one far better than dead reckoning (quick run here: 0.015
    # and 0.078 rad against 0.85 and 1.63), and better with its losses.
    assert m["rmse_0.1"] < 0.05 and m["rmse_0.25"] < 0.2
    for h in ("0.1", "0.25", "0.5"):
        assert m[f"rmse_{h}"] < m[f"constant_velocity_rmse_{h}"] / 4
    assert m["rmse_0.25"] < m["no_damping_rmse_0.25"]
    fit = doc["fits"]["damped"]
    assert fit["cost"] < fit["initial_cost"]
    # The camera of these recordings is on its side: gravity along image +x.
    assert abs(fit["values"]["gravity_angle"] - np.pi / 2) < 0.035
    assert doc["fits"]["no_damping"]["values"]["viscous1"] == 0.0
    assert doc["data"] == str(data) and png.stat().st_size > 10_000
    assert "constant velocity" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["experiment", "double-pendulum-sysid", "--quick", "--no-progress",
                 "--data", str(empty)]) == 2
    assert "recording 0 not found" in capsys.readouterr().err
