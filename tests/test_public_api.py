"""The public API: every name of `difsim`, `difsim.models` and `difsim.solvers`, with its kind.

The lists were taken on 2026-11-24, before the layered redesign (issue 10) moved the
implementation into subpackages. A name that disappears, changes kind, or appears without
being added here fails: the public face changes only on purpose. (One entry was dropped on
purpose: `importlib`, the standard-library module the old `__init__.py` happened to leave in
the namespace; `wants_split_terms` was added to `difsim.solvers`; issue 13 added the
stochastic models: `Noise`, `brownian_path`, `KalmanLikelihood`, `SimulatedMoments`, three
SDE zoo models and the SDE solver table; issue 28 added equation discovery: `discover`,
`Discovery`, `PolynomialLibrary`, `FunctionLibrary`; issue 32 added `tune_xla`, the opt-in
that `import difsim` no longer applies itself, and moved the 20 PDE operators into the
`fd` and `spectral` namespaces.)"""

import inspect

import pytest

import difsim
import difsim.models
import difsim.solvers

DIFSIM = {
    "AbstractEvent": "class",
    "AbstractTransform": "class",
    "BoundaryCondition": "class",
    "Bounded": "class",
    "ConfigError": "class",
    "Dirichlet": "class",
    "Discovery": "class",
    "Event": "class",
    "EventRecord": "class",
    "Experiment": "class",
    "FitResult": "class",
    "FitWarning": "class",
    "FunctionLibrary": "class",
    "Grid": "class",
    "GridSweep": "class",
    "Identity": "class",
    "KalmanLikelihood": "class",
    "LogUniform": "class",
    "Model": "class",
    "MultipleShooting": "class",
    "Neumann": "class",
    "Noise": "class",
    "Normal": "class",
    "Periodic": "class",
    "PolynomialLibrary": "class",
    "Positive": "class",
    "RandomSweep": "class",
    "ResourceError": "class",
    "SimulatedMoments": "class",
    "SolveError": "class",
    "Solution": "class",
    "State": "class",
    "Status": "class",
    "TimeEvent": "class",
    "Uniform": "class",
    "Var": "class",
    "VarInfo": "class",
    "ZipSweep": "class",
    "animate": "function",
    "brownian_path": "function",
    "discover": "function",
    "fd": "module",
    "domain_sharding": "function",
    "fit": "function",
    "load_config": "function",
    "models": "module",
    "observable": "function",
    "param": "function",
    "plot": "function",
    "plot_snapshots": "function",
    "run_config": "function",
    "simulate": "function",
    "simulate_ensemble": "function",
    "solvers": "module",
    "spectral": "module",
    "steady_state": "function",
    "sweep": "function",
    "to_xarray": "function",
    "tune_xla": "function",
}

# The PDE operators, by namespace (issue 32.4 moved them from the top level, where the old
# names remain as deprecated aliases: test_moved_pde_operators_warn_and_still_work).
FD = {
    "advection": "function",
    "biharmonic": "function",
    "conservative_divergence": "function",
    "derivative": "function",
    "divergence": "function",
    "gradient": "function",
    "laplacian": "function",
    "solve_poisson": "function",
}

SPECTRAL = {
    "dealias": "function",
    "dealias_mask": "function",
    "derivative": "function",
    "derivative_symbol": "function",
    "gradient": "function",
    "inverse_laplacian": "function",
    "inverse_laplacian_symbol": "function",
    "irfftn": "function",
    "laplacian": "function",
    "laplacian_symbol": "function",
    "rfftn": "function",
    "wavenumbers": "function",
}

MODELS = {
    "BouncingBall": "class",
    "Burgers": "class",
    "CartesianPendulum": "class",
    "DiodeCircuit": "class",
    "AkzoNobel": "class",
    "DampedDrivenPendulum": "class",
    "DoubleWellLangevin": "class",
    "ExponentialDecay": "class",
    "FitzHughNagumo": "class",
    "GrayScott": "class",
    "HarmonicOscillator": "class",
    "Heat": "class",
    "Hires": "class",
    "Kepler": "class",
    "KuramotoSivashinsky": "class",
    "LinearAdvection": "class",
    "Lorenz": "class",
    "LotkaVolterra": "class",
    "MODELS": "dict",
    "NavierStokes2D": "class",
    "OralDosing": "class",
    "Oregonator": "class",
    "OrnsteinUhlenbeck": "class",
    "Robertson": "class",
    "RobertsonDAE": "class",
    "SEIR": "class",
    "SIR": "class",
    "StochasticSIR": "class",
    "Thermostat": "class",
    "VanDerPol": "class",
    "Wave": "class",
}

