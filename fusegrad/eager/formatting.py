"""``repr(tensor)`` exactly as PyTorch prints it (``torch._tensor_str``'s rules).

Floats: 4 decimals; integral values end in ``.``; scientific notation when the
largest magnitude is over 1e8 or more than 1000 times the smallest, or the
smallest is under 1e-4; one width for all elements; rows wrapped at 80
columns; more than 1000 elements summarised with ``...``. Suffixes: the dtype
when it is not the default (``dtype=fusegrad.float64``), then ``grad_fn=<...>``
or ``requires_grad=True``.
"""

from __future__ import annotations

import math

import numpy as np

from . import dtypes as D
from . import tensor_base as TB

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80


class _Formatter:
    def __init__(self, values: np.ndarray):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not self.floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        vals = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if vals.size == 0:
            return
        mag = np.abs(vals)
        lo, hi = float(mag.min()), float(mag.max())
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                self._widen(vals, f"{{:.{PRECISION}e}}")
            else:
                self._widen(vals, "{:.0f}", extra=1)
        elif hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
            self.sci_mode = True
            self._widen(vals, f"{{:.{PRECISION}e}}")
        else:
            self._widen(vals, f"{{:.{PRECISION}f}}")

    def _widen(self, vals, fmt: str, extra: int = 0) -> None:
        for v in vals.tolist():
            self.max_width = max(self.max_width, len(fmt.format(v)) + extra)

    def format(self, value) -> str:
        if self.floating:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{PRECISION}f}"
        else:
            ret = str(value)
        return (self.max_width - len(ret)) * " " + ret


def _summarized(a: np.ndarray) -> np.ndarray:
    """The edge items PyTorch shows of a large array (for choosing the format)."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        a = np.concatenate([a[:EDGEITEMS], a[-EDGEITEMS:]])
    if a.ndim == 1:
        return a
    return np.stack([_summarized(x) for x in a])


def _vector(a, indent: int, summarize: bool, fmt: _Formatter) -> str:
    element_length = fmt.max_width + 2
    per_line = max(1, math.floor((LINEWIDTH - indent) / element_length))
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        data = ([fmt.format(v) for v in a[:EDGEITEMS].tolist()] + [" ..."]
                + [fmt.format(v) for v in a[-EDGEITEMS:].tolist()])
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(a, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = ([_array_str(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)]
                + ["..."]
                + [_array_str(a[i], indent + 1, summarize, fmt) for i in range(n - EDGEITEMS, n)])
    else:
        rows = [_array_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _add_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t) -> str:
    prefix = "tensor("
    indent = len(prefix)
    data = t._data
    dt = t.dtype
    suffixes = []
    if not TB.is_concrete(data):
        body = f"<traced {data!r}>"
        suffixes.append(f"dtype={dt}")
    elif data.size == 0:
        body = "[]"
        if data.ndim != 1:
            suffixes.append(f"size={tuple(data.shape)}")
        if dt != D.get_default_dtype():
            suffixes.append(f"dtype={dt}")
    else:
        if dt not in (D.get_default_dtype(), D.int64, D.bool):
            suffixes.append(f"dtype={dt}")
        values = data.astype(np.float32) if data.dtype == np.float16 else data
        summarize = values.size > THRESHOLD
        fmt = _Formatter(_summarized(values) if summarize else values)
        body = _array_str(values, indent, summarize, fmt)
    if t._grad_fn is not None:
        suffixes.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._rg:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
