"""Differential fuzzing: random programs over the whole op table, every transform checked.

See docs/fuzzing.md. The default run checks ``N_DEFAULT`` programs in the interpreter
and compiles every one of them; ``pytest -m fuzz`` checks ``N_LARGE`` more
(compiling one in ``LARGE_COMPILED_EVERY``). A failure names its seed and prints the
program shrunk to a few ops, as IR and as Python;
``FUSEGRAD_FUZZ_SEED=n python -m pytest tests/fuzz -k seed`` reruns seed ``n``.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

from fusegrad.ir import ops
from fusegrad.ir.optable import OPS
from fusegrad.passes.autodiff import vjp_rules

from .checks import failures
from .gen import SKIPPED, TEMPLATES, covered_ops, generate, program, valid
from .runner import LARGE_START, failure_message
from .shrink import shrink

N_DEFAULT = 300
N_LARGE = 10_000
LARGE_COMPILED_EVERY = 50


def _check(seed: int, compiled: bool) -> None:
    msg = failure_message(seed, compiled)
    if msg is not None:
        pytest.fail(msg, pytrace=False)


@pytest.mark.compiled
@pytest.mark.parametrize("seed", range(N_DEFAULT), ids=lambda s: f"program{s}")
def test_program(seed):
    _check(seed, compiled=True)


@pytest.mark.fuzz
@pytest.mark.parametrize("seed", range(LARGE_START, LARGE_START + N_LARGE),
                         ids=lambda s: f"program{s}")
def test_program_large_sample(seed):
    _check(seed, compiled=(seed - LARGE_START) % LARGE_COMPILED_EVERY == 0)


def test_seed_from_environment():
    """Reruns ``FUSEGRAD_FUZZ_SEED`` (default 0), interpreted and compiled."""
    _check(int(os.environ.get("FUSEGRAD_FUZZ_SEED", "0")), compiled=True)


def test_templates_cover_the_op_table():
    assert covered_ops() | SKIPPED == set(OPS) | {"scan"}
    drawn = Counter(i.op for s in range(N_DEFAULT) for i in program(s).instrs)
    assert set(drawn) == set(TEMPLATES), f"never drawn: {set(TEMPLATES) - set(drawn)}"


def test_generated_programs_are_valid_and_reproducible():
    dtypes = Counter()
    for seed in range(50):
        p = generate(seed)
        assert 3 <= len(p.instrs) <= 10 and valid(p)
        assert generate(seed) == p
        dtypes[p.dtype] += 1
    assert 0 < dtypes["f32"] < dtypes["f64"]


def _wrong_sin_vjp(g, out, x):
    return (g * ops.cos(x) * 1.5,)


def test_shrinker_reduces_an_injected_wrong_vjp_to_one_op(monkeypatch):
    """With sin's VJP off by a factor 1.5, a program using sin among other ops fails the
    gradient check and shrinks to the single sin."""
    monkeypatch.setitem(vjp_rules.VJP_RULES, "sin", _wrong_sin_vjp)
    for seed in range(1000, 2000):
        p = generate(seed)
        if p.dtype == "f64" and len(p.instrs) >= 5 and [i.op for i in p.instrs].count("sin"):
            bad = dict(failures(p))
            if "grad" in bad:
                break
    else:
        raise AssertionError("no program with sin fails under the wrong rule")
    small = shrink(p, "grad")
    assert [i.op for i in small.instrs] == ["sin"], small.describe()
    assert small.n_inputs == 1 and np.prod(small.shapes[0]) == 1, small.describe()
    assert "sin" in small.describe() and "def f(x0)" in small.describe()
