"""Kernels equal in all but their values' names are built once per process
(``codegen.lean.kernel_key``): a model's repeated layers emit each kernel's IR once."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen import lean
from fusegrad.codegen.lean import kernel
from tests.helpers import interpreted

pytestmark = pytest.mark.compiled


def _layers(scale_second: float):
    def f(x, w1, w2, w3):
        h = fnp.tanh(x @ w1) * 1.5 + fnp.sin(x @ w1)
        h = fnp.tanh(h @ w2) * scale_second + fnp.sin(h @ w2)
        return h @ w3
    return f


def _built(monkeypatch, f, *args):
    calls = []
    real = kernel.build

    def spy(op, chunked=False):
        calls.append(op)
        return real(op, chunked)

    monkeypatch.setattr(lean, "build", spy)
    lean._built.clear()
    got = fg.jit(f)(*args)
    return calls, got


def test_repeated_layers_build_each_kernel_once(monkeypatch):
    rng = np.random.default_rng(0)
    x, w1, w2, w3 = (rng.standard_normal((4, 4)) for _ in range(4))
    same, got = _built(monkeypatch, _layers(1.5), x, w1, w2, w3)
    other, _ = _built(monkeypatch, _layers(2.5), x, w1, w2, w3)
    assert (len(same), len(other)) == (1, 2)  # the second layer's kernel was the first's
    np.testing.assert_allclose(got, interpreted(fg.jit(_layers(1.5)), x, w1, w2, w3),
                               rtol=1e-13, atol=1e-14)


def test_key_tells_apart_constants_structure_and_chunking():
    def kernels(f, *args):
        fused = fg.make_ir(f)(*args)
        from fusegrad.passes.fusion import fuse
        from fusegrad.passes.simplify import simplify

        return [op for op in fuse(simplify(fused)).ops if op.name == "fused"]

    (a,) = kernels(lambda x: fnp.sin(x) * 2.0, np.ones(50))
    (b,) = kernels(lambda y: fnp.sin(y) * 2.0, np.ones(50))
    (c,) = kernels(lambda x: fnp.sin(x) * 3.0, np.ones(50))
    (d,) = kernels(lambda x: fnp.sin(x) * 2.0, np.ones((50, 1)))
    (e,) = kernels(lambda x: fnp.sin(x) * 2.0, np.ones(60))  # extents are read at run time
    (f,) = kernels(lambda x: fnp.sin(x) * 2.0, np.ones(6))  # a tiny kernel's are constants
    assert lean.kernel_key(a, False) == lean.kernel_key(b, False) == lean.kernel_key(e, False)
    assert lean._kernel(a, False)[2] == lean._kernel(e, False)[2]
    assert len({lean.kernel_key(a, False), lean.kernel_key(c, False), lean.kernel_key(d, False),
                lean.kernel_key(a, True), lean.kernel_key(f, False)}) == 5
