"""Messages for common mistakes say what to do, and tracebacks show the user's frames.

A list argument is a pytree of scalars; ``x[0] = v`` on a traced array points to
``x.at[0].set(v)``; a tuple returned to ``grad`` points to ``has_aux=True``;
keyword arguments are not differentiated; a traced boolean mask gives one
message. Errors raised through the transforms carry none of fusegrad's frames
unless ``FUSEGRAD_TRACEBACK_FILTERING=off``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import traceback

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir.errors import TracerError

PKG = os.path.dirname(os.path.abspath(fg.__file__))


def _fusegrad_frames(err: BaseException) -> int:
    return sum(fr.filename.startswith(PKG) for fr in traceback.extract_tb(err.__traceback__))


def test_a_list_argument_is_explained_as_a_pytree_of_scalars():
    with pytest.raises(TypeError, match=r"argument 0 is a Python list.*pytree of 3 separate "
                                        r"scalars.*np\.asarray"):
        fg.grad(lambda x: fnp.sum(x ** 2))([1.0, 2.0, 3.0])
    # x * 2 repeats the list, and fnp.sum of a list of traced scalars is their sum: the
    # function Python defines, differentiated exactly
    assert fg.grad(lambda x: fnp.sum(x * 2))([1.0, 2.0, 3.0]) == [2.0, 2.0, 2.0]


def test_item_assignment_on_a_traced_array_points_to_at_set():
    def f(x):
        x[0] = 1.0
        return fnp.sum(x)

    with pytest.raises(TypeError, match=r"immutable: x\[0\] = \.\.\..*x = x\.at\[0\]\.set"):
        fg.grad(f)(np.ones(3))
    assert fg.grad(lambda x: fnp.sum(x.at[0].set(1.0) * x))(np.ones(3)).tolist() == [1, 2, 2]


def test_a_tuple_returned_to_grad_points_to_has_aux():
    with pytest.raises(TypeError, match=r"got tuple\(\*, \*\)\. If the other values are "
                                        r"auxiliary outputs.*has_aux=True"):
        fg.grad(lambda x: (fnp.sum(x), x))(np.ones(3))


def test_keyword_arguments_are_not_differentiated():
    with pytest.raises(TypeError, match=r"keyword argument\(s\) x\. Differentiated arguments "
                                        r"must be passed positionally"):
        fg.grad(lambda x: fnp.sum(x))(x=np.ones(3))


def test_a_traced_boolean_mask_gives_one_message():
    with pytest.raises(TracerError) as info:
        fg.jit(fg.grad(lambda x: fnp.sum(x[x > 0])))(np.ones(3))
    msg = str(info.value)
    assert msg.startswith("boolean-mask indexing with a traced mask (a traced bool[3] at ")
    assert "fnp.where(mask, x, 0)" in msg and "Python control flow" not in msg


@pytest.mark.parametrize("call", [
    lambda: fg.jit(fg.grad(lambda x: fnp.sum(x[x > 0])))(np.ones(3)),
    lambda: fg.jit(lambda x: x + np.ones(4))(np.ones(3)),
    lambda: fg.vmap(lambda x: fnp.sum(x) if x > 0 else x)(np.ones(3)),
    lambda: fg.jvp(lambda x: x @ x, (np.ones((2, 3)),), (np.ones((2, 3)),)),
    lambda: fg.grad(lambda x: 1 / 0)(1.0),
])
def test_tracebacks_hide_fusegrads_frames(call):
    with pytest.raises(Exception) as info:
        call()
    assert _fusegrad_frames(info.value) == 0
    assert any("FUSEGRAD_TRACEBACK_FILTERING=off" in n for n in info.value.__notes__)


def test_filtering_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(config, "TRACEBACK_FILTERING", False)
    with pytest.raises(TracerError) as info:
        fg.jit(fg.grad(lambda x: fnp.sum(x[x > 0])))(np.ones(3))
    assert _fusegrad_frames(info.value) > 3


def test_the_environment_variable_turns_it_off():
    code = textwrap.dedent("""
        from fusegrad import config
        print(config.TRACEBACK_FILTERING)
    """)
    out = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, FUSEGRAD_TRACEBACK_FILTERING=v)).stdout.strip()
           for v in ("off", "1")]
    assert out == ["False", "True"]
