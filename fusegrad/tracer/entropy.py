"""Which calls that take a seed from the OS are seeded after all.

``np.random.RandomState(seed)`` first makes an unseeded bit generator (drawing OS
entropy, which ``tracer.effects`` watches for) and then seeds it: the call on the
caller's line tells it apart from ``RandomState()``.
"""

from __future__ import annotations

import ast
import linecache


def _call_text(frame) -> str | None:
    """The source of the expression ``frame`` is executing (a call), from its positions."""
    code = frame.f_code
    try:
        line, end, col, end_col = list(code.co_positions())[frame.f_lasti // 2]
    except (IndexError, ValueError):
        return None
    if None in (line, end, col, end_col):
        return None
    lines = linecache.getlines(code.co_filename)[line - 1:end]
    if not lines:
        return None
    data = [x.encode() for x in lines]  # the offsets count UTF-8 bytes
    data[-1] = data[-1][:end_col]
    data[0] = data[0][col:]
    return b"".join(data).decode(errors="replace")


def seeded_call(frame) -> bool:
    """Whether ``frame`` is calling ``RandomState(seed)`` (any spelling of the name) with a
    seed that is not the literal ``None``."""
    text = _call_text(frame)
    if not text:
        return False
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return False
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if name != "RandomState":
        return False
    seeds = node.args[:1] + [k.value for k in node.keywords if k.arg == "seed"]
    return any(not (isinstance(s, ast.Constant) and s.value is None) for s in seeds)