SOLVERS = {
    "ADJOINTS": "dict",
    "ADJOINT_DESCRIPTIONS": "dict",
    "ADJOINT_NAMES": "dict",
    "AbstractLinearImplicit": "class",
    "AdjointName": "class",
    "BDF": "class",
    "BDFController": "class",
    "BDFError": "class",
    "BDFInterpolation": "class",
    "BackwardEuler": "class",
    "CONTROLLERS": "dict",
    "CrankNicolson": "class",
    "DEFAULT_ROOT_TOL": "float",
    "ENTRY_POINTS": "tuple",
    "ETDRK4": "class",
    "Radau5": "class",
    "Rodas5P": "class",
    "SDESolverInfo": "class",
    "SDE_SOLVERS": "dict",
    "SOLVERS": "dict",
    "ScaledKrylov": "class",
    "SolverInfo": "class",
    "SpectralODETerm": "class",
    "StageNewton": "class",
    "adjoint_names": "function",
    "check_adjoint_name": "function",
    "default_sde_solver": "function",
    "make_adjoint": "function",
    "make_controller": "function",
    "make_sde_solver": "function",
    "make_solver": "function",
    "newton_krylov": "function",
    "sde_solver_info": "function",
    "solver_info": "function",
    "wants_split_terms": "function",
}


def _kind(value) -> str:
    if inspect.ismodule(value):
        return "module"
    if inspect.isclass(value):
        return "class"
    if callable(value):
        return "function"
    return type(value).__name__


@pytest.mark.parametrize(
    "module, expected",
    [
        (difsim, DIFSIM),
        (difsim.fd, FD),
        (difsim.spectral, SPECTRAL),
        (difsim.models, MODELS),
        (difsim.solvers, SOLVERS),
    ],
    ids=["difsim", "difsim.fd", "difsim.spectral", "difsim.models", "difsim.solvers"],
)
def test_public_names_and_kinds_are_unchanged(module, expected):
    public = {n: _kind(getattr(module, n)) for n in dir(module) if not n.startswith("_")}
    missing = sorted(set(expected) - set(public))
    added = sorted(set(public) - set(expected))
    assert not missing, f"public names gone from {module.__name__}: {missing}"
    assert not added, f"new public names in {module.__name__} (add them here on purpose): {added}"
    changed = {n: (expected[n], public[n]) for n in expected if expected[n] != public[n]}
    assert not changed, f"public names whose kind changed (was, now): {changed}"


def test_every_public_name_is_documented_where_it_is_defined():
    # The public face re-exports: each class or function keeps a docstring after moving.
    undocumented = [
        n
        for n, k in DIFSIM.items()
        if k in ("class", "function") and not getattr(difsim, n).__doc__
    ]
    assert not undocumented, undocumented


def test_moved_pde_operators_warn_and_still_work():
    # docs/versions.md: a moved name keeps working, warns naming its replacement, and is
    # not listed by dir() (so it is not part of the public face above).
    from difsim._deprecated import MOVED

    assert len(MOVED) == 20 and not set(MOVED) & set(dir(difsim))
    for old, (namespace, new) in MOVED.items():
        with pytest.warns(
            DeprecationWarning, match=rf"ds\.{old} is deprecated .* ds\.{namespace}\.{new}$"
        ):
            alias = getattr(difsim, old)
        assert alias is getattr(getattr(difsim, namespace), new)
    with pytest.warns(DeprecationWarning, match="ds.spectral.laplacian"):
        from difsim import spectral_laplacian
    assert spectral_laplacian is difsim.spectral.laplacian
    with pytest.raises(AttributeError, match="no attribute 'laplacain'"):
        difsim.laplacain  # noqa: B018
