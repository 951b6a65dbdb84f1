"""Make `damped_oscillator.csv`: the exact position of a damped oscillator, with 1 % noise.

x'' = -omega^2 x - c x', omega = 2 1/s, c = 0.3 1/s, x(0) = 1 m, x'(0) = 0: underdamped,
x(t) = exp(-c t / 2) (cos(w t) + c / (2 w) sin(w t)), w = sqrt(omega^2 - c^2 / 4).
41 times from 0 to 10 s; Gaussian noise of standard deviation 0.01 m (NumPy's
default_rng(0)). Run from the repository root: python data/make_oscillator_data.py
"""

from pathlib import Path

import numpy as np

OMEGA, C = 2.0, 0.3


def position(t: np.ndarray) -> np.ndarray:
    w = np.sqrt(OMEGA**2 - C**2 / 4)
    return np.exp(-C * t / 2) * (np.cos(w * t) + C / (2 * w) * np.sin(w * t))


def main() -> None:
    t = np.linspace(0.0, 10.0, 41)
    x = position(t) + 0.01 * np.random.default_rng(0).standard_normal(t.shape)
    out = Path(__file__).with_name("damped_oscillator.csv")
    rows = "\n".join(f"{a:.2f},{b:.6f}" for a, b in zip(t, x))
    out.write_text("time,x\n" + rows + "\n")


if __name__ == "__main__":
    main()
