"""A full reduction's scratch space is a few kilobytes, whatever its input's size.

The vectorised sum writes each chunk of 512 values into a row of lanes and sums the
row into the chunk's partial result; there is one row per thread, not one per chunk
(which made ``fg.jit(sum)`` of 1e8 float64 take 800 MB more).
"""

import tracemalloc

import numpy as np
import pytest

import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.runtime.compiled import executable
from fusegrad.transforms.inspection import make_ir

pytestmark = [pytest.mark.compiled, pytest.mark.numba_codegen]  # the Numba entry's scratch


@pytest.mark.parametrize("dtype", [np.float64, np.int8])
def test_full_reduction_scratch_is_bounded(dtype):
    n = 1 << 22
    x = np.ones(n, dtype)
    exe = executable(make_ir(lambda v: fnp.sum(v * 2))(x))
    assert exe(x)[0] == 2 * n  # compiled
    exe.pool.free.clear()  # the next call allocates its buffers afresh
    tracemalloc.start()
    try:
        got = exe(x)[0]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == 2 * n
    # the chunks' partial sums (8 bytes per 512 elements) and a row of lanes per thread
    assert peak < n * 8 // 512 + (1 << 20), f"peak {peak} bytes for {n} elements"


def test_scratch_arrays_have_one_row_per_thread(monkeypatch):
    import numba

    monkeypatch.setattr(config, "REUSE_BUFFERS", True)
    fn = make_ir(lambda v: fnp.sum(fnp.sin(v)))(np.ones(1 << 20))
    exe = executable(fn)
    rows = [a.shape for a in exe.pool.plan.arena if len(a.shape) == 2]
    assert rows == [(numba.config.NUMBA_NUM_THREADS, 512)]
    x = np.linspace(0.1, 3.0, 1 << 20)
    np.testing.assert_allclose(exe(x)[0], np.sin(x).sum(), rtol=1e-12)
