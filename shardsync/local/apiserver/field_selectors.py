"""Field selectors (`fieldSelector=`): parsing the query-string syntax and matching objects, as the real API
does. They take `f=v`, `f==v` and `f!=v` terms, comma meaning AND (a backslash escapes a comma in a value),
on the fixed set of fields each resource supports.

Label selectors (`labelSelector=`) are shardsync/kube/selectors.py's, shared with the sources; a field
selector that does not parse raises the same SelectorError, so a request handler reports both alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shardsync.kube.selectors import SelectorError

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
