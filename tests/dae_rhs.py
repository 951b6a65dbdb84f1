"""The zoo's differential-algebraic models written out independently in NumPy (each
algebraic variable's entry its constraint residual): compared with the models' `rhs` at
random states by tests/test_models.py."""

import numpy as np


def cartesian_pendulum_rhs(t, y, p):
    # The last entry: the residual of the Baumgarte-stabilised, twice differentiated
    # length constraint (the DAE's algebraic equation for the tension lam).
    x, y_, u, v, lam = y
    a, c = p["alpha"], (x**2 + y_**2 - p["L"] ** 2) / 2
    accel = u**2 + v**2 - lam * (x**2 + y_**2) - p["g"] * y_
    return [u, v, -lam * x, -lam * y_ - p["g"], accel + 2 * a * (x * u + y_ * v) + a**2 * c]


def diode_circuit_rhs(t, y, p):
    v, i = y
    source = p["V0"] * np.sin(2 * np.pi * p["f"] * t)
    return [((source - v) / p["R"] - i) / p["C"], i - p["I_s"] * np.expm1(v / p["V_T"])]


def akzo_nobel_rhs(t, y, p):
    y1, y2, y3, y4, y5, y6 = y
    r1 = p["k1"] * y1**4 * np.sqrt(y2)
    r2, r3 = p["k2"] * y3 * y4, p["k2"] / p["K"] * y1 * y5
    r4, r5 = p["k3"] * y1 * y4**2, p["k4"] * y6**2 * np.sqrt(y2)
    inflow = p["klA"] * (p["p_co2"] / p["H"] - y2)
    return [-2 * r1 + r2 - r3 - r4, -r1 / 2 - r4 - r5 / 2 + inflow, r1 - r2 + r3,
            -r2 + r3 - 2 * r4, r2 - r3 + r5, p["Ks"] * y1 * y4 - y6]  # fmt: skip
