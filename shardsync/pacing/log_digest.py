"""Repeated failures as few log lines: one line per kind of failure per window, not one per zone and retry.

A failure many zones share (a DNS server down, the API server down, a replica self-fenced, a provider
throttling) would otherwise log once per zone per retry: 50 zones backing off from 0.5 s log about 300
lines in 20 s. `LogDigest` sits between callers and their loggers:

    digest = LogDigest(window=60.0)
    digest.warning(log, "zone reconcile failed", zone=z, kind="unreachable", error=str(exc), retry_in="2s")

- The first failure of a group is logged at once, as given, so nothing is hidden. A group is the logger,
  the event, the level, the `kind` field and the shape of the `error` field: its text with the subject
  (the `zone`
  field's value) taken out, digits and long hex runs masked, so "axfr of zone a.example: refused" and
  "axfr of zone b.example: refused" are one group and a timeout is another.
- The group's later failures are logged at debug only (the per-zone detail), and counted.
- Every `window` seconds (`run`, or the next report once a window has passed) each group with failures
  not logged at its level gets ONE line at that level: the event, `kind`, `zones` (distinct subjects in
  the window), `count` (failures in the window), `window`, and the latest failure as the example (`zone`,
  `error`).
- A group quiet for a whole window is forgotten: its next failure is news again and logged at once.

Metrics are not the digest's business: callers count every failure themselves, per zone where they did.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from shardsync.logs import KVLogger

Level = Literal["warning", "error"]
DEFAULT_WINDOW = 60.0  # the default --interval: one line per group per sync interval
MAX_GROUPS = 64  # past this many live groups, new shapes share one group per event (memory stays bounded)
SHAPE_CHARS = 300  # an error's shape is its start: enough to tell causes apart

_HEX_RUN = re.compile(r"\b[0-9a-fA-F-]{8,}\b")  # request ids, UUIDs: different on every failure
_DIGITS = re.compile(r"\d+")


def window_for(interval: float) -> float:
    """The window for failures of work done every `interval` (--interval): that interval, within 10 s to
    60 s (never a line a second; a lasting outage is re-stated at least once a minute)."""
    return min(max(interval, 10.0), 60.0)


def shape(error: str, subject: str = "") -> str:
    """`error` with what differs between failures of one cause masked: the subject, ids and numbers."""
    if subject:
        error = error.replace(subject, "<subject>")
    return _DIGITS.sub("#", _HEX_RUN.sub("<id>", error[:SHAPE_CHARS]))


def _emit(log: KVLogger, level: Level, event: str, fields: dict[str, Any]) -> None:
    (log.error if level == "error" else log.warning)(event, **fields)


@dataclass(slots=True)
class _Group:
    log: KVLogger
    level: Level
    event: str
    kind: str
    subjects: set[str] = field(default_factory=set)  # in the current window
    count: int = 0  # failures in the current window
    unlogged: int = 0  # of which logged at debug only
    example: dict[str, Any] = field(default_factory=dict)

    def add(self, subject: str, fields: dict[str, Any]) -> None:
        self.count += 1
        if subject:
            self.subjects.add(subject)
        self.example = fields


class LogDigest:
    """See the module docstring. `subject` names the field that says what failed (one zone)."""

    def __init__(
        self,
        *,
        window: float = DEFAULT_WINDOW,
        subject: str = "zone",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window <= 0:
            raise ValueError("the digest window must be positive")
        self.window = window
        self.subject = subject
        self.clock = clock
        self._groups: dict[tuple[str, str, str, str, str], _Group] = {}
        self._flush_at = clock() + window

    def warning(self, log: KVLogger, event: str, **fields: Any) -> None:
        self._report(log, "warning", event, fields)

    def error(self, log: KVLogger, event: str, **fields: Any) -> None:
        self._report(log, "error", event, fields)

    def _report(self, log: KVLogger, level: Level, event: str, fields: dict[str, Any]) -> None:
        if self.clock() >= self._flush_at:
            self.flush()
        subject = str(fields.get(self.subject, ""))
        kind = str(fields.get("kind", ""))
        key = (log.name, level, event, kind, shape(str(fields.get("error", "")), subject))
        group = self._groups.get(key)
        if group is None and len(self._groups) >= MAX_GROUPS:
            key = (log.name, level, event, kind, "<other>")
            group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(log, level, event, kind)
            group.add(subject, fields)
            _emit(log, level, event, fields)
            return
        group.add(subject, fields)
        group.unlogged += 1
        log.debug(event, **fields)

    def flush(self) -> None:
        """One line for every group with failures not logged at its level; forget the quiet groups."""
        self._flush_at = self.clock() + self.window
        for key, group in list(self._groups.items()):
            if not group.count:
                del self._groups[key]
                continue
            if group.unlogged:
                self._summarise(group)
            group.count = group.unlogged = 0
            group.subjects.clear()

    def _summarise(self, group: _Group) -> None:
        example = group.example
        fields: dict[str, Any] = {"kind": group.kind} if group.kind else {}
        if group.subjects:
            fields[f"{self.subject}s"] = len(group.subjects)
        fields |= {"count": group.count, "window": f"{self.window:g}s"}
        if self.subject in example:
            fields[self.subject] = example[self.subject]
        if "error" in example:
            fields["error"] = example["error"]
        _emit(group.log, group.level, group.event, fields)

    async def run(self) -> None:
        """Flush at the end of every window until cancelled, and once more then (a `--once` run, a stop)."""
        try:
            while True:
                await anyio.sleep(max(0.0, self._flush_at - self.clock()))
                if self.clock() >= self._flush_at:
                    self.flush()
        finally:
            self.flush()
