"""Importing the baseline libraries, configured for the benchmark (or ``Unavailable``)."""

from __future__ import annotations

import contextlib
import sys

from .harness import Unavailable


def jax():
    """``jax`` with float64 enabled; its thread count comes from ``XLA_FLAGS`` (set by run.py)."""
    try:
        import jax as _jax
    except Exception as e:
        raise Unavailable(f"jax: {type(e).__name__}: {e}") from None
    _jax.config.update("jax_enable_x64", True)
    return _jax


def torch():
    """``torch``; run.py sets its thread count (``torch.set_num_threads``)."""
    try:
        import torch as _torch
    except Exception as e:
        raise Unavailable(f"torch: {type(e).__name__}: {e}") from None
    return _torch


def set_torch_threads(n: int | None) -> None:
    """Pin PyTorch's intra-op threads if it is importable (and has not been set yet)."""
    if n is None:
        return
    try:
        import torch as _torch
    except Exception:
        return
    _torch.set_num_threads(n)
    # only allowed before PyTorch's first parallel work
    with contextlib.suppress(RuntimeError):
        _torch.set_num_interop_threads(n)


def versions() -> dict[str, str | None]:
    """Installed versions of everything timed, read without importing it."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for pkg in ("fusegrad", "numpy", "numba", "llvmlite", "scipy", "jax", "jaxlib", "torch"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    if out["fusegrad"] is None:  # a source checkout that was not pip-installed
        from fusegrad import __version__

        out["fusegrad"] = f"{__version__} (source tree)"
    out["python"] = sys.version.split()[0]
    return out
