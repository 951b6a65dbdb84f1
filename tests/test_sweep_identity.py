"""A sweep's identity covers what decides its numbers (`difsim._io._provenance`): the
model's code, the library versions, XLA_FLAGS and the devices. Issue 27, point 1: a sweep of
`decay.py:Decay`, run, the file's rhs edited (`-k*y` -> `-2*k*y`) and run again, used to
report "already holds this sweep's result" and return exp(-k t) again."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._app._cli import main
from difsim._config._imports import load_model_file
from difsim._io import code_text
from difsim._sweep import SweepOutputError, run_sweep

K = np.array([0.5, 1.0, 2.0])
MODEL = """\
import difsim as ds


class Decay(ds.Model):
    k: float = ds.param(1.0)
    state = ds.State(y=ds.Var(1.0))

    def rhs(self, t, s):
        return {"y": -self.k * s.y}
"""
CONFIG = """\
[model]
name = "decay.py:Decay"
[time]
t0 = 0.0
t1 = 1.0
save = "final"
[solver]
rtol = 1e-10
atol = 1e-10
dtype = "float64"
[sweep]
k = [0.5, 1.0, 2.0]
keep = ["y_final"]
[output]
path = "runs/x.nc"
plot = false
"""


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "decay.py").write_text(MODEL)
    (tmp_path / "sweep.toml").write_text(CONFIG)
    return tmp_path


def _edit(folder: Path) -> None:
    path = folder / "decay.py"
    path.write_text(path.read_text().replace("-self.k * s.y", "-2 * self.k * s.y"))


def _difsim_run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "difsim", "run", "sweep.toml", "--no-progress", *args]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300)


def _final(path: Path) -> tuple[np.ndarray, dict]:
    with xr.open_dataset(path, engine="h5netcdf") as f:
        return f["y_final"].values.copy(), dict(f.attrs)


def test_an_edited_model_file_is_refused_then_recomputed_across_processes(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    # The first run in this process (`difsim run` in-process), the next two in new ones.
    monkeypatch.chdir(folder)
    assert main(["run", "sweep.toml", "--no-progress"]) == 0
    out = folder / "runs" / "x.nc"
    y, attrs = _final(out)
    np.testing.assert_allclose(y, np.exp(-K), rtol=1e-8)
    # The provenance: the code's hash, the versions, XLA_FLAGS and the devices.
    assert attrs["model_code"].startswith("Decay (decay.py) sha256:")
    settings = json.loads(attrs["sweep_settings"])
    assert settings["code"] == attrs["model_code"]
    assert settings["versions"].startswith(f"difsim {ds.__version__}, jax ")
    assert "jaxlib " in settings["versions"] and "python " in settings["versions"]
    assert settings["xla"] == attrs["xla_flags"] == os.environ["XLA_FLAGS"]
    assert settings["devices"] == attrs["devices"] == "8 x cpu"  # conftest's 8 CPU devices
    before = out.read_bytes()
    _edit(folder)
    # The same command: refused in one line naming what changed, the old file kept.
    again = _difsim_run(folder)
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"difsim: error: the code of Decay (decay.py) changed since {out} was computed; "
        "refusing to reuse or replace it. Pass overwrite=True (difsim run --overwrite) to "
        "recompute it, or choose a new output path"
    ]
    assert out.read_bytes() == before
    third = _difsim_run(folder, "--overwrite")
    assert third.returncode == 0, third.stderr
    y, new = _final(out)
    np.testing.assert_allclose(y, np.exp(-2 * K), rtol=1e-8)  # y0 exp(-2 k t), t = 1
    assert new["model_code"] != attrs["model_code"] and new["sweep_hash"] != attrs["sweep_hash"]


def test_an_edited_model_file_is_run_again_in_one_process(tmp_path):
    folder = _folder(tmp_path)
    config = folder / "sweep.toml"
    first = ds.run_config(config, progress=False)
    np.testing.assert_allclose(first["y_final"], np.exp(-K), rtol=1e-8)
    # Without an output: nothing stored, but the memo, the rhs check and the compiled
    # chunk of the old class must not serve the new code.
    in_memory = folder / "memory.toml"
    in_memory.write_text(CONFIG.partition("[output]")[0])
    memory = ds.run_config(in_memory, progress=False)
    np.testing.assert_allclose(memory["y_final"], np.exp(-K), rtol=1e-8)
    _edit(folder)
    with pytest.raises(SweepOutputError, match=r"^the code of Decay \(decay.py\) changed since"):
        ds.run_config(config, progress=False)
    memory = ds.run_config(in_memory, progress=False)
    np.testing.assert_allclose(memory["y_final"], np.exp(-2 * K), rtol=1e-8)
    second = ds.run_config(config, progress=False, overwrite=True)
    np.testing.assert_allclose(second["y_final"], np.exp(-2 * K), rtol=1e-8)
    assert second.attrs["model_code"] != first.attrs["model_code"]
    # Unchanged since: the module is not run again (the same class, the same code).
    again = ds.run_config(config, progress=False)
    assert again.attrs["sweep_hash"] == second.attrs["sweep_hash"]


class _Stop(Exception):
    pass


def _stop_after_first(i):
    raise _Stop


def test_unfinished_chunks_of_the_old_code_are_not_resumed(tmp_path):
    folder = _folder(tmp_path)
    out = folder / "x.nc"
    kw = dict(t0=0.0, t1=1.0, rtol=1e-10, atol=1e-10, chunk_size=8, progress=False)
    spec = ds.GridSweep({"k": np.linspace(0.5, 2.0, 24)})
    old = load_model_file(folder / "decay.py", "model.name").Decay
    with pytest.raises(_Stop):
        run_sweep(old(), spec, output=out, on_chunk=_stop_after_first, **kw)
    _edit(folder)
    new = load_model_file(folder / "decay.py", "model.name").Decay
    assert new is not old and code_text(new) != code_text(old)
    with pytest.raises(SweepOutputError) as info:
        run_sweep(new(), spec, output=out, **kw)
    assert str(info.value) == (
        f"the code of Decay (decay.py) changed since the unfinished chunks in {out}.zarr were "
        f"computed, so they cannot be resumed into {out}. Pass overwrite=True (difsim run "
        "--overwrite) to discard them and recompute, or choose a new output path"
    )
    data, report = run_sweep(new(), spec, output=out, overwrite=True, **kw)
    assert report.reused == 0 and report.computed == (0, 1, 2)
    np.testing.assert_allclose(data["y"], np.exp(-2 * np.linspace(0.5, 2.0, 24)), rtol=1e-8)


CODE_TEXT = """
import sys
from difsim._io import code_text
"""


def _code_texts_in_subprocess(cwd: Path, *defines: str, hash_seed: str | None = None) -> list:
    """`code_text(Decay)` after each of `defines`, run in turn in one new process."""
    steps = [f"{textwrap.dedent(d)}\nprint(code_text(Decay))" for d in defines]
    script = CODE_TEXT + "\n".join(steps)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = hash_seed
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    texts = done.stdout.strip().splitlines()
    assert len(texts) == len(defines), done.stdout
    return texts


def test_code_identity_is_stable_and_sees_helpers_and_sourceless_classes(tmp_path):
    # A module imported normally: compiled from source, then loaded from its .pyc.
    (tmp_path / "mymodel.py").write_text(
        MODEL.replace("-self.k * s.y", "-rate(self.k) * s.y") + "\n\ndef rate(k):\n    return k\n"
    )
    define = "sys.path.insert(0, '.')\nfrom mymodel import Decay"
    texts = {_code_texts_in_subprocess(tmp_path, define)[0] for _ in range(2)}
    assert len(texts) == 1 and next(iter(texts)).startswith("Decay (mymodel.py) sha256:")
    assert list(tmp_path.glob("__pycache__/mymodel*.pyc"))  # the second run read this
    # A helper the rhs calls is part of the code; and a process that imported the module
    # before the edit (the old helper runs) is not taken for one running the new code.
    helper = tmp_path / "mymodel.py"
    edit = ("from pathlib import Path; p = Path('mymodel.py'); "
            "p.write_text(p.read_text().replace('return k', 'return 2 * k'))")  # fmt: skip
    (stale,) = _code_texts_in_subprocess(tmp_path, f"{define}\n{edit}")
    assert "return 2 * k" in helper.read_text()
    # A class with no source (`python -c`): its bytecode, the same in every process, and
    # another for another rhs. The edited module imported afresh in the first of these.
    inline = MODEL
    sourceless, fresh = _code_texts_in_subprocess(tmp_path, inline, define)
    again, other = _code_texts_in_subprocess(
        tmp_path, inline, inline.replace("-self.k", "-2 * self.k")
    )
    assert len({fresh, stale, *texts}) == 3
    assert sourceless == again and other != sourceless
    assert "no source: bytecode" in other


UNORDERED = """
def half(k):
    return k / 2


