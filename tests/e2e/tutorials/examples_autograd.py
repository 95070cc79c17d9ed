"""Fitting sin(x) with autograd, in the style of "Learning PyTorch with examples".

The cubic's coefficients are leaf tensors that require grad; ``loss.backward()``
computes their gradients and a ``torch.no_grad()`` block updates them. Then the
model is rewritten with a custom ``torch.autograd.Function`` for the Legendre
polynomial P3. The update lives in a ``train_step`` function so it can be compiled.
"""

import math

import numpy as np
import torch

dtype = torch.float
device = torch.device("cpu")
x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
y = torch.sin(x)

rng = np.random.default_rng(1)
a, b, c, d = (torch.tensor(float(v), device=device, dtype=dtype, requires_grad=True)
              for v in rng.standard_normal(4))
learning_rate = 1e-6


def train_step(x, y, a, b, c, d):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = (y_pred - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        for p in (a, b, c, d):
            p -= learning_rate * p.grad
            p.grad = None
    return loss


step = train_step  # jit-step
for t in range(1000):
    loss = step(x, y, a, b, c, d)
    if t % 100 == 99:
        print("autograd", t, f"{loss.item():.8g}")
print(f"Result: y = {a.item():.8g} + {b.item():.8g} x + {c.item():.8g} x^2 + {d.item():.8g} x^3")


class LegendrePolynomial3(torch.autograd.Function):
    """P3(x) = (5x^3 - 3x) / 2, with its derivative written by hand."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)
learning_rate = 5e-6


def legendre_step(x, y, a, b, c, d):
    P3 = LegendrePolynomial3.apply
    y_pred = a + b * P3(c + d * x)
    loss = (y_pred - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        for p in (a, b, c, d):
            p -= learning_rate * p.grad
            p.grad = None
    return loss


step = legendre_step  # jit-step
for t in range(1000):
    loss = step(x, y, a, b, c, d)
    if t % 100 == 99:
        print("legendre", t, f"{loss.item():.8g}")
print(f"Result: y = {a.item():.8g} + {b.item():.8g} * P3({c.item():.8g} + {d.item():.8g} x)")
out = LegendrePolynomial3.apply(x[:3])
print("grad_fn", type(out.grad_fn).__name__ if out.grad_fn is not None else None)
