"""Anomaly detection (``fg.autograd.detect_anomaly``), as PyTorch's: a backward function
returning NaN raises naming the node and the forward line that created it; forward
NaN warns; infinities are not anomalies."""

from __future__ import annotations

import inspect
import traceback
import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import autograd


def _here(marker: str, fn) -> str:
    src, start = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(src) if marker in s)
    return f"{inspect.getsourcefile(fn)}:{start + k}"


def sqrt_of_zero_times(x):
    # sqrt'(0) = inf flows back into the multiply: inf * 0.0 is nan. (A zero cotangent
    # times an infinite derivative is 0 by fusegrad's convention, docs/special_points.md,
    # so the nan has to come from an infinite cotangent times a zero factor.)
    y = x * 0.0  # the anomaly
    return y.sqrt().sum()


def test_flags_and_restoring():
    assert not autograd.is_anomaly_enabled()
    with autograd.detect_anomaly():
        assert autograd.is_anomaly_enabled() and autograd.is_anomaly_check_nan_enabled()
        with autograd.detect_anomaly(check_nan=False):
            assert not autograd.is_anomaly_check_nan_enabled()
        assert autograd.is_anomaly_check_nan_enabled()
    assert not autograd.is_anomaly_enabled()
    with autograd.set_detect_anomaly(True):
        assert autograd.is_anomaly_enabled()
    assert not autograd.is_anomaly_enabled()
    autograd.set_detect_anomaly(True)
    try:
        assert autograd.is_anomaly_enabled()
    finally:
        autograd.set_detect_anomaly(False)
    assert not autograd.is_anomaly_enabled()


def test_backward_nan_names_node_and_forward_line():
    x = fg.tensor([0.0, 1.0], requires_grad=True)
    with autograd.detect_anomaly():
        loss = sqrt_of_zero_times(x)
        with pytest.raises(RuntimeError) as info:
            loss.backward()
    msg = str(info.value)
    assert msg.startswith("Function 'MulBackward0' returned nan values in its 0th output.")
    assert f"{_here('the anomaly', sqrt_of_zero_times)}: y = x * 0.0" in msg
    assert "Traceback of the forward call" in msg
    assert "test_backward_nan_names_node_and_forward_line" in msg  # the caller's frame too


def test_message_matches_pytorch():
    torch = pytest.importorskip("torch")
    xt = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly(), pytest.raises(RuntimeError) as tinfo:
            (xt * 0.0).sqrt().sum().backward()
    x = fg.tensor([0.0, 1.0], requires_grad=True)
    with autograd.detect_anomaly(), pytest.raises(RuntimeError) as info:
        (x * 0.0).sqrt().sum().backward()
    first = str(tinfo.value).split(".")[0]
    assert first == "Function 'MulBackward0' returned nan values in its 0th output"
    assert str(info.value).startswith(first + ".")


def test_off_nan_flows_as_pytorch():
    x = fg.tensor([0.0, 1.0], requires_grad=True)
    sqrt_of_zero_times(x).backward()
    assert np.isnan(x.grad.numpy()).all()


def test_infinite_gradient_is_not_an_anomaly():
    x = fg.tensor([0.0, 4.0], requires_grad=True)
    with autograd.detect_anomaly():
        x.sqrt().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [np.inf, 0.25])


def test_forward_nan_warns_and_masked_branch_still_differentiates():
    x = fg.tensor([-1.0, 2.0], requires_grad=True)
    with autograd.detect_anomaly():
        with pytest.warns(RuntimeWarning) as rec:
            lg = x.log()  # forward nan
        y = fg.where(x > 0, lg, fg.zeros_like(x)).sum()
        y.backward()
    msg = str(rec[0].message)
    assert "LogBackward0" in msg and "nan" in msg and "lg = x.log()" in msg
    assert rec[0].filename == __file__
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.5])


def test_generic_record_path_view_input():
    x = fg.tensor([1.0, 0.0, 4.0], requires_grad=True)
    with autograd.detect_anomaly():
        y = x[1:] * 0.0  # a view: not the fast path
        with pytest.raises(RuntimeError, match=r"MulBackward0.*y = x\[1:\] \* 0\.0"):
            y.sqrt().sum().backward()


def test_graph_recorded_before_enabling_says_so():
    x = fg.tensor([0.0], requires_grad=True)
    loss = sqrt_of_zero_times(x)
    with autograd.detect_anomaly(), pytest.raises(
            RuntimeError, match="made while anomaly detection was off"):
        loss.backward()


def test_check_nan_false_keeps_tracebacks_only():
    x = fg.tensor([0.0], requires_grad=True)
    with autograd.detect_anomaly(check_nan=False):
        loss = sqrt_of_zero_times(x)
        loss.backward()
    assert np.isnan(x.grad.numpy()[0])
    mul_node = loss.grad_fn.next_functions[0][0].next_functions[0][0]
    assert mul_node.name() == "MulBackward0"
    tb = "".join(traceback.format_list(mul_node.metadata["traceback_"]))
    assert "y = x * 0.0" in tb


class NanBackward(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * float("nan")


class FailingBackward(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        raise ValueError("backward failed on purpose")


def test_custom_function_backward_nan():
    x = fg.tensor([1.0], requires_grad=True)
    with autograd.detect_anomaly():
        y = NanBackward.apply(x)  # custom op
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
    msg = str(info.value)
    assert "Function 'NanBackwardBackward' returned nan values in its 0th output" in msg
    assert "y = NanBackward.apply(x)  # custom op" in msg


def test_exception_in_backward_gets_forward_location():
    x = fg.tensor([1.0], requires_grad=True)
    with autograd.detect_anomaly():
        y = FailingBackward.apply(x)  # failing op
        with pytest.raises(ValueError, match="on purpose") as info:
            y.sum().backward()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "FailingBackwardBackward" in notes and "y = FailingBackward.apply(x)" in notes


def test_create_graph_gradients_checked():
    x = fg.tensor([0.0, 1.0], requires_grad=True)
    with autograd.detect_anomaly():
        loss = sqrt_of_zero_times(x)
        # the double-backward graph is recorded too: its nan forward warns first
        with pytest.raises(RuntimeError, match="MulBackward0"), pytest.warns(
                RuntimeWarning, match="MulBackward0 produced nan"):
            autograd.grad(loss, x, create_graph=True)


def test_decorator_form():
    @autograd.detect_anomaly()
    def step(x):
        assert autograd.is_anomaly_enabled()
        sqrt_of_zero_times(x).backward()

    with pytest.raises(RuntimeError, match="MulBackward0"):
        step(fg.tensor([0.0], requires_grad=True))
    assert not autograd.is_anomaly_enabled()
