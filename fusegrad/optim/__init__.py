"""``fusegrad.optim``: eager optimizers with PyTorch's update rules (``SGD``, ``Adam``,
``AdamW``, ``RMSprop``, ``Adagrad``, ``Adadelta``; they also compile under ``fg.jit``),
learning-rate schedules (``lr_scheduler``), and functional optimizers for compiled steps
(``sgd``, ``momentum``, ``adam``, ``adamw``).

The eager optimizers round every step as PyTorch's single-tensor (``foreach=False``)
code does, so float32 parameters get PyTorch's bits given the same gradients (see
``_fused``). ``foreach``, ``fused``, ``capturable`` and ``differentiable`` are accepted
and kept in the parameter groups, as PyTorch's; the update is the single-tensor one.

>>> import fusegrad as fg
>>> w = fg.tensor([1.0, -2.0], requires_grad=True)
>>> opt = fg.optim.SGD([w], lr=0.1)
>>> (w * w).sum().backward()
>>> opt.step()
>>> w
tensor([ 0.8000, -1.6000], requires_grad=True)
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

# isort: split
# after the submodules adam.py and sgd.py, so these names are the functions, not them
from .functional import adam, adamw, momentum, sgd

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "adam", "adamw",
           "lr_scheduler", "momentum", "sgd"]
