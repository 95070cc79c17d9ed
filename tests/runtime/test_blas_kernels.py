"""``runtime.blas_kernels.note()`` names AVX2 OpenBLAS kernels on a CPU with AVX-512
(the case where products run at half speed), and is silent otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fusegrad.runtime import blas_kernels

AVX512 = frozenset({"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl"})
AVX2 = frozenset({"avx2", "fma"})


def _lib(arch):
    return {"internal_api": "openblas", "architecture": arch}


@pytest.mark.parametrize(("arch", "flags", "slow"), [
    ("Haswell", AVX512, True),
    ("Zen", AVX512, True),
    ("SkylakeX", AVX512, False),
    ("Cooperlake", AVX512, False),
    ("Haswell", AVX2, False),  # the best this CPU has
])
def test_note_names_avx2_kernels_on_an_avx512_cpu(arch, flags, slow):
    text = blas_kernels.note([_lib(arch)], flags)
    assert (text is not None) == slow
    if slow:
        assert arch in text and "OPENBLAS_CORETYPE" in text


def test_note_with_several_libraries():
    text = blas_kernels.note([_lib("SkylakeX"), _lib("Haswell")], AVX512)
    assert text is not None and text.startswith("OpenBLAS runs its Haswell (AVX2)")
    assert blas_kernels.note([], AVX512) is None


@pytest.mark.skipif(not blas_kernels.libraries(), reason="no OpenBLAS loaded")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/cpuinfo")
def test_preset_haswell_is_reported_in_a_fresh_process():
    """OpenBLAS reads OPENBLAS_CORETYPE when it loads: a process started with Haswell
    runs (and reports) those kernels."""
    env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell"}
    out = subprocess.run(
        [sys.executable, "-c", "from fusegrad.runtime import blas_kernels as b; "
         "print(sorted({i['architecture'] for i in b.libraries()})); print(b.note())"],
        env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "Haswell" in out.splitlines()[0]
    has_avx512 = all(f in blas_kernels.cpu_flags() for f in AVX512 - AVX2)
    assert ("OPENBLAS_CORETYPE=Haswell is set" in out) == has_avx512
