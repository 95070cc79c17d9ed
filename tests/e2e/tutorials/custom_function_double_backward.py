"""Double backward with custom functions, in the style of the tutorial of that name.

A custom ``Function`` whose backward is written with differentiable operations
supports a second derivative. Shown for saving inputs (Square), saving outputs
(Exp), and saving an intermediate that is neither (Sinh, which returns it as an
extra output so it can be saved), each checked with gradcheck and gradgradcheck.
"""

import numpy as np
import torch

rng = np.random.default_rng(5)


def leaf(*shape):
    return torch.tensor(rng.random(shape), dtype=torch.double, requires_grad=True)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)  # an input: safe to save
        return x ** 2

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return grad_out * 2 * x  # differentiable, so double backward works


x = leaf(3, 3)
print("Square gradcheck", torch.autograd.gradcheck(Square.apply, x))
print("Square gradgradcheck", torch.autograd.gradgradcheck(Square.apply, x))
y = Square.apply(x)
(g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
(gg,) = torch.autograd.grad(g.sum(), x)
print("Square first", f"{g.sum().item():.10g}", "second", f"{gg.sum().item():.10g}")


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        result = torch.exp(x)
        ctx.save_for_backward(result)  # an output: also fine
        return result

    @staticmethod
    def backward(ctx, grad_out):
        result, = ctx.saved_tensors
        return result * grad_out


x = leaf(3, 3)
print("Exp gradcheck", torch.autograd.gradcheck(Exp.apply, x))
print("Exp gradgradcheck", torch.autograd.gradgradcheck(Exp.apply, x))
y = Exp.apply(x)
(g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
(gg,) = torch.autograd.grad(g.sum(), x)
print("Exp first", f"{g.sum().item():.10g}", "second", f"{gg.sum().item():.10g}")


class Sinh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        expx = torch.exp(x)
        expnegx = torch.exp(-x)
        ctx.save_for_backward(expx, expnegx)
        # the intermediates are returned as well, so autograd tracks them
        return (expx - expnegx) / 2, expx, expnegx

    @staticmethod
    def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
        expx, expnegx = ctx.saved_tensors
        grad_input = grad_out * (expx + expnegx) / 2
        # the extra outputs' gradients flow back into x too
        grad_input += _grad_out_exp * expx
        grad_input -= _grad_out_negexp * expnegx
        return grad_input


def sinh(x):
    return Sinh.apply(x)[0]


x = leaf(3, 3)
print("Sinh gradcheck", torch.autograd.gradcheck(sinh, x))
print("Sinh gradgradcheck", torch.autograd.gradgradcheck(sinh, x))
(g,) = torch.autograd.grad(sinh(x).sum(), x, create_graph=True)
(gg,) = torch.autograd.grad(g.sum(), x)
print("Sinh first", f"{g.sum().item():.10g}", "second", f"{gg.sum().item():.10g}")


class SinhBad(torch.autograd.Function):
    """Saves an intermediate without returning it: first derivative right, second wrong."""

    @staticmethod
    def forward(ctx, x):
        expx = torch.exp(x)
        expnegx = torch.exp(-x)
        ctx.expx = expx
        ctx.expnegx = expnegx
        return (expx - expnegx) / 2

    @staticmethod
    def backward(ctx, grad_out):
        expx = ctx.expx
        expnegx = ctx.expnegx
        return grad_out * (expx + expnegx) / 2


x = leaf(3, 3)
print("SinhBad gradcheck", torch.autograd.gradcheck(SinhBad.apply, x))
(g,) = torch.autograd.grad(SinhBad.apply(x).sum(), x, create_graph=True)
print("SinhBad first-order grad requires_grad:", g.requires_grad)
try:
    torch.autograd.gradgradcheck(SinhBad.apply, x)
    print("SinhBad gradgradcheck passed")
except RuntimeError as e:  # GradcheckError is a RuntimeError
    print("SinhBad gradgradcheck failed:", type(e).__name__)
