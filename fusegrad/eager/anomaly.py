"""Anomaly detection for eager autograd, as ``torch.autograd.detect_anomaly``.

While it is on, every recorded operation keeps the user's stack at the time of its
forward call (``node.metadata["traceback_"]``, a list of ``traceback.FrameSummary``,
outermost first; the innermost user frame is ``node.metadata["location"]``), and:

* a backward function that returns NaN raises ``RuntimeError`` naming the node
  (``"Function 'SqrtBackward0' returned nan values in its 0th output."``) and the
  forward line that created it (``file:line: code``), with the forward traceback;
* an exception raised inside a backward function gets the same forward
  location added as a note;
* a recorded forward operation whose result holds NaN emits a ``RuntimeWarning``
  naming the node and the line (a warning, not an error: a NaN in a branch that
  ``where`` discards is legitimate and its gradient is fine).

Infinities are not anomalies, as in PyTorch: ``sqrt`` at 0 has an infinite
derivative, and where that turns into NaN (``inf * 0``) the node doing it is
reported. The mode is process-wide (as PyTorch's); it costs one flag test per
recorded operation and per backward node when off.
"""

from __future__ import annotations

import linecache
import os
import sys
import traceback
import warnings

import numpy as np

from . import tensor_base as TB

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _Mode:
    __slots__ = ("check_nan", "enabled")

    def __init__(self):
        self.enabled = False
        self.check_nan = True


MODE = _Mode()


def is_anomaly_enabled() -> bool:
    return MODE.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return MODE.check_nan


class set_detect_anomaly:
    """``set_detect_anomaly(True)`` turns anomaly detection on now; as ``with
    set_detect_anomaly(mode):`` only for the block. ``check_nan=False`` keeps the
    forward tracebacks but does not check for NaN."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (MODE.enabled, MODE.check_nan)
        MODE.enabled, MODE.check_nan = bool(mode), bool(check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        MODE.enabled, MODE.check_nan = self.prev


class detect_anomaly:
    """``with detect_anomaly():`` anomaly detection on for the block (also a decorator)."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self.prev = None

    def __enter__(self):
        self.prev = (MODE.enabled, MODE.check_nan)
        MODE.enabled, MODE.check_nan = True, self.check_nan
        return self

    def __exit__(self, *exc):
        MODE.enabled, MODE.check_nan = self.prev

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapped


def _user_frames() -> list:
    """The stack outside fusegrad, outermost first."""
    frames = []
    f = sys._getframe(2)
    while f is not None:
        fname = f.f_code.co_filename
        if not fname.startswith(_PKG_DIR) and not fname.startswith("<frozen"):
            frames.append((fname, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    frames.reverse()
    return frames


def record(node, outs) -> None:
    """Called for each node made while the mode is on: keep the forward stack; warn if
    the forward results ``outs`` (tensors) hold NaN."""
    frames = _user_frames()
    meta = node.metadata
    meta["traceback_"] = [traceback.FrameSummary(f, ln, name, lookup_line=False)
                          for f, ln, name in frames]
    meta["location"] = frames[-1] if frames else None
    if MODE.check_nan:
        for i, t in enumerate(outs):
            data = t._data if isinstance(t, TB.TensorBase) else None
            if _has_nan(data):
                warnings.warn(f"anomaly detection: the forward of {node.name()} produced nan "
                              f"values in its {_nth(i)} output, at {where(node)}",
                              RuntimeWarning, stacklevel=_stacklevel())


def _stacklevel() -> int:
    """The warning's stack level that points at the user's frame."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f, level = f.f_back, level + 1
    return level


def _has_nan(data) -> bool:
    return (type(data) is np.ndarray and np.issubdtype(data.dtype, np.inexact)
            and bool(np.isnan(data).any()))


def _nth(i: int) -> str:
    return f"{i}th"  # PyTorch's wording ("0th", "1th")


def where(node) -> str:
    """``file:line: code`` of the forward call that created ``node``."""
    loc = node.__dict__.get("_metadata", {}).get("location")
    if loc is None:
        return ("an unknown line (the node was made while anomaly detection was off; "
                "enable it before the forward pass)")
    fname, line, _ = loc
    code = linecache.getline(fname, line).strip()
    return f"{fname}:{line}" + (f": {code}" if code else "")


def _forward_trace(node) -> str:
    tb = node.__dict__.get("_metadata", {}).get("traceback_")
    if not tb:
        return ""
    return ("\nTraceback of the forward call that created it:\n"
            + "".join(traceback.format_list(tb)).rstrip())


def check_backward(node, outs) -> None:
    """Raise if ``node``'s backward returned NaN (``outs``: its gradients)."""
    if not MODE.check_nan:
        return
    for i, g in enumerate(outs):
        data = g._data if isinstance(g, TB.TensorBase) else g
        if _has_nan(data):
            err = RuntimeError(f"Function '{node.name()}' returned nan values in its "
                               f"{_nth(i)} output. Its forward call: {where(node)}"
                               + _forward_trace(node))
            err.anomaly_reported = True
            raise err


def annotate(node, err: BaseException) -> None:
    """Add the forward location of ``node`` to an exception raised by its backward."""
    if hasattr(err, "add_note") and not getattr(err, "anomaly_reported", False):
        err.anomaly_reported = True
        err.add_note(f"(anomaly detection) raised by the backward of {node.name()}, whose "
                     f"forward call was {where(node)}" + _forward_trace(node))
