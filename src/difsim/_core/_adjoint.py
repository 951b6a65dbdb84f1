"""Clear errors when a derivative goes through an adjoint that cannot take it.

diffrax's adjoints each support one direction: `RecursiveCheckpointAdjoint` and
`BacksolveAdjoint` are reverse mode only (`jax.grad`, `jax.vjp`), `ForwardMode` is forward
mode only (`jax.jvp`, `jax.jacfwd`); `DirectAdjoint` does both. The wrong pairing reaches
the user as a JAX error about `custom_vjp` functions or `while_loop`s that never names the
adjoint. These helpers turn both into messages saying which `adjoint=` to use.
"""

import diffrax as dfx
import equinox.internal as eqxi

_NAMES = {
    dfx.RecursiveCheckpointAdjoint: "'checkpoint' (the default)",
    dfx.BacksolveAdjoint: "'backsolve'",
}

FORWARD_ONLY = (
    "simulate: reverse-mode derivatives (jax.grad, jax.vjp) cannot pass through "
    "adjoint='forward', which is forward mode only: use adjoint='checkpoint' (the default) "
    "for jax.grad, or keep adjoint='forward' with jax.jacfwd / jax.jvp"
)


def _reverse_only_name(adjoint: dfx.AbstractAdjoint) -> str | None:
    for cls, name in _NAMES.items():
        if isinstance(adjoint, cls):
            return name
    return None


def forward_mode_error(adjoint: dfx.AbstractAdjoint, error: TypeError) -> TypeError | None:
    """The difsim error for JAX's `error`, raised when forward-mode differentiation met a
    reverse-only adjoint; `None` when `error` is something else."""
    name = _reverse_only_name(adjoint)
    if name is None or "forward-mode autodiff" not in str(error):
        return None
    return TypeError(
        f"simulate: forward-mode derivatives (jax.jvp, jax.jacfwd) cannot pass through "
        f"adjoint={name}, which is reverse mode only: use adjoint='forward' for forward "
        "mode, adjoint='direct' for both modes (more memory), or jax.grad / jax.jacrev"
    )


def forward_only(adjoint: dfx.AbstractAdjoint, outputs):
    """`outputs` as they are, except that with `adjoint="forward"` a reverse-mode
    derivative of them raises [`FORWARD_ONLY`][] (before JAX reaches the solve's loop and
    raises its own error about `while_loop`s)."""
    if not isinstance(adjoint, dfx.ForwardMode):
        return outputs
    # equinox's identity whose transpose raises: diffrax uses it likewise; a custom_vjp
    # would do too, but would also refuse the forward mode this adjoint is for.
    return eqxi.nondifferentiable_backward(outputs, msg=FORWARD_ONLY)
