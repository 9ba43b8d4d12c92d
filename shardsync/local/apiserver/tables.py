"""Server-side printing: the `meta.k8s.io/v1` Table answer `kubectl get` asks for.

kubectl sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io, …, application/json` and prints the
columns the server chose. As the real API server does for custom resources: the columns are Name plus the
CRD version's `additionalPrinterColumns` (or Name and Age when it declares none), each cell read with the
column's JSONPath (simple paths: `.a.b`, `.a[0].b`; a missing value is an empty cell), `date` cells shown as
an age (`5m`, `3h12m`, `4d`) and every row carrying the object's metadata (PartialObjectMetadata). Built-in
kinds get Name and Age (the real server has a printer per kind; ours only needs to be readable).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_TABLE_MEDIA = re.compile(r"as=table", re.IGNORECASE)
_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One `additionalPrinterColumns` entry of a CRD version."""

    name: str
    type: str  # string, integer, number, boolean, date
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""

    @classmethod
    def from_crd(cls, column: Mapping[str, Any]) -> PrinterColumn:
        return cls(
            name=str(column.get("name") or ""),
            type=str(column.get("type") or "string"),
            json_path=str(column.get("jsonPath") or ""),
            description=str(column.get("description") or ""),
            priority=int(column.get("priority") or 0),
            format=str(column.get("format") or ""),
        )


AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the object was created.")


def wants_table(accept: str | None) -> bool:
    """Whether the client asks for a Table (it may list plain JSON as a fallback after it)."""
    return bool(accept) and any(_TABLE_MEDIA.search(entry) for entry in (accept or "").split(","))


def lookup(obj: Any, json_path: str) -> Any:
    """The value at a simple JSONPath (`.spec.a`, `.items[0].b`), None where anything is missing."""
    cur = obj
    path = json_path.strip().removeprefix("{").removesuffix("}")
    for field, index in _STEP.findall(path):
        if field:
            cur = cur.get(field) if isinstance(cur, Mapping) else None
        else:
            cur = cur[int(index)] if isinstance(cur, list) and int(index) < len(cur) else None
        if cur is None:
            return None
    return cur


def human_duration(seconds: float) -> str:
    """Kubernetes's HumanDuration: `45s`, `5m10s`, `2h30m`, `3d4h`, `2y10d`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years, days = hours // (24 * 365), (hours // 24) % 365
    if hours < 24 * 365 * 8:
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{years}y"


def _cell(column: PrinterColumn, value: Any, now: datetime) -> Any:
    if value is None:
        return None
    if column.type == "date":
        try:
            then = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return "<unknown>"
        return human_duration((now - then).total_seconds())
    if column.type in ("integer", "number", "boolean") and isinstance(value, int | float | bool):
        return value
    return value if isinstance(value, str) else str(value)


def table(
    columns: Iterable[PrinterColumn], objects: Iterable[Mapping[str, Any]], list_meta: Mapping[str, Any]
) -> dict[str, Any]:
    """The Table of `objects` with a Name column first, then `columns` (Age when there are none)."""
    chosen = list(columns) or [AGE]
    now = datetime.now(UTC)
    definitions = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": "Name of the object.",
            "priority": 0,
        }
    ] + [
        {
            "name": c.name,
            "type": c.type,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }
        for c in chosen
    ]
    rows = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        cells = [meta.get("name", "")] + [_cell(c, lookup(obj, c.json_path), now) for c in chosen]
        partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        rows.append({"cells": cells, "object": partial})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta),
        "columnDefinitions": definitions,
        "rows": rows,
    }
