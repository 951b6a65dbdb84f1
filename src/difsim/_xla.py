"""The one XLA option difsim offers: whole while loops as single CPU kernels (opt-in).

XLA:CPU runs a while loop's body kernel by kernel, one runtime task ("thunk") per fused
kernel, unless the loop's memory footprint is below `xla_cpu_small_while_loop_byte_threshold`
(1 KiB by default): then it compiles the whole loop into one kernel. The ensemble engine's
step loops (some twenty kernels per step over blocks of a few hundred lanes) are far above
1 KiB. Kernel by kernel, each step pays the runtime's dispatch, and when the program
reduces or drops some of the engine's results (a loss, a sum), XLA:CPU may run the loop on
its thread pool at 2-3x the CPU time. With the threshold at 4 MiB the loops are single
kernels (`docs/benchmarks.md`, "stage boundaries"; CPU time, with the engine's stage
boundaries): the Lorenz engine 1.6x less, the Robertson (Rodas5P) engine 3.5x less, the
default gradient of a Lorenz sweep loss in (σ, β) 5x less; every shipped config as fast or
faster ("2026-11-28, late"). The exception is `jnp.roll`, which XLA compiles to slower code
inside one kernel: a Lorenz-96 ensemble takes 1.1x more. Results are the same to rounding.

Importing difsim changes nothing: the option goes into `XLA_FLAGS` only when
[`tune_xla`][] is called (the `difsim` command calls it first thing, for its own process;
a script or notebook calls it before its first JAX computation). XLA reads `XLA_FLAGS`
once, when JAX starts its backends, and its compile options cannot carry this backend
option per program (jax 0.10: `compiler_options={"xla_backend_extra_options": ...}` is
refused), so the setting is the process's, which is why it is left to the process's owner.
`tune_xla` leaves `XLA_FLAGS` alone when:

- `DIFSIM_XLA_TUNING` is `0`, `off`, `false` or `no` (left to XLA's default);
- `XLA_FLAGS` already sets the threshold (the user's value stands);
- JAX has already started its backends (too late: XLA's default stays for this process;
  call it before running JAX code, or set `XLA_FLAGS` yourself).

Nothing here imports JAX: importing it does not start a backend.
"""

import logging
import os
import re

logger = logging.getLogger("difsim")

ENV = "DIFSIM_XLA_TUNING"
OPTION = "xla_cpu_small_while_loop_byte_threshold"
# Covers the engine's loops, forward and differentiated, in float32 (their blocks hold about
# 2,048 state entries per array, 8,192 in reverse mode, whatever the model: 1 MiB covered the
# forward-mode gradients, 4 MiB also the checkpointed ones), while a loop over large arrays
# (a PDE on a big grid) keeps XLA's default, kernel by kernel.
THRESHOLD = 4 * 2**20

_EXTRA = re.compile(r"--xla_backend_extra_options=(\S*)")

# What `tune()` did in this process: "set", "off", "user" or "late" (see the module
# docstring), or "" before it ran.
state = ""


def with_option(flags: str, threshold: int = THRESHOLD) -> str:
    """`flags` (an `XLA_FLAGS` value) with the loop threshold added to XLA's backend extra
    options: merged into an `--xla_backend_extra_options` already there (a second one would
    replace it), else appended."""
    entry = f"{OPTION}={threshold}"
    match = _EXTRA.search(flags)
    if match is None:
        return f"{flags} --xla_backend_extra_options={entry}".strip()
    merged = f"{match.group(1)},{entry}" if match.group(1) else entry
    return f"{flags[: match.start(1)]}{merged}{flags[match.end(1) :]}"


def tune() -> str:
    """Add the loop threshold to `XLA_FLAGS` where the module docstring says; returns (and
    records in `state`) what it did. The public face is [`tune_xla`][]."""
    global state
    flags = os.environ.get("XLA_FLAGS", "")
    if os.environ.get(ENV, "").strip().lower() in ("0", "off", "false", "no"):
        state = "off"
    elif OPTION in flags:
        state = "user"
    elif _backends_started():
        state = "late"
        logger.info(
            "JAX started its backends before difsim.tune_xla() was called: XLA:CPU runs the "
            "ensemble engine's loops kernel by kernel in this process (slower; see %s in "
            "docs/sweeps.md)",
            ENV,
        )
    else:
        os.environ["XLA_FLAGS"] = with_option(flags)
        state = "set"
    return state


def _backends_started() -> bool:
    from difsim._compat import jax_backends_started  # imports JAX: only when called

    return jax_backends_started()


def tune_xla() -> str:
    """Let XLA:CPU compile the ensemble engine's step loops as single kernels in this
    process: adds `--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=
    4194304` to `XLA_FLAGS` (merged into extra options already there). Importing difsim
    does not do it; the `difsim` command does, for its own process.

    Call it before the first JAX computation of the process: XLA reads `XLA_FLAGS` once,
    when JAX starts its backends. On a 2-core Xeon, CPU time (docs/sweeps.md): a Lorenz
    ensemble of 10⁴ lanes 7.4 → 4.5 ms, Robertson with `rodas5p` 175 → 50 ms, the gradient
    of a Lorenz sweep loss 44 → 8.5 ms; an ensemble whose right-hand side uses `jnp.roll`
    ~1.1x slower. It also applies to the process's other JAX programs: any while loop over
    up to 4 MiB runs as one kernel, on one core.

    **Returns:** what it did: `"set"`; `"user"` (`XLA_FLAGS` already sets the threshold:
    left alone); `"off"` (`DIFSIM_XLA_TUNING=0`); `"late"` (JAX had started its backends:
    nothing changed, the `difsim` logger says so at INFO level).

    **Example:**

    ```python
    import difsim as ds

    done = ds.tune_xla()  # first thing in a script, before any JAX computation
    assert done in ("set", "user", "off", "late")
    ```
    """
    return tune()
