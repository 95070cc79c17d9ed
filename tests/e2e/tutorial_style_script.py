"""A training script in the style of PyTorch's beginner tutorials, written against ``torch``.

The test runs it twice: with its one line ``import torch`` replaced by
``import fusegrad as torch``
and (when installed) with real PyTorch, and compares what it prints. Weights and
data come from NumPy so both runs start from the same numbers.
"""

import numpy as np
import torch

nn = torch.nn
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

device = (torch.accelerator.current_accelerator().type if torch.accelerator.is_available()
          else "cuda" if torch.cuda.is_available()
          else "mps" if torch.backends.mps.is_available() else "cpu")
print(f"Using {device} device")

rng = np.random.default_rng(7)
features = rng.standard_normal((96, 4)).astype(np.float32)
labels = (features[:, 0] * features[:, 1] + features[:, 2] > 0).astype(np.int64)
train_data = TensorDataset(torch.from_numpy(features[:64]), torch.from_numpy(labels[:64]))
test_data = TensorDataset(torch.from_numpy(features[64:]), torch.from_numpy(labels[64:]))
train_loader = DataLoader(train_data, batch_size=16)
test_loader = DataLoader(test_data, batch_size=16)


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stack = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x):
        return self.stack(x)


model = SmallNet().to(device)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, tuple(p.shape)).astype(np.float32)))

loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)


def train(loader):
    model.train()
    for batch, (X, y) in enumerate(loader):
        X, y = X.to(device), y.to(device)
        loss = loss_fn(model(X), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if batch % 2 == 0:
            print(f"loss: {loss.item():.7f} [{(batch + 1) * len(X)}/{len(loader.dataset)}]")


def test(loader):
    model.eval()
    total, correct = 0.0, 0
    with torch.no_grad():
        for X, y in loader:
            pred = model(X.to(device))
            total += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    print(f"accuracy: {correct / len(loader.dataset):.6f} avg loss: {total / len(loader):.7f}")


for epoch in range(4):
    print(f"epoch {epoch + 1} lr {scheduler.get_last_lr()[0]:.6f}")
    train(train_loader)
    test(test_loader)
    scheduler.step()

# autograd basics: gradients of a small logistic model
x = torch.ones(5)
y = torch.zeros(3)
w = torch.tensor(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=True)
b = torch.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
z = torch.matmul(x, w) + b
loss = (torch.nn.functional.softplus(z) - z * y).mean()  # binary cross-entropy with logits
print("grad_fn:", type(z.grad_fn).__name__, type(loss.grad_fn).__name__)
loss.backward()
print("w.grad:", " ".join(f"{v:.7f}" for v in w.grad.flatten().tolist()))
print("b.grad:", " ".join(f"{v:.7f}" for v in b.grad.tolist()))
with torch.no_grad():
    print("requires_grad under no_grad:", (torch.matmul(x, w) + b).requires_grad)
print("detached:", z.detach().requires_grad)
