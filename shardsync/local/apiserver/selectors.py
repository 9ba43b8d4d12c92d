"""Label and field selectors: parsing the query-string syntax and matching objects, as the real API does.

Label selectors take the full syntax (`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
`k>1`, `k<1`, comma meaning AND). Field selectors take `f=v`, `f==v`, `f!=v` terms on a fixed set of fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

LabelOp = Literal["=", "!=", "in", "notin", "exists", "!", ">", "<"]

_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SPECIAL = frozenset("!=(),<> \t\n")


class SelectorError(ValueError):
    """The selector text does not parse; the server answers 400 BadRequest with this message."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: LabelOp
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if not present:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.op == ">" else number < bound


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _tokens(text: str) -> list[str]:
    """Splits selector text into identifiers and the operators `! != = == ( ) , < >`."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t\n":
            i += 1
        elif text.startswith(("!=", "=="), i):
            out.append(text[i : i + 2])
            i += 2
        elif c in _SPECIAL:
            out.append(c)
            i += 1
        else:
            j = i
            while j < len(text) and text[j] not in _SPECIAL:
                j += 1
            out.append(text[i:j])
            i = j
    return out


def _check_key(key: str) -> str:
    if not _KEY_RE.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise SelectorError(f"unable to parse requirement: invalid label key {key!r}")
    return key


def _check_value(value: str) -> str:
    if not _VALUE_RE.match(value) or len(value) > 63:
        raise SelectorError(f"unable to parse requirement: invalid label value {value!r}")
    return value


def parse_label_selector(text: str) -> LabelSelector:
    """Parses `labelSelector=` text; raises SelectorError on anything the real server would refuse."""
    toks = _tokens(text)
    reqs: list[Requirement] = []
    pos = 0

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(toks):
            raise SelectorError(f"unable to parse requirement: unexpected end of selector {text!r}")
        pos += 1
        return toks[pos - 1]

    while pos < len(toks):
        tok = take()
        if tok == "!":
            reqs.append(Requirement(_check_key(take()), "!"))
        elif tok in _SPECIAL or tok in ("!=", "=="):
            raise SelectorError(f"unable to parse requirement: found {tok!r}, expected: identifier")
        else:
            key = _check_key(tok)
            op = peek()
            if op is None or op == ",":
                reqs.append(Requirement(key, "exists"))
            else:
                take()
                if op in ("=", "=="):
                    reqs.append(Requirement(key, "=", (_check_value(_value_token(peek(), take)),)))
                elif op == "!=":
                    reqs.append(Requirement(key, "!=", (_check_value(_value_token(peek(), take)),)))
                elif op == "in":
                    reqs.append(Requirement(key, "in", _value_set(take)))
                elif op == "notin":
                    reqs.append(Requirement(key, "notin", _value_set(take)))
                elif op == ">" or op == "<":
                    bound = take()
                    if not re.fullmatch(r"-?\d+", bound):
                        raise SelectorError(
                            f"unable to parse requirement: for {op!r}, {bound!r} is not an integer"
                        )
                    reqs.append(Requirement(key, ">" if op == ">" else "<", (bound,)))
                else:
                    raise SelectorError(f"unable to parse requirement: found {op!r}, expected an operator")
        nxt = peek()
        if nxt is not None:
            if nxt != ",":
                raise SelectorError(f"unable to parse requirement: found {nxt!r}, expected: ','")
            take()
            if peek() is None:
                raise SelectorError("unable to parse requirement: found trailing ','")
    return LabelSelector(tuple(reqs))


def _value_token(nxt: str | None, take: Any) -> str:
    """A value after `=` may be empty (`k=` or `k=,j`): then there is no identifier to consume."""
    if nxt is None or nxt == ",":
        return ""
    tok: str = take()
    if tok in _SPECIAL or tok in ("!=", "=="):
        raise SelectorError(f"unable to parse requirement: found {tok!r}, expected: identifier")
    return tok


def _value_set(take: Any) -> tuple[str, ...]:
    if take() != "(":
        raise SelectorError("unable to parse requirement: expected '(' after set operator")
    values: list[str] = []
    expect_value = True
    while True:
        tok = take()
        if tok == ")":
            if expect_value:
                values.append("")
            return tuple(_check_value(v) for v in values)
        if tok == ",":
            if expect_value:
                values.append("")
            expect_value = True
        elif expect_value and tok not in _SPECIAL:
            values.append(tok)
            expect_value = False
        else:
            raise SelectorError(f"unable to parse requirement: found {tok!r} in value set")


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """Renders a metav1.LabelSelector object (matchLabels/matchExpressions) as selector text."""
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


FieldOp = Literal["=", "!="]


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: FieldOp
    value: str


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        for r in self.requirements:
            equal = fields.get(r.field, "") == r.value
            if equal != (r.op == "="):
                return False
        return True

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(r.field for r in self.requirements)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if text[i] == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(text[i])
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str, supported: frozenset[str]) -> FieldSelector:
    """Parses `fieldSelector=` text; a field outside `supported` is refused as the real server does."""
    reqs: list[FieldRequirement] = []
    if not text.strip():
        return FieldSelector()
    for term in _split_unescaped(text, ","):
        m = re.match(r"^\s*([^=!\s]+)\s*(==|!=|=)(.*)$", term)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, value = m.group(1), m.group(2), _unescape(m.group(3).strip())
        if field not in supported:
            raise SelectorError(f"field label not supported: {field}")
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
    return FieldSelector(tuple(reqs))


def field_values(obj: Mapping[str, Any], fields: frozenset[str]) -> dict[str, str]:
    """Reads each dotted field path of `obj` as a string ("" when absent), for FieldSelector.matches."""
    out: dict[str, str] = {}
    for path in fields:
        cur: Any = obj
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, Mapping) else None
        if cur is None:
            out[path] = ""
        elif isinstance(cur, bool):
            out[path] = "true" if cur else "false"
        else:
            out[path] = str(cur)
    return out
