"""fg.autograd.profiler: events per Tensor operation, record_function, table, chrome trace."""

import json

import pytest

import fusegrad as fg
from fusegrad.autograd.profiler import profile, record_function


def _work():
    x = fg.ones(50, 50, requires_grad=True)
    for _ in range(3):
        with record_function("step"):
            y = (x * x + 1).tanh().mean()
            y.backward()
    return x


def test_counts_and_nesting():
    with profile() as prof:
        _work()
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["aten::mul"].count == 3 and avg["aten::add"].count == 3
    assert avg["aten::tanh"].count == 3 and avg["step"].count == 3
    step = avg["step"]
    inner = sum(avg[k].cpu_time_total for k in ("aten::mul", "aten::add", "aten::tanh",
                                                 "aten::mean", "aten::backward"))
    assert step.cpu_time_total >= inner  # the block contains its operations
    assert step.self_cpu_time_total == pytest.approx(step.cpu_time_total - inner, abs=1.0)
    for e in avg.values():
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-6


def test_table_sorts_and_limits_rows():
    with profile() as prof:
        _work()
    text = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=3)
    lines = text.splitlines()
    assert "Self CPU %" in lines[1] and "# of Calls" in lines[1]
    body = lines[3:6]
    assert len(body) == 3 and lines[6].startswith("---")
    assert lines[7].startswith("Self CPU time total:")
    selfs = sorted((e.self_cpu_time_total for e in prof.key_averages()), reverse=True)[:3]
    assert [round(e.self_cpu_time_total, 6) for e in sorted(
        prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:3]] == [
        round(s, 6) for s in selfs]
    by_count = prof.key_averages().table(sort_by="count", row_limit=1).splitlines()[3]
    assert by_count.split()[-1] == "3"


def test_methods_are_restored_and_cost_nothing_outside():
    mul = fg.Tensor.__mul__
    with profile():
        assert fg.Tensor.__mul__ is not mul
        with profile():  # nested profiles both see the events
            fg.ones(2) * 2
    assert fg.Tensor.__mul__ is mul
    with profile() as prof:
        pass
    assert len(prof.key_averages()) == 0
    with record_function("outside"):  # no profile open: nothing recorded, no error
        fg.ones(2) * 2


def test_record_function_as_decorator_and_chrome_trace(tmp_path):
    @record_function("my_fn")
    def f():
        return fg.ones(3).exp().sum()

    with profile() as prof:
        f()
        f()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["name"] for e in events]
    assert names.count("my_fn") == 2 and names.count("aten::exp") == 2
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)


def test_disabled_profile_records_nothing():
    with profile(enabled=False) as prof:
        fg.ones(2) * 2
    assert list(prof.key_averages()) == []
