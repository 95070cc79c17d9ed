"""``fusegrad.scipy``: differentiable versions of SciPy functions (``special``, ``stats``, ``linalg``, ``integrate``, ``signal``)."""

import importlib as _importlib

#: the submodules, imported on first use (PEP 562); ``optimize`` also gives ``minimize``
_SUBMODULES = ("integrate", "linalg", "optimize", "signal", "special", "stats")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name == "minimize":
        return _importlib.import_module(f"{__name__}.optimize").minimize
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBMODULES, "minimize"})
