"""The public API: every name of `difsim`, `difsim.models` and `difsim.solvers`, with its kind.

The lists were taken on 2026-11-24, before the layered redesign (issue 10) moved the
implementation into subpackages. A name that disappears, changes kind, or appears without
being added here fails: the public face changes only on purpose. (One entry was dropped on
purpose: `importlib`, the standard-library module the old `__init__.py` happened to leave in
the namespace; `wants_split_terms` was added to `difsim.solvers`; issue 13 added the
stochastic models: `Noise`, `brownian_path`, `KalmanLikelihood`, `SimulatedMoments`, three
SDE zoo models and the SDE solver table; issue 28 added equation discovery: `discover`,
`Discovery`, `PolynomialLibrary`, `FunctionLibrary`; issue 32 added `tune_xla`, the opt-in
that `import difsim` no longer applies itself.)"""

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
    "advection": "function",
    "animate": "function",
    "biharmonic": "function",
    "brownian_path": "function",
    "conservative_divergence": "function",
    "dealias": "function",
    "dealias_mask": "function",
    "discover": "function",
    "derivative": "function",
    "derivative_symbol": "function",
    "divergence": "function",
    "domain_sharding": "function",
    "fit": "function",
    "gradient": "function",
    "inverse_laplacian": "function",
    "inverse_laplacian_symbol": "function",
    "irfftn": "function",
    "laplacian": "function",
    "laplacian_symbol": "function",
    "load_config": "function",
    "models": "module",
    "observable": "function",
    "param": "function",
    "plot": "function",
    "plot_snapshots": "function",
    "rfftn": "function",
    "run_config": "function",
    "simulate": "function",
    "simulate_ensemble": "function",
    "solve_poisson": "function",
    "solvers": "module",
    "spectral_derivative": "function",
    "spectral_gradient": "function",
    "spectral_laplacian": "function",
    "steady_state": "function",
    "sweep": "function",
    "to_xarray": "function",
    "tune_xla": "function",
    "wavenumbers": "function",
}

MODELS = {
    "BouncingBall": "class",
    "Burgers": "class",
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
    "BackwardEuler": "class",
    "CONTROLLERS": "dict",
    "CrankNicolson": "class",
    "DEFAULT_ROOT_TOL": "float",
    "ENTRY_POINTS": "tuple",
    "ETDRK4": "class",
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
    [(difsim, DIFSIM), (difsim.models, MODELS), (difsim.solvers, SOLVERS)],
    ids=["difsim", "difsim.models", "difsim.solvers"],
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
