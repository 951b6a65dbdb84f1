"""`difsim._xla`: the XLA option `difsim.tune_xla` sets (never `import difsim`), and when it
leaves XLA alone."""

import os
import subprocess
import sys
import textwrap

import pytest

from difsim import _xla

# A loop over 16 KiB: above XLA's default threshold (1 KiB), below difsim's.
PROBE = textwrap.dedent(
    """
    import os, sys
    import difsim, jax, jax.numpy as jnp
    if sys.argv[1] == "late":  # a JAX computation before tune_xla
        jnp.ones(2).block_until_ready()
    if sys.argv[1] != "import":
        difsim.tune_xla()
    loop = jax.jit(lambda x: jax.lax.fori_loop(0, 10, lambda i, c: c * 1.01 + 1.0, x))
    text = loop.lower(jnp.ones(4096, jnp.float32)).compile().as_text()
    print(difsim._xla.state, "xla_cpu_small_call" in text, os.environ.get("XLA_FLAGS", ""))
    """
)


def _probe(case: str, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", _xla.ENV)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, case], env={**clean, **env}, capture_output=True,
        text=True, timeout=120, check=True,
    )  # fmt: skip
    return out.stdout.split()


def test_the_option_merges_into_the_users_flags():
    entry = f"{_xla.OPTION}={_xla.THRESHOLD}"
    assert _xla.with_option("") == f"--xla_backend_extra_options={entry}"
    assert _xla.with_option("--xla_force_host_platform_device_count=8") == (
        f"--xla_force_host_platform_device_count=8 --xla_backend_extra_options={entry}"
    )
    # One extra-options flag, extended: a second one would replace the first.
    flags = "--xla_backend_extra_options=a=1,b=2 --xla_cpu_enable_fast_math=false"
    assert _xla.with_option(flags, 7) == (
        f"--xla_backend_extra_options=a=1,b=2,{_xla.OPTION}=7 --xla_cpu_enable_fast_math=false"
    )
    assert _xla.with_option("--xla_backend_extra_options=", 7) == (
        f"--xla_backend_extra_options={_xla.OPTION}=7"
    )


@pytest.mark.parametrize("value", ["0", "off", "False", " no "])
def test_the_switch_and_the_users_own_value_leave_xla_flags_alone(monkeypatch, value):
    monkeypatch.setattr(_xla, "state", _xla.state)
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    monkeypatch.setenv(_xla.ENV, value)
    assert _xla.tune() == "off"
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8"
    monkeypatch.delenv(_xla.ENV)
    own = f"--xla_backend_extra_options={_xla.OPTION}=0"
    monkeypatch.setenv("XLA_FLAGS", own)
    assert _xla.tune() == "user" and os.environ["XLA_FLAGS"] == own


def test_tune_xla_compiles_small_loops_as_one_kernel_and_import_alone_does_not():
    # Fresh processes: XLA reads XLA_FLAGS once, when JAX starts its backends.
    state, single, flags = _probe("tune")
    assert (state, single) == ("set", "True")
    assert flags == f"--xla_backend_extra_options={_xla.OPTION}={_xla.THRESHOLD}"
    assert _probe("import") == ["False"]  # no state, no option, no XLA_FLAGS
    assert _probe("tune", DIFSIM_XLA_TUNING="0")[:2] == ["off", "False"]
    # JAX already running when tune_xla is called: too late, XLA's default stays.
    assert _probe("late")[:2] == ["late", "False"]
