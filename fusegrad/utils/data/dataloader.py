"""``DataLoader``: batches of a dataset, collated into Tensors, in the main process."""

from __future__ import annotations

import collections.abc
import numbers

import numpy as np

from ...eager import tensor_base as TB
from ...eager.creation import as_tensor, tensor
from ...eager.functions import stack
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def default_collate(batch):
    """Stack a list of samples into a batch, as PyTorch: Tensors and NumPy arrays are
    stacked (arrays become Tensors), numbers become a 1-d Tensor (floats float64, ints
    int64), strings are left as they are, and tuples, lists, dicts and namedtuples are collated
    field by field (a tuple gives a list, as in PyTorch)."""
    first = batch[0]
    if isinstance(first, TB.TensorBase):
        return stack(list(batch), 0)
    if isinstance(first, np.ndarray):
        if first.dtype.kind in "OSU":
            return list(batch)
        return stack([as_tensor(b) for b in batch], 0)
    if isinstance(first, np.generic):
        return as_tensor(np.asarray(batch))
    if isinstance(first, bool):
        return tensor(list(batch))
    if isinstance(first, float):
        return tensor(list(batch), dtype=np.float64)
    if isinstance(first, numbers.Integral):
        return tensor(list(batch))
    if isinstance(first, str | bytes):
        return batch
    if isinstance(first, collections.abc.Mapping):
        return {k: default_collate([b[k] for b in batch]) for k in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        if any(len(b) != len(first) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(s) for s in zip(*batch)]
        if isinstance(first, tuple | list):  # a tuple gives a list, as PyTorch
            return fields
        try:
            return type(first)(fields)
        except TypeError:
            return fields
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(first)}")


def _identity(x):
    return x


class DataLoader:
    """Iterate over ``dataset`` in batches.

    ``batch_size`` (None: samples one by one, uncollated), ``shuffle`` (a new
    permutation each epoch, from ``generator`` when given), ``sampler`` or
    ``batch_sampler``, ``drop_last``, ``collate_fn`` (default: ``default_collate``).
    Data is loaded in the calling process: ``num_workers`` must be 0.
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if num_workers > 0:
            raise NotImplementedError("fusegrad's DataLoader loads data in the main process: "
                                      "use num_workers=0")
        self.dataset, self.num_workers, self.generator = dataset, num_workers, generator
        self.pin_memory, self.timeout = pin_memory, timeout
        iterable = isinstance(dataset, IterableDataset)
        if iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle, "
                             "sampler and batch_sampler options")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        auto = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if auto else _identity)

    def __iter__(self):
        if isinstance(self.dataset, IterableDataset):
            yield from self._iter_stream()
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])

    def _iter_stream(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)
