"""``fusegrad.utils.data``: datasets, samplers and ``DataLoader``, as PyTorch's.

>>> import fusegrad as fg
>>> from fusegrad.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(fg.arange(6.0).reshape(3, 2), fg.tensor([0, 1, 0]))
>>> x, y = next(iter(DataLoader(ds, batch_size=2)))
>>> x.shape, y
(fusegrad.Size([2, 2]), tensor([0, 1]))
"""

from .dataloader import DataLoader, default_collate
from .dataset import (
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
)

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset",
           "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler",
           "TensorDataset", "default_collate", "random_split"]
