"""Kubernetes label selectors (`app=web,tier in (a,b),!legacy`): parsed and matched as the API server does.

One implementation serves both places that need one: the sources (external-dns's `--label-filter` and
`--annotation-filter`, and a Service's spec.selector matched against its Pods) and the embedded API server
(the `labelSelector=` parameter of lists and watches, and a Scale's status.selector, rendered from a
metav1.LabelSelector object by `format_label_selector`).

The grammar, the key and value validation and the matching follow k8s.io/apimachinery/pkg/labels
(`labels.Parse`, what both `--label-filter` and the API server's `labelSelector` go through); a clause
that does not parse is reported with the API server's `unable to parse requirement: ...` prefix.
`--annotation-filter` goes through `metav1.ParseToLabelSelector` instead, which refuses `<` and `>` and
keeps only the last `key=value` of a repeated key: `parse_selector(text, for_annotations=True)` does the
same. No maintained Python package parses this syntax (the kubernetes client only forwards selector
strings to the API server), hence this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class SelectorError(ValueError):
    """A selector string that the API server would refuse too."""


class Op(Enum):
    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def label_key_error(key: str) -> str | None:
    """Why `key` is not a qualified name (`[prefix/]name`), or None (validation.IsQualifiedName)."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return f"key {key!r}: prefix part must be non-empty"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            return f"key {key!r}: prefix part must be a DNS-1123 subdomain"
    else:
        return f"key {key!r}: a qualified name has at most one '/'"
    if not name:
        return f"key {key!r}: name part must be non-empty"
    if len(name) > 63:
        return f"key {key!r}: name part must be no more than 63 characters"
    if not _NAME_RE.fullmatch(name):
        return f"key {key!r}: name part must be alphanumerics, '-', '_' or '.', alphanumeric at both ends"
    return None


