"""Docstring text as plain text: for `difsim models`, netCDF `title`s and figure titles.

Model docstrings write their equations in LaTeX for the documentation site; a terminal or
a netCDF attribute shows them as Unicode instead (`$\\dot y = -k\\,y$` → `ẏ = -k y`).
"""

import re
import unicodedata

# Greek letters and the operators the zoo's docstrings use.
_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ",
    "nu": "ν", "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ",
    "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ",
    "Theta": "Θ", "Lambda": "Λ", "Pi": "Π", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ",
    "Omega": "Ω", "nabla": "∇", "partial": "∂", "cdot": "·", "times": "×", "le": "≤",
    "leq": "≤", "ge": "≥", "geq": "≥", "approx": "≈", "to": "→", "infty": "∞", "pm": "±",
    "ne": "≠", "neq": "≠", "sim": "~", "ell": "ℓ", "hbar": "ħ", "lVert": "‖", "rVert": "‖",
    "Vert": "‖", "quad": " ", "qquad": " ", "left": "", "right": "", "mathrm": "",
    "mathbf": "", "mathbb": "", "text": "", "operatorname": "", "bigl": "", "bigr": "",
}  # fmt: skip
_DOT = {"dot": "\u0307", "ddot": "\u0308", "hat": "\u0302", "tilde": "\u0303", "bar": "\u0304"}
_SUPERSCRIPT = str.maketrans("0123456789+-()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁽⁾ⁿ")
_SUBSCRIPT = str.maketrans("0123456789+-()", "₀₁₂₃₄₅₆₇₈₉₊₋₍₎")


def _sup(match: re.Match) -> str:
    return (match.group(1) or match.group(2)).translate(_SUPERSCRIPT)


def _sub(match: re.Match) -> str:
    return (match.group(1) or match.group(2)).translate(_SUBSCRIPT)


def _math(text: str) -> str:
    """One `$...$` span as Unicode."""
    text = re.sub(r"\\(?:tfrac|dfrac|frac)\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"(\1)/(\2)", text)
    text = re.sub(r"\((\w)\)/", r"\1/", text)  # (1)/(2) → 1/(2) for one symbol
    text = re.sub(r"/\((\w+)\)", r"/\1", text)
    text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"√(\1)", text)
    for name, mark in _DOT.items():  # \dot y, \dot{y} → y with a combining mark
        text = re.sub(rf"\\{name}\s*\{{?\\?(\w)\}}?", lambda m, c=mark: m.group(1) + c, text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _SYMBOLS.get(m.group(1), m.group(1)), text)
    text = re.sub(r"\\[,;:! ]", " ", text)
    # x^2, x^{-1}, y_3, y_{12}: digits (and signs) as super/subscripts.
    text = re.sub(r"\^(?:\{([-+]?[0-9n]+)\}|([0-9n]))", lambda m: _sup(m), text)
    text = re.sub(r"_(?:\{([0-9]+)\}|([0-9]))", lambda m: _sub(m), text)
    text = re.sub(r"[_^]\{([^{}]*)\}", r"_\1", text)  # other sub/superscripts stay readable
    text = text.replace("{", "").replace("}", "")
    return re.sub(r"\s+", " ", text).strip()


def plain_text(doc: str) -> str:
    """The first paragraph of a docstring as one line of plain text: LaTeX math as
    Unicode, Markdown links and code marks removed."""
    paragraph = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0] if doc.strip() else ""
    text = " ".join(line.strip() for line in paragraph.splitlines())
    text = re.sub(r"\$\$(.+?)\$\$", lambda m: _math(m.group(1)), text)
    text = re.sub(r"\$(.+?)\$", lambda m: _math(m.group(1)), text)
    text = re.sub(r"\[`?([^\]`]+)`?\]\[[^\]]*\]", r"\1", text)  # [`name`][] cross-references
    text = text.replace("`", "")
    # Composed characters where Unicode has them (y + combining dot → ẏ): terminals
    # draw those reliably.
    return unicodedata.normalize("NFC", re.sub(r"\s+", " ", text).strip())
