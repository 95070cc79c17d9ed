"""The ``fusegrad`` command: ``dump`` prints parseable IR per stage, bad input exits 2.

Each case runs both as a subprocess (``python -m fusegrad.cli``, what a user
types) and in-process through ``fusegrad.cli.main`` (fast, and what coverage
sees).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fusegrad
from fusegrad.cli import main
from fusegrad.ir.parser import parse_function
from fusegrad.ir.verifier import verify
from fusegrad.transforms.inspection import STAGES
from tests.ir.test_printer_parser import GOLDEN

ROOT = Path(fusegrad.__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "f.py")
HEADER = re.compile(r"^// ---- stage: (\w+) \((\d+\.\d+) ms\) ----$", re.MULTILINE)


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "fusegrad.cli", *argv],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )


def stage_blocks(out: str) -> dict[str, str]:
    """``{stage name: IR text}`` from ``dump`` output, split on the header lines."""
    names = HEADER.findall(out)
    texts = HEADER.split(out)[0::3]
    assert texts[0] == "", f"output before the first header: {texts[0]!r}"
    blocks = {name: text.strip() for (name, _), text in zip(names, texts[1:])}
    assert len(blocks) == len(names), f"a stage printed twice: {names}"
    return blocks


def check_blocks(out: str, expected_stages) -> dict[str, str]:
    blocks = stage_blocks(out)
    assert list(blocks) == list(expected_stages)
    for name, text in blocks.items():
        if name == "source":
            # LLVM IR: an entry and its kernels
            assert text.startswith("; ModuleID") and 'define i8* @"e_' in text
            continue
        fn = parse_function(text)
        verify(fn)
        assert str(fn) == text, f"stage {name} does not print back identically"
    return blocks


TRACED_F = GOLDEN  # examples/f.py traces to the golden IR of the printer tests


def _check_grad_dump(out: str) -> None:
    blocks = check_blocks(out, STAGES)
    assert blocks["traced"] == TRACED_F
    grad_fn = parse_function(blocks["grad"])
    assert [str(t) for t in grad_fn.in_types] == ["f64[1000]", "f64[]"]
    assert [str(t) for t in grad_fn.out_types] == ["f64[]", "f64[1000]"]
    assert " cos %x" in blocks["grad"]


def test_dump_grad_subprocess():
    proc = run_cli("dump", "examples/f.py:f", "--arg", "f64[1000]", "--grad")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    _check_grad_dump(proc.stdout)


def test_dump_grad_in_process(capsys):
    assert main(["dump", f"{EXAMPLE}:f", "--arg", "f64[1000]", "--grad"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    _check_grad_dump(captured.out)


def test_dump_stage_traced_prints_one_stage(capsys):
    proc = run_cli("dump", "examples/f.py:f", "--arg", "f64[1000]", "--stage", "traced")
    assert proc.returncode == 0, proc.stderr
    assert check_blocks(proc.stdout, ["traced"])["traced"] == TRACED_F
    assert main(["dump", f"{EXAMPLE}:f", "--arg", "f64[1000]", "--stage", "traced"]) == 0
    assert check_blocks(capsys.readouterr().out, ["traced"])["traced"] == TRACED_F


def test_dump_without_grad_prints_the_traced_stage(capsys):
    assert main(["dump", f"{EXAMPLE}:f", "--arg", "f32[3]"]) == 0
    blocks = check_blocks(capsys.readouterr().out, ["traced"])
    assert blocks["traced"].startswith("func @f(%x: f32[3]) -> f32[] {")


def test_dump_stage_grad_only(capsys):
    assert main(["dump", f"{EXAMPLE}:f", "--arg", "f64[4]", "--stage", "grad"]) == 0
    check_blocks(capsys.readouterr().out, ["grad"])


def test_dump_several_arguments(tmp_path, capsys):
    src = tmp_path / "two.py"
    src.write_text("import numpy as np\n\n\ndef g(w, x):\n    return np.sum(np.tanh(x @ w))\n")
    assert main(["dump", f"{src}:g", "--arg", "f64[3,2]", "--arg", "f64[5,3]", "--grad"]) == 0
    blocks = check_blocks(capsys.readouterr().out, STAGES)
    assert blocks["traced"].startswith("func @g(%w: f64[3,2], %x: f64[5,3]) -> f64[] {")
    assert [str(t) for t in parse_function(blocks["grad"]).out_types] == [
        "f64[]", "f64[3,2]", "f64[5,3]",
    ]


def test_dump_a_file_with_a_dataclass_and_postponed_annotations(tmp_path, capsys):
    src = tmp_path / "dc.py"
    src.write_text(
        "from __future__ import annotations\n\nimport dataclasses\n\nimport numpy as np\n\n\n"
        "@dataclasses.dataclass\nclass Scale:\n    k: float\n\n\n"
        "def g(x):\n    return np.sum(x * Scale(2.0).k)\n"
    )
    assert main(["dump", f"{src}:g", "--arg", "f64[3]"]) == 0
    blocks = check_blocks(capsys.readouterr().out, ["traced"])
    assert "constant {dtype=f64, value=2.0}" in blocks["traced"]


def test_user_mistake_in_the_function_exits_1_with_one_line(tmp_path, capsys):
    src = tmp_path / "bad.py"
    src.write_text("import numpy as np\n\n\ndef g(x):\n    return np.sum(x + np.ones(4))\n")
    assert main(["dump", f"{src}:g", "--arg", "f64[3]"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("fusegrad dump: ShapeError: add")
    assert "(3,)" in err and "(4,)" in err


def test_file_that_fails_to_import(tmp_path, capsys):
    src = tmp_path / "broken.py"
    src.write_text("import numpy as np\n\nraise RuntimeError('boom')\n")
    code = main(["dump", f"{src}:g", "--arg", "f64[3]"])
    _check_usage_error(code, capsys.readouterr().err, "RuntimeError: boom")
    assert "_fusegrad_dump_target" not in sys.modules


BAD_ARGS = [
    (["dump", "examples/missing.py:f", "--arg", "f64[3]"], "no such file"),
    (["dump", "examples/f.py:nope", "--arg", "f64[3]"], "no function named 'nope'"),
    (["dump", "examples/f.py:f", "--arg", "f64[x]"], "f64[x]"),
    (["dump", "examples/f.py:f", "--arg", "q64[3]"], "q64[3]"),
    (["dump", "examples/f.py", "--arg", "f64[3]"], "FILE.py:FUNC"),
    (["dump", "examples/f.py:", "--arg", "f64[3]"], "FILE.py:FUNC"),
    (["dump", "examples/f.py:f", "--arg", "f64[3]", "--stage", "codegen"], "unknown stage"),
    (["dump", "examples/f.py:f"], "--arg"),
    (["dump", "examples/f.py:f", "--arg", "f64[3]", "--arg", "f64[3]"], "--arg"),
    (["dump", "examples/f.py:f", "--arg", "i64[3]", "--grad"], "nothing to differentiate"),
]
BAD_IDS = ["missing-file", "unknown-function", "malformed-type", "unknown-dtype",
           "missing-func", "empty-func", "unknown-stage", "too-few-args", "too-many-args",
           "grad-of-integers"]


def _check_usage_error(code: int, err: str, needle: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line message, got:\n{err}"
    assert lines[0].startswith("fusegrad dump: error: ")
    assert needle in lines[0]


@pytest.mark.parametrize(("argv", "needle"), BAD_ARGS, ids=BAD_IDS)
def test_bad_arguments_in_process(argv, needle, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code = main(argv)
    captured = capsys.readouterr()
    assert captured.out == ""
    _check_usage_error(code, captured.err, needle)


@pytest.mark.parametrize(("argv", "needle"), BAD_ARGS[:5], ids=BAD_IDS[:5])
def test_bad_arguments_subprocess(argv, needle):
    proc = run_cli(*argv)
    assert proc.stdout == ""
    _check_usage_error(proc.returncode, proc.stderr, needle)


def test_version(capsys):
    from fusegrad import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"fusegrad {__version__}"


@pytest.mark.parametrize("out, needle", [
    ("/nonexistent-dir/x.png", "/nonexistent-dir does not exist"),
    (".", "that is a directory"),
])
def test_demo_with_an_unwritable_out_fails_before_training(out, needle, capsys, monkeypatch):
    import fusegrad.demo as demo

    monkeypatch.setattr(demo, "make_step", lambda *a: pytest.fail("training started"))
    monkeypatch.setattr(demo, "EagerTrainer", lambda *a: pytest.fail("training started"))
    assert main(["demo", "--steps", "2", "--out", out]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("fusegrad demo: error: --out ") and needle in captured.err
