"""Autograd mechanics, in the style of the note of that name: what gets saved,
turning gradients off (``requires_grad_``, ``no_grad``, ``inference_mode``,
``set_grad_enabled``, eval mode), in-place operations and the version counter,
and the hooks autograd offers (tensor, node pre/post, multi-grad and
post-accumulate-grad hooks).
"""

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)  # the numbers below come from NumPy
rng = np.random.default_rng(9)


def leaf(*shape):
    return torch.tensor(rng.standard_normal(shape), dtype=torch.float32, requires_grad=True)


def show(name, t):
    print(name, " ".join(f"{v:.8g}" for v in t.flatten().tolist()))


# what is saved: x for pow, the result for exp
x = leaf(4)
y = x.pow(2)
print("pow saves its input:", y.grad_fn._saved_self is x)
z = x.exp()
print("exp saves its output:", z.grad_fn._saved_result.equal(z))

# setting requires_grad: freeze a pretrained part, train the rest
model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.tensor(rng.uniform(-0.5, 0.5, tuple(p.shape)), dtype=torch.float32))
model[0].requires_grad_(False)
inp = torch.tensor(rng.standard_normal((5, 4)), dtype=torch.float32)
loss = model(inp).pow(2).sum()
loss.backward()
print("frozen grad:", model[0].weight.grad, "trained grad set:", model[2].weight.grad is not None)
show("head grad", model[2].weight.grad)

# grad modes
x = leaf(3)
with torch.no_grad():
    y = x * 2
print("no_grad:", y.requires_grad)
with torch.inference_mode():
    y = x * 2
print("inference_mode:", y.requires_grad, y.is_inference(), torch.is_inference_mode_enabled())
try:
    (y * x).sum().backward()
except RuntimeError as e:
    print("inference tensor in autograd:", "inference" in str(e).lower())
is_train = False
with torch.set_grad_enabled(is_train):
    y = x * 2
print("set_grad_enabled(False):", y.requires_grad)
torch.set_grad_enabled(True)
y = x * 2
print("set_grad_enabled(True):", y.requires_grad, torch.is_grad_enabled())


@torch.inference_mode()
def predict(t):
    return model(t)


print("decorated inference:", predict(inp).requires_grad)
model.eval()
print("eval mode still records:", model(inp).requires_grad, model.training)
model.train()

# in-place operations and the version counter
a = leaf(3)
b = a.sigmoid()  # sigmoid saves its output
print("version before:", b._version)
b.mul_(2)
print("version after:", b._version)
try:
    b.sum().backward()
except RuntimeError as e:
    print("modified by an inplace operation:", "modified by an inplace operation" in str(e))
c = a * 2  # multiplying by a Python number saves nothing
d = c + 1  # neither does adding one
c.add_(1)
d.sum().backward()
show("a.grad after allowed in-place", a.grad)
try:
    a.add_(1)
except RuntimeError as e:
    print("leaf in-place:", "leaf Variable that requires grad" in str(e))

# tensor hooks
x = leaf(3)
seen = []
h = x.register_hook(lambda g: seen.append([round(v, 6) for v in g.tolist()]))
(x * 3).sum().backward()
h.remove()
(x * 3).sum().backward()
print("hook saw:", len(seen), "grad", x.grad.tolist())
x = leaf(3)
x.register_hook(lambda g: g * 10)  # a hook can replace the gradient
(x * 1).sum().backward()
print("replaced grad:", x.grad.tolist())

# node hooks
x = leaf(3)
y = x.sin()
log = []
y.grad_fn.register_prehook(lambda grad_outputs: log.append("pre") or (grad_outputs[0] * 2,))
y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: log.append("post") or None)
y.sum().backward()
print("node hooks:", log)
show("doubled grad", x.grad)
print("matches 2cos(x):", torch.allclose(x.grad, 2 * x.detach().cos()))

# multi-grad hook: runs once all the given tensors' gradients are computed
a, b, c = leaf(2), leaf(2), leaf(2)
got = []


def all_done(grads):
    got.append([g is not None for g in grads])


handle = torch.autograd.graph.register_multi_grad_hook((a, b, c), all_done)
(a * b).sum().backward()
print("multi-grad hook:", got)
handle.remove()
(a * b).sum().backward()
print("after remove:", got)
got.clear()
handle = torch.autograd.graph.register_multi_grad_hook((a, b), lambda g: got.append(len(g)),
                                                      mode="any")
(a * c).sum().backward()
print("mode any:", got)
handle.remove()

# post-accumulate-grad hook: an optimizer step right after each gradient lands
v = torch.tensor([0., 0., 0.], requires_grad=True)
v.register_post_accumulate_grad_hook(lambda p: p.add_(p.grad, alpha=-0.01))
v.backward(torch.tensor([1., 2., 3.]))
show("v after hooked backward", v)
w = leaf(4)
lr = 0.1


def sgd_in_hook(p):
    with torch.no_grad():
        p -= lr * p.grad
    p.grad = None


w.register_post_accumulate_grad_hook(sgd_in_hook)
target = torch.tensor(rng.standard_normal(4), dtype=torch.float32)
for step in range(3):
    loss = ((w - target) ** 2).sum()
    loss.backward()
    print(f"step {step} loss {loss.item():.8g} grad is None: {w.grad is None}")
show("w", w)
