"""The `difsim` command line and `run_config`: outputs, overrides, exit codes, entry point."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim import solvers
from difsim._app._cli import main
from difsim._app._run import run_config
from difsim._config._load import load_config
from difsim._xla import with_option
from difsim.models import MODELS, Lorenz

from .fuzz_helpers import assert_one_failure_line
from .helpers import scipy_reference

RTOL = ATOL = 1e-10
LORENZ = f"""
[model]
name = "lorenz"
[model.parameters]
rho = 28.0
[model.state]
x = 1.0
y = 1.0
[time]
t0 = 0.0
t1 = 1.0
save = 11
[solver]
name = "tsit5"
rtol = {RTOL}
atol = {ATOL}
dtype = "float64"
[output]
path = "out/lorenz.nc"
"""


def _lorenz_rhs(rho, sigma=10.0, beta=8.0 / 3.0):
    def f(t, u):
        x, y, z = u
        return [sigma * (y - x), x * (rho - z) - y, x * y - beta * z]

    return f


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative output paths resolve against the cwd
    path = tmp_path / "lorenz.toml"
    path.write_text(LORENZ)
    return path


def test_run_writes_netcdf_and_png_equal_to_simulate(config, capsys):
    assert main(["run", str(config)]) == 0
    out = capsys.readouterr().out
    nc, png = Path("out/lorenz.nc"), Path("out/lorenz.png")
    assert nc.is_file() and png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
    assert not [p for p in nc.parent.iterdir() if ".tmp" in p.name]  # no temp files left
    assert "SUCCESS" in out and str(nc) in out and str(png) in out and "rho=28" in out

    sol = ds.simulate(
        Lorenz(rho=28.0).replace(**{"state.x": 1.0, "state.y": 1.0}),
        t0=0.0,
        t1=1.0,
        save=11,
        solver="tsit5",
        rtol=RTOL,
        atol=ATOL,
    )
    with xr.open_dataset(nc) as result:
        result = result.load()
    np.testing.assert_allclose(result.time, sol.ts, rtol=0, atol=1e-14)
    for var in "xyz":
        np.testing.assert_allclose(result[var], sol.ys[var], rtol=1e-12, atol=1e-12)
    assert result.x.dtype == np.float64 and int(result.status) == 0
    assert result.attrs["rho"] == 28.0 and result.attrs["dtype"] == "float64"
    # The stored config reproduces the run: it loads back to the same experiment.
    assert load_config(tomllib.loads(result.attrs["config"])) == load_config(config)
    # And the run itself is right: an independent solver agrees.
    ref = scipy_reference(_lorenz_rhs(28.0), (0.0, 1.0), [1.0, 1.0, 0.0], np.linspace(0, 1, 11))
    np.testing.assert_allclose(np.stack([result[v] for v in "xyz"], -1), ref, rtol=0, atol=1e-7)


def test_set_changes_parameters_and_output(config, capsys):
    code = main(
        [
            "run",
            str(config),
            "--set",
            "model.parameters.rho=20",
            "--set",
            "model.state.z=5",
            "--output",
            "other/rho20.nc",
            "--no-plot",
        ]
    )
    assert code == 0
    assert "rho=20" in capsys.readouterr().out
    assert Path("other/rho20.nc").is_file() and not Path("other/rho20.png").exists()
    assert not Path("out").exists()
    with xr.open_dataset("other/rho20.nc") as result:
        values = np.stack([result[v].values for v in "xyz"], -1)
        assert result.attrs["rho"] == 20.0
    ref = scipy_reference(_lorenz_rhs(20.0), (0.0, 1.0), [1.0, 1.0, 5.0], np.linspace(0, 1, 11))
    np.testing.assert_allclose(values, ref, rtol=0, atol=1e-7)
    ref28 = scipy_reference(_lorenz_rhs(28.0), (0.0, 1.0), [1.0, 1.0, 5.0], np.linspace(0, 1, 11))
    assert np.max(np.abs(values - ref28)) > 0.1


@pytest.mark.parametrize(
    "argv, fragments",
    [
        (["--set", "solver.rtol=oops"], ["[solver] rtol", '"oops" (a string)', "positive number"]),
        (["--set", "model.name=lorenzz"], ["[model] name", *map(repr, MODELS)]),
        (["--set", "solver.rtoll=1e-3"], ["[solver] rtoll", "'rtol'", "'atol'", "override"]),
        (["--set", "solver.rtol"], ["section.key=value"]),
    ],
)
def test_config_errors_exit_2_without_traceback(config, capsys, argv, fragments):
    assert main(["run", str(config), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("difsim: error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert not Path("out").exists()  # nothing written for an invalid config


def test_missing_config_exits_2(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml: config file not found" in capsys.readouterr().err


def test_failed_solve_exits_1_and_keeps_partial_output(config, capsys):
    assert main(["run", str(config), "--set", "solver.max_steps=3"]) == 1
    captured = capsys.readouterr()
    assert "MAX_STEPS" in captured.err and "raise max_steps" in captured.err
    with xr.open_dataset("out/lorenz.nc") as result:
        assert int(result.status) == int(ds.Status.MAX_STEPS)
        assert np.isnan(result.x.values[-1]) and result.x.values[0] == 1.0
    with pytest.raises(ds.SolveError, match=r"failed \[MAX_STEPS\].*partial output in") as info:
        run_config(config, overrides={"solver.max_steps": 3}, plot=False)
    assert info.value.status == ds.Status.MAX_STEPS
    result = run_config(config, overrides={"solver.max_steps": 3}, plot=False, throw=False)
    assert int(result.status) == int(ds.Status.MAX_STEPS)


def test_check_models_solvers_version(config, capsys):
    assert main(["check", str(config), "--set", "solver.atol=1e-3"]) == 0
    text = capsys.readouterr().out
    assert load_config(tomllib.loads(text)) == load_config(config, overrides={"solver.atol": 1e-3})
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name, cls in MODELS.items():
        assert name in out and cls.__name__ in out
    assert "x y z" in out
    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    for name in [*solvers.SOLVERS, *solvers.CONTROLLERS, *solvers.ADJOINTS]:
        assert f"\n{name} " in out
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"difsim {ds.__version__}"
    assert main([]) == 2


def test_help_names_the_docs_site(capsys):
    # A pip install has no docs/ folder: --help names the site, as pyproject.toml does.
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    site = pyproject["project"]["urls"]["Documentation"].rstrip("/")
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the epilog
    assert info.value.code == 0 and "docs/configs.md" not in out
    assert f"Documentation: {site}/ " in out and f"{site}/configs/" in out


def test_solvers_lists_the_sde_solvers_with_their_orders(capsys):
    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    section = out.split("SDE solvers")[1].split("Step-size controllers")[0]
    lines = section.strip().splitlines()
    body = lines[[i for i, line in enumerate(lines) if line.startswith("---")][0] + 1 :]
    rows = {line.split()[0]: line for line in body}
    assert set(rows) == set(solvers.SDE_SOLVERS)
    # name, calculus, strong/weak orders for general, commutative and additive noise,
    # adaptive: the registry's, which tests/test_sde_orders.py measures.
    for name, info in solvers.SDE_SOLVERS.items():
        cells = rows[name].split()
        calculus = ["additive", "noise"] if info.additive_only else [info.calculus]
        orders = [
            f"{info.strong[k]:g}/{info.weak[k]:g}" if k in info.strong else "-"
            for k in ("general", "commutative", "additive")
        ]
        adaptive = "yes" if info.adaptive else "-"
        assert cells[: 6 + info.additive_only] == [name, *calculus, *orders, adaptive], name
    # Published orders (Kloeden & Platen 1992; Foster, dos Reis & Strange 2024 for ShARK).
    assert rows["euler"].split()[1:5] == ["ito", "0.5/1", "0.5/1", "1/1"]
    assert rows["milstein"].split()[3] == "1/1"
    assert rows["shark"].split()[3:7] == ["-", "-", "1.5/2", "yes"]


def test_python_m_difsim_entry_point_tunes_its_own_process(tmp_path):
    # A sweep through the console entry point in a fresh process whose XLA_FLAGS are unset:
    # the command tunes XLA for itself (issue 32.1; `import difsim` alone does not), and the
    # output records the flags its numbers came from. A deprecated dotted name ("y.final")
    # is shown to the user by Python's default filters, though the caller is difsim's own
    # __main__ (issue 32.5).
    (tmp_path / "decay.toml").write_text(
        '[model]\nname = "exponential_decay"\n[time]\nt1 = 2.0\nsave = 5\n'
        '[solver]\nrtol = 1e-10\natol = 1e-12\ndtype = "float64"\n'
        '[sweep]\nk = [0.5, 2.0]\nkeep = ["y.final", "y_max"]\n'
        '[output]\npath = "decay.nc"\nplot = false\n'
    )
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "DIFSIM_XLA_TUNING")}
    proc = subprocess.run(
        [sys.executable, "-m", "difsim", "run", "decay.toml", "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "SUCCESS" in proc.stdout
    assert "DeprecationWarning: sweep.keep: 'y.final' is spelled 'y_final'" in proc.stderr
    y0 = float(MODELS["exponential_decay"]().initial_state()["y"])
    with xr.open_dataset(tmp_path / "decay.nc") as result:
        assert result.attrs["xla_flags"] == with_option("")
        k, final, peak = result.k.values, result.y_final.values, result.y_max.values
    np.testing.assert_allclose(final, y0 * np.exp(-2.0 * k), rtol=1e-8)  # y(t1 = 2)
    np.testing.assert_allclose(peak, y0, rtol=1e-12)  # a decay's maximum is its start
    assert not (tmp_path / "decay.png").exists()


DECAY_SWEEP = """
[model]
name = "exponential_decay"
[time]
t1 = 1.0
save = "final"
[solver]
rtol = 1e-10
atol = 1e-10
dtype = "float64"
[sweep]
k = { linspace = [0.5, 2.0, 4] }
"state.y" = [1.0, 3.0]
[output]
path = "out/decay.nc"
"""


def test_run_sweep_writes_netcdf_png_and_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("sweep.toml").write_text(DECAY_SWEEP)
    assert main(["run", "sweep.toml", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for fragment in ["grid over k, state.y: 8 trajectories (4 x 2)", "status  SUCCESS 8",
                     "1 computed, 0 reused", "out/decay.nc", "out/decay.png"]:  # fmt: skip
        assert fragment in out, (fragment, out)
    assert Path("out/decay.png").read_bytes()[:4] == b"\x89PNG"
    with xr.open_dataset("out/decay.nc") as result:
        result = result.load()
    k, y0 = np.linspace(0.5, 2.0, 4), np.array([1.0, 3.0])
    np.testing.assert_allclose(result.y, y0[None, :] * np.exp(-k[:, None]), rtol=1e-8)
    assert result.y.dims == ("k", "state.y") and result.attrs["n_success"] == 8
    assert load_config(tomllib.loads(result.attrs["config"])) == load_config("sweep.toml")
    # The same command again: the output is complete, nothing is computed.
    assert main(["run", "sweep.toml", "--no-progress"]) == 0
    assert "0 computed" in capsys.readouterr().out
    # A different sweep to the same path is refused (exit 2), unless --overwrite.
    assert main(["run", "sweep.toml", "--set", "time.t1=2.0"]) == 2
    err = capsys.readouterr().err
    assert "out/decay.nc exists and holds the result of a different sweep" in err
    assert "--overwrite" in err
    assert main(["run", "sweep.toml", "--set", "time.t1=2.0", "--overwrite"]) == 0
    # Python and the config say the same thing.
    ds_py = ds.sweep(ds.models.ExponentialDecay(), ds.GridSweep({"k": k, "state.y": y0}),
                     t0=0.0, t1=2.0, rtol=1e-10, atol=1e-10)  # fmt: skip
    with xr.open_dataset("out/decay.nc") as result:
        np.testing.assert_array_equal(result.y, ds_py.y)
        assert result.attrs["sweep_hash"] == ds_py.attrs["sweep_hash"]


def test_a_failed_stiff_sweep_is_one_line_after_the_log_lines(tmp_path, monkeypatch, capsys):
    # stderr holds difsim's log lines, then the one line of the failure; its MAX_STEPS hint
    # fits the solver: no "try 'kvaerno5'" to a user of an implicit one.
    monkeypatch.chdir(tmp_path)
    Path("sweep.toml").write_text(DECAY_SWEEP)
    overrides = ["--set", "solver.name=implicit_euler", "--set", "solver.max_steps=2"]
    assert main(["run", "sweep.toml", "--no-plot", *overrides]) == 1
    err = capsys.readouterr().err
    assert err.startswith("difsim: sweep: the diffrax engine runs this sweep (solver")
    assert_one_failure_line(err)
    assert "8 of 8 trajectories failed" in err and "MAX_STEPS" in err
    assert "raise max_steps" in err and "kvaerno5" not in err


def test_sweep_with_failures_warns_and_all_failing_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("sweep.toml").write_text(
        DECAY_SWEEP.replace("{ linspace = [0.5, 2.0, 4] }", "[0.5, 800.0]")
    )
    args = ["run", "sweep.toml", "--no-plot", "--set", "solver.max_steps=100"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "SUCCESS 2, MAX_STEPS 2" in captured.out
    assert "2 of 4 trajectories failed" in captured.err and "raise max_steps" in captured.err
    assert main([*args[:-1], "solver.max_steps=2", "--overwrite"]) == 1
    assert "MAX_STEPS 4" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match=r"every trajectory of sweep\(ExponentialDecay\)"):
        run_config("sweep.toml", overrides={"solver.max_steps": 2}, plot=False)


FLU_FIT = """
[model]
name = "sir"
[model.parameters]
beta = 1.0
gamma = 0.5
[model.state]
S = 762.0
I = 1.0
R = 0.0
[solver]
rtol = 1e-8
atol = 1e-8
[fit]
data = "{data}"
t0 = 0.0
[fit.free]
beta = "positive"
gamma = "positive"
[fit.observe]
confined_to_bed = "I"
[output]
path = "out/flu.nc"
"""


def test_run_fit_equals_python_fit_and_writes_outputs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = Path(__file__).resolve().parents[1] / "data" / "influenza.nc"
    Path("flu.toml").write_text(FLU_FIT.format(data=data))
    assert main(["run", "flu.toml", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for fragment in ["Fit of SIR (trust_region): converged", "beta", "gamma", "loss",
                     "14 observations", "out/flu.nc", "out/flu.json", "out/flu.png"]:  # fmt: skip
        assert fragment in out, (fragment, out)
    # The same fit through the Python API (the config's defaults written out).
    model = ds.models.SIR(beta=1.0, gamma=0.5).replace(
        **{"state.S": 762.0, "state.I": 1.0, "state.R": 0.0}
    )
    direct = ds.fit(model, str(data), {"beta": ds.Positive(), "gamma": ds.Positive()},
                    observe={"confined_to_bed": "I"}, t0=0.0, solver="tsit5",
                    rtol=1e-8, atol=1e-8, max_steps=4096)  # fmt: skip
    assert direct.status is ds.Status.CONVERGED
    with xr.open_dataset("out/flu.nc") as result:
        result = result.load()
    fitted = dict(zip(result.parameter.values.tolist(), result.value.values))
    for name in ("beta", "gamma"):
        np.testing.assert_allclose(fitted[name], direct.parameters[name], rtol=1e-8)
    np.testing.assert_allclose(result.attrs["loss"], direct.loss, rtol=1e-8)
    assert load_config(tomllib.loads(result.attrs["config"])) == load_config("flu.toml")
    summary = json.loads(Path("out/flu.json").read_text())
    np.testing.assert_allclose(summary["parameters"]["beta"], direct.parameters["beta"], rtol=1e-8)
    assert Path("out/flu.png").read_bytes()[:4] == b"\x89PNG"
    # Errors name the key, exit 2, no traceback.
    assert main(["run", "flu.toml", "--set", "fit.optimizer=adamm"]) == 2
    err = capsys.readouterr().err
    assert "[fit] optimizer" in err and "'adam'" in err and "Traceback" not in err
    # What only the fit can find (a start outside its range) is a [fit] error too.
    # (--overwrite: out/flu.nc holds the earlier fit's output, which is otherwise kept.)
    assert main(["run", "flu.toml", "--set", "fit.free.beta=[2.0, 3.0]", "--overwrite"]) == 2
    assert "[fit]" in capsys.readouterr().err
