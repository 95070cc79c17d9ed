"""Fitting sin(x) with ``torch.nn`` and ``torch.optim``, in the style of "Learning PyTorch
with examples": a Sequential model with a manual update, the same with RMSprop, a
custom Module with Parameters, and a network whose depth changes on every call.
"""

import math
import random

import numpy as np
import torch

torch.manual_seed(0)  # the numbers below come from NumPy
rng = np.random.default_rng(2)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)  # (2000, 3): x, x^2, x^3


def init_(module, scale=0.5):
    with torch.no_grad():
        for prm in module.parameters():
            values = np.asarray(scale * rng.standard_normal(tuple(prm.shape)), dtype=np.float32)
            prm.copy_(torch.from_numpy(values))
    return module


# --- nn with a hand-written update ---
model = init_(torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1)))
loss_fn = torch.nn.MSELoss(reduction="sum")
learning_rate = 1e-6


def nn_step(xx, y):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad
    return loss


step = nn_step  # jit-step
for t in range(1000):
    loss = step(xx, y)
    if t % 100 == 99:
        print("nn", t, f"{loss.item():.8g}")
linear_layer = model[0]
print(f"Result: y = {linear_layer.bias.item():.8g} + {linear_layer.weight[:, 0].item():.8g} x"
      f" + {linear_layer.weight[:, 1].item():.8g} x^2 + {linear_layer.weight[:, 2].item():.8g} x^3")

# --- optim ---
model = init_(torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1)))
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)


def optim_step(xx, y):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


step = optim_step  # jit-step
for t in range(600):  # later on RMSprop's steps hop around the minimum, amplifying rounding
    loss = step(xx, y)
    if t % 100 == 99:
        print("optim", t, f"{loss.item():.8g}")
linear_layer = model[0]
print(f"Result: y = {linear_layer.bias.item():.8g} + {linear_layer.weight[:, 0].item():.8g} x"
      f" + {linear_layer.weight[:, 1].item():.8g} x^2 + {linear_layer.weight[:, 2].item():.8g} x^3")


# --- custom Module ---
class Polynomial3(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(()))
        self.b = torch.nn.Parameter(torch.zeros(()))
        self.c = torch.nn.Parameter(torch.zeros(()))
        self.d = torch.nn.Parameter(torch.zeros(()))

    def forward(self, x):
        return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

    def string(self):
        return (f"y = {self.a.item():.8g} + {self.b.item():.8g} x + {self.c.item():.8g} x^2"
                f" + {self.d.item():.8g} x^3")


model = init_(Polynomial3())
criterion = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)


def module_step(x, y):
    y_pred = model(x)
    loss = criterion(y_pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


step = module_step  # jit-step
for t in range(1000):
    loss = step(x, y)
    if t % 100 == 99:
        print("module", t, f"{loss.item():.8g}")
print(f"Result: {model.string()}")
print("parameters:", [n for n, _ in model.named_parameters()])


# --- dynamic network: depth drawn anew on every forward ---
class DynamicNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(()))
        self.b = torch.nn.Parameter(torch.zeros(()))
        self.c = torch.nn.Parameter(torch.zeros(()))
        self.d = torch.nn.Parameter(torch.zeros(()))
        self.e = torch.nn.Parameter(torch.zeros(()))

    def forward(self, x):
        y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
        for exp in range(4, random.randint(4, 6)):
            y = y + self.e * x ** exp
        return y

    def string(self):
        return (f"y = {self.a.item():.8g} + {self.b.item():.8g} x + {self.c.item():.8g} x^2"
                f" + {self.d.item():.8g} x^3 + {self.e.item():.8g} x^4 ?"
                f" + {self.e.item():.8g} x^5 ?")


random.seed(0)
model = init_(DynamicNet(), scale=0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
for t in range(300):
    y_pred = model(x)
    loss = criterion(y_pred, y)
    if t % 50 == 49:
        print("dynamic", t, f"{loss.item():.8g}")
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"Result: {model.string()}")
