"""Placeholder: being written (PDE issue)."""

def derivative(*args, **kwargs):
    raise NotImplementedError("derivative is being written")


def gradient(*args, **kwargs):
    raise NotImplementedError("gradient is being written")


def divergence(*args, **kwargs):
    raise NotImplementedError("divergence is being written")


def laplacian(*args, **kwargs):
    raise NotImplementedError("laplacian is being written")


def biharmonic(*args, **kwargs):
    raise NotImplementedError("biharmonic is being written")


