"""Cached machine code loaded without LLVM (``codegen/lean/elf.py``): a warm process
runs programs of every family (kernels calling the math library, copies, BLAS,
LAPACK, FFT, errors by ``longjmp``) from their object files with the same bits as
the process that compiled them and never loads llvmlite's binding; modules loaded
that way and modules MCJIT compiles call each other; objects the loader does not
take go to MCJIT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest

from fusegrad.codegen.lean import elf, engine, symbols

pytestmark = [pytest.mark.compiled,
              pytest.mark.skipif(not elf.supported(), reason="objects MCJIT loads here")]

PROGRAMS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import fusegrad as fg
    import fusegrad.numpy as fnp

    def mlp(w, x):
        h = fnp.tanh(x @ w)
        return fnp.sum(fnp.exp(-h * h) * fnp.log1p(h * h)) + fnp.sum(w.T * 2.0)

    def gp(a, y):
        k = a @ a.T + 3.0 * np.eye(4)
        return fnp.sum(fnp.linalg.solve(k, y)) + fnp.linalg.slogdet(k)[1]

    def spectrum(x):
        return fnp.sum(fnp.abs(fnp.fft.rfft(x)) ** 2)

    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))
    a, y = rng.standard_normal((4, 4)), rng.standard_normal((4, 2))
    out = [fg.grad(mlp)(w, x), fg.grad(gp)(a, y), fg.grad(spectrum)(x[0])]
    try:
        fg.jit(lambda a: fnp.linalg.cholesky(a))(-np.eye(3))
        error = None
    except np.linalg.LinAlgError as e:
        error = str(e)
    json.dump({"out": [o.tobytes().hex() for o in out], "error": error,
               "llvm": "llvmlite.binding" in sys.modules}, sys.stdout)
""")


def _run(cache, **env) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROGRAMS], capture_output=True, text=True,
                          env={**os.environ, "FUSEGRAD_CACHE_DIR": str(cache), **env},
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_warm_process_runs_every_family_without_llvm(tmp_path):
    cold = _run(tmp_path)
    assert cold["llvm"] and cold["error"] == "Matrix is not positive definite"
    warm = _run(tmp_path)
    assert not warm["llvm"], "a warm start loaded llvmlite's binding"
    assert warm["out"] == cold["out"] and warm["error"] == cold["error"]
    # the same objects through MCJIT: the same bits
    assert _run(tmp_path, FUSEGRAD_LOAD_WITH_LLVM="1")["out"] == cold["out"]


def _object(source: str) -> bytes:
    """The machine code of LLVM IR ``source``, as the engine keeps it."""
    llvm = engine._llvm()
    mod = llvm.parse_assembly(source)
    return engine.target_machine().emit_object(mod)


def test_relocated_code_reads_its_constants_and_calls_the_host():
    data = _object(textwrap.dedent("""
        @table = internal constant [3 x double] [double 1.5, double 2.5, double 4.0]
        declare double @cos(double)
        define double @fg_elf_probe(i64 %i, double %x) {
          %p = getelementptr [3 x double], [3 x double]* @table, i64 0, i64 %i
          %t = load double, double* %p
          %c = call double @cos(double %x)
          %r = fmul double %t, %c
          ret double %r
        }
        """))
    import ctypes

    exports = elf.load([data], engine._resolve)
    fn = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64, ctypes.c_double)(
        exports["fg_elf_probe"])
    assert [fn(i, 0.25) for i in range(3)] == [v * np.cos(0.25) for v in (1.5, 2.5, 4.0)]


def test_what_the_loader_does_not_take_is_unloadable():
    with pytest.raises(elf.Unloadable):
        elf.load([b"\x7fELF" + bytes(60)], engine._resolve)
    data = _object("declare double @fg_nowhere(double)\n"
                   "define double @fg_elf_calls_nowhere(double %x) {\n"
                   "  %r = call double @fg_nowhere(double %x)\n  ret double %r\n}\n")
    with pytest.raises(elf.Unloadable, match="fg_nowhere"):
        elf.load([data], engine._resolve)


def _unique() -> str:
    return f"fg_probe_{uuid.uuid4().hex[:12]}"


def _kept(source: str) -> str:
    """A module of IR ``source`` in the disk cache only, as a former process left it."""
    name = "m" + _unique()
    engine._keep_object(name, _object(source))
    return name


def _call(symbol: str, x: float) -> float:
    import ctypes

    return ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(engine.address(symbol))(x)


def test_modules_loaded_both_ways_call_each_other():
    a, b, c = _unique(), _unique(), _unique()
    # ``a`` loaded without LLVM; ``b`` compiled by MCJIT calls it; ``c``, loaded without
    # LLVM, calls ``b``
    assert engine.load_objects([_kept(
        f"define double @{a}(double %x) {{\n  %r = fmul double %x, 3.0\n  ret double %r\n}}\n")])
    assert symbols.address(a)
    engine.add(f"declare double @{a}(double)\n"
               f"define double @{b}(double %x) {{\n  %y = call double @{a}(double %x)\n"
               f"  %r = fadd double %y, 1.0\n  ret double %r\n}}\n", "m" + b)
    assert engine.load_objects([_kept(
        f"declare double @{b}(double)\n"
        f"define double @{c}(double %x) {{\n  %y = call double @{b}(double %x)\n"
        f"  %r = fmul double %y, %y\n  ret double %r\n}}\n")])
    assert symbols.address(c)
    assert _call(b, 2.0) == 7.0 and _call(c, 2.0) == 49.0


def test_a_batch_the_loader_refuses_goes_to_mcjit(monkeypatch):
    def refuse(objects, resolve):
        raise elf.Unloadable("refused")

    monkeypatch.setattr(elf, "load", refuse)
    f = _unique()
    assert engine.load_objects([_kept(
        f"define double @{f}(double %x) {{\n  %r = fsub double %x, 0.5\n  ret double %r\n}}\n")])
    assert symbols.address(f) is None  # MCJIT's, not the loader's
    assert _call(f, 2.0) == 1.5
