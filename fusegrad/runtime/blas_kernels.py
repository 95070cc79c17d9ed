"""Which kernels the loaded OpenBLAS libraries run, and whether the CPU has faster ones.

OpenBLAS picks its kernels once, when the library loads: from the CPU, or from
``OPENBLAS_CORETYPE`` when that is set. The builds bundled with NumPy and SciPy (0.3.30
and later) choose their AVX-512 ("SkylakeX") kernels on an AMD Zen 4/5 CPU by
themselves; ``OPENBLAS_CORETYPE=Haswell`` (or ``Zen``) forces the AVX2 ones, which run
the float32 products of an MLP step about 1.9x slower there (docs/performance.md). The
choice cannot be changed once the library is loaded, so fusegrad only reports it:
``note()`` says when a library runs AVX2 kernels on a CPU with AVX-512, and how to fix it.
"""

from __future__ import annotations

import os

#: OpenBLAS core names whose kernels use at most AVX2
AVX2_CORES = frozenset({"haswell", "zen", "sandybridge", "nehalem", "core2", "prescott",
                        "atom", "penryn", "dunnington", "barcelona", "bulldozer",
                        "piledriver", "steamroller", "excavator"})
_AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl")


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def libraries() -> list[dict]:
    """threadpoolctl's description of each OpenBLAS library loaded (SciPy's included)."""
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (the library compiled products call)
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [i for i in threadpool_info() if i.get("internal_api") == "openblas"]


def note(libs: list[dict] | None = None, flags: frozenset[str] | None = None) -> str | None:
    """A sentence if some OpenBLAS library runs AVX2 kernels on a CPU with AVX-512,
    else None."""
    libs = libraries() if libs is None else libs
    flags = cpu_flags() if flags is None else flags
    if not all(f in flags for f in _AVX512):
        return None
    slow = sorted({str(i.get("architecture")) for i in libs
                   if str(i.get("architecture", "")).lower() in AVX2_CORES})
    if not slow:
        return None
    preset = os.environ.get("OPENBLAS_CORETYPE")
    why = f"OPENBLAS_CORETYPE={preset} is set" if preset else "OpenBLAS chose them"
    return (f"OpenBLAS runs its {'/'.join(slow)} (AVX2) kernels on a CPU with AVX-512 "
            f"({why}); float32 products run about half as fast as they could. Unset "
            "OPENBLAS_CORETYPE (or set it to SkylakeX) before NumPy/SciPy are imported.")
