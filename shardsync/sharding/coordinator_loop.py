"""The coordinator, as I/O: the elected replica publishing the assignment ConfigMap `<instance>-assignment`
(design §2 rules 2 and 7); the election itself is sharding/candidate.py's.

While `Candidate.is_leader()`, `CoordinatorLoop` follows every member Lease (peer_view.py), feeds their
statuses to a `Publisher` and writes each proposal with a resourceVersion precondition (create when the
ConfigMap is absent; 409: reset to what is stored and go on from there). A new leader starts from the
stored generation (failover changes nothing by itself) and repairs a corrupt ConfigMap with the next
generation.

Pins are carried over from the stored assignment; they are set by editing the ConfigMap (with a higher
generation), which the coordinator then continues from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import anyio
from prometheus_client import Counter

from shardsync.kube.client import KubeError
from shardsync.kube.objects import CONFIGMAPS, resource_version
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.notify import Notifier
from shardsync.sharding.assignment import Assignment, CorruptAssignment, configmap_name
from shardsync.sharding.assignment_watch import AssignmentWatch
from shardsync.sharding.candidate import Candidate
from shardsync.sharding.peer_view import PeerView
from shardsync.sharding.publisher import Publisher
from shardsync.sharding.site import Site

log = get_logger(__name__)

REBALANCES = Counter(
    "shardsync_rebalances_total", "Assignment generations this replica published as the coordinator"
)


class CoordinatorLoop:
    """Election plus publishing; every replica runs one, only the leader publishes."""

    def __init__(self, site: Site, peers: PeerView, watch: AssignmentWatch, candidate: Candidate) -> None:
        self.site = site
        self.timings = site.timings
        self.peers = peers
        self.watch = watch
        self.candidate = candidate
        self.name = configmap_name(site.instance)
        self._wake = Notifier()
        # Raised by the owner when its zone set changes: zones that appear may call for an even table now.
        self.zones_changed = Notifier()
        for source in (candidate.changed, peers.changed, watch.changed, self.zones_changed):
            source.forward_to(self._wake)
        self._publisher: Publisher | None = None
        self._rv: str | None = None  # resourceVersion of the ConfigMap as we last read or wrote it
        self._watch_rv: str | None = None  # the watch's resourceVersion we last reacted to
        self._problems: list[str] = []
        # The zones this replica knows (its provider's), for the slot table's balance; set by the owner.
        self.zones: Callable[[], Iterable[str]] = tuple

    def is_leader(self) -> bool:
        return self.candidate.is_leader()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.candidate.run)
            await self._publish_loop()

    async def release(self) -> None:
        await self.candidate.release()

    async def _publish_loop(self) -> None:
        backoff = Backoff(initial=0.2, maximum=max(1.0, self.timings.renew_interval))
        while True:
            ticket = self._wake.ticket()
            delay = self.timings.renew_interval
            try:
                delay = await self._publish_round()
                backoff.reset()
            except KubeError as exc:
                delay = backoff.next()
                emit = log.debug if self.site.kube.health.quiet(exc.status) else log.warning
                emit("reading the stored assignment failed", configmap=self.name, error=str(exc))
            await self._wake.wait(ticket, delay)

    async def _publish_round(self) -> float:
        """One look at the members; returns how long to sleep at most before the next."""
        if not self.candidate.is_leader():
            if self._publisher is not None:
                log.info("stopped publishing assignments")
                self._publisher = None
            return self.timings.renew_interval
        if self._publisher is None or self._stored_changed():
            await self._load()
        publisher = self._publisher
        if publisher is None or not self.peers.everyone:
            return self.timings.renew_interval  # woken once every member Lease has been listed
        now = self.site.clock.monotonic()
        pins = dict(publisher.current.pins) if publisher.current is not None else {}
        statuses = self.peers.statuses()
        proposal = publisher.observe(statuses, pins, now, self.site.clock.now())
        if publisher.problems != self._problems:
            self._problems = list(publisher.problems)
            for problem in self._problems:
                log.warning("pin problem", problem=problem)
        if proposal is not None and self.candidate.is_leader():
            await self._write(publisher, proposal)
        # Act on an expiry when it happens, not at the next round: wake when the first live member's
        # lease runs out unless it renews first (a renewal raises `members.changed` anyway).
        # An expiry already past on our clock waits for the view to catch up (a member event wakes us),
        # and asks for it now: the echo of our own renewal proves the view current, and waiting for the
        # next one cost up to a renew interval (5 s with an unfenced provider) per crash.
        now = self.site.clock.monotonic()
        if any(s.live and s.expires_at() <= now for s in statuses.values()):
            self.peers.confirm()
        wakes = [s.expires_at() for s in statuses.values() if s.live and s.expires_at() > now]
        wake = publisher.next_wakeup()
        if wake is not None:
            wakes.append(wake)
        if not wakes:
            return self.timings.renew_interval
        return max(0.0, min(self.timings.renew_interval, min(wakes) - now))

    def _stored_changed(self) -> bool:
        """Someone else wrote the ConfigMap (an operator, a deposed coordinator, a corruption): re-read."""
        seen = self.watch.resource_version
        if seen is None or seen == self._watch_rv:
            return False
        self._watch_rv = seen
        return seen != self._rv

    async def _load(self) -> None:
        """Read the stored assignment and continue from it (rule 7)."""
        body = await self.site.kube.get(
            CONFIGMAPS, self.name, namespace=self.site.namespace, request_timeout=self.timings.request_timeout
        )
        if body is None:
            stored, self._rv = None, None
        else:
            self._rv = resource_version(body) or None
            data = body.get("data")
            try:
                stored = Assignment.from_configmap_data(data if isinstance(data, dict) else None)
            except CorruptAssignment as exc:
                stored = self._repair_base(str(exc))
        if self._publisher is None:
            self._publisher = Publisher(
                self.site.identity, self.timings.publisher_config(), stored, lambda: self.zones()
            )
            log.info(
                "publishing assignments",
                generation=stored.generation if stored else 0,
                configmap=self.name,
            )
        elif stored != self._publisher.current:
            self._publisher.reset(stored)

    def _repair_base(self, error: str) -> Assignment | None:
        """What to continue from when the stored ConfigMap is unreadable: the last good generation this
        replica saw, with no members, so that the next proposal differs from it, outnumbers it, and is
        written over the corrupt object."""
        last_good = self.watch.current
        log.error(
            "stored assignment is corrupt; publishing a new generation over it",
            configmap=self.name,
            error=error,
            last_good=last_good.generation if last_good else "",
        )
        return last_good.with_members(()) if last_good is not None else None

    async def _write(self, publisher: Publisher, proposal: Assignment) -> None:
        previous = publisher.current
        body = proposal.to_configmap(self.site.instance, self._rv)
        try:
            timeout = self.timings.request_timeout
            if self._rv is None:
                stored = await self.site.kube.create(
                    CONFIGMAPS, body, namespace=self.site.namespace, request_timeout=timeout
                )
            else:
                stored = await self.site.kube.replace(
                    CONFIGMAPS, self.name, body, namespace=self.site.namespace, request_timeout=timeout
                )
        except KubeError as exc:
            if exc.conflict or exc.not_found:
                log.warning(
                    "assignment write lost a race; continuing from what is stored",
                    generation=proposal.generation,
                    status=exc.status,
                )
                await self._load()
                return
            log.warning("assignment write failed", generation=proposal.generation, error=str(exc))
            return
        self._rv = resource_version(stored) or None
        publisher.committed(proposal)
        REBALANCES.inc()
        log.info(
            "assignment published",
            generation=proposal.generation,
            previous=previous.generation if previous else 0,
            members=",".join(m.identity for m in proposal.members) or "-",
        )
