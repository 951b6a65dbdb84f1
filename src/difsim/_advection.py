"""Placeholder: being written (PDE issue)."""

def advection(*args, **kwargs):
    raise NotImplementedError("advection is being written")


def conservative_divergence(*args, **kwargs):
    raise NotImplementedError("conservative_divergence is being written")


