"""Compiled code == the NumPy interpreter, for every op and its VJP.

Compiling costs 0.3-1 s per module and grows faster than linearly with its
size, so the cases of the op-table tests are compiled in combined Functions of
``CHUNK`` cases each; each case is then checked on its own slice of the results.
"""

import numpy as np
import pytest

from fusegrad.ir import OPS, evaluate
from fusegrad.ir.optable import OpDef
from fusegrad.passes.autodiff import vjp
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import run
from fusegrad.runtime.compiled import executable
from fusegrad.tracer import trace
from tests.helpers import assert_close
from tests.passes.control_cases import NO_VJP_OF
from tests.passes.incgamma_cases import FIRST_ORDER_RAISES
from tests.passes.test_vjp_rules import GRAD_CASES, INTERPRETER_ONLY


def _one_per_op(cases):
    """The last (most broadcasting) case of each op: compiling every case would take
    many minutes; the interpreter tests cover them all, and the VJP of each case also
    computes the op itself."""
    by_op: dict = {}
    for c in cases:
        by_op[c.op] = c
    return list(by_op.values())


VJP_CASES = _one_per_op([c for c in GRAD_CASES if c.op not in NO_VJP_OF | FIRST_ORDER_RAISES])
CASES = _one_per_op([*INTERPRETER_ONLY,
                     *(c for c in GRAD_CASES if c.op in NO_VJP_OF | FIRST_ORDER_RAISES)])


def _combine(fns, name):
    """One Function computing every ``fns[i]`` on its own slice of the parameters."""
    types = [p.type for fn in fns for p in fn.params]

    def combined(*xs):
        outs, k = [], 0
        for fn in fns:
            outs += evaluate(fn, *xs[k : k + len(fn.params)])
            k += len(fn.params)
        return tuple(outs)

    combined.__name__ = name
    return trace(combined, *types)


CHUNK = 40


def _run_chunks(fns, args_per_fn, name):
    out = []
    for s in range(0, len(fns), CHUNK):
        out += _run_both(fns[s : s + CHUNK], args_per_fn[s : s + CHUNK], f"{name}{s}")
    return out


def _run_both(fns, args_per_fn, name):
    big = _combine(fns, name)
    flat = [a for args in args_per_fn for a in args]
    compiled = executable(big)(*flat)
    interpreted = run(big, *flat)
    out, k = [], 0
    for fn in fns:
        n = len(fn.results)
        out.append((compiled[k : k + n], interpreted[k : k + n]))
        k += n
    return out


@pytest.fixture(scope="module")
def forward_results():
    args = [c.inputs() for c in CASES]
    fns = [c.function(a) for c, a in zip(CASES, args)]
    return dict(zip((c.id for c in CASES), _run_chunks(fns, args, "ops")))


@pytest.fixture(scope="module")
def vjp_results():
    rng = np.random.default_rng(7)
    fns, args = [], []
    for c in VJP_CASES:
        a = c.inputs()
        fn = c.function(a)
        wrt = [i for i, p in enumerate(fn.params) if p.type.is_inexact]
        g = simplify(vjp(fn, wrt))
        cts = [rng.normal(size=r.type.shape).astype(r.type.dtype) for r in fn.results]
        fns.append(g)
        args.append([*a, *cts])
    return dict(zip((c.id for c in VJP_CASES), _run_chunks(fns, args, "vjps")))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_compiled_op_equals_interpreter(case, forward_results):
    for got, want in zip(*forward_results[case.id]):
        assert_close(got, want, "exact64")


@pytest.mark.parametrize("case", VJP_CASES, ids=lambda c: c.id)
def test_compiled_vjp_equals_interpreter(case, vjp_results):
    for got, want in zip(*vjp_results[case.id]):
        assert_close(got, want, "exact64")


#: ops that never reach the code generator, and why
NOT_LOWERED = {
    "custom_vjp_call": "inlined by passes.fusion.prepare (its forward region)",
    "checkpoint": "inlined by passes.fusion.prepare (only its VJP differs from its body)",
}


def test_every_case_op_covered():
    covered = {c.op for c in [*CASES, *VJP_CASES]}
    assert covered >= {n for n, d in OPS.items() if n not in NOT_LOWERED and isinstance(d, OpDef)}
