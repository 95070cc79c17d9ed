"""Read the text form written by ``printer.print_function`` back into a Function.

``parse_function(print_function(f))`` prints as ``f`` does (with or without
locs), so golden IR in tests can be written as text and compared as text.
Parameter names become ``Value.hint``s; result names only bind uses to
definitions. Malformed text raises ``IRParseError`` with ``line:column``, the
offending line and a caret. The parser checks that op names exist in the op
table and that each op lists one type per result; whether those types follow
the op's shape rule is the verifier's job.

Whitespace, including newlines, only separates tokens, with one exception: an
op's operands start on the op name's line, so a zero-operand, zero-result op
is not confused with the next line's results.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any, NoReturn

from . import optable
from .core import Builder, Function, Value
from .errors import IRParseError
from .types import TensorType, parse_type

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<value>%[A-Za-z0-9_]+)
  | (?P<symbol>@(?:[A-Za-z_][A-Za-z0-9_]*|"(?:[^"\\\n]|\\.)*"))
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?(?:inf|nan)(?![A-Za-z0-9_])|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>->|[(){}\[\],=:])
    """,
    re.VERBOSE,
)
_KEYWORDS = {"true": True, "false": False, "none": None}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # value, symbol, string, number, ident, punct, eof
    text: str
    pos: int


def _tokenize(text: str, fail) -> list[_Token]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            fail(pos, f"unexpected character {text[pos]!r}")
        if m.lastgroup != "ws":
            tokens.append(_Token(m.lastgroup, m.group(), pos))
        pos = m.end()
    tokens.append(_Token("eof", "end of text", len(text)))
    return tokens


