"""Samplers: the order in which a ``DataLoader`` reads a map-style dataset's indices."""

from __future__ import annotations

from ...eager.creation import Generator, randint, randperm


class Sampler:
    """Yields dataset indices (or lists of them, for a batch sampler)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _child_generator(generator) -> Generator:
    """A generator seeded from ``generator`` (or afresh from the default one), as PyTorch
    seeds each epoch's permutation: seeded loaders repeat their epochs' orders."""
    seed = int(randint(0, 2**62, (), generator=generator).item())
    return Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A random permutation each epoch (or ``num_samples`` draws with replacement)."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None,
                 generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        g = _child_generator(self.generator)
        if self.replacement:  # in chunks of 32, as PyTorch: num_samples may be huge (1e10)
            for _ in range(self.num_samples // 32):
                yield from randint(0, n, (32,), generator=g).tolist()
            yield from randint(0, n, (self.num_samples % 32,), generator=g).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=g).tolist()
        yield from randperm(n, generator=g).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order each epoch."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of ``batch_size``."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
