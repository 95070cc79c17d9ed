"""``FUSEGRAD_DEBUG_NANS`` / ``fg.debug_nans``: a non-finite result of a compiled (or
interpreted) call names the first op that produced it, its IR and the user's line;
adjoint ops carry the location of the primal op they differentiate."""

from __future__ import annotations

import inspect
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.cli import main as cli_main
from fusegrad.transforms.plan import vjp_pass


@pytest.fixture
def nans_on(monkeypatch):
    monkeypatch.setattr(config, "DEBUG_NANS", True)


def _line(fn, marker: str) -> str:
    """``file:line`` of the first line of ``fn`` containing ``marker``."""
    src, start = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(src) if marker in s)
    return f"{inspect.getsourcefile(fn)}:{start + k}"


def root_loss(x):
    y = fnp.sqrt(x)  # marker: sqrt
    return fnp.sum(y * 2.0)


def log_shift(x):
    z = x - 1.0
    return fnp.sum(fnp.log(z))  # marker: log


@pytest.mark.compiled
def test_compiled_grad_names_adjoint_op_and_primal_line(nans_on):
    with pytest.raises(FloatingPointError) as info:
        fg.grad(root_loss)(np.array([1.0, 0.0, 4.0]))
    msg = str(info.value)
    assert "@root_loss_grad returned inf in result 1" in msg
    assert "reverse-mode (adjoint)" in msg
    assert " = div " in msg  # d sqrt(x) = g * 0.5 / sqrt(x)
    assert _line(root_loss, "marker: sqrt") in msg
    assert "y = fnp.sqrt(x)" in msg
    assert "numba" not in msg.lower()


@pytest.mark.compiled
def test_compiled_forward_nan_names_op_and_line(nans_on):
    f = fg.jit(log_shift)
    with pytest.raises(FloatingPointError) as info:
        f(np.array([2.0, 0.5, 4.0]))
    msg = str(info.value)
    assert "@log_shift returned nan in result 0 (f64[])" in msg
    assert "forward computation" in msg
    assert " = log " in msg
    assert _line(log_shift, "marker: log") in msg


@pytest.mark.compiled
def test_fast_path_of_grad_is_checked(nans_on):
    df = fg.grad(root_loss)
    np.testing.assert_allclose(df(np.array([1.0, 4.0, 9.0])), [1.0, 0.5, 1 / 3])
    with pytest.raises(FloatingPointError, match="reverse-mode"):
        df(np.array([1.0, 0.0, 9.0]))  # same signature: the cached fast path


@pytest.mark.compiled
def test_off_returns_non_finite_values():
    assert not config.DEBUG_NANS
    g = fg.grad(root_loss)(np.array([1.0, 0.0]))
    assert np.isinf(g[1])


@pytest.mark.compiled
def test_finite_results_unchanged(nans_on):
    x = np.array([0.5, 2.0, 3.0])
    g = fg.grad(log_shift)(x + 1.0)
    np.testing.assert_allclose(g, 1.0 / x, rtol=1e-15)


@pytest.mark.interpreted  # the interpreter's own behaviour
def test_interpreter_path_is_checked_too(nans_on):
    assert config.DISABLE_JIT
    with pytest.raises(FloatingPointError, match="forward computation"):
        fg.jit(log_shift)(np.array([0.0, 3.0]))


def test_nan_argument_is_reported_as_such(nans_on):
    with pytest.raises(FloatingPointError) as info:
        fg.jit(log_shift)(np.array([np.nan, 3.0]))
    assert "argument %x (f64[2]) already holds nan" in str(info.value)


def test_context_manager_restores(monkeypatch):
    monkeypatch.setattr(config, "DEBUG_NANS", False)
    with fg.debug_nans():
        assert config.DEBUG_NANS
        with pytest.raises(FloatingPointError):
            fg.jit(log_shift)(np.array([0.0, 3.0]))
    assert not config.DEBUG_NANS
    out = fg.jit(log_shift)(np.array([0.0, 3.0]))
    assert np.isnan(out)
    fg.debug_nans(True)  # a plain call sets it (monkeypatch restores it afterwards)
    assert config.DEBUG_NANS


def test_jvp_tangent_ops_point_at_primal_line(nans_on):
    with pytest.raises(FloatingPointError) as info:
        fg.jvp(root_loss, (np.array([0.0, 1.0]),), (np.array([1.0, 1.0]),))
    msg = str(info.value)
    assert "inf" in msg
    assert _line(root_loss, "marker: sqrt") in msg


def _loop_body(i, c):
    return c * fnp.log(c - 1.0)  # marker: body


def looped(x):
    return fnp.sum(fg.fori_loop(0, 2, _loop_body, x))  # marker: loop


@pytest.mark.parametrize("transform", ["jit", "grad"])
def test_control_flow_op_and_the_op_inside_it(nans_on, transform):
    f = fg.jit(looped) if transform == "jit" else fg.grad(looped)
    with pytest.raises(FloatingPointError) as info:
        f(np.array([3.0, 1.5 if transform == "grad" else 1.0]))
    msg = str(info.value)
    outer, _, inner = msg.partition("inside it, ")
    assert " = scan " in outer and _line(looped, "marker: loop") in outer
    assert " = log " in inner and _line(_loop_body, "marker: body") in inner


def test_env_var_turns_it_on(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import numpy as np, fusegrad as fg, fusegrad.numpy as fnp\n"
        "def f(x):\n"
        "    return fnp.sum(fnp.log(x))\n"
        "try:\n"
        "    fg.jit(f)(np.array([-1.0]))\n"
        "except FloatingPointError as e:\n"
        "    print('RAISED', e)\n"
    )
    env = dict(os.environ, FUSEGRAD_DEBUG_NANS="1", FUSEGRAD_DISABLE_JIT="1",
               PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert "RAISED" in out.stdout, out.stderr
    assert f"{script}:3" in out.stdout


def test_adjoint_ops_carry_primal_locations():
    fn = fg.make_ir(root_loss)(np.ones(3))
    g = vjp_pass(fn, [0], seeds=(0,))
    user_lines = {op.loc for op in fn.ops if op.loc}
    adjoint_locs = {op.loc for op in g.ops[len(fn.ops):] if op.loc}
    assert adjoint_locs and adjoint_locs <= user_lines
    assert _line(root_loss, "marker: sqrt") in adjoint_locs


def test_dump_locs():
    buf = io.StringIO()
    fg.dump(root_loss, np.ones(3), stage="grad", locs=True, file=buf)
    text = buf.getvalue()
    sqrt_loc = _line(root_loss, "marker: sqrt")
    div_lines = [ln for ln in text.splitlines() if " = div " in ln]
    assert div_lines and all(f'loc("{sqrt_loc}")' in ln for ln in div_lines)
    plain = io.StringIO()
    fg.dump(root_loss, np.ones(3), stage="grad", file=plain)
    assert "loc(" not in plain.getvalue()


def test_cli_dump_locs(tmp_path, capsys):
    src = tmp_path / "model.py"
    src.write_text("import fusegrad.numpy as fnp\n"
                   "def f(x):\n"
                   "    return fnp.sum(fnp.exp(x))\n")
    assert cli_main(["dump", f"{src}:f", "--arg", "f64[4]", "--grad", "--stage", "grad",
                     "--locs"]) == 0
    out = capsys.readouterr().out
    assert f'loc("{src}:3")' in out
