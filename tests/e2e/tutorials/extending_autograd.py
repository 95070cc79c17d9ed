"""Extending autograd with custom Functions and Modules, in the style of the
"Extending PyTorch" note: forward with a combined or a separate ``setup_context``,
``needs_input_grad``, non-tensor arguments, non-differentiable outputs,
unmaterialized gradients, in-place (dirty) outputs, ``once_differentiable``,
and a ``Linear`` module built on a custom Function.
"""

import math

import numpy as np
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable

rng = np.random.default_rng(8)


def data(*shape, requires_grad=False):
    return torch.tensor(rng.standard_normal(shape), dtype=torch.double, requires_grad=requires_grad)


class LinearFunction(Function):
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


linear = LinearFunction.apply
inp = (data(5, 4, requires_grad=True), data(3, 4, requires_grad=True), data(3, requires_grad=True))
print("LinearFunction gradcheck:", torch.autograd.gradcheck(linear, inp, eps=1e-6, atol=1e-4))
x, w, b = data(5, 4), data(3, 4, requires_grad=True), data(3)
out = linear(x, w, b)
out.sum().backward()
print("only weight needs grad:", x.grad is None, b.grad is None, f"{w.grad.sum().item():.10g}")


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.constant = inputs[1]  # not a tensor: kept on ctx

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


t = data(4, requires_grad=True)
MulConstant.apply(t, 5.5).sum().backward()
print("MulConstant grad:", t.grad.tolist())


class MulConstantCombined(Function):
    """The same with the older style: ``forward(ctx, ...)`` and no setup_context."""

    @staticmethod
    def forward(ctx, tensor, constant):
        ctx.constant = constant
        return tensor * constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


t = data(4, requires_grad=True)
y = MulConstantCombined.apply(t, -2.0)
print("combined grad_fn:", type(y.grad_fn).__name__)
y.sum().backward()
print("MulConstantCombined grad:", t.grad.tolist())


class SortWithIndices(Function):
    @staticmethod
    def forward(ctx, x):
        values, idx = x.sort()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x, idx)
        return values, idx

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):
        x, idx = ctx.saved_tensors
        grad_input = torch.zeros_like(x)
        grad_input.index_add_(0, idx, g1)
        return grad_input


x = data(6, requires_grad=True)
values, idx = SortWithIndices.apply(x)
print("index requires_grad:", idx.requires_grad, "values requires_grad:", values.requires_grad)
(values * torch.arange(6, dtype=torch.double)).sum().backward()
print("sort grad:", x.grad.tolist())


class SimpleFunc(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):  # either may be None: nothing is materialized
        grad = torch.zeros(3, dtype=torch.double)
        if g1 is not None:
            grad += g1
        if g2 is not None:
            grad += g2 * 3
        return grad


x = data(3, requires_grad=True)
a, _ = SimpleFunc.apply(x)
(a * 2).sum().backward()
print("unmaterialized grad:", x.grad.tolist())


class AddOneInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


base = data(3, requires_grad=True)
x = base.clone()
version = x._version
y = AddOneInPlace.apply(x)
print("same object:", y is x, "version bumped:", x._version > version)
(y * y).sum().backward()
print("dirty grad:", base.grad.tolist())


class Linear(torch.nn.Module):
    def __init__(self, input_features, output_features, bias=True):
        super().__init__()
        self.input_features = input_features
        self.output_features = output_features
        self.weight = torch.nn.Parameter(
            torch.empty(output_features, input_features, dtype=torch.double))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(output_features, dtype=torch.double))
        else:
            self.register_parameter("bias", None)
        with torch.no_grad():
            self.weight.copy_(data(output_features, input_features) / math.sqrt(input_features))
            if self.bias is not None:
                self.bias.copy_(data(output_features))

    def forward(self, input):
        return LinearFunction.apply(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"input_features={self.input_features}, "
                f"output_features={self.output_features}, bias={self.bias is not None}")


layer = Linear(4, 2)
print(layer)
print(Linear(3, 1, bias=False))
print("parameters:", [n for n, _ in layer.named_parameters()])
opt = torch.optim.SGD(layer.parameters(), lr=0.1)
x = data(8, 4)
target = data(8, 2)


def train_step(x, target):
    opt.zero_grad()
    loss = ((layer(x) - target) ** 2).mean()
    loss.backward()
    opt.step()
    return loss


step = train_step  # jit-step
for i in range(4):
    print(f"step {i} loss {step(x, target).item():.10g}")
