"""``fusegrad bench``: a quick in-process run prints the table and writes the JSON.

Only fusegrad, NumPy and Numba are timed (JAX and PyTorch are optional baselines, not
needed here), at W4's size (n = 16), with two rounds. fusegrad runs as the test suite
configures it (the interpreter, unless marked compiled), which the table says.
"""

from __future__ import annotations

import json

import pytest

from fusegrad import config
from fusegrad.cli import main


def test_bench_quick_w4_in_process(tmp_path, capsys):
    out_json = tmp_path / "results" / "w4.json"
    rc = main(["bench", "--quick", "--only", "W4", "--in-process", "--rounds", "2",
               "--impl", "fusegrad,numpy,numba", "--json", str(out_json)])
    assert rc == 0
    out, err = capsys.readouterr()

    header = "| workload | size | implementation | median | vs jax.jit | vs fusegrad |"
    assert header in out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| W4 ")]
    assert [r[2].strip() for r in rows] == ["fusegrad", "numpy", "numba"]
    for r in rows:
        assert r[1].strip() == "n=16"
        assert r[3].strip().endswith("s/call")  # a time, not an error
        assert r[4].strip() == "—"  # no jax.jit timed: no ratio to it
    assert rows[0][5].strip() == "1.00×"
    assert ("interpreter" in out) == config.DISABLE_JIT  # the note on an interpreted run
    for impl in ("fusegrad", "numpy", "numba"):  # one progress line per measurement
        assert sum(f"W4 n=16 {impl} " in line for line in err.splitlines()) == 1

    data = json.loads(out_json.read_text())
    m = data["machine"]
    assert m["cpu"] and m["cores"] >= 1 and m["date"]
    assert m["versions"]["numpy"] and m["versions"]["fusegrad"]
    assert data["command"].startswith("fusegrad bench --quick --only W4")
    recs = data["records"]
    assert [r["impl"] for r in recs] == ["fusegrad", "numpy", "numba"]
    for r in recs:
        assert r["status"] == "ok", r
        assert r["workload"] == "W4" and r["n"] == 16
        assert len(r["times_s"]) == 2 and r["median_s"] > 0 and r["median_cpu_s"] > 0
        assert r["check_max_err"] <= 1e-8


@pytest.mark.parametrize("argv", [["--only", "W9"], ["--rounds", "0"]])
def test_bench_bad_options_are_usage_errors(argv, capsys):
    assert main(["bench", *argv]) == 2
    assert "fusegrad bench: error:" in capsys.readouterr().err


def test_bench_reports_crashes_and_wrong_results_in_the_table():
    import numpy as np

    from fusegrad.bench import _suite

    _suite()  # puts the checkout's benchmarks/ on the path
    from benchmarks.harness import Case, compare, run_case
    from benchmarks.report import table

    def crash():
        raise RuntimeError("kaboom")

    case = Case("WX", "n=3", {"fusegrad": crash, "numpy": lambda: (lambda: np.ones(3)),
                              "other": lambda: (lambda: np.zeros(3))},
                check=lambda name, out: compare(name, out, np.ones(3), 1e-8))
    recs = run_case(case, rounds=2, min_time=1e-4, threads="t")
    assert [(r["impl"], r["status"]) for r in recs] == [
        ("fusegrad", "error"), ("numpy", "ok"), ("other", "wrong")]
    text = table(recs)
    assert "| WX | n=3 | fusegrad | error: RuntimeError: kaboom | — | — |" in text
    assert "| WX | n=3 | other | WRONG: other: gradient differs" in text


def test_bench_compile_runs_fresh_processes_and_fits_exponents(tmp_path, capsys):
    out = tmp_path / "compile.json"
    from fusegrad.bench import _suite

    latency = _suite("compile_latency")
    rc = latency.main(["--families", "elementwise", "--sizes", "2,4", "--no-jax",
                       "--json", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert [(r["family"], r["size"]) for r in rows] == [("elementwise", 2), ("elementwise", 4)]
    for r in rows:
        assert r["cold_first_s"] > 0 and r["warm_first_s"] > 0 and r["cold_startup_s"] > 0
        assert "cold_error" not in r and "warm_error" not in r
    assert "growth exponents, fusegrad cold: elementwise" in capsys.readouterr().out


def test_bench_compile_scalar_family_quick(tmp_path, capsys):
    """The small scalar programs (Beale's gradient, the nested Jacobian), cold and warm."""
    out = tmp_path / "scalar.json"
    from fusegrad.bench import _suite

    latency = _suite("compile_latency")
    assert latency.main(["--quick", "--families", "scalar", "--no-jax", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(r["family"], r["size"]) for r in rows] == [("scalar", 1), ("scalar", 5)]
    for r in rows:
        assert r["cold_first_s"] > 0 and r["warm_first_s"] > 0
        assert "cold_error" not in r and "warm_error" not in r
        assert r["jax_first_s"] is None and r["ratio_cold_to_jax"] is None
    text = capsys.readouterr().out
    assert "| scalar | 1 (beale) |" in text and "| scalar | 5 (jacobian(jacobian(f))) |" in text
    assert "growth exponents" not in text  # the sizes only number the programs


def test_bench_compile_exponents_are_log_log_slopes():
    from fusegrad.bench import _suite

    latency = _suite("compile_latency")
    rows = [{"family": "f", "size": n, "t": 0.01 * n ** 1.5} for n in (2, 8, 32)]
    assert latency.exponents(rows, "t")["f"] == pytest.approx(1.5)


def test_bench_compile_bad_family_is_a_usage_error(capsys):
    assert main(["bench", "compile", "--only", "nope"]) == 2
    assert "unknown family" in capsys.readouterr().err


def test_bench_compile_gpt_family(tmp_path, capsys):
    """The GPT training step under ``fg.jit``: its compiling call timed, cold and warm."""
    out = tmp_path / "gpt.json"
    from fusegrad.bench import _suite

    latency = _suite("compile_latency")
    assert latency.main(["--families", "gpt", "--sizes", "1", "--no-jax",
                         "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert (row["family"], row["size"]) == ("gpt", 1)
    assert "cold_error" not in row and "warm_error" not in row
    assert row["warm_first_s"] > 0 and row["cold_first_s"] > 0  # figures, not compared
    assert row["cold_startup_s"] > 0  # the eager first step, before the compile
    assert "| gpt | 1 (1 layer, vs PyTorch's first step) |" in capsys.readouterr().out


def test_bench_compile_geomean_leaves_out_the_pytorch_rows():
    from fusegrad.bench import _suite

    latency = _suite("compile_latency")
    rows = [{"family": "scalar", "ratio_cold_to_jax": 4.0},
            {"family": "mlp", "ratio_cold_to_jax": 0.25},
            {"family": "gpt", "ratio_cold_to_jax": 100.0}]
    assert latency.geomean(rows) == pytest.approx(1.0)
