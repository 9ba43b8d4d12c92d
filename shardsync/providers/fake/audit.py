"""The fake provider's write audit: one `AuditEntry` per write that passed the gate, in a bounded log.

An entry records op (apply or fence), zone, writer identity, generation, fence token, start and end on the
store's monotonic clock and on the wall clock, outcome (ok, fenced, error). Start is taken when the call
gets its slot (before the latency), end when it commits, so an interval covers the whole time the write was
in the provider's hands. Entries are numbered (`seq`) in the order they are recorded; the log keeps the
newest `limit` of them and says how many fell off. `AuditEntry`'s JSON form is what `GET /v1/audit` serves.
Analyses of an audit (two writers at once) are test tooling, in bench/audit.py.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shardsync.providers.base import FencedError, FenceToken

Outcome = Literal["ok", "fenced", "error"]
Op = Literal["apply", "fence"]

DEFAULT_AUDIT_LIMIT = 1_000_000


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One write that reached the provider."""

    seq: int
    op: Op
    zone: str
    writer: str
    generation: int | None
    fence: str | None  # the token the write was conditional on (apply) or tried to set (fence)
    start: float  # store's monotonic clock
    end: float
    start_wall: float  # Unix time
    end_wall: float
    outcome: Outcome
    changes: int = 0
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "op": self.op,
            "zone": self.zone,
            "writer": self.writer,
            "generation": self.generation,
            "fence": self.fence,
            "start": self.start,
            "end": self.end,
            "startWall": self.start_wall,
            "endWall": self.end_wall,
            "outcome": self.outcome,
            "changes": self.changes,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AuditEntry:
        op = data["op"]
        outcome = data["outcome"]
        if op not in ("apply", "fence") or outcome not in ("ok", "fenced", "error"):
            raise ValueError(f"bad audit entry: {data!r}")
        generation = data.get("generation")
        return cls(
            seq=int(data["seq"]),
            op=op,
            zone=str(data["zone"]),
            writer=str(data["writer"]),
            generation=None if generation is None else int(generation),
            fence=data.get("fence"),
            start=float(data["start"]),
            end=float(data["end"]),
            start_wall=float(data["startWall"]),
            end_wall=float(data["endWall"]),
            outcome=outcome,
            changes=int(data.get("changes", 0)),
            message=str(data.get("message", "")),
        )


class AuditLog:
    """The newest `limit` audit entries, oldest first.

    Not locked: the store records under its data lock, which also makes seq order commit order.
    """

    def __init__(
        self,
        limit: int = DEFAULT_AUDIT_LIMIT,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._entries: deque[AuditEntry] = deque(maxlen=limit)
        self._seq = 0
        self._clock = clock
        self._wall_clock = wall_clock

    def record(
        self,
        op: Op,
        zone: str,
        writer: str,
        generation: int | None,
        fence: FenceToken | None,
        started: tuple[float, float],
        outcome: int | Exception,
    ) -> None:
        """A write that started at `started` (monotonic, wall) ends now: with `outcome` changes applied,
        or refused by that error."""
        result: Outcome = "ok"
        changes, message = 0, ""
        if isinstance(outcome, Exception):
            result = "fenced" if isinstance(outcome, FencedError) else "error"
            message = str(outcome)
        else:
            changes = outcome
        self._entries.append(
            AuditEntry(
                seq=self._seq,
                op=op,
                zone=zone,
                writer=writer,
                generation=generation,
                fence=fence.to_text() if fence else None,
                start=started[0],
                end=self._clock(),
                start_wall=started[1],
                end_wall=self._wall_clock(),
                outcome=result,
                changes=changes,
                message=message,
            )
        )
        self._seq += 1

    def since(self, seq: int = 0) -> list[AuditEntry]:
        """The entries numbered `seq` or later."""
        return [e for e in self._entries if e.seq >= seq]

    def dropped(self) -> int:
        """How many of the oldest entries fell off."""
        return self._entries[0].seq if self._entries else self._seq

    def clear(self) -> None:
        self._entries.clear()
        self._seq = 0
