"""``docs/coverage.md`` is the table ``tests/coverage_table.py`` makes from the registries,
and what it says of each function holds: supported ones run on traced values, the
differentiable ones carry a gradient, and unsupported ones raise a TypeError naming
themselves."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.ir.methods import _np_name
from tests.coverage_table import numpy_rows, page, scipy_rows, unsupported

ROOT = Path(__file__).resolve().parents[1]


def test_page_is_up_to_date():
    text = (ROOT / "docs" / "coverage.md").read_text()
    assert text == page(), "regenerate: python -m tests.coverage_table > docs/coverage.md"


def test_every_registered_function_is_listed_once():
    names = [r[0] for r in numpy_rows() + scipy_rows()]
    assert len(names) == len(set(names))
    assert {"np.linalg.solve", "np.sort", "np.einsum"} <= set(names)
    assert {"scipy.special.gammaln", "scipy.stats.norm.logpdf", "scipy.linalg.expm",
            "scipy.integrate.odeint"} <= set(names)


UNSUPPORTED = [n for names in unsupported().values() for n in names
               if not n.rsplit(".", 1)[-1].startswith(("save", "load"))]  # file arguments


def _arity(func) -> int:
    """How many positional arguments ``func`` needs (a ufunc: its inputs)."""
    if isinstance(func, np.ufunc):
        return func.nin
    sig = inspect.signature(func)
    return max(1, sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                           p.POSITIONAL_OR_KEYWORD)
                      for p in sig.parameters.values()))


@pytest.mark.parametrize("name", UNSUPPORTED[::7])
def test_unsupported_functions_raise_naming_themselves(name):
    func = eval(name, {"np": np})
    spelled = {name.rsplit(".", 1)[-1], _np_name(func).rsplit(".", 1)[-1]}
    x = np.linspace(0.5, 1.5, 9).reshape(3, 3)
    with pytest.raises(TypeError, match=rf"({'|'.join(spelled)})\b.*not supported"):
        fg.grad(lambda a: np.sum(func(*[a] * _arity(func))))(x)
