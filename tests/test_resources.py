"""Issue 14, point 10: bounded resources. A run that cannot fit in memory or on disk is
refused before any work, naming the setting, the estimate and the limit (exit code 2 from
the command line); the limits come from the machine and can be overridden."""

import types
from pathlib import Path

import numpy as np
import pytest

import difsim as ds
from difsim._app._cli import main
from difsim._config import ConfigError, load_config
from difsim._core._save import SaveSpec, check_saved_memory
from difsim._resources import format_bytes, memory_limit, parse_bytes

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
LORENZ = EXPERIMENTS / "lorenz.toml"


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.3g} GiB"


def test_memory_limit_is_the_machines_unless_overridden(monkeypatch):
    monkeypatch.delenv("DIFSIM_MEMORY_LIMIT", raising=False)
    limit, source = memory_limit()
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():  # an independent reading: never more than the physical memory
        total = next(line for line in meminfo.read_text().splitlines() if "MemTotal" in line)
        assert 0 < limit <= int(total.split()[1]) * 1024
        assert source == "the memory available on this machine"
    monkeypatch.setenv("DIFSIM_MEMORY_LIMIT", "3GiB")
    assert memory_limit() == (3 * 2**30, "the limit set by DIFSIM_MEMORY_LIMIT")
    monkeypatch.setenv("DIFSIM_MEMORY_LIMIT", "lots")
    with pytest.raises(ds.ResourceError, match="DIFSIM_MEMORY_LIMIT: expected a positive"):
        memory_limit()


def test_sizes_parse_and_print():
    assert parse_bytes("512MiB") == 2**29 and parse_bytes(" 2GB ") == 2 * 10**9
    with pytest.raises(ValueError, match="memory_budget"):  # was an OverflowError
        parse_bytes("1e400GB")
    assert format_bytes(4e12) == "3.64 TiB" and format_bytes(1536) == "1.5 KiB"


def test_a_grid_whose_field_cannot_fit_is_refused(monkeypatch):
    with pytest.raises(ds.ResourceError) as info:
        ds.Grid.periodic(shape=(10**6, 10**6))
    error = info.value
    assert error.key == "grid.shape" and error.needed == 4 * 10**12
    assert "1,000,000,000,000 points" in str(error) and "3.64 TiB" in str(error)
    # One float32 field of 512 x 512 is exactly 1 MiB: allowed at that limit, 513 rows not.
    monkeypatch.setenv("DIFSIM_MEMORY_LIMIT", "1MiB")
    assert ds.Grid.periodic(shape=(512, 512)).size == 2**18
    with pytest.raises(ds.ResourceError, match=r"grid\.shape: .*1 MiB \(the limit set by"):
        ds.Grid.periodic(shape=(513, 512))
    monkeypatch.setenv("DIFSIM_MEMORY_LIMIT", "8TiB")  # the override also raises the limit
    assert ds.Grid.periodic(shape=(10**6, 10**6)).size == 10**12


def test_config_grid_too_large_names_the_key():
    with pytest.raises(ConfigError) as info:
        load_config(EXPERIMENTS / "heat_2d.toml", overrides={"model.grid.shape": [10**6] * 2})
    assert info.value.key == "model.grid" and "grid.shape" in info.value.problem


def test_saved_values_that_cannot_fit_are_refused_before_solving(monkeypatch):
    monkeypatch.setenv("DIFSIM_MEMORY_LIMIT", "1MiB")
    # Lorenz in float64: (3 values + the time) x 8 bytes x 2**15 saves = 1 MiB: allowed.
    layout = types.SimpleNamespace(shapes=[(), (), ()], dtype=np.dtype("float64"))
    check_saved_memory(SaveSpec(t0=0.0, t1=1.0, save=2**15), layout, "Lorenz")
    with pytest.raises(ds.ResourceError) as info:
        ds.simulate(ds.models.Lorenz(), t0=0.0, t1=1.0, save=2**15 + 1)
    assert info.value.key == "save" and info.value.needed == 4 * 8 * (2**15 + 1)
    assert str(info.value).startswith("save: simulate(Lorenz) saving 32,769 times of 3 values")


def test_simulation_output_that_cannot_fit_on_disk_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DIFSIM_DISK_LIMIT", "64KiB")
    out = tmp_path / "lorenz.nc"
    # 2501 saves of (3 values + the time) x 8 bytes = 80,032 bytes > 64 KiB; 2001 fit.
    with pytest.raises(ConfigError) as info:
        load_config(LORENZ, overrides={"output.path": str(out)})
    assert info.value.key == "time.save" and "more than 64 KiB" in info.value.problem
    assert load_config(LORENZ, overrides={"output.path": str(out), "time.save": 2001})


