"""Hooks for saved tensors, in the style of the autograd saved-tensors-hooks tutorial.

What a node saves for backward (``grad_fn._saved_self``, ``_saved_result``),
hooks on one saved tensor (``_raw_saved_self.register_hooks``), hooks for every
tensor saved inside a context (``saved_tensors_hooks``), offloading to CPU
(``save_on_cpu``) and to disk with ``torch.save``/``torch.load``.
"""

import os
import tempfile

import numpy as np
import torch

rng = np.random.default_rng(6)


def leaf(n):
    return torch.tensor(rng.standard_normal(n), dtype=torch.float32, requires_grad=True)


torch.manual_seed(0)
a = torch.randn(5, requires_grad=True)
b = torch.ones(5, requires_grad=True)
y = a * b  # saves both factors
print("saved factors:", y.grad_fn._saved_self is a, y.grad_fn._saved_other is b)
x = leaf(5)
y = x.pow(2)
print("saved self equals x:", x.equal(y.grad_fn._saved_self), "is x:", x is y.grad_fn._saved_self)
y = x.exp()
print("saved result equals y:", y.equal(y.grad_fn._saved_result),
      "is y:", y.grad_fn._saved_result is y)
y.sum().backward()
print("x.grad", " ".join(f"{v:.8g}" for v in x.grad.tolist()))
try:
    print(y.grad_fn._saved_result)
except RuntimeError as e:
    print("after backward:", "backward through the graph a second time" in str(e))

# hooks on one saved tensor
calls = []


def pack_hook(t):
    calls.append("pack")
    return t * 10  # store something else


def unpack_hook(t):
    calls.append("unpack")
    return t / 10


x = leaf(5)
y = x.pow(2)
y.grad_fn._raw_saved_self.register_hooks(pack_hook, unpack_hook)
print("after register:", calls)
print("unpacked equals x:", torch.allclose(y.grad_fn._saved_self, x))
y.sum().backward()
print("calls:", calls)
print("x.grad", " ".join(f"{v:.8g}" for v in x.grad.tolist()))

try:
    y = x.pow(2)
    y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: "not a tensor")
    y.sum().backward()
except Exception as e:  # an unpack hook must return a tensor
    print("bad unpack hook raises", type(e).__name__ in ("TypeError", "RuntimeError"))

# hooks for everything saved in a context
packed = []


def pack(t):
    packed.append(tuple(t.shape))
    return t


def unpack(t):
    return t


a = leaf(5)
b = leaf(5)
with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    c = a * b
    d = c.sin()
print("packed shapes:", packed)
d.sum().backward()
print("a.grad", " ".join(f"{v:.8g}" for v in a.grad.tolist()))


# a linear layer whose saved tensors are scaled down and back up on every save
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(rng.standard_normal((4, 3)), dtype=torch.float64))

    def forward(self, x):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t * 0.5, lambda t: t * 2):
            return (x @ self.w).tanh().sum()


model = Model()
inp = torch.tensor(rng.standard_normal((2, 4)), dtype=torch.float64, requires_grad=True)
out = model(inp)
out.backward()
print(f"out {out.item():.8g}")
print("w.grad", " ".join(f"{v:.8g}" for v in model.w.grad.flatten().tolist()))

# offloading to CPU memory
x = leaf(5)
with torch.autograd.graph.save_on_cpu(pin_memory=False):
    y = (x * x).exp().sum()
y.backward()
print("save_on_cpu grad", " ".join(f"{v:.8g}" for v in x.grad.tolist()))

# saving to disk
tmp_dir_obj = tempfile.TemporaryDirectory()
tmp_dir = tmp_dir_obj.name
counter = [0]


def pack_to_disk(tensor):
    counter[0] += 1
    name = os.path.join(tmp_dir, f"saved{counter[0]}.pt")
    torch.save(tensor, name)
    return name


def unpack_from_disk(name):
    return torch.load(name, weights_only=True)


x = leaf(5)
with torch.autograd.graph.saved_tensors_hooks(pack_to_disk, unpack_from_disk):
    y = x.pow(2).sin().sum()
print("files on disk:", len(os.listdir(tmp_dir)))
y.backward()
print("disk grad", " ".join(f"{v:.8g}" for v in x.grad.tolist()))
expected = (2 * x * torch.cos(x.pow(2))).detach()
print("matches 2x cos(x^2):", torch.allclose(x.grad, expected))
tmp_dir_obj.cleanup()
