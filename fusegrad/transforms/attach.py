"""``.njit(*example)`` and ``.cfunc(*example)`` of the callables ``grad``,
``value_and_grad`` and ``hvp`` return: ``export``, which makes them (40 KiB of code a
gradient does not need), is imported by their first call."""

from __future__ import annotations


def attach(obj) -> None:
    """Give ``obj`` (a fusegrad callable) its ``.njit(*example)`` and ``.cfunc(*example)``."""

    def njit(*example_args):
        from .export import export_njit

        return export_njit(obj, *example_args)

    def cfunc(*example_args):
        from .export import cfunc

        return cfunc(obj, *example_args)

    obj.njit, obj.cfunc = njit, cfunc
