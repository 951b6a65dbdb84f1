"""Placeholder: being written (PDE issue)."""

def wavenumbers(*args, **kwargs):
    raise NotImplementedError("wavenumbers is being written")


def rfftn(*args, **kwargs):
    raise NotImplementedError("rfftn is being written")


def irfftn(*args, **kwargs):
    raise NotImplementedError("irfftn is being written")


def spectral_derivative(*args, **kwargs):
    raise NotImplementedError("spectral_derivative is being written")


def spectral_gradient(*args, **kwargs):
    raise NotImplementedError("spectral_gradient is being written")


def spectral_laplacian(*args, **kwargs):
    raise NotImplementedError("spectral_laplacian is being written")


def inverse_laplacian(*args, **kwargs):
    raise NotImplementedError("inverse_laplacian is being written")


def dealias(*args, **kwargs):
    raise NotImplementedError("dealias is being written")


