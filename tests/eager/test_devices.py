"""Devices on a CPU-only library: parsing as torch.device, errors on using an accelerator."""

import numpy as np
import pytest

import fusegrad as fg


@pytest.mark.parametrize("spec", [("cpu",), ("cpu", 0), ("cuda",), ("cuda:0",), ("cuda", 1),
                                  ("mps",), ("xpu:3",), ("meta",)])
def test_device_parses_as_pytorch(spec):
    torch = pytest.importorskip("torch")
    d, t = fg.device(*spec), torch.device(*spec)
    assert (d.type, d.index, repr(d), str(d)) == (t.type, t.index, repr(t), str(t))
    assert (d == fg.device(str(d))) and hash(d) == hash(fg.device(str(d)))
    assert (d == str(d)) == (t == str(t))  # a device never equals a string in PyTorch


def test_device_attributes_without_torch():
    d = fg.device("cuda:2")
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 2, "cuda:2",
                                                  "device(type='cuda', index=2)")
    assert fg.device(d) == d and fg.device("cpu") != fg.device("cpu", 0)
    for bad in ("gpu", "cuda:x", "cuda:-1"):
        with pytest.raises(RuntimeError):
            fg.device(bad)


def test_tensor_device_and_to():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    assert x.device == fg.device("cpu") and not x.is_cuda and x.is_cpu and x.get_device() == -1
    assert x.to("cpu") is x and x.to(fg.device("cpu")) is x and x.to(fg.float32) is x
    assert x.to(x) is x and x.cpu() is x and x.to("cpu", non_blocking=True) is x
    assert x.to("cpu", copy=True) is not x
    y = x.to("cpu", fg.float64)
    assert y.dtype == fg.float64 and y.grad_fn.name() == "ToCopyBackward0"
    z = x.to(device="cpu", dtype=fg.float64)
    assert z.dtype == fg.float64
    (y * y + z).sum().backward()  # autograd through the dtype change, back to float32
    assert x.grad.dtype == fg.float32 and x.grad.tolist() == [3.0, 5.0]
    assert x.to(fg.zeros(1, dtype=fg.float64)).dtype == fg.float64


@pytest.mark.parametrize("use", [
    lambda: fg.zeros(2, device="cuda"),
    lambda: fg.tensor([1.0], device="cuda:0"),
    lambda: fg.ones(2).to("cuda"),
    lambda: fg.ones(2).to(fg.device("mps")),
    lambda: fg.ones(2).cuda(),
    lambda: fg.randn(2, device="xpu"),
    lambda: fg.arange(3, device="cuda"),
    lambda: fg.nn.Linear(2, 2).to("cuda"),
    lambda: fg.set_default_device("cuda"),
])
def test_using_an_accelerator_says_cpu_only(use):
    with pytest.raises(RuntimeError, match="fusegrad runs on the CPU only"):
        use()


def test_device_argument_on_every_creation_function():
    cpu = fg.device("cpu")
    made = [fg.tensor([1.0], device=cpu), fg.as_tensor([1.0], device="cpu"),
            fg.zeros(2, device=cpu), fg.ones(2, device="cpu"), fg.empty(2, device="cpu"),
            fg.full((2,), 3.0, device="cpu"), fg.arange(3, device="cpu"),
            fg.linspace(0, 1, 3, device="cpu"), fg.rand(2, device=cpu), fg.randn(2, device=cpu),
            fg.eye(2, device="cpu"), fg.randint(0, 3, (2,), device="cpu"),
            fg.randperm(3, device="cpu")]
    x = fg.ones(2)
    made += [f(x, device="cpu") for f in (fg.zeros_like, fg.ones_like, fg.empty_like,
                                            fg.rand_like, fg.randn_like)]
    made.append(fg.full_like(x, 2.0, device=cpu))
    assert all(t.device == cpu for t in made)


def test_availability_answers_as_pytorch_without_accelerator():
    assert fg.cuda.is_available() is False and fg.cuda.device_count() == 0
    assert fg.accelerator.is_available() is False
    assert fg.accelerator.current_accelerator() is None
    assert fg.backends.mps.is_available() is False
    fg.set_default_device("cpu")
    fg.set_default_device(None)
    assert fg.get_default_device() == fg.device("cpu")
    assert (fg.pi, fg.e, fg.inf) == (np.pi, np.e, np.inf) and np.isnan(fg.nan)


def test_tutorial_device_selection_runs():
    device = (fg.accelerator.current_accelerator().type if fg.accelerator.is_available()
              else "cuda" if fg.cuda.is_available()
              else "mps" if fg.backends.mps.is_available() else "cpu")
    model = fg.nn.Linear(3, 1).to(device)
    assert model.cpu() is model and model.weight.device.type == "cpu"
    assert model(fg.ones(2, 3, device=device)).device == fg.device(device)
