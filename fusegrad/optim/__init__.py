"""``fusegrad.optim``: eager optimizers with PyTorch's update rules.

>>> import fusegrad as fg
>>> w = fg.tensor([1.0, -2.0], requires_grad=True)
>>> opt = fg.optim.SGD([w], lr=0.1)
>>> (w * w).sum().backward()
>>> opt.step()
>>> w
tensor([ 0.8000, -1.6000], requires_grad=True)
"""

from .adam import Adam
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer"]
