"""The difsim model zoo: classic ODE, PDE and SDE systems with literature defaults.

`MODELS` is the explicit name → class table that configs use (`[model] name = "lorenz"`).
See `docs/zoo.md` for the equations, parameters and sources.
"""

from difsim.models._advection import LinearAdvection as LinearAdvection
from difsim.models._akzo_nobel import AkzoNobel as AkzoNobel
from difsim.models._bouncing_ball import BouncingBall as BouncingBall
from difsim.models._burgers import Burgers as Burgers
from difsim.models._cartesian_pendulum import CartesianPendulum as CartesianPendulum
from difsim.models._decay import ExponentialDecay as ExponentialDecay
from difsim.models._diode_circuit import DiodeCircuit as DiodeCircuit
from difsim.models._double_well import DoubleWellLangevin as DoubleWellLangevin
from difsim.models._epidemic import SEIR as SEIR, SIR as SIR
from difsim.models._fitzhugh_nagumo import FitzHughNagumo as FitzHughNagumo
from difsim.models._gray_scott import GrayScott as GrayScott
from difsim.models._heat import Heat as Heat
from difsim.models._hires import Hires as Hires
from difsim.models._kepler import Kepler as Kepler
from difsim.models._kuramoto_sivashinsky import KuramotoSivashinsky as KuramotoSivashinsky
from difsim.models._lorenz import Lorenz as Lorenz
from difsim.models._lotka_volterra import LotkaVolterra as LotkaVolterra
from difsim.models._navier_stokes import NavierStokes2D as NavierStokes2D
from difsim.models._oregonator import Oregonator as Oregonator
from difsim.models._ornstein_uhlenbeck import OrnsteinUhlenbeck as OrnsteinUhlenbeck
from difsim.models._oscillator import HarmonicOscillator as HarmonicOscillator
from difsim.models._pendulum import DampedDrivenPendulum as DampedDrivenPendulum
from difsim.models._pharmacokinetics import OralDosing as OralDosing
from difsim.models._robertson import Robertson as Robertson, RobertsonDAE as RobertsonDAE
from difsim.models._stochastic_sir import StochasticSIR as StochasticSIR
from difsim.models._thermostat import Thermostat as Thermostat
from difsim.models._van_der_pol import VanDerPol as VanDerPol
from difsim.models._wave import Wave as Wave

MODELS: dict[str, type] = {
    "exponential_decay": ExponentialDecay,
    "harmonic_oscillator": HarmonicOscillator,
    "pendulum": DampedDrivenPendulum,
    "lotka_volterra": LotkaVolterra,
    "lorenz": Lorenz,
    "van_der_pol": VanDerPol,
    "sir": SIR,
    "seir": SEIR,
    "robertson": Robertson,
    "robertson_dae": RobertsonDAE,
    "cartesian_pendulum": CartesianPendulum,
    "diode_circuit": DiodeCircuit,
    "akzo_nobel": AkzoNobel,
    "oregonator": Oregonator,
    "hires": Hires,
    "kepler": Kepler,
    "heat": Heat,
    "advection": LinearAdvection,
    "burgers": Burgers,
    "wave": Wave,
    "kuramoto_sivashinsky": KuramotoSivashinsky,
    "gray_scott": GrayScott,
    "fitzhugh_nagumo": FitzHughNagumo,
    "navier_stokes": NavierStokes2D,
    "ornstein_uhlenbeck": OrnsteinUhlenbeck,
    "double_well": DoubleWellLangevin,
    "stochastic_sir": StochasticSIR,
    "bouncing_ball": BouncingBall,
    "oral_dosing": OralDosing,
    "thermostat": Thermostat,
}
