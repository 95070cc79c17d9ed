"""A Function's fingerprint: the SHA-256 of a canonical form of everything its text shows.

The pass cache names its entries by the program (``runtime.pass_cache``). Printing a
large program's text to hash it (``printer.print_function``: names, attribute
formatting, one string per op) cost a GPT training step's warm start 35 ms; this walks
the ops once and hashes the pickle of plain tuples instead.

The form holds, per op, its name, its operands as the numbers of their definitions
(parameters first, as the text names them), its attributes sorted by key, its results'
types, its regions (each numbered on its own, as in the text) and its source location
(``locs``); and the function's name, its parameters' hints and types and its results.
Types and locations are numbered in the order they are met, their texts listed once.
Whatever the text distinguishes, the form does: two programs with different texts
have different fingerprints (it may tell apart more: a parameter's hint the text
replaced by ``%arg<i>``). The form is made of ints, floats, complex numbers,
strings, booleans, None and tuples, which ``pickle`` writes exactly and by value alone
(without its memo, which would depend on which objects are shared): the bytes read
back to the form, so two forms never give the same bytes. An attribute of another
kind is kept as its text form, of a class of its own so that it cannot read as a
string.

None where the text has no form for an attribute (``printer.format_attr_value`` raises
TypeError), or for invalid IR (a value used before it is defined, or defined twice).
"""

from __future__ import annotations

import io
import pickle

import numpy as np

from .._sources import sha256
from .printer import format_attr_value

_EXACT = frozenset((int, float, str, bool, complex, type(None)))


class _Invalid(Exception):
    """The function has no fingerprint."""


class _Text(str):
    """An attribute's text form (``printer.format_attr_value``), for a kind not held as
    it is: pickled as this class, never read as a string attribute."""

    __slots__ = ()


def _attr(v):
    t = type(v)
    if t in _EXACT:
        return v
    if t is tuple or t is list:
        return tuple(_attr(e) for e in v)
    if isinstance(v, np.generic):
        return _attr(v.item())
    try:
        return _Text(format_attr_value(v))
    except TypeError:
        raise _Invalid from None


def _attrs(attrs: dict) -> tuple:
    items = sorted(attrs.items()) if len(attrs) > 1 else attrs.items()
    out = []
    for k, v in items:
        out.append(k)
        out.append(v if type(v) in _EXACT else _attr(v))
    return tuple(out)


class _Tables:
    """The texts of the types and source locations met, each numbered once: the form
    holds their numbers (``repr`` of an int is cheaper than of a path)."""

    def __init__(self):
        self.types: dict = {}  # id(TensorType) -> number (the function keeps them alive)
        self.by_text: dict = {}  # type text -> number
        self.type_texts: list = []
        self.locs: dict = {None: 0}
        self.loc_texts: list = [None]

    def type(self, t) -> int:
        k = self.types.get(id(t))
        if k is None:  # numbered by text: equal types are often distinct objects
            text = str(t)
            k = self.by_text.get(text)
            if k is None:
                k = self.by_text[text] = len(self.type_texts)
                self.type_texts.append(text)
            self.types[id(t)] = k
        return k

    def loc(self, loc) -> int:
        k = self.locs.get(loc)
        if k is None:
            k = self.locs[loc] = len(self.loc_texts)
            self.loc_texts.append(loc)
        return k


def _form(fn, locs: bool, tables: _Tables) -> tuple:
    numbers: dict = {}
    number = numbers.__getitem__
    type_of, loc_of = tables.type, tables.loc
    known_types = tables.types
    params = []
    for p in fn.params:
        if p in numbers:
            raise _Invalid
        numbers[p] = len(numbers)
        params.append((p.hint, type_of(p.type)))
    ops = []
    n = len(numbers)
    try:
        for op in fn.ops:
            operands = tuple(map(number, op.operands))
            results = []
            for r in op.results:
                if r in numbers:
                    raise _Invalid
                numbers[r] = n
                n += 1
                t = r.type
                k = known_types.get(id(t))
                results.append(k if k is not None else type_of(t))
            ops.append((op.name, operands, _attrs(op.attrs) if op.attrs else (),
                        tuple(results),
                        tuple(_form(g, locs, tables) for g in op.regions) if op.regions else (),
                        loc_of(op.loc) if locs else 0))
        returned = tuple(map(number, fn.results))
    except KeyError:  # a value used but not defined here
        raise _Invalid from None
    return (fn.name, tuple(params), tuple(ops), returned)


def fingerprint(fn, *, locs: bool = True, salt: str = "") -> str | None:
    """The hex SHA-256 of ``salt`` and of ``fn``'s canonical form (``locs``: with the
    ops' source locations); None if ``fn``'s text has no form or ``fn`` is invalid."""
    tables = _Tables()
    try:
        form = _form(fn, locs, tables)
    except _Invalid:
        return None
    form = (salt, form, tuple(tables.type_texts), tuple(tables.loc_texts))
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=5)
    pickler.fast = True  # no memo: equal forms give equal bytes, however objects are shared
    pickler.dump(form)
    return sha256(out.getbuffer()).hexdigest()
