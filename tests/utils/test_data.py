"""fusegrad.utils.data: datasets, samplers, DataLoader and collation as PyTorch's."""

import collections

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)


def _ds(n=10):
    return TensorDataset(fg.arange(2.0 * n).reshape(n, 2), fg.arange(n))


def test_tensor_dataset_and_sequential_batches():
    ds = _ds()
    assert len(ds) == 10 and ds[3][0].tolist() == [6.0, 7.0] and ds[3][1].item() == 3
    batches = list(DataLoader(ds, batch_size=4))
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    assert isinstance(batches[0], list)  # a tuple sample collates into a list, as PyTorch
    assert batches[1][1].tolist() == [4, 5, 6, 7] and batches[1][0].shape == (4, 2)
    assert [len(b[1]) for b in DataLoader(ds, batch_size=4, drop_last=True)] == [4, 4]
    assert len(DataLoader(ds, batch_size=4)) == 3
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    with pytest.raises(AssertionError, match="Size mismatch"):
        TensorDataset(fg.zeros(3), fg.zeros(4))


def test_shuffle_is_a_permutation_and_seeded():
    def order(seed):
        g = fg.Generator().manual_seed(seed)
        loader = DataLoader(_ds(), batch_size=3, shuffle=True, generator=g)
        return [[int(v) for v in b[1].tolist()] for b in loader], loader

    a, loader = order(0)
    b, _ = order(0)
    c, _ = order(1)
    assert a == b and a != c
    flat = [i for batch in a for i in batch]
    assert sorted(flat) == list(range(10)) and flat != list(range(10))
    epoch2 = [int(v) for bt in loader for v in bt[1].tolist()]
    assert epoch2 != flat and sorted(epoch2) == list(range(10))  # a new order per epoch


def test_default_collate_as_pytorch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as t_collate

    Point = collections.namedtuple("Point", "x y")
    batches = [
        [1.5, 2.5],
        [1, 2],
        [True, False],
        [np.array([1.0, 2.0]), np.array([3.0, 4.0])],
        [np.float32(1.0), np.float32(2.0)],
        [{"a": 1.0, "b": (1, 2)}, {"a": 2.0, "b": (3, 4)}],
        [Point(1.0, 2), Point(3.0, 4)],
        [("x", 1), ("y", 2)],
    ]

    def plain(v):
        if hasattr(v, "numpy"):
            return ("T", v.numpy().tolist(), str(v.numpy().dtype))
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return (type(v).__name__, *[plain(x) for x in v])
        if isinstance(v, list | tuple):
            return (type(v).__name__, *[plain(x) for x in v])
        return v

    for b in batches:
        assert plain(default_collate(b)) == plain(t_collate(b)), b
    tb = [torch.ones(2), torch.zeros(2)]
    assert plain(default_collate([fg.ones(2), fg.zeros(2)])) == plain(t_collate(tb))


def test_collate_fn_sampler_and_batch_sampler():
    ds = _ds()
    loader = DataLoader(ds, batch_size=2, collate_fn=lambda b: [int(s[1]) for s in b])
    assert list(loader)[:2] == [[0, 1], [2, 3]]
    loader = DataLoader(ds, batch_size=None)
    assert [int(s[1]) for s in loader] == list(range(10))
    bs = BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=False)
    assert list(bs) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and len(bs) == 3
    loader = DataLoader(ds, batch_sampler=[[9, 0], [5]])
    assert [b[1].tolist() for b in loader] == [[9, 0], [5]]
    loader = DataLoader(ds, batch_size=5, sampler=list(reversed(range(10))))
    assert [b[1].tolist() for b in loader] == [[9, 8, 7, 6, 5], [4, 3, 2, 1, 0]]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, batch_sampler=bs, batch_size=3)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=[0], shuffle=True)


def test_workers_are_not_supported_clearly():
    with pytest.raises(NotImplementedError, match="num_workers=0"):
        DataLoader(_ds(), num_workers=2)


def test_iterable_dataset():
    class Count(IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in DataLoader(Count(), batch_size=3)] == [[0, 1, 2], [3, 4, 5],
                                                                       [6]]
    assert [b.tolist() for b in DataLoader(Count(), batch_size=3, drop_last=True)] == [
        [0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError):
        DataLoader(Count(), shuffle=True)


def test_custom_map_dataset_and_subset():
    class Squares(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return {"x": float(i), "y": i * i}

    batch = next(iter(DataLoader(Squares(), batch_size=3)))
    assert batch["x"].dtype == fg.float64 and batch["y"].tolist() == [0, 1, 4]
    sub = Subset(Squares(), [5, 1])
    assert len(sub) == 2 and sub[0]["y"] == 25
    assert len(Squares() + Squares()) == 12 and (Squares() + Squares())[7]["y"] == 1


def test_random_split_lengths_and_fractions():
    ds = _ds()
    a, b = random_split(ds, [7, 3], generator=fg.Generator().manual_seed(0))
    assert (len(a), len(b)) == (7, 3)
    assert sorted(a.indices + b.indices) == list(range(10))
    parts = random_split(ds, [0.5, 0.3, 0.2], generator=fg.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [5, 3, 2]
    parts = random_split(_ds(11), [0.5, 0.5])
    assert [len(p) for p in parts] == [6, 5]  # the remainder goes round-robin, as PyTorch
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [5, 6])


def test_random_sampler_with_replacement():
    s = RandomSampler(range(5), replacement=True, num_samples=20,
                      generator=fg.Generator().manual_seed(3))
    draws = list(s)
    assert len(draws) == 20 and set(draws) <= set(range(5)) and len(s) == 20
    s = RandomSampler(range(4), num_samples=10, generator=fg.Generator().manual_seed(3))
    draws = list(s)
    assert len(draws) == 10 and sorted(draws[:4]) == [0, 1, 2, 3]


def test_random_sampler_with_replacement_draws_lazily():
    """minGPT's trainer samples 1e10 indices with replacement: drawn as iterated."""
    ds = TensorDataset(fg.arange(10))
    sampler = RandomSampler(ds, replacement=True, num_samples=int(1e10))
    assert len(sampler) == int(1e10)
    it = iter(DataLoader(ds, sampler=sampler, batch_size=4, pin_memory=True))
    for _ in range(20):
        (batch,) = next(it)
        assert tuple(batch.shape) == (4,) and int(batch.min()) >= 0 and int(batch.max()) < 10
    assert len(list(RandomSampler(ds, replacement=True, num_samples=70))) == 70
