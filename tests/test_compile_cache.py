"""`difsim run` keeps compiled programs in JAX's persistent compilation cache
(`difsim._app._cache`): where the folder is, how to turn it off, and that a second run
loads every program instead of compiling it.

conftest.py turns the cache off for the suite (`DIFSIM_COMPILE_CACHE=off`); the runs here
turn it on in their own processes.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from difsim._app import _cache
from difsim._app._cli import main

ROOT = Path(__file__).resolve().parents[1]
HOME = Path.home()


@pytest.mark.parametrize(
    "setting, env, expected",
    [
        ("/data/cache", {"DIFSIM_COMPILE_CACHE": "/elsewhere"}, Path("/data/cache")),
        (False, {"DIFSIM_COMPILE_CACHE": "/elsewhere"}, None),
        (None, {"DIFSIM_COMPILE_CACHE": "/scratch/jax"}, Path("/scratch/jax")),
        (None, {"DIFSIM_COMPILE_CACHE": "~/jc"}, HOME / "jc"),
        (None, {"DIFSIM_COMPILE_CACHE": "off"}, None),
        (None, {"DIFSIM_COMPILE_CACHE": " 0 "}, None),
        (None, {"DIFSIM_COMPILE_CACHE": ""}, None),
        (None, {"JAX_COMPILATION_CACHE_DIR": "/jaxc"}, Path("/jaxc")),
        (None, {"XDG_CACHE_HOME": "/xdg"}, Path("/xdg/difsim/jax")),
        (None, {"XDG_CACHE_HOME": "relative"}, HOME / ".cache/difsim/jax"),  # ignored (XDG)
        (None, {}, HOME / ".cache/difsim/jax"),
    ],
)
def test_cache_folder_precedence(setting, env, expected, monkeypatch):
    monkeypatch.setattr(_cache.sys, "platform", "linux")
    assert _cache.cache_folder(setting, env) == expected


def test_user_cache_folder_per_platform():
    env = {"LOCALAPPDATA": r"C:\Users\a\AppData\Local"}
    assert _cache._user_cache(env, "win32") == Path(env["LOCALAPPDATA"]) / "difsim" / "Cache"
    assert _cache._user_cache({}, "darwin") == HOME / "Library/Caches/difsim"


def test_an_unusable_folder_warns_and_runs_without(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert _cache.enable_compile_cache(blocker / "jax") is None
    err = capsys.readouterr().err
    assert f"compilation cache {blocker / 'jax'} cannot be used" in err
    assert "compiling without it" in err


def test_checks_become_nan_unless_the_user_chose(monkeypatch):
    from equinox import _errors

    monkeypatch.setattr(_errors, "EQX_ON_ERROR", "raise")
    monkeypatch.setenv("EQX_ON_ERROR", "raise")
    assert not _cache._checks_as_nan() and _errors.EQX_ON_ERROR == "raise"
    monkeypatch.delenv("EQX_ON_ERROR")
    assert _cache._checks_as_nan() and _errors.EQX_ON_ERROR == "nan"


CONFIG = """
[model]
name = "lorenz"
[time]
t0 = 0.0
t1 = 2.0
save = 21
[solver]
rtol = 1e-6  # float32 (the CLI's default precision): above its floor of 6e-7
atol = 1e-6
[output]
path = "lorenz.nc"
plot = false
"""


def _run(folder: Path, cwd: Path, *extra: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in ("EQX_ON_ERROR",)}
    environ.update(DIFSIM_COMPILE_CACHE=str(folder), JAX_PLATFORMS="cpu", **env)
    environ.pop("XLA_FLAGS", None)  # one device, as a user's run has on a laptop
    proc = subprocess.run(
        [sys.executable, "-m", "difsim", "run", "lorenz.toml", "--overwrite", *extra],
        cwd=cwd, env=environ, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_second_run_loads_every_program(tmp_path):
    (tmp_path / "lorenz.toml").write_text(CONFIG)
    folder = tmp_path / "cache"
    first = _run(folder, tmp_path)
    line = next(x for x in first.splitlines() if "compile cache" in x)
    stored = int(line.split("loaded, ")[1].split(" compiled")[0])
    # Every program was storable: no host callback left in any (diffrax's save-time
    # checks are compiled as NaN selects; difsim checked the times on the host).
    assert line.endswith(f"programs 0 loaded, {stored} compiled and stored") and stored >= 3
    assert len(list(folder.iterdir())) >= stored
    second = _run(folder, tmp_path)
    assert f"programs {stored} loaded, 0 compiled and stored" in second
    final = [x for x in first.splitlines() if "final state" in x]
    assert final == [x for x in second.splitlines() if "final state" in x]
    assert "wall time" in second and "s in all: start-up " in second


def test_the_users_equinox_mode_is_kept(tmp_path):
    # EQX_ON_ERROR=raise keeps diffrax's checks as host callbacks: the solve is compiled
    # every time (and says so), the rest is still stored.
    (tmp_path / "lorenz.toml").write_text(CONFIG)
    out = _run(tmp_path / "cache", tmp_path, EQX_ON_ERROR="raise")
    assert "1 compiled, not storable (host callbacks)" in out


def test_no_compile_cache_stores_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lorenz.toml").write_text(CONFIG)
    assert main(["run", "lorenz.toml", "--no-compile-cache", "-q"]) == 0
    out, err = capsys.readouterr()
    assert "compile cache" not in out and "wall time" in out
    assert err == ""  # --quiet: no progress, no messages