def double(k):
    return 2 * k


class Tag:
    pass


RATES = {half, double}  # iterated by the functions' ids: their addresses
WEIGHTS = dict.fromkeys({"alpha", "beta", "gamma", "delta"}, 1.0)  # by string hashes
TAGGED = {Tag(): 1.0}  # a key whose repr holds its address
"""


def test_code_identity_of_sets_and_dicts_is_the_same_in_every_process(tmp_path):
    # Review: a set of functions, a dict filled from a set of strings and a dict keyed by
    # an object were hashed in their iteration order or by their repr (addresses, the
    # process's string hashes): each process computed another hash for the same code, so
    # a sweep could never be resumed or found complete by the next command.
    source = MODEL.replace("-self.k * s.y", "-sum(f(self.k) for f in RATES) * s.y")
    (tmp_path / "unordered.py").write_text(source + UNORDERED)
    define = "sys.path.insert(0, '.')\nfrom unordered import Decay"
    texts = {_code_texts_in_subprocess(tmp_path, define, hash_seed=seed)[0] for seed in "123"}
    assert len(texts) == 1, texts


def test_the_devices_and_xla_flags_are_part_of_the_identity(monkeypatch):
    import jax

    model = ds.models.ExponentialDecay()
    spec = ds.GridSweep({"k": [0.5, 1.0]})
    kw = dict(t0=0.0, t1=1.0, progress=False)
    everywhere = ds.sweep(model, spec, **kw)
    one = ds.sweep(model, spec, devices=jax.devices()[:1], **kw)
    monkeypatch.setenv("XLA_FLAGS", os.environ["XLA_FLAGS"] + " --xla_cpu_enable_fast_math=false")
    flagged = ds.sweep(model, spec, **kw)
    hashes = {d.attrs["sweep_hash"] for d in (everywhere, one, flagged)}
    assert len(hashes) == 3
    assert (everywhere.attrs["devices"], one.attrs["devices"]) == ("8 x cpu", "1 x cpu")
    assert flagged.attrs["xla_flags"].endswith("--xla_cpu_enable_fast_math=false")


def test_a_monte_carlo_sweeps_identity_covers_the_same(monkeypatch):
    import jax

    from difsim._sweep import SweepOptions
    from difsim._sweep._mc_setup import statistics_setup
    from difsim._sweep._samples import PathSweep

    ou = ds.models.MODELS["ornstein_uhlenbeck"]()
    paths = PathSweep(None, 64, seed=1)

    def setup(**kw):
        options = SweepOptions(t0=0.0, t1=1.0, keep=["x_mean"], samples=64, seed=1, **kw)
        return statistics_setup(ou, paths, options)

    flags = os.environ["XLA_FLAGS"]
    everywhere, one = setup(), setup(devices=jax.devices()[:1])
    assert everywhere.settings["code"] == everywhere.attrs["model_code"] == code_text(type(ou))
    assert everywhere.attrs["model_code"].startswith("OrnsteinUhlenbeck (")
    assert (everywhere.attrs["devices"], one.attrs["devices"]) == ("8 x cpu", "1 x cpu")
    monkeypatch.setenv("XLA_FLAGS", "")
    flagged = setup()
    assert (everywhere.settings["xla"], flagged.settings["xla"]) == (flags, "")
    assert flagged.attrs["xla_flags"] == ""
    assert len({everywhere.sweep_hash, one.sweep_hash, flagged.sweep_hash}) == 3


WRAPPED = MODEL.replace("-self.k * s.y", "-rate(self.k) * NET(jnp.ones(1))[0] * s.y")


def _sourceless_class(**scope) -> type:
    """`Decay` of `WRAPPED`, run where no source is kept, against the globals `scope`."""
    namespace = {"__name__": "difsim_review_wrapped", "jnp": jnp, **scope}
    exec(compile(WRAPPED, "<no source>", "exec"), namespace)
    return namespace["Decay"]


def test_code_identity_sees_jitted_helpers_and_library_modules_weights():
    # Review: a helper wrapped by jax.jit (or custom_jvp, eqx.filter_jit) and a library
    # module's arrays (an equinox MLP's weights) counted by their type alone, so another
    # helper or other weights were taken for the same code.
    def net(seed):
        return eqx.nn.Linear(1, 1, key=jax.random.PRNGKey(seed))

    def once(k):
        return k

    def twice(k):
        return 2 * k

    base = code_text(_sourceless_class(rate=jax.jit(once), NET=net(0)))
    assert "no source: bytecode" in base
    assert code_text(_sourceless_class(rate=jax.jit(once), NET=net(0))) == base
    assert code_text(_sourceless_class(rate=jax.jit(twice), NET=net(0))) != base
    assert code_text(_sourceless_class(rate=jax.custom_jvp(twice), NET=net(0))) != base
    assert code_text(_sourceless_class(rate=jax.jit(once), NET=net(1))) != base