def test_check_refuses_ten_billion_saves_with_exit_2(capsys):
    code = main(["check", str(LORENZ), "--set", "time.save=10000000000"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    # lorenz.toml is float64: 1e10 saves of (3 values + the time) x 8 bytes.
    assert "[time] save: saving 10,000,000,000 times" in err and _gib(4 * 8 * 1e10) in err


def test_sweep_of_1e12_points_is_refused_before_any_allocation():
    with pytest.raises(ConfigError) as info:  # np.linspace would allocate 8 TB here
        load_config(LORENZ, overrides={"sweep.rho": {"linspace": [0.0, 1.0, 10**12]}})
    assert info.value.key == "sweep.rho" and "1,000,000,000,000 values" in info.value.problem
    overrides = {"sweep.kind": "random", "sweep.samples": 10**12, "sweep.rho": {"uniform": [0, 1]}}
    with pytest.raises(ConfigError) as info:
        load_config(LORENZ, overrides=overrides)
    assert info.value.key == "sweep.samples"
    # From Python: a grid of 1e6 x 1e6 points kept in memory, and 1e12 random draws.
    axis = np.linspace(0.0, 1.0, 10**6)
    grid = ds.GridSweep({"rho": axis, "sigma": axis})
    with pytest.raises(ds.ResourceError) as info:
        ds.sweep(ds.models.Lorenz(), grid, t0=0.0, t1=1.0)
    per_point = 3 * 8 + 12  # final x, y, z in float64, status and num_steps
    assert info.value.key == "spec" and info.value.needed == 10**12 * per_point
    # The message is formatted only for a refusal (a passing check does not build it).
    assert str(info.value).startswith(
        f"spec: the results of 1,000,000,000,000 trajectories ({per_point} bytes each), "
        "held in memory without an output would need about"
    )
    draws = ds.RandomSweep({"rho": ds.Uniform(0.0, 1.0)}, samples=10**12)
    with pytest.raises(ds.ResourceError, match="^samples: drawing 1,000,000,000,000 points"):
        ds.sweep(ds.models.Lorenz(), draws, t0=0.0, t1=1.0)
    with pytest.raises(ds.ResourceError, match="^chunk_size: a chunk of 1,000,000,000"):
        ds.sweep(ds.models.Lorenz(), ds.GridSweep({"rho": [1.0]}), t0=0, t1=1, chunk_size=10**9)


def test_sweep_output_that_cannot_fit_on_disk_is_refused_and_nothing_written(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("DIFSIM_DISK_LIMIT", "64KiB")
    spec = ds.GridSweep({"rho": np.linspace(0.0, 1.0, 1000)})
    out = tmp_path / "runs" / "rho.nc"
    with pytest.raises(ds.ResourceError) as info:
        ds.sweep(ds.models.Lorenz(), spec, t0=0.0, t1=1.0, output=out)
    # The chunks and the netCDF file: 2 x 1000 x (3 x 8 + 12) bytes > 64 KiB.
    assert info.value.key == "output" and info.value.needed == 2 * 1000 * 36
    assert info.value.limit == 2**16 and list(tmp_path.iterdir()) == []
    overrides = [f"output.path={out}", "sweep.rho={linspace=[0.0, 1.0, 1000]}"]
    argv = ["run", str(LORENZ), *(x for o in overrides for x in ("--set", o))]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[sweep]: the results of 1,000 trajectories" in err
    assert "more than 64 KiB (the limit set by DIFSIM_DISK_LIMIT)" in err
    assert list(tmp_path.iterdir()) == []


def test_seed_beyond_64_bits_is_a_clear_error():
    overrides = {"sweep.kind": "random", "sweep.samples": 10, "sweep.seed": 2**63}
    overrides["sweep.rho"] = {"uniform": [0, 1]}
    with pytest.raises(ConfigError, match=r"\[sweep\] seed: expected an integer from 0 to"):
        load_config(LORENZ, overrides=overrides)
    with pytest.raises(ValueError, match="seed must be an integer from 0 to 2\\*\\*63 - 1"):
        ds.RandomSweep({"rho": ds.Uniform(0, 1)}, samples=10, seed=2**63)


def test_a_monte_carlo_sweep_of_more_paths_than_its_keys_index_is_refused(tmp_path):
    # Issue 27: 2e12 paths of an SDE started (an ETA of 7,578 h) and would have failed at
    # path 2**32, whose key index no longer fits fold_in's 32 bits.
    import time

    from difsim._sweep import MAX_PATHS, check_paths

    ou = ds.models.MODELS["ornstein_uhlenbeck"]()
    start = time.perf_counter()
    with pytest.raises(ds.ResourceError) as info:
        ds.sweep(ou, samples=2_000_000_000_000, t0=0.0, t1=1.0, keep=["x_mean"])
    assert time.perf_counter() - start < 1.0  # before anything is compiled
    error = info.value
    assert (error.key, error.needed, error.limit) == ("samples", 2 * 10**12, 2**32)
    assert str(error).startswith("samples: a Monte Carlo sweep of 2,000,000,000,000 paths")
    assert "4,294,967,296 (2**32" in str(error)
    # The bound counts the paths of every point; the last index that fits is 2**32 - 1.
    assert MAX_PATHS == 2**32
    check_paths(2**31, 2)
    with pytest.raises(ds.ResourceError, match=r"\(2 points x 2,147,483,649 samples\)"):
        ds.sweep(ou, ds.GridSweep({"theta": [1.0, 2.0]}), samples=2**31 + 1, t0=0.0, t1=1.0,
                 keep="final")  # fmt: skip
    config = {
        "model": {"name": "ornstein_uhlenbeck"},
        "time": {"t0": 0.0, "t1": 1.0, "save": "final"},
        "sweep": {"samples": 2_000_000_000_000, "keep": ["x_mean"]},
    }
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert info.value.key == "sweep.samples" and "2,000,000,000,000 paths" in str(info.value)