def label_value_error(value: str) -> str | None:
    """Why `value` is not a valid label value, or None (validation.IsValidLabelValue)."""
    if len(value) > 63:
        return f"value {value[:20]!r}...: must be no more than 63 characters"
    if value and not _NAME_RE.fullmatch(value):
        return f"value {value!r}: must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def _go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): no blanks, no underscores, within int64."""
    if not _INT64_RE.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause of a selector: `key op values`."""

    key: str
    op: Op
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op in (Op.IN, Op.EQUALS, Op.DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if self.op in (Op.NOT_IN, Op.NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if self.op is Op.EXISTS:
            return present
        if self.op is Op.DOES_NOT_EXIST:
            return not present
        # GREATER_THAN / LESS_THAN: both sides must be int64.
        if not present or len(self.values) != 1:
            return False
        have = _go_int64(labels[self.key])
        want = _go_int64(next(iter(self.values)))
        if have is None or want is None:
            return False
        return have > want if self.op is Op.GREATER_THAN else have < want


@dataclass(frozen=True, slots=True)
class Selector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)


# --- lexer -------------------------------------------------------------------------------------------

_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")
_SYMBOLS = {")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": ">", "<": "<", "!=": "!=", "(": "("}
_ID = "identifier"
_EOS = "end of string"
_IN, _NOTIN = "in", "notin"


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as (kind, literal); kind is _ID, _EOS, _IN, _NOTIN or the symbol itself."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_EOS, ""))
            return tokens
        if text[i] in _SPECIAL:
            # Longest run of special characters that is still a known symbol.
            j, best = i, ""
            while j < n and text[j] in _SPECIAL and text[i : j + 1] in _SYMBOLS:
                best = text[i : j + 1]
                j += 1
            tokens.append((_SYMBOLS[best], best))
            i += len(best)
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
            j += 1
        word = text[i:j]
        tokens.append((word if word in (_IN, _NOTIN) else _ID, word))
        i = j


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def _at(self, index: int, values: bool) -> tuple[str, str]:
        kind, lit = self.tokens[min(index, len(self.tokens) - 1)]
        # In a value position the keywords are ordinary words: `a in (in, notin)` is legal.
        if values and kind in (_IN, _NOTIN):
            kind = _ID
        return kind, lit

    def peek(self, values: bool = True) -> tuple[str, str]:
        return self._at(self.pos, values)

    def take(self, values: bool = True) -> tuple[str, str]:
        tok = self._at(self.pos, values)
        self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, lit = self.peek()
            if kind == _EOS:
                return requirements
            if kind not in (_ID, "!"):
                raise SelectorError(f"found {lit!r}, expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except SelectorError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            kind, lit = self.take()
            if kind == _EOS:
                return requirements
            if kind != ",":
                raise SelectorError(f"found {lit!r}, expected: ',' or 'end of string'")
            kind, lit = self.peek()
            if kind not in (_ID, "!"):
                raise SelectorError(f"found {lit!r}, expected: identifier after ','")

    def requirement(self) -> Requirement:
        negated = False
        kind, lit = self.take()
        if kind == "!":
            negated = True
            kind, lit = self.take()
        if kind != _ID:
            raise SelectorError(f"found {lit!r}, expected: identifier")
        key = lit
        err = label_key_error(key)
        if err:
            raise SelectorError(err)
        if negated:
            return _requirement(key, Op.DOES_NOT_EXIST, [])
        if self.peek()[0] in (_EOS, ","):
            return _requirement(key, Op.EXISTS, [])
        kind, lit = self.take(values=False)
        ops = {
            _IN: Op.IN,
            _NOTIN: Op.NOT_IN,
            "=": Op.EQUALS,
            "==": Op.DOUBLE_EQUALS,
            "!=": Op.NOT_EQUALS,
            ">": Op.GREATER_THAN,
            "<": Op.LESS_THAN,
        }
        op = ops.get(kind)
        if op is None:
            raise SelectorError(f"found {lit!r}, expected: in, notin, =, ==, !=, gt, lt")
        values = self.value_set() if op in (Op.IN, Op.NOT_IN) else self.exact_value()
        return _requirement(key, op, values)

    def exact_value(self) -> list[str]:
        kind, lit = self.peek()
        if kind in (_EOS, ","):
            return [""]
        kind, lit = self.take()
        if kind != _ID:
            raise SelectorError(f"found {lit!r}, expected: identifier")
        return [lit]

    def value_set(self) -> list[str]:
        kind, lit = self.take()
        if kind != "(":
            raise SelectorError(f"found {lit!r} expected: '('")
        kind, lit = self.peek()
        if kind == ")":
            self.take()
            return [""]
        if kind not in (_ID, ","):
            raise SelectorError(f"found {lit!r}, expected: ',', ')' or identifier")
        values: list[str] = []
        while True:
            kind, lit = self.take()
            if kind == _ID:
                values.append(lit)
                nxt, nlit = self.peek()
                if nxt == ")":
                    self.take()
                    return values
                if nxt != ",":
                    raise SelectorError(f"found {nlit!r}, expected: ',' or ')'")
            elif kind == ",":
                # Empty members, as in `(,a)`, `(a,,b)` or `(a,)`, stand for the empty value.
                if not values:
                    values.append("")
                nxt, _ = self.peek()
                if nxt == ")":
                    self.take()
                    values.append("")
                    return values
                if nxt == ",":
                    self.take()
                    values.append("")
            else:
                raise SelectorError(f"found {lit!r}, expected: ',', or identifier")


def _requirement(key: str, op: Op, values: list[str]) -> Requirement:
    """labels.NewRequirement: the value-count and value-syntax checks."""
    if op in (Op.IN, Op.NOT_IN) and not values:
        raise SelectorError(f"{key}: for 'in', 'notin' operators, values set can't be empty")
    if op in (Op.EQUALS, Op.DOUBLE_EQUALS, Op.NOT_EQUALS) and len(values) != 1:
        raise SelectorError(f"{key}: exact-match compatibility requires one single value")
    if op in (Op.GREATER_THAN, Op.LESS_THAN) and (len(values) != 1 or _go_int64(values[0]) is None):
        raise SelectorError(f"{key}: for 'gt', 'lt' operators, the value must be one integer")
    for value in values:
        err = label_value_error(value)
        if err:
            raise SelectorError(f"{key}: {err}")
    return Requirement(key, op, frozenset(values))


def parse_selector(text: str, *, for_annotations: bool = False) -> Selector:
    """Parse a label selector; raise SelectorError as the API server would.

    `for_annotations=True` applies metav1.ParseToLabelSelector's differences (external-dns's
    `--annotation-filter`): `<`/`>` are refused and for a repeated `key=value` only the last one counts.
    """
    requirements = _Parser(text).parse()
    if for_annotations:
        kept: dict[str, Requirement] = {}
        others: list[Requirement] = []
        for req in requirements:
            if req.op in (Op.GREATER_THAN, Op.LESS_THAN):
                raise SelectorError(f"{req.key}: {req.op.value!r} isn't supported in annotation filters")
            if req.op in (Op.EQUALS, Op.DOUBLE_EQUALS):
                kept[req.key] = req
            else:
                others.append(req)
        requirements = [*kept.values(), *others]
    return Selector(tuple(sorted(requirements, key=lambda r: r.key)))


def selector_from_labels(labels: Mapping[str, str] | Iterable[tuple[str, str]]) -> Selector:
    """The equality selector of a map such as a Service's spec.selector (no validation, as the API has)."""
    items = labels.items() if isinstance(labels, Mapping) else labels
    return Selector(tuple(Requirement(k, Op.EQUALS, frozenset([v])) for k, v in sorted(items)))


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """Selector text for a metav1.LabelSelector object (matchLabels, then matchExpressions in their order).

    What a Scale's status.selector shows for an object whose spec.selector is such an object.
    """
    if not selector:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(sorted(values))})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(sorted(values))})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
