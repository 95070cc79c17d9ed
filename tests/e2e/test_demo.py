"""``fusegrad demo`` end to end with a small step count."""

import re

from fusegrad.cli import main


def test_demo_trains_and_reports(tmp_path, capsys):
    out = tmp_path / "demo.png"
    assert main(["demo", "--steps", "60", "--batch-size", "64", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    final = float(re.search(r"final loss ([0-9.]+)", text).group(1))
    first = float(re.search(r"first minibatch ([0-9.]+)", text).group(1))
    assert final < first
    assert re.search(r"accuracy [0-9.]+%", text)
    assert "time per step: compiled" in text and "time per step: eager" in text
    assert f"written to {out}" in text or "plot skipped" in text
