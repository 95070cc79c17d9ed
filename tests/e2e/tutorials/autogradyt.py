"""The fundamentals of autograd, in the style of the introductory video series.

Walks a computation history backwards through ``grad_fn.next_functions``, trains
a two-layer model for a few steps, switches autograd off in several ways, shows
the in-place-on-leaf error, and takes Jacobians and Hessians.
"""

import math

import numpy as np
import torch

a = torch.linspace(0., 2. * math.pi, steps=25, requires_grad=True)
b = torch.sin(a)
c = 2 * b
d = c + 1
out = d.sum()


def names(fn):
    return [type(f).__name__ if f is not None else None for f, _ in fn.next_functions]


print("d:", type(d.grad_fn).__name__, names(d.grad_fn))
print("c:", type(c.grad_fn).__name__, names(c.grad_fn))
print("b:", type(b.grad_fn).__name__, names(b.grad_fn))
print("a.grad_fn:", a.grad_fn)
out.backward()
print("a.grad:", " ".join(f"{v:.8g}" for v in a.grad.tolist()))
print("matches 2cos(a):", torch.allclose(a.grad, 2 * torch.cos(a.detach()), atol=1e-6))

# autograd in training
BATCH_SIZE = 16
DIM_IN, HIDDEN_SIZE, DIM_OUT = 100, 20, 10
torch.manual_seed(0)  # the numbers below come from NumPy
rng = np.random.default_rng(4)


class TinyModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = torch.nn.Linear(DIM_IN, HIDDEN_SIZE)
        self.relu = torch.nn.ReLU()
        self.layer2 = torch.nn.Linear(HIDDEN_SIZE, DIM_OUT)

    def forward(self, x):
        return self.layer2(self.relu(self.layer1(x)))


some_input = torch.tensor(rng.random((BATCH_SIZE, DIM_IN)), dtype=torch.float32,
                          requires_grad=False)
ideal_output = torch.tensor(rng.random((BATCH_SIZE, DIM_OUT)), dtype=torch.float32,
                            requires_grad=False)
model = TinyModel()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.uniform(-0.1, 0.1, tuple(p.shape)), dtype=torch.float32))
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
print("layer2 weight:", " ".join(f"{v:.8g}" for v in model.layer2.weight[0][0:5].tolist()))
print("layer2 grad:", model.layer2.weight.grad)
prediction = model(some_input)
loss = (ideal_output - prediction).pow(2).sum()
print(f"loss {loss.item():.8g}")
loss.backward()
print("layer2 grad:", " ".join(f"{v:.8g}" for v in model.layer2.weight.grad[0][0:5].tolist()))
optimizer.step()
print("layer2 weight:", " ".join(f"{v:.8g}" for v in model.layer2.weight[0][0:5].tolist()))
for _ in range(0, 5):
    prediction = model(some_input)
    loss = (ideal_output - prediction).pow(2).sum()
    loss.backward()
print("accumulated grad:", " ".join(f"{v:.8g}" for v in model.layer2.weight.grad[0][0:5].tolist()))
optimizer.zero_grad(set_to_none=False)
print("after zero_grad:", model.layer2.weight.grad[0][0:5])

# turning autograd off and on
a = torch.ones(2, 3, requires_grad=True)
b1 = 2 * a
print(b1.requires_grad)
a.requires_grad = False
b2 = 2 * a
print(b2.requires_grad)

a = torch.ones(2, 3, requires_grad=True) * 2
b = torch.ones(2, 3, requires_grad=True) * 3
c1 = a + b
with torch.no_grad():
    c2 = a + b
c3 = a * b
print(c1.requires_grad, c2.requires_grad, c3.requires_grad)


def add_tensors1(x, y):
    return x + y


@torch.no_grad()
def add_tensors2(x, y):
    return x + y


print(add_tensors1(a, b).requires_grad, add_tensors2(a, b).requires_grad)
x = torch.tensor(rng.random(5), dtype=torch.float32, requires_grad=True)
y = x.detach()
print(x.requires_grad, y.requires_grad)

# in-place operations on a leaf that requires grad
a = torch.linspace(0., 2. * math.pi, steps=25, requires_grad=True)
try:
    torch.sin_(a)
except RuntimeError as e:
    print("RuntimeError:", "leaf Variable that requires grad" in str(e))

# the profiler
x = torch.tensor(rng.random(3), dtype=torch.float32, requires_grad=True)
with torch.autograd.profiler.profile() as prf:
    for _ in range(10):
        x = x * x.sin() + 1
keys = {e.key for e in prf.key_averages()}
print("profiled ops:", sorted(keys & {"aten::mul", "aten::sin"}))

# higher-order derivatives
def exp_adder(x, y):
    return 2 * x.exp() + 3 * y


def draw(n):
    return torch.tensor(rng.random(n), dtype=torch.float32)


inputs = (draw(1), draw(1))
jac = torch.autograd.functional.jacobian(exp_adder, inputs)
print("jacobian:", [f"{j.item():.8g}" for j in jac])
inputs = (draw(3), draw(3))
jac = torch.autograd.functional.jacobian(exp_adder, inputs)
diag = torch.diagonal(jac[0])
print("jacobian diag:", " ".join(f"{v:.8g}" for v in diag.tolist()), tuple(jac[1].shape))


def do_some_doubling(x):
    y = x * 2
    while y.data.norm() < 1000:
        y = y * 2
    return y


inputs = torch.tensor(rng.random(3), dtype=torch.float32)
my_gradients = torch.tensor([0.1, 1.0, 0.0001])
out, vjp = torch.autograd.functional.vjp(do_some_doubling, inputs, v=my_gradients)
print("vjp:", " ".join(f"{v:.8g}" for v in vjp.tolist()))
hess = torch.autograd.functional.hessian(lambda t: (t ** 3).sum(), inputs)
print("hessian diag:", " ".join(f"{v:.8g}" for v in torch.diagonal(hess).tolist()))
