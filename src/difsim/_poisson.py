"""Placeholder: being written (PDE issue)."""

def solve_poisson(*args, **kwargs):
    raise NotImplementedError("solve_poisson is being written")


