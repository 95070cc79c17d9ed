"""A gentle tour of ``torch.autograd`` in the style of the 60-minute blitz.

A small convolutional classifier stands in for a pretrained vision model: one
forward pass, one backward pass, one optimizer step; then the gradients of a
two-variable polynomial checked against the calculus, and a model whose
feature extractor is frozen so that only its new head trains.
"""

import numpy as np
import torch
from torch import nn, optim

torch.manual_seed(0)  # the numbers below come from NumPy
rng = np.random.default_rng(11)


def fill_(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    return model


model = fill_(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10)))
data = torch.from_numpy(rng.random((1, 3, 8, 8)).astype(np.float32))
labels = torch.from_numpy(rng.random((1, 10)).astype(np.float32))

prediction = model(data)  # forward pass
loss = (prediction - labels).sum()
loss.backward()  # backward pass fills .grad of every parameter
print(f"loss {loss.item():.8g}")
print("conv weight grad norm", f"{model[0].weight.grad.norm().item():.8g}")
print("head bias grad", " ".join(f"{v:.8g}" for v in model[3].bias.grad.tolist()))

optimizer = optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
optimizer.step()  # gradient descent
print(f"loss after a step {(model(data) - labels).sum().item():.8g}")

# Differentiation in autograd
a = torch.tensor([2., 3.], requires_grad=True)
b = torch.tensor([6., 4.], requires_grad=True)
Q = 3 * a**3 - b**2
external_grad = torch.tensor([1., 1.])
Q.backward(gradient=external_grad)
print(9 * a**2 == a.grad)
print(-2 * b == b.grad)
print("a.grad", a.grad.tolist(), "b.grad", b.grad.tolist())
print("Q.grad_fn", type(Q.grad_fn).__name__, "is_leaf", a.is_leaf, Q.is_leaf)

# Exclusion from the DAG
x = torch.from_numpy(rng.random((5, 5)).astype(np.float32))
y = torch.from_numpy(rng.random((5, 5)).astype(np.float32))
z = torch.from_numpy(rng.random((5, 5)).astype(np.float32)).requires_grad_()
s = x + y
print(f"Does `s` require gradients?: {s.requires_grad}")
s = x + z
print(f"Does `s` require gradients?: {s.requires_grad}")

# Freeze everything but a freshly made head
for param in model.parameters():
    param.requires_grad = False
model[3] = fill_(nn.Linear(4 * 6 * 6, 10))
optimizer = optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)


def train_step(data, labels):
    optimizer.zero_grad()
    loss = ((model(data) - labels) ** 2).mean()
    loss.backward()
    optimizer.step()
    return loss


step = train_step  # jit-step
for i in range(3):
    print(f"step {i} loss {step(data, labels).item():.8g}")
print("frozen conv grad is None:", model[0].weight.grad is None,
      "head grad set:", model[3].weight.grad is not None)
print("trainable:", [n for n, p in model.named_parameters() if p.requires_grad])
