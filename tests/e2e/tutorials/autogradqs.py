"""Automatic differentiation with ``torch.autograd``, in the style of the basics tutorial.

A one-layer network with weights ``w`` and bias ``b``, a binary cross-entropy
loss, the gradients it gives, switching tracking off, and Jacobian-vector
products with an explicit ``gradient`` argument (accumulating across calls).
"""

import numpy as np
import torch

rng = np.random.default_rng(3)
x = torch.ones(5)  # input tensor
y = torch.zeros(3)  # expected output
w = torch.tensor(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=True)
b = torch.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)

print(f"Gradient function for z = {type(z.grad_fn).__name__}")
print(f"Gradient function for loss = {type(loss.grad_fn).__name__}")
print(f"loss = {loss.item():.8g}")

loss.backward()
print("w.grad", " ".join(f"{v:.8g}" for v in w.grad.flatten().tolist()))
print("b.grad", " ".join(f"{v:.8g}" for v in b.grad.tolist()))

# Disabling gradient tracking
z = torch.matmul(x, w) + b
print(z.requires_grad)
with torch.no_grad():
    z = torch.matmul(x, w) + b
print(z.requires_grad)
z = torch.matmul(x, w) + b
z_det = z.detach()
print(z_det.requires_grad)

# Tensor gradients and Jacobian products
inp = torch.eye(4, 5, requires_grad=True)
out = (inp + 1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
print(f"First call\n{inp.grad}")
out.backward(torch.ones_like(out), retain_graph=True)
print(f"\nSecond call\n{inp.grad}")
inp.grad.zero_()
out.backward(torch.ones_like(out), retain_graph=True)
print(f"\nCall after zeroing gradients\n{inp.grad}")
