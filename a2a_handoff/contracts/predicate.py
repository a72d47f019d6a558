"""A small, safe predicate language for contract triggers and acceptance criteria.

    state.intent == "refund" and payload.amount > 500
    "refunds" in card.capabilities or not state.escalated
    card.skills contains "refund"

Grammar (keywords in lower or upper case):

    expr    := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := operand (op operand)?      op: == != < <= > >= in "not in" contains
    operand := literal | path | list | "(" expr ")"
    list    := "[" (literal ("," literal)*)? "]"
    path    := name ("." name)*           a dotted lookup in the namespace's mappings

Text is parsed into a small tree and evaluated by walking it: there is no `eval`, no call,
no attribute access, no indexing — a path only looks keys up in plain mappings, and a name
starting with an underscore is refused. A missing path is null. Comparing values that do
not compare (a number with null, say) is false, never an error at run time. Errors in the
text are `PredicateError`s with the position (0-based offset) where they were found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from a2a_handoff.errors import HandoffError

MAX_LENGTH = 4096
MAX_DEPTH = 32

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>==|!=|<=|>=|<|>)
  | (?P<punct>[()\[\],.])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE | re.ASCII,
)
_KEYWORDS = {"and", "or", "not", "in", "contains", "true", "false", "null"}


class PredicateError(HandoffError, ValueError):
    """A predicate that does not parse; `position` is the offset in its text."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (at position {position})")
        self.message = message
        self.position = position


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number string op punct name keyword end
    text: str
    position: int
    value: Any = None


# -- the tree ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any


@dataclass(frozen=True, slots=True)
class Path:
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ListOf:
    items: tuple[Literal, ...]


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: str  # and | or
    operands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # == != < <= > >= in notin contains
    left: Node
    right: Node


