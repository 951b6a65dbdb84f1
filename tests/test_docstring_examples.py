"""Every public name of `difsim` shows a short example in its docstring that runs (issue
32.3): each ```python block of the docstring is executed in a fresh namespace, and the
examples assert their own results against a known answer (an analytic derivative, an exact
solution), so a wrong example fails here.

`PENDING` lists the names whose docstring has no runnable example yet: a fragment that
needs context (`model`, `key`) or nothing. It only shrinks: a new public name without an
example, or a listed name that is no longer public, fails."""

import inspect
import re

import pytest

import difsim

FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)

PENDING: set[str] = set()  # every public name has one now


def _public() -> dict[str, object]:
    # The top level, and the PDE namespaces as `fd.laplacian`, `spectral.rfftn`, ...
    found = {}
    for prefix, module in (("", difsim), ("fd.", difsim.fd), ("spectral.", difsim.spectral)):
        for n in (n for n in dir(module) if not n.startswith("_")):
            if not inspect.ismodule(obj := getattr(module, n)):
                found[prefix + n] = obj
    return found


def _examples(obj) -> list[str]:
    return FENCE.findall(inspect.getdoc(obj) or "")


def test_every_public_name_has_an_example_or_is_pending():
    public = _public()
    assert not PENDING - set(public), "not public any more: drop from PENDING"
    without = sorted(n for n, obj in public.items() if n not in PENDING and not _examples(obj))
    assert not without, f"public names without a ```python example in their docstring: {without}"


PUBLIC = _public()


@pytest.mark.parametrize("name", sorted(set(PUBLIC) - PENDING))
def test_the_example_runs(name):
    examples = _examples(PUBLIC[name])
    assert examples
    for i, code in enumerate(examples):
        exec(compile(code, f"<docstring example {i} of difsim.{name}>", "exec"), {})


@pytest.mark.parametrize("module", [difsim.fd, difsim.spectral], ids=lambda m: m.__name__)
def test_the_namespace_example_runs(module):
    (code,) = _examples(module)
    exec(compile(code, f"<docstring example of {module.__name__}>", "exec"), {})
