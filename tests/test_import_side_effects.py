"""`import difsim` is a guest in its user's process: it changes no environment variable, no
JAX configuration value, no batching rule of JAX, no equinox setting, no warnings filter and
no logging handler outside its own logger. Checked in a fresh process, where nothing else
has touched them, importing everything difsim ships (`difsim`, `difsim.models`,
`difsim.solvers`); then that the engine's batching rule for `linear_call`
(`difsim/_compat.py`) is added only by the reverse-mode path that needs it."""

import json
import os
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import json, logging, os, sys, warnings
    # What difsim imports: their own registrations at import are theirs, not difsim's.
    import diffrax, equinox, jax, jax.experimental.multihost_utils, jax.scipy.linalg
    import lineax, optax, optimistix, tomli_w, xarray
    from equinox import _errors
    from jax._src.custom_derivatives import linear_call_p
    from jax._src.interpreters import batching

    def snapshot():
        root = logging.getLogger()
        return {
            "environ": dict(os.environ),
            "jax_config": {k: repr(v) for k, v in jax.config.values.items()},
            "batchers": sorted(map(str, batching.fancy_primitive_batchers)),
            "eqx_on_error": _errors.EQX_ON_ERROR,
            "warnings": [repr(f) for f in warnings.filters],
            "root_handlers": [repr(h) for h in root.handlers],
            "root_level": root.level,
        }

    before = snapshot()
    import difsim, difsim.models, difsim.solvers
    after = snapshot()
    changed = sorted(k for k in before if before[k] != after[k])
    detail = {k: [before[k], after[k]] for k in changed if k != "environ"}
    if "environ" in changed:
        keys = set(before["environ"]) | set(after["environ"])
        detail["environ"] = sorted(
            k for k in keys if before["environ"].get(k) != after["environ"].get(k)
        )
    print(json.dumps({"changed": changed, "detail": detail,
                      "rule": linear_call_p in batching.fancy_primitive_batchers}))
    """
)


def test_import_difsim_changes_no_global_state_of_the_process():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_", "EQX_"))}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"  # a user's own value
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180,
        check=True,
    )  # fmt: skip
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["changed"] == [], report["detail"]
    assert report["rule"] is False  # JAX 0.10 has none of its own: difsim's is not added yet
