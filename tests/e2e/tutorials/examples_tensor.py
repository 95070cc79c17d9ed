"""Fitting sin(x) with a cubic, in the style of "Learning PyTorch with examples" (tensors).

First with NumPy arrays and hand-written gradients, then the same loop with
Tensors on a chosen device and dtype. Gradients are computed by hand: no autograd.
"""

import math

import numpy as np
import torch

# --- NumPy ---
x = np.linspace(-math.pi, math.pi, 2000)
y = np.sin(x)
rng = np.random.default_rng(0)
a, b, c, d = rng.standard_normal(4)

learning_rate = 1e-6
for t in range(1000):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = np.square(y_pred - y).sum()
    if t % 100 == 99:
        print("numpy", t, f"{loss:.8g}")
    grad_y_pred = 2.0 * (y_pred - y)
    grad_a = grad_y_pred.sum()
    grad_b = (grad_y_pred * x).sum()
    grad_c = (grad_y_pred * x ** 2).sum()
    grad_d = (grad_y_pred * x ** 3).sum()
    a -= learning_rate * grad_a
    b -= learning_rate * grad_b
    c -= learning_rate * grad_c
    d -= learning_rate * grad_d
print(f"numpy result: y = {a:.8g} + {b:.8g} x + {c:.8g} x^2 + {d:.8g} x^3")

# --- Tensors ---
dtype = torch.float
device = torch.device("cpu")
x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
y = torch.sin(x)
start = rng.standard_normal(4)
a, b, c, d = (torch.tensor(float(v), device=device, dtype=dtype) for v in start)



def tensor_step(x, y, a, b, c, d):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = (y_pred - y).pow(2).sum()
    grad_y_pred = 2.0 * (y_pred - y)
    grad_a = grad_y_pred.sum()
    grad_b = (grad_y_pred * x).sum()
    grad_c = (grad_y_pred * x ** 2).sum()
    grad_d = (grad_y_pred * x ** 3).sum()
    a -= learning_rate * grad_a
    b -= learning_rate * grad_b
    c -= learning_rate * grad_c
    d -= learning_rate * grad_d
    return loss


step = tensor_step  # jit-step
for t in range(1000):
    loss = step(x, y, a, b, c, d).item()
    if t % 100 == 99:
        print("tensor", t, f"{loss:.8g}")
print(f"tensor result: y = {a.item():.8g} + {b.item():.8g} x + {c.item():.8g} x^2"
      f" + {d.item():.8g} x^3")
print("dtype", str(a.dtype).split(".")[-1], "device", a.device)