class _Parser:
    """Recursive descent over the token list; one instance per text."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.tokens = _tokenize(text, self.fail)
        self.i = 0

    # --- errors and token helpers ---------------------------------------------------

    def where(self, pos: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, pos)
        return line, pos - self.line_starts[line - 1] + 1

    def fail(self, pos: int, msg: str) -> NoReturn:
        line, col = self.where(pos)
        src = self.text.split("\n")[line - 1]
        err = IRParseError(f"{line}:{col}: {msg}\n  {src}\n  {' ' * (col - 1)}^")
        err.line, err.column = line, col
        raise err

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def next(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at(self, kind: str, text: str | None = None) -> bool:
        tok = self.peek()
        return tok.kind == kind and (text is None or tok.text == text)

    def accept(self, kind: str, text: str | None = None) -> _Token | None:
        return self.next() if self.at(kind, text) else None

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> _Token:
        if self.at(kind, text):
            return self.next()
        tok = self.peek()
        self.fail(tok.pos, f"expected {what or repr(text or kind)}, got {tok.text!r}")

    def line_of(self, tok: _Token) -> int:
        return self.where(tok.pos)[0]

    # --- grammar --------------------------------------------------------------------

    def parse(self) -> Function:
        fn = self.function()
        self.expect("eof", what="end of text after the function")
        return fn

    def function(self) -> Function:
        self.expect("ident", "func")
        sym = self.expect("symbol", what="a function name like @f")
        name = json.loads(sym.text[1:]) if sym.text[1] == '"' else sym.text[1:]
        b = Builder(name)
        scope: dict[str, tuple[Value, int]] = {}
        self.expect("punct", "(")
        while not self.accept("punct", ")"):
            if b.params:
                self.expect("punct", ",", what="',' or ')'")
            tok = self.expect("value", what="a parameter like %x")
            self.expect("punct", ":")
            self.define(scope, tok, b.param(self.type(), hint=tok.text[1:]))
        self.expect("punct", "->")
        out_pos = self.peek().pos
        out_types = self.type_list_in_parens() if self.at("punct", "(") else [self.type()]
        self.expect("punct", "{")
        while not self.at("ident", "return"):
            self.op(b, scope)
        self.next()
        results = self.operands(scope, self.line_of(self.tokens[self.i - 1]))
        self.expect("punct", "}", what="'}' after return (return must be the last line)")
        got = [v.type for v in results]
        if got != out_types:
            shown = ", ".join(map(str, got))
            self.fail(
                out_pos,
                f"@{name} returns ({shown}) but its header declares "
                f"({', '.join(map(str, out_types))})",
            )
        return b.build(results)

    def type(self) -> TensorType:
        start = self.expect("ident", what="a type like f64[3]")
        self.expect("punct", "[", what="'[' in a type like f64[3]")
        dims = []
        while not self.accept("punct", "]"):
            if dims:
                self.expect("punct", ",", what="',' or ']' in a type")
            dims.append(self.expect("number", what="a dimension").text)
        try:
            return parse_type(f"{start.text}[{','.join(dims)}]")
        except ValueError as e:
            self.fail(start.pos, f"bad type: {e}")

    def type_list_in_parens(self) -> list[TensorType]:
        self.expect("punct", "(")
        types = []
        while not self.accept("punct", ")"):
            if types:
                self.expect("punct", ",", what="',' or ')'")
            types.append(self.type())
        return types

    def define(self, scope, tok: _Token, value: Value) -> None:
        if tok.text in scope:
            line, col = self.where(scope[tok.text][1])
            self.fail(
                tok.pos,
                f"{tok.text} is already defined at {line}:{col}; every value is defined once",
            )
        scope[tok.text] = (value, tok.pos)

    def use(self, scope, tok: _Token) -> Value:
        if tok.text not in scope:
            self.fail(
                tok.pos,
                f"unknown value {tok.text} (not a parameter or an earlier "
                "result of this function; regions cannot see outer values)",
            )
        return scope[tok.text][0]

    def operands(self, scope, line: int) -> list[Value]:
        if not (self.at("value") and self.line_of(self.peek()) == line):
            return []
        vals = [self.use(scope, self.next())]
        while self.accept("punct", ","):
            vals.append(self.use(scope, self.expect("value", what="an operand like %x")))
        return vals

    def op(self, b: Builder, scope) -> None:
        defs = []
        if self.at("value"):
            defs.append(self.next())
            while self.accept("punct", ","):
                defs.append(self.expect("value", what="a result name like %0"))
            self.expect("punct", "=")
        elif not self.at("ident"):
            tok = self.peek()
            self.fail(tok.pos, f"expected an op or 'return', got {tok.text!r}")
        name_tok = self.expect("ident", what="an op name")
        if name_tok.text not in optable.OPS:
            self.fail(name_tok.pos, f"unknown op {name_tok.text!r} (not in the op table)")
        operands = self.operands(scope, self.line_of(name_tok))
        attrs = self.attrs() if self.at("punct", "{") else {}
        types = self.result_types(defs, name_tok)
        regions = []
        if self.accept("punct", "("):
            regions.append(self.function())
            while self.at("ident", "func"):
                regions.append(self.function())
            self.expect("punct", ")", what="')' or another region 'func'")
        loc = None
        if self.accept("ident", "loc"):
            self.expect("punct", "(")
            loc = json.loads(self.expect("string", what="a quoted location").text)
            self.expect("punct", ")")
        results = b.emit(name_tok.text, tuple(operands), attrs, tuple(types), tuple(regions), loc)
        for tok, v in zip(defs, results):
            self.define(scope, tok, v)

    def result_types(self, defs: list[_Token], name_tok: _Token) -> list[TensorType]:
        colon = self.accept("punct", ":")
        if colon is None:
            if defs:
                tok = self.peek()
                self.fail(
                    tok.pos,
                    f"expected ':' and the result types of {name_tok.text}, got {tok.text!r}",
                )
            return []
        types = [self.type()]
        while self.accept("punct", ","):
            types.append(self.type())
        if len(types) != len(defs):
            self.fail(
                colon.pos,
                f"wrong number of result types for {name_tok.text}: "
                f"{len(defs)} results, {len(types)} types",
            )
        return types

    def attrs(self) -> dict[str, Any]:
        self.expect("punct", "{")
        attrs: dict[str, Any] = {}
        while not self.accept("punct", "}"):
            if attrs:
                self.expect("punct", ",", what="',' or '}'")
            key = self.expect("ident", what="an attribute name")
            if key.text in attrs:
                self.fail(key.pos, f"attribute {key.text!r} is given twice")
            self.expect("punct", "=")
            attrs[key.text] = self.attr_value()
        return attrs

    def attr_value(self) -> Any:
        tok = self.next()
        if tok.kind == "number":
            is_int = not any(c in tok.text for c in ".eEin")
            return int(tok.text) if is_int else float(tok.text)
        if tok.kind == "string":
            return json.loads(tok.text)
        if tok.kind == "ident":
            return _KEYWORDS.get(tok.text, tok.text)
        if tok.kind == "punct" and tok.text == "[":
            items = []
            while not self.accept("punct", "]"):
                if items:
                    self.expect("punct", ",", what="',' or ']'")
                items.append(self.attr_value())
            return tuple(items)
        self.fail(tok.pos, f"expected an attribute value, got {tok.text!r}")


def parse_function(text: str) -> Function:
    """Parse the text form of one Function (see ``printer``); IRParseError if malformed.

    >>> print(parse_function("func @g(%a: f32[2]) -> f32[2] { %0 = neg %a : f32[2] return %0 }"))
    func @g(%a: f32[2]) -> f32[2] {
      %0 = neg %a : f32[2]
      return %0
    }
    """
    return _Parser(text).parse()
