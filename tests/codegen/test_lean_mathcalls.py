"""How kernels call the math library (``codegen.lean.mathcalls``): inlined into a small
kernel, through shared vector variants in a kernel with many calls. Both forms must
give the same bits, and the second must keep the kernel's IR small."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
import fusegrad.scipy.special as special
from fusegrad.codegen.lean import engine, mathcalls, mathlib_ir
from fusegrad.codegen.lean.kernel import PLACEHOLDER, build
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import compiled
from tests.helpers import assert_close, interpreted

pytestmark = pytest.mark.compiled


def every_function(x):
    """Each of the library's functions once (arguments inside their domains), and the
    gradient's calls on top: far more calls than a kernel inlines."""
    u = 0.5 * fnp.tanh(x)  # in (-0.5, 0.5)
    terms = [fnp.exp(u), fnp.expm1(u), fnp.exp2(u), fnp.log(2 + u), fnp.log1p(u),
             fnp.log2(2 + u), fnp.log10(2 + u), fnp.sin(x), fnp.cos(x), fnp.tan(u),
             fnp.arctan(x), fnp.arcsin(u), fnp.arccos(u), fnp.sinh(u), fnp.cosh(u),
             fnp.arcsinh(x), fnp.arccosh(2 + u), fnp.arctanh(u), fnp.cbrt(2 + u),
             fnp.power(2 + u, 1.5 + u), fnp.arctan2(u, 1 + x * x), special.expit(x),
             special.erf(u), fnp.sqrt(2 + u)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return fnp.sum(total * total)


def _fused_kernel(f, x):
    fn = fg.make_ir(fg.grad(f))(x)
    return next(o for o in fuse(simplify(fn)).ops if o.name == "fused"), fn


def _optimised(text: str) -> str:
    mod = engine._llvm().parse_assembly(text.replace(PLACEHOLDER, "k_test"))
    if "cfunc." in text:
        mathlib_ir.link_into(mod)
    engine._optimise(mod, 2)
    return str(mod.get_function("k_test"))


def _compiled_with(monkeypatch, inline_calls: int, fn, *args):
    monkeypatch.setattr(mathcalls, "INLINE_CALLS", inline_calls)
    return compiled._build(fn, "test")(*args)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vector_calls_and_inlined_library_give_the_same_bits(monkeypatch, dtype):
    x = np.linspace(-1.7, 1.9, 1003).astype(dtype)  # a remainder after the vector loop
    _, fn = _fused_kernel(every_function, x)
    inlined = _compiled_with(monkeypatch, 10**6, fn, x)
    vector = _compiled_with(monkeypatch, 0, fn, x)
    for a, b in zip(inlined, vector):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    ref = interpreted(fg.grad(every_function), x)
    assert_close(vector[0], ref, "f32" if dtype == np.float32 else "exact64")


def test_a_kernel_with_many_calls_calls_the_vector_variants():
    """Over ``INLINE_CALLS`` calls, the vectorised loop calls ``fgv<W>.`` functions and
    holds none of the library's code; under it, the library is inlined (no calls)."""
    x = np.linspace(-1.0, 1.0, 4096)
    op, _ = _fused_kernel(every_function, x)
    text = mathcalls.prepare(build(op)[0])
    kernel = _optimised(text)
    vector_calls = re.findall(r"call <(\d+) x double> @\"?fgv\1\.(\w+)\.float64\.fast", kernel)
    assert {"exp", "sin", "cos", "log1p", "pow", "atan2"} <= {n for _, n in vector_calls}
    inlined = _optimised(mathcalls.prepare(build(_fused_kernel(
        lambda v: fnp.sum(fnp.exp(v) * fnp.log1p(v * v)), x)[0])[0]))
    assert "fgv" not in inlined and "fgm." not in inlined
    assert len(kernel) < len(inlined) * 20  # the 40-odd calls' code is not in the kernel


def test_rare_inputs_in_a_vector_call_kernel_take_the_exact_path(monkeypatch):
    monkeypatch.setattr(mathcalls, "INLINE_CALLS", 0)
    x = np.array([0.5, 3.0e8, -1.0e9, 2.0, 1e-3, 7.0, -2.5, 0.0, 1.0])
    got = fg.grad(lambda v: fnp.sum(fnp.sin(v) * fnp.cos(v) + fnp.exp(-v * v)))(x)
    assert_close(got, np.cos(2 * x) - 2 * x * np.exp(-x * x), "exact64")


def test_a_new_process_loads_a_vector_call_program_from_its_manifest(tmp_path):
    """The program's machine code calls the shared vector variants: a warm process loads
    their runtime modules before the program's (else the load fails on a missing
    symbol) and gives the same numbers."""
    code = (
        "import numpy as np, fusegrad as fg, fusegrad.numpy as fnp\n"
        "from fusegrad.codegen.lean import engine\n"
        "def f(v):\n"
        "    for _ in range(6):\n"
        "        v = fnp.sin(v) + fnp.exp(-v * v) * fnp.cos(v)\n"
        "    return fnp.sum(v)\n"
        "g = fg.grad(f)(np.linspace(-2, 2, 999))\n"
        "print(g.tobytes().hex()[:64], sum(g), engine.stats()['compiled'])\n")
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    assert runs[0][:2] == runs[1][:2]
    assert int(runs[1][2]) == 0  # nothing compiled: loaded by the manifest
    text = b"".join(p.read_bytes() for p in (tmp_path / "lean").glob("*.json"))
    assert b"sin.float64.fast" in text  # the manifest names the library functions needed
