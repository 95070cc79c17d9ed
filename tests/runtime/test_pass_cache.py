"""The pass cache's names and entries (``runtime/pass_cache.py``): a program's
fingerprint (``ir/fingerprint.py``) changes whenever its text does, programs are kept
as tables (``ir/serial.py``) that read back to the same text and sharing, reverse
mode's result is kept and found again by a new process, and is not used for another
function; a damaged entry is made again. The sources' digests the salts hold
(``_sources.py``) follow every edit."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import _sources
from fusegrad.ir import Builder, TensorType
from fusegrad.ir.fingerprint import fingerprint
from fusegrad.ir.printer import print_function
from fusegrad.ir.serial import decode, encode
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import lean_exec
from fusegrad.tracer import trace
from tests.helpers import damage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _program(c: float = 2.0, axis: int = 0):
    def f(x):
        y = fnp.sin(x) * c + x[1:].sum()
        return fg.cond(y.sum() > 0.0, lambda v: fnp.sum(v * v, axis=axis),
                       lambda v: fnp.sum(fnp.cos(v), axis=axis), y)
    return trace(f, np.ones((4, 3)))


def test_the_fingerprint_follows_the_text():
    base = _program()
    assert fingerprint(base) == fingerprint(_program())  # the same program, traced again
    # a constant, an attribute, a type, a source location: each changes the text
    assert fingerprint(_program(c=2.5)) != fingerprint(base)
    assert fingerprint(_program(axis=1)) != fingerprint(base)
    assert fingerprint(trace(lambda x: fnp.sin(x), np.ones(3))) != fingerprint(
        trace(lambda x: fnp.sin(x), np.ones(4)))
    assert fingerprint(trace(lambda x: fnp.sin(x), np.ones(3, np.float32))) != fingerprint(
        trace(lambda x: fnp.sin(x), np.ones(3)))
    f1 = trace(lambda x: fnp.sin(x), np.ones(3))
    f2 = trace(lambda x: fnp.sin(x), np.ones(3))  # another line
    assert print_function(f1) == print_function(f2)
    assert print_function(f1, locs=True) != print_function(f2, locs=True)
    assert fingerprint(f1) != fingerprint(f2)
    assert fingerprint(f1, locs=False) == fingerprint(f2, locs=False)
    assert fingerprint(base, salt="a") != fingerprint(base, salt="b")


def _one_op(**attrs):
    b = Builder("f")
    x = b.param(TensorType((3,), np.float64), "x")
    (y,) = b.emit("mul", (x, x), attrs, (TensorType((3,), np.float64),))
    return b.build([y])


def test_attribute_kinds_are_told_apart_as_the_text_does():
    prints = {}
    for v in (1, 1.0, True, "1", None, (1,), (1.0,), np.float32(0.1), np.int64(1),
              float("nan"), -0.0, 0.0, 1j):
        fn = _one_op(a=v)
        prints.setdefault(print_function(fn), set()).add(fingerprint(fn))
    # never one fingerprint for two texts
    seen = [fp for fps in prints.values() for fp in fps]
    assert len(seen) == len(set(seen))
    assert fingerprint(_one_op(a=1, b=2)) == fingerprint(_one_op(b=2, a=1))  # sorted keys
    assert fingerprint(_one_op(a=np.zeros(2))) is None  # no text form: no entry


def test_invalid_ir_has_no_fingerprint():
    b = Builder("f")
    x = b.param(TensorType((3,), np.float64), "x")
    stray = Builder("g").param(TensorType((3,), np.float64))
    (y,) = b.emit("add", (x, stray), {}, (TensorType((3,), np.float64),))
    assert fingerprint(b.build([y])) is None


def test_tables_read_back_the_same_program_and_sharing():
    fused = fuse(simplify(_program()))
    plan = lean_exec.segments(fused)
    form = pickle.loads(pickle.dumps(encode([fused, *plan])))
    back, *steps = decode(form)
    assert print_function(back, locs=True) == print_function(fused, locs=True)
    assert fingerprint(back) == fingerprint(fused)
    ops = set(map(id, back.ops))
    for step, original in zip(steps, plan):
        assert type(step) is type(original)
        inner = step.ops if hasattr(step, "ops") else (step,)
        assert all(id(op) in ops for op in inner)  # the segments' ops are the program's
    with pytest.raises(ValueError):
        decode((99, *form[1:]))


def test_sources_digest_follows_edits(tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "sub").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("A = 1\n")
    (src / "pkg" / "sub" / "b.py").write_text("B = 1\n")
    memo = tmp_path / "memo"
    memo.mkdir()
    first = _sources.digest(str(src), ("pkg",), memo=str(memo))
    assert first == _sources.digest(str(src), ("pkg",))  # kept, the same value
    assert list(memo.glob("sources_*.txt"))
    assert _sources.digest(str(src), ("pkg",), memo=str(memo)) == first  # read back
    (src / "pkg" / "sub" / "b.py").write_text("B = 2\n")
    second = _sources.digest(str(src), ("pkg",), memo=str(memo))
    assert second != first and second == _sources.digest(str(src), ("pkg",))
    (src / "pkg" / "c.py").write_text("")
    assert _sources.digest(str(src), ("pkg",), memo=str(memo)) != second


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import fusegrad as fg
    from fusegrad.transforms import plan
    made = []
    real = plan._vjp_pass
    plan._vjp_pass = lambda *a, **k: (made.append(1), real(*a, **k))[1]
    C = float(sys.argv[1])
    f = lambda x: C * (x[1] - x[0] ** 2) ** 2 + (1.0 - x[0]) ** 2
    g = fg.grad(f)(np.array([0.5, -0.3]))
    print(json.dumps({"grad": g.tolist(), "made": len(made)}))
""")


def _run(cache, c: float) -> dict:
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    env.pop("FUSEGRAD_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, "-c", _CHILD, repr(c)], env=env,
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _expected(c: float) -> list[float]:
    x0, x1 = 0.5, -0.3
    return [-4.0 * c * x0 * (x1 - x0 ** 2) - 2.0 * (1.0 - x0), 2.0 * c * (x1 - x0 ** 2)]


@pytest.mark.compiled
def test_reverse_mode_is_kept_and_changes_with_the_function(tmp_path):
    cold = _run(tmp_path, 100.0)
    assert cold["made"] == 1 and list((tmp_path / "lean").glob("vjp_*.pkl"))
    warm = _run(tmp_path, 100.0)
    assert warm["made"] == 0 and warm["grad"] == cold["grad"]  # read back, the same bits
    np.testing.assert_allclose(warm["grad"], _expected(100.0), rtol=1e-13)
    other = _run(tmp_path, 10.0)  # another constant: another program, made again
    assert other["made"] == 1
    np.testing.assert_allclose(other["grad"], _expected(10.0), rtol=1e-13)
    for path in (tmp_path / "lean").glob("vjp_*.pkl"):
        damage(path)
    again = _run(tmp_path, 100.0)  # a damaged entry: made again, never a wrong answer
    assert again["made"] == 1 and again["grad"] == cold["grad"]