Node = Literal | Path | ListOf | Not | BoolOp | Compare


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise PredicateError(f"unexpected character {text[at]!r}", at)
        kind = match.lastgroup or ""
        raw = match.group()
        if kind == "number":
            tokens.append(_Token("number", raw, at, float(raw) if "." in raw else int(raw)))
        elif kind == "string":
            value = re.sub(r"\\(.)", r"\1", raw[1:-1])
            tokens.append(_Token("string", raw, at, value))
        elif kind == "name":
            lowered = raw.lower()
            if lowered in _KEYWORDS:
                tokens.append(_Token("keyword", lowered, at))
            else:
                if raw.startswith("_"):
                    raise PredicateError(f"names may not start with '_': {raw!r}", at)
                tokens.append(_Token("name", raw, at))
        elif kind != "space":
            tokens.append(_Token(kind, raw, at))
        at = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def accept(self, kind: str, text: str | None = None) -> _Token | None:
        token = self.token
        if token.kind == kind and (text is None or token.text == text):
            return self.take()
        return None

    def expect(self, kind: str, text: str) -> _Token:
        token = self.accept(kind, text)
        if token is None:
            found = self.token.text or "the end"
            raise PredicateError(f"expected {text!r}, found {found!r}", self.token.position)
        return token

    def nested(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise PredicateError(f"nested more than {MAX_DEPTH} deep", self.token.position)

    def parse(self) -> Node:
        node = self.expr()
        if self.token.kind != "end":
            raise PredicateError(f"unexpected {self.token.text!r}", self.token.position)
        return node

    def expr(self) -> Node:
        operands = [self.conjunction()]
        while self.accept("keyword", "or"):
            operands.append(self.conjunction())
        return operands[0] if len(operands) == 1 else BoolOp("or", tuple(operands))

    def conjunction(self) -> Node:
        operands = [self.negation()]
        while self.accept("keyword", "and"):
            operands.append(self.negation())
        return operands[0] if len(operands) == 1 else BoolOp("and", tuple(operands))

    def negation(self) -> Node:
        if self.accept("keyword", "not"):
            self.nested()
            node = Not(self.negation())
            self.depth -= 1
            return node
        return self.comparison()

    def comparison(self) -> Node:
        left = self.operand()
        token = self.token
        if token.kind == "op":
            self.take()
            return Compare(token.text, left, self.operand())
        if self.accept("keyword", "in"):
            return Compare("in", left, self.operand())
        if self.accept("keyword", "contains"):
            return Compare("contains", left, self.operand())
        if token.kind == "keyword" and token.text == "not":
            self.take()
            self.expect("keyword", "in")
            return Compare("notin", left, self.operand())
        return left

    def operand(self) -> Node:
        token = self.token
        if token.kind in ("number", "string"):
            self.take()
            return Literal(token.value)
        if token.kind == "keyword" and token.text in ("true", "false", "null"):
            self.take()
            return Literal({"true": True, "false": False, "null": None}[token.text])
        if self.accept("punct", "("):
            self.nested()
            node = self.expr()
            self.depth -= 1
            self.expect("punct", ")")
            return node
        if self.accept("punct", "["):
            items: list[Literal] = []
            if not self.accept("punct", "]"):
                while True:
                    item = self.operand()
                    if not isinstance(item, Literal):
                        raise PredicateError("a list holds literals only", token.position)
                    items.append(item)
                    if self.accept("punct", "]"):
                        break
                    self.expect("punct", ",")
            return ListOf(tuple(items))
        if token.kind == "name":
            names = [self.take().text]
            while self.accept("punct", "."):
                name = self.token
                if name.kind != "name":
                    raise PredicateError("expected a name after '.'", name.position)
                names.append(self.take().text)
            if self.token.kind == "punct" and self.token.text in ("(", "["):
                raise PredicateError(
                    "calls and indexing are not part of the language", self.token.position
                )
            return Path(tuple(names))
        found = token.text or "the end"
        raise PredicateError(f"expected a value, found {found!r}", token.position)


@dataclass(frozen=True, slots=True)
class Predicate:
    """A parsed predicate; `evaluate(namespace)` → bool."""

    text: str
    tree: Node

    def evaluate(self, namespace: Mapping[str, Any]) -> bool:
        return _truth(_value(self.tree, namespace))

    def paths(self) -> list[tuple[str, ...]]:
        """Every path the predicate reads (for linting what it depends on)."""
        found: list[tuple[str, ...]] = []
        _collect(self.tree, found)
        return found


def parse(text: str) -> Predicate:
    """Parse `text`; raises PredicateError with a position."""
    if not isinstance(text, str):
        raise PredicateError("a predicate is a string", 0)
    if len(text) > MAX_LENGTH:
        raise PredicateError(f"longer than {MAX_LENGTH} characters", MAX_LENGTH)
    if not text.strip():
        raise PredicateError("empty predicate", 0)
    return Predicate(text, _Parser(text).parse())


def _collect(node: Node, found: list[tuple[str, ...]]) -> None:
    match node:
        case Path(names):
            found.append(names)
        case Not(operand):
            _collect(operand, found)
        case BoolOp(_, operands):
            for operand in operands:
                _collect(operand, found)
        case Compare(_, left, right):
            _collect(left, found)
            _collect(right, found)
        case _:
            pass


def _lookup(names: Sequence[str], namespace: Mapping[str, Any]) -> Any:
    value: Any = namespace
    for name in names:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


def _truth(value: Any) -> bool:
    return bool(value)  # values are JSON data: null, false, 0, "" and empty lists are false


def _value(node: Node, namespace: Mapping[str, Any]) -> Any:
    match node:
        case Literal(value):
            return value
        case Path(names):
            return _lookup(names, namespace)
        case ListOf(items):
            return [item.value for item in items]
        case Not(operand):
            return not _truth(_value(operand, namespace))
        case BoolOp("and", operands):
            return all(_truth(_value(o, namespace)) for o in operands)
        case BoolOp(_, operands):
            return any(_truth(_value(o, namespace)) for o in operands)
        case Compare(op, left, right):
            return _compare(op, _value(left, namespace), _value(right, namespace))
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


def _kind(value: Any) -> Any:
    """Booleans are not numbers here (Python's `True == 1` is not the language's)."""
    return (type(value), value) if isinstance(value, bool) else value


def _compare(op: str, left: Any, right: Any) -> bool:
    if isinstance(left, bool) != isinstance(right, bool) and op not in ("in", "notin", "contains"):
        return op == "!="  # a boolean equals, and orders against, booleans only
    if op in ("in", "notin") and isinstance(right, list):
        right = [_kind(v) for v in right]
        left = _kind(left)
    elif op == "contains" and isinstance(left, list):
        left = [_kind(v) for v in left]
        right = _kind(right)
    try:
        match op:
            case "==":
                return bool(left == right)
            case "!=":
                return bool(left != right)
            case "<":
                return bool(left < right)
            case "<=":
                return bool(left <= right)
            case ">":
                return bool(left > right)
            case ">=":
                return bool(left >= right)
            case "in":
                return isinstance(right, list | str) and _member(left, right)
            case "notin":
                return isinstance(right, list | str) and not _member(left, right)
            case _:  # contains
                return isinstance(left, list | str) and _member(right, left)
    except TypeError:
        return False


def _member(item: Any, container: list[Any] | str) -> bool:
    if isinstance(container, str):
        return isinstance(item, str) and item in container
    return item in container
