"""Robertson's stiff chemical kinetics problem."""

from typing import ClassVar

from difsim._core import Model, State, Var, param


class Robertson(Model):
    r"""Robertson's autocatalytic reaction system, the classic stiff test problem.

    $$\dot y_1 = -k_1 y_1 + k_3 y_2 y_3,\quad
    \dot y_2 = k_1 y_1 - k_3 y_2 y_3 - k_2 y_2^2,\quad
    \dot y_3 = k_2 y_2^2$$

    The rate constants span eleven orders of magnitude, so explicit solvers crawl:
    `stiff = True` makes `simulate` default to the implicit `kvaerno5`. The total
    $y_1 + y_2 + y_3$ is conserved (= 1 from the default state). Solutions are usually
    viewed on a log time axis out to $t = 10^{11}$.

    **Parameters:** `k1` (0.04), `k2` (3e7), `k3` (1e4): rate constants in 1/time and
    1/(concentration · time), all dimensionless. **State:** `y1` (default 1), `y2` (0), `y3` (0),
    dimensionless concentrations. Time in model units.

    Source: H. H. Robertson, "The solution of a set of reaction rate equations", in
    J. Walsh (ed.), *Numerical Analysis: An Introduction* (Academic Press, 1966), 178–182;
    E. Hairer and G. Wanner, *Solving Ordinary Differential Equations II* (2nd ed.,
    Springer 1996), §IV.1 (problem ROBER).
    """

    k1: float = param(0.04, units="1", description="rate constant of A -> B")
    k2: float = param(3e7, units="1", description="rate constant of 2B -> B + C")
    k3: float = param(1e4, units="1", description="rate constant of B + C -> A + C")
    state = State(
        y1=Var(1.0, units="1", description="concentration of A"),
        y2=Var(0.0, units="1", description="concentration of B"),
        y3=Var(0.0, units="1", description="concentration of C"),
    )
    time_units: ClassVar[str] = "1"
    stiff: ClassVar[bool] = True
    # Kinetics over eleven decades of time: drawn on a log time axis.
    plot_time_scale: ClassVar[str] = "log"

    def rhs(self, t, s):
        a_to_b, b_c, b_b = _rates(self, s)
        return dict(y1=-a_to_b + b_c, y2=a_to_b - b_c - b_b, y3=b_b)


class RobertsonDAE(Model):
    r"""Robertson's kinetics as a differential-algebraic model: mass conservation replaces
    the third rate equation (Hairer & Wanner, §VI.1; the IVP test set's ROBER in DAE form).

    $$\dot y_1 = -k_1 y_1 + k_3 y_2 y_3,\quad
    \dot y_2 = k_1 y_1 - k_3 y_2 y_3 - k_2 y_2^2,\quad
    0 = y_1 + y_2 + y_3 - 1$$

    `y3` is algebraic (`ds.Var(..., algebraic=True)`): index 1, since the constraint
    determines it. The solution is that of [`Robertson`][difsim.models.Robertson] from a
    state that sums to 1; `simulate` solves it with Rodas5P and a singular mass matrix.
    Stiff like `Robertson` (`stiff = True`).

    **Parameters:** `k1` (0.04), `k2` (3e7), `k3` (1e4), as `Robertson`'s. **State:** `y1`
    (1), `y2` (0), `y3` (algebraic; its given value is only a guess, made consistent).

    Source: Hairer & Wanner, *Solving Ordinary Differential Equations II* (2nd ed.,
    Springer 1996), §VI.1 (problem ROBER as a DAE); F. Mazzia and C. Magherini, *Test Set
    for Initial Value Problem Solvers*, release 2.4 (University of Bari, 2008).
    """

    k1: float = param(0.04, units="1", description="rate constant of A -> B")
    k2: float = param(3e7, units="1", description="rate constant of 2B -> B + C")
    k3: float = param(1e4, units="1", description="rate constant of B + C -> A + C")
    state = State(
        y1=Var(1.0, units="1", description="concentration of A"),
        y2=Var(0.0, units="1", description="concentration of B"),
        y3=Var(0.0, units="1", description="concentration of C", algebraic=True),
    )
    time_units: ClassVar[str] = "1"
    stiff: ClassVar[bool] = True
    plot_time_scale: ClassVar[str] = "log"

    def rhs(self, t, s):
        a_to_b, b_c, b_b = _rates(self, s)
        return dict(y1=-a_to_b + b_c, y2=a_to_b - b_c - b_b, y3=s.y1 + s.y2 + s.y3 - 1)


def _rates(model, s):
    """The three reaction rates A -> B, B + C -> A + C and 2B -> B + C."""
    return model.k1 * s.y1, model.k3 * s.y2 * s.y3, model.k2 * s.y2**2
