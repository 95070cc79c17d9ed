"""``examples/pytorch_style.py`` end to end (small model, few steps)."""

import importlib.util
import re
from pathlib import Path

import fusegrad as fg

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch_style.py"


def test_example_runs_and_the_two_loops_agree(capsys):
    spec = importlib.util.spec_from_file_location("pytorch_style", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    old = fg.get_default_dtype()
    try:
        module.main(["--small", "--steps", "5"])
    finally:
        fg.set_default_dtype(old)
    text = capsys.readouterr().out
    assert "SGD momentum: eager" in text and "Adam: eager" in text
    diffs = [float(d) for d in re.findall(r"max \|(?:loss|param) diff\| ([0-9.e+-]+)", text)]
    assert len(diffs) == 4
    assert max(diffs) < 1e-12
