"""The problems found in source objects: logged and counted when they first appear, posted as Warning
Events by one replica.

A problem (an endpoint dropped, an annotation ignored) is logged and counted when it first appears, not again
while it persists. Which replica posts it as an Event, so N replicas do not post N copies:
- the one holding a zone the object's names reach (`held` True) when the object's kind can say where its
  records may fall (`SourceKind.names`) and this replica is sharded: the other replicas may never translate
  the object at all (sources.shard_cache), and the holder translates it as it gains the zone;
- otherwise the one for which `write_status()` is true (the coordinator; every replica with --once).
A problem found while this replica was not the one to post it is kept as unposted: it is posted when this
replica becomes the writer (`taking_office`, for the writer's problems) or translates the object again as
its holder. A previous poster may have posted it already: a repeat is preferred to an Event never posted.
An object whose names reach zones held by two replicas has its problems posted by both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio
from prometheus_client import Counter

from shardsync.kube.events import EventRecorder
from shardsync.logs import get_logger
from shardsync.sources.result import Problem

log = get_logger(__name__)

INVALID_ENDPOINTS = Counter(
    "shardsync_source_invalid_endpoints_total",
    "Problems found in source objects (an endpoint dropped, an annotation ignored), by source kind",
    ["kind"],
)


class ProblemReports:
    """See the module docstring; keyed by the objects' desired-index keys."""

    def __init__(self, events: EventRecorder | None, write_status: Callable[[], bool]) -> None:
        self._events = events
        self._write_status = write_status
        self.found: dict[str, frozenset[Problem]] = {}  # key → the problems last reported
        # key → True when the writer posts its problems (False: the holder of one of its zones)
        self._unposted: dict[str, bool] = {}

    def report(self, kind: str, key: str, problems: Sequence[Problem], held: bool | None) -> None:
        """The object at `key` was translated and has `problems` (none: it is fine, or gone). `held`: see
        the module docstring (None: the writer's to post)."""
        fresh = frozenset(problems)
        before = self.found.pop(key, frozenset())
        if not fresh:
            self._unposted.pop(key, None)
            return
        self.found[key] = fresh
        ordered = list(dict.fromkeys(problems))
        new = [p for p in ordered if p not in before]
        for p in new:
            INVALID_ENDPOINTS.labels(kind).inc()
            log.warning("invalid source object", object=p.ref.resource, field=p.field, problem=p.message)
        if self._events is None:
            return
        if self._write_status() if held is None else held:
            for p in ordered if self._unposted.pop(key, None) is not None else new:
                self._post(p)
        elif new or key in self._unposted:
            self._unposted[key] = held is None

    async def follow_writer(self, poll: float, took_office: Callable[[], None]) -> None:
        """Call `took_office` whenever write_status() turns true (looked at every `poll` seconds)."""
        writer = False
        while True:
            now = self._write_status()
            if now and not writer:
                took_office()
            writer = now
            await anyio.sleep(poll)

    def taking_office(self) -> int:
        """This replica has become the writer: post the writer's problems found meanwhile and still
        present; returns how many were posted."""
        posted = 0
        for key in [k for k, writers in self._unposted.items() if writers]:
            del self._unposted[key]
            for problem in self.found.get(key, ()):
                self._post(problem)
                posted += 1
        if posted:
            log.info("posting the events of problems found before taking office", events=posted)
        return posted

    def _post(self, problem: Problem) -> None:
        if self._events is not None:
            self._events.record(problem.ref, problem.reason, f"{problem.field}: {problem.message}")
