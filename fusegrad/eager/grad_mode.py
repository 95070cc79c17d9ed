"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

Each works as a context manager and as a decorator (``@fg.no_grad()`` and bare
``@fg.no_grad``), as in PyTorch. The mode is thread-local: a ``no_grad`` block
in one thread does not stop another thread from recording.
"""

from __future__ import annotations

import functools
import inspect
import threading


class _Mode(threading.local):
    def __init__(self):
        self.grad = True
        self.inference = False


_mode = _Mode()


def is_grad_enabled() -> bool:
    """Whether operations on tensors that require grad are recorded (thread-local)."""
    return _mode.grad


def is_inference_mode_enabled() -> bool:
    return _mode.inference


class _DecoratorContextManager:
    """A context manager that also decorates functions (and generators), like PyTorch's."""

    def __call__(self, func):
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def gen_wrapper(*args, **kwargs):
                gen = func(*args, **kwargs)
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except BaseException as exc:
                        with self.clone():
                            response = gen.throw(exc)
                    else:
                        with self.clone():
                            response = gen.send(request)

            return gen_wrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)

        return wrapper

    def clone(self):
        return self.__class__()


class _NoParamDecorator(_DecoratorContextManager):
    """Allows the bare form ``@fg.no_grad`` as well as ``@fg.no_grad()``."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecorator):
    """Operations inside do not record autograd history (results do not require grad)."""

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = _mode.grad
        _mode.grad = False

    def __exit__(self, *exc) -> None:
        _mode.grad = self.prev


class enable_grad(_NoParamDecorator):
    """Turn recording back on inside a ``no_grad`` block."""

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = _mode.grad
        _mode.grad = True

    def __exit__(self, *exc) -> None:
        _mode.grad = self.prev


class set_grad_enabled(_DecoratorContextManager):
    """``set_grad_enabled(b)`` sets the mode now (a plain call) or for a block (``with``)."""

    def __init__(self, mode: bool) -> None:
        self.prev = _mode.grad
        self.mode = bool(mode)
        _mode.grad = self.mode

    def __call__(self, func):
        _mode.grad = self.prev
        return super().__call__(func)

    def __enter__(self) -> None:
        _mode.grad = self.mode

    def __exit__(self, *exc) -> None:
        _mode.grad = self.prev

    def clone(self):
        return _Scoped(self.mode)


class _Scoped(set_grad_enabled):
    """A ``set_grad_enabled`` that only acts inside ``with`` (what decorators use)."""

    def __init__(self, mode: bool) -> None:
        self.prev = _mode.grad
        self.mode = bool(mode)

    def __enter__(self) -> None:
        self.prev = _mode.grad
        _mode.grad = self.mode


class inference_mode(_NoParamDecorator):
    """Like ``no_grad``; tensors made inside are inference tensors (``is_inference()``).

    Inference tensors cannot be saved for backward or modified in place
    outside inference mode, as in PyTorch.
    """

    def __new__(cls, mode=True):
        if callable(mode):
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode) if not callable(mode) else True
        self.prev = (True, False)

    def __enter__(self) -> None:
        self.prev = (_mode.grad, _mode.inference)
        if self.mode:
            _mode.grad, _mode.inference = False, True
        else:
            _mode.inference = False

    def __exit__(self, *exc) -> None:
        _mode.grad, _mode.inference = self.prev

    def clone(self):
        return self.__class__(self.mode)
