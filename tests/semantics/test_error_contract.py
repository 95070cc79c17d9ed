"""SEMANTICS.md "Errors" as a table: one row per user mistake, run through the
functional API (NumPy interpreter and compiled) and the eager Tensor API.

Each row checks the exception type, that the message names the op, the
argument(s) and the shapes (and, for traced functions, the user's line), and
that neither the traceback nor the exception chain shows Numba frames or a bare
NumPy error. ``test_errors.py`` covers the messages' advice in more detail.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from tests.semantics.test_errors import LEAKS

HERE = __file__
A3, A4 = np.ones(3), np.ones(4)
M23, M45 = np.ones((2, 3)), np.ones((4, 5))


@dataclass
class Case:
    id: str
    call: object  # () -> None, expected to raise
    exc: type
    contains: tuple[str, ...]
    line: str | None = None  # a marker on the user's line the message must point at
    tags: tuple[str, ...] = field(default=())


def _lineno(marker: str) -> int:
    with open(HERE) as f:
        for i, text in enumerate(f, 1):
            if marker in text and '"' + marker not in text:
                return i
    raise AssertionError(f"no line with {marker!r}")


# --- the user functions (each mistake on a line with a marker comment) ----------------


def add_mismatch(x, y):
    return x + y  # E-add


def matmul_mismatch(x, y):
    return x @ y  # E-matmul


def bad_axis(x):
    return fnp.sum(x, axis=3)  # E-axis


def bad_concat(x, y):
    return fnp.concatenate([x, y], axis=0)  # E-concat


def bad_reshape(x):
    return fnp.reshape(x, (4,))  # E-reshape


def static_index(x):
    return x[5] * 2.0  # E-static-index


def dynamic_index(x, i):
    return x[i] * 2.0  # E-dynamic-index


def vector_loss(x):
    return x * 2.0


def branchy(x):
    if fnp.sum(x) > 0:  # E-branch
        return x
    return -x


def loss(x):
    return fnp.sum(x * x)


FUNCTIONAL = [
    Case("add-shapes", lambda: fg.jit(add_mismatch)(A3, A4), fg.ShapeError,
         ("add", "(3,)", "(4,)", "%x: f64[3]", "%y: f64[4]", "@add_mismatch"), "E-add"),
    Case("grad-add-shapes", lambda: fg.grad(lambda x, y: fnp.sum(add_mismatch(x, y)))(A3, A4),
         fg.ShapeError, ("add", "(3,)", "(4,)"), "E-add"),
    Case("matmul-shapes", lambda: fg.jit(matmul_mismatch)(M23, M45), fg.ShapeError,
         ("matmul", "(2, 3)", "(4, 5)", "3", "4"), "E-matmul"),
    Case("reduce-bad-axis", lambda: fg.jit(bad_axis)(M23), fg.ShapeError,
         ("reduce_sum", "axis 3", "rank 2"), "E-axis"),
    Case("concatenate-shapes", lambda: fg.jit(bad_concat)(M23, M45), fg.ShapeError,
         ("concatenate", "f64[2,3]", "f64[4,5]", "%x", "%y"), "E-concat"),
    Case("reshape-size", lambda: fg.jit(bad_reshape)(M23), fg.ShapeError,
         ("reshape", "f64[2,3]", "(4,)", "%x"), "E-reshape"),
    Case("static-index", lambda: fg.jit(static_index)(A3), IndexError,
         ("index 5", "axis 0", "size 3"), "E-static-index"),
    Case("runtime-index", lambda: fg.jit(dynamic_index)(A3, np.int64(7)), IndexError,
         ("take", "index 7", "size 3", "@dynamic_index"), "E-dynamic-index"),
    Case("grad-non-scalar", lambda: fg.grad(vector_loss)(A3), fg.GradError,
         ("grad", "scalar", "f64[3]", ".sum()")),
    Case("grad-argnums", lambda: fg.grad(loss, argnums=2)(A3), fg.GradError,
         ("argnums=2", "1 positional argument")),
    Case("grad-int-input", lambda: fg.grad(loss)(np.arange(3)), fg.GradError,
         ("argument 0", "int64", "floating-point")),
    Case("vjp-cotangent-shape", lambda: fg.vjp(vector_loss, A3)[1](A4), fg.GradError,
         ("cotangent", "(4,)", "(3,)")),
    Case("jvp-tangent-shape", lambda: fg.jvp(vector_loss, (A3,), (A4,)), fg.GradError,
         ("jvp", "tangent of argument 0", "(4,)", "(3,)")),
    Case("vmap-sizes", lambda: fg.vmap(add_mismatch)(A3, A4), fg.BatchingError,
         ("vmap(add_mismatch)", "`x` of shape (3,)", "`y` of shape (4,)", "size 3", "size 4")),
    Case("control-flow-on-tracer", lambda: fg.jit(branchy)(A3), fg.TracerError,
         ("cond",), "E-branch"),
    Case("jit-grad-tensor", lambda: fg.jit(loss)(fg.tensor(A3, requires_grad=True)),
         fg.GradError, ("fg.jit(loss)", "requires grad", "(3,)")),
    Case("static-unhashable", lambda: fg.jit(lambda x, s: x, static_argnums=1)(A3, [1]),
         TypeError, ("static", "hashable")),
]


def _backward_twice():
    y = fg.tensor(A3, requires_grad=True).exp().sum()
    y.backward()
    y.backward()


def _inplace_needed():
    x = fg.tensor(A3, requires_grad=True).exp()
    y = x.exp()
    x.mul_(2.0)
    y.sum().backward()


def _grad_unused():
    a, b = fg.tensor(A3, requires_grad=True), fg.tensor(A3, requires_grad=True)
    fg.autograd.grad((a * 2.0).sum(), [b])


EAGER = [
    Case("add-shapes", lambda: fg.tensor(A3) + fg.tensor(A4), fg.ShapeError,
         ("add", "(3,)", "(4,)")),
    Case("matmul-shapes", lambda: fg.tensor(M23) @ fg.tensor(M45), fg.ShapeError,
         ("matmul", "f64[2,3]", "f64[4,5]", "3 != 4")),
    Case("sum-bad-dim", lambda: fg.tensor(M23).sum(dim=3), fg.ShapeError,
         ("reduce_sum", "axis 3", "rank 2")),
    Case("cat-shapes", lambda: fg.cat([fg.tensor(M23), fg.tensor(M45)]), fg.ShapeError,
         ("concatenate", "f64[2,3]", "f64[4,5]")),
    Case("reshape-size", lambda: fg.tensor(M23).reshape(4), RuntimeError, ("[4]", "size 6")),
    Case("index", lambda: fg.tensor(A3)[5], IndexError, ("index 5", "dimension 0", "size 3")),
    Case("backward-non-scalar", lambda: (fg.tensor(A3, requires_grad=True) * 2).backward(),
         RuntimeError, ("scalar outputs", "output 0", "[3]")),
    Case("backward-gradient-shape",
         lambda: (fg.tensor(A3, requires_grad=True) * 2).backward(fg.tensor(A4)),
         RuntimeError, ("grad_output[0]", "[4]", "[3]")),
    Case("backward-twice", _backward_twice, RuntimeError, ("second time", "retain_graph=True")),
    Case("inplace-on-leaf", lambda: fg.tensor(A3, requires_grad=True).add_(1.0), RuntimeError,
         ("leaf", "in-place", "add_", "[3]")),
    Case("inplace-on-saved", _inplace_needed, RuntimeError,
         ("modified by an inplace operation", "ExpBackward0", "[3]", "version 1")),
    Case("int-requires-grad", lambda: fg.tensor([1, 2], requires_grad=True), RuntimeError,
         ("floating point", "int64")),
    Case("backward-without-grad", lambda: fg.tensor(A3).sum().backward(), RuntimeError,
         ("element 0", "does not require grad")),
    Case("grad-unused-input", _grad_unused, RuntimeError, ("not have been used", "allow_unused")),
]


def _check(case: Case, info) -> None:
    err = info.value
    assert type(err) is case.exc or isinstance(err, case.exc), type(err)
    msg = str(err)
    for part in case.contains:
        assert part in msg, f"{part!r} not in message: {msg}"
    for leak in LEAKS:
        assert leak not in msg.lower(), f"{leak!r} leaked into message: {msg}"
    if case.line is not None:
        assert f"{HERE}:{_lineno(case.line)}" in msg, msg
    frames = traceback.extract_tb(err.__traceback__)
    assert not [f for f in frames if "numba" in f.filename or "/fg_" in f.filename], frames
    # no bare NumPy (or Numba) error underneath, shown as "during handling of..."
    chained = err.__cause__ or (None if err.__suppress_context__ else err.__context__)
    while chained is not None:
        assert isinstance(chained, fg.FusegradError), repr(chained)
        chained = chained.__cause__ or (
            None if chained.__suppress_context__ else chained.__context__)


@pytest.mark.parametrize("jit", [False, True], ids=["interpreter", "compiled"])
@pytest.mark.parametrize("case", FUNCTIONAL, ids=[c.id for c in FUNCTIONAL])
def test_functional(case, jit, monkeypatch):
    monkeypatch.setattr(config, "DISABLE_JIT", not jit)
    with pytest.raises(case.exc) as info:
        case.call()
    _check(case, info)


@pytest.mark.parametrize("case", EAGER, ids=[c.id for c in EAGER])
def test_eager(case):
    with pytest.raises(case.exc) as info:
        case.call()
    _check(case, info)

