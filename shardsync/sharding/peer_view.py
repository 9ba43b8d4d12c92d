"""The member Leases this replica follows, and how their holders look from here (design §2 rules 1 and 4,
the I/O): membership watched by whoever needs it, not by everyone (issue 39).

Two modes, chosen again whenever what is needed changes:
- every member (the coordinator, which publishes from the whole picture; and a replica whose pending
  zones must hear from everyone, or from more than FEW peers): one list + watch of the instance's member
  Leases by label. The view is known current after each full list, and up to each of our own renewals the
  watch delivers back (events arrive in order).
- a few (everyone else): one list + watch per Lease, by name (a fieldSelector), for the coordinator's
  member Lease (so whoever takes over the coordinator Lease has timed its holder's member Lease all
  along, and publishes its crash without waiting a lease duration more) and for the peers rule 4 names
  (`ShardState.hearing`). Such watches carry no echo of ours, so each Lease is known current as of its
  own last read: the list that started its watch, or a GET `confirm()` makes of the ones read too long
  ago; each is judged as of that read (`LivenessTracker.statuses(now, read_at)`).

`synced_for(peers)` is when the view was last known current for all those peers (infinity for none, None
when it does not cover them), which rule 4 compares with when the assignment was received; `confirm()`
asks for a view current now (an early renewal whose echo proves it, or the GETs). A Lease that stops being
followed is forgotten, so a status is only ever judged on a read that covered it; what a stopped watch
still delivers is ignored.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import anyio.abc

from shardsync.kube.client import KubeError
from shardsync.kube.informer import Informer
from shardsync.kube.objects import LEASES
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.notify import Notifier
from shardsync.sharding.candidate import Candidate
from shardsync.sharding.election import coordinator_lease_name
from shardsync.sharding.member_loop import MemberLoop
from shardsync.sharding.membership import (
    LivenessTracker,
    MalformedLease,
    MemberLease,
    MemberStatus,
    identity_from_name,
    label_selector,
    member_lease_name,
)
from shardsync.sharding.site import Site

log = get_logger(__name__)

# More peers than this to hear from and one watch of every member Lease costs less than a watch each.
FEW = 8


class PeerView:
    """See the module docstring. `changed` is notified whenever a followed Lease changed or was read."""

    def __init__(self, site: Site, members: MemberLoop, candidate: Candidate) -> None:
        self.site = site
        self.members = members
        self.candidate = candidate
        self.clock = site.clock
        self.tracker = LivenessTracker(grace=site.timings.renew_interval)
        self.changed = Notifier()
        self._hearing: frozenset[str] | None = frozenset()  # asked for by the shard loop (None: everyone)
        self._reconfigure = Notifier()
        candidate.changed.forward_to(self._reconfigure)
        members.on_regained.append(self._restart_timers)
        # Every member: the watch's scope, and when the view was last proven current (None: not listed yet).
        self._full: anyio.CancelScope | None = None
        self._proof_at: float | None = None
        # A few: each watch's scope, and when each Lease was last read (its list, or a GET).
        self._few: dict[str, anyio.CancelScope] = {}
        self._read_at: dict[str, float] = {}
        self._confirm = Notifier()
        self._confirm_since: float | None = None  # reads older than this are to be made again
        self._renewal_asked = False  # an early renewal was asked for since the last proof
        self._tg: anyio.abc.TaskGroup | None = None

    # -- what the rest of the replica asks and reads ----------------------------------------------------

    def follow(self, hearing: frozenset[str] | None) -> None:
        """The peers rule 4 must hear from (None: every member); the coordinator's is followed anyway."""
        if hearing != self._hearing:
            self._hearing = hearing
            if self._tg is not None:
                self._apply(self._tg)  # at once: a `confirm` that follows reads what is followed now

    def confirm(self) -> None:
        """Ask for a view current now: an early renewal (its echo proves a watch of every Lease current;
        asked once until a proof comes), or a read of each followed Lease not read since. Cheap to call
        on every pass that finds the view too old."""
        if self._full is not None:
            if not self._renewal_asked:
                self._renewal_asked = True
                self.members.renew_soon()
        else:
            self._confirm_since = self.clock.monotonic()
            self._confirm.notify()

    @property
    def everyone(self) -> bool:
        """Every member Lease is followed, and has been listed since."""
        return self._full is not None and self._proof_at is not None

    def synced_for(self, peers: frozenset[str] | None) -> float | None:
        """When the view was last known current for `peers` (None: every member); None when it does not
        cover them, infinity when there is nobody to hear from."""
        if peers is not None and not peers:
            return math.inf
        if self._full is not None:
            return self._proof_at
        if peers is None or not peers <= self._read_at.keys():
            return None
        return min(self._read_at[identity] for identity in peers)

    def statuses(self) -> dict[str, MemberStatus]:
        now = self.clock.monotonic()
        return self.tracker.statuses(now, None if self._full is not None else self._read_at)

    # -- what to follow -------------------------------------------------------------------------------

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._confirm_loop)
            while True:
                ticket = self._reconfigure.ticket()
                self._apply(tg)  # the coordinator changed, or we began or ceased to lead
                await ticket.wait()

    def _wanted(self) -> frozenset[str] | None:
        """The Leases to follow now (None: every member)."""
        if self.candidate.is_leader() or self._hearing is None:
            return None
        wanted = set(self._hearing)
        if self.candidate.leader:
            wanted.add(self.candidate.leader)
        wanted.discard(self.site.identity)
        return None if len(wanted) > FEW else frozenset(wanted)

    def _apply(self, tg: anyio.abc.TaskGroup) -> None:
        wanted = self._wanted()
        if wanted is None:
            if self._full is None:
                # What the few watches saw stays: a new coordinator has timed its predecessor's member
                # Lease all along, and publishes its crash without waiting a lease duration more.
                for scope in self._few.values():
                    scope.cancel()
                self._few.clear()
                self._read_at.clear()
                self._full, self._proof_at = anyio.CancelScope(), None
                tg.start_soon(_run_in, self._full, _FullInformer(self, self._full).run)
                log.debug("following every member lease")
            return
        if self._full is not None:
            self._full.cancel()
            self._full = None
            # The last full proof covered every Lease still followed.
            if self._proof_at is not None:
                self._read_at = dict.fromkeys(wanted, self._proof_at)
            for identity in set(self.tracker.statuses(self.clock.monotonic())) - wanted:
                self.tracker.forget(identity)
        for identity in set(self._few) - wanted:
            self._few.pop(identity).cancel()
            self._read_at.pop(identity, None)
            self.tracker.forget(identity)
        for identity in sorted(wanted - set(self._few)):
            scope = self._few[identity] = anyio.CancelScope()
            tg.start_soon(_run_in, scope, _OneInformer(self, identity, scope).run)

    # -- reading them ---------------------------------------------------------------------------------

    async def _confirm_loop(self) -> None:
        backoff = Backoff(initial=0.2, maximum=self.site.timings.renew_interval)
        while True:
            ticket = self._confirm.ticket()
            delay = math.inf
            since = self._confirm_since
            if since is not None and self._full is None:
                if await self._read_followed(since):
                    backoff.reset()
                    if self._confirm_since == since:
                        self._confirm_since = None
                else:
                    delay = backoff.next()
            elif self._full is not None:
                self._confirm_since = None
            await self._confirm.wait(ticket, delay)

    async def _read_followed(self, since: float) -> bool:
        """GET every followed Lease not read since `since`; False when the API could not be read."""
        stale = sorted(i for i in self._few if self._read_at.get(i, -math.inf) < since)
        site = self.site
        read: dict[str, tuple[float, dict[str, Any] | None]] = {}

        async def get(identity: str) -> None:
            sent = self.clock.monotonic()
            body = await site.kube.get(
                LEASES,
                member_lease_name(site.instance, identity),
                namespace=site.namespace,
                request_timeout=site.timings.request_timeout,
            )
            read[identity] = sent, body

        failed: list[KubeError] = []
        try:
            async with anyio.create_task_group() as tg:
                for identity in stale:
                    tg.start_soon(get, identity)
        except* KubeError as group:
            failed.extend(e for e in group.exceptions if isinstance(e, KubeError))
        now = self.clock.monotonic()
        for identity, (sent, body) in read.items():
            if identity not in self._few:
                continue  # no longer followed while we read
            if body is None:
                self.tracker.forget(identity)
            else:
                self._observe(body, now)
            self._read(identity, sent)
        self.changed.notify()
        if failed:
            log.debug("reading the followed member leases failed", error=str(failed[0]))
        return not failed

    def _read(self, identity: str, sent: float) -> None:
        self._read_at[identity] = max(sent, self._read_at.get(identity, -math.inf))

    # -- what the watches deliver ----------------------------------------------------------------------

    def _on_change(
        self, scope: anyio.CancelScope, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        if scope.cancel_called:
            return  # a watch we stopped following (its last answer may still come in)
        if new is None:
            identity = identity_from_name(self.site.instance, _name(old))
            if identity is not None:
                self.tracker.forget(identity)
                log.info("member lease gone", member=identity)
        else:
            lease = self._observe(new, self.clock.monotonic())
            if lease is not None and lease.identity == self.site.identity and self._proof_at is not None:
                sent = self.members.sent_at(lease.renew_time)
                if sent is not None and self._full is scope:
                    self._proved(sent)
        self.changed.notify()

    def _observe(self, obj: dict[str, Any], now: float) -> MemberLease | None:
        try:
            lease = MemberLease.from_object(obj, self.site.instance)
        except MalformedLease:
            return None  # not a member Lease of ours
        first = self.tracker.lease(lease.identity) is None
        self.tracker.observe(lease, now)
        if first and lease.identity != self.site.identity:
            log.debug("member seen", member=lease.identity, weight=lease.weight, problems=len(lease.problems))
        return lease

    def _listed(self, scope: anyio.CancelScope, objects: Iterable[dict[str, Any]], sent: float) -> None:
        """A full list of every member Lease, sent at `sent`."""
        if scope.cancel_called:
            return
        leases = []
        for obj in objects:
            try:
                leases.append(MemberLease.from_object(obj, self.site.instance))
            except MalformedLease:
                continue
        gap: bool | None = None
        if self._proof_at is None:
            # Our view was proven only now and then before (the few watches): whether it may have missed
            # renewals is whether the API failed us lately, not how long since the last proof.
            failed = self.members.last_failure
            gap = failed is not None and sent - failed < self.site.timings.lease_duration
        self.tracker.resync(leases, sent, gap)
        self._proved(sent)
        self.changed.notify()

    def _listed_one(self, scope: anyio.CancelScope, identity: str, sent: float) -> None:
        """The list that (re)started the watch of `identity`'s Lease, sent at `sent`: it is current then."""
        if scope.cancel_called:
            return
        self._read(identity, sent)
        self.changed.notify()

    def _proved(self, at: float) -> None:
        """Every member Lease written before `at` has been seen."""
        self._renewal_asked = False
        self.tracker.mark_synced(at)
        self._proof_at = at if self._proof_at is None else max(self._proof_at, at)

    def _restart_timers(self, now: float) -> None:
        """We could not renew for longer than the write fence: most likely nobody could (an API outage).
        Peers silent meanwhile had no chance to renew, so each counts as just seen, as client-go treats
        the leases a new observer finds; otherwise the first replica back would judge every other one
        expired and move their zones away and back. A peer that really crashed expires one lease later."""
        for identity in list(self.tracker.statuses(now)):
            lease = self.tracker.lease(identity)
            self.tracker.forget(identity)
            if lease is not None:
                self.tracker.observe(lease, now)


async def _run_in(scope: anyio.CancelScope, run: Callable[[], Any]) -> None:
    with scope:
        await run()


def _name(obj: dict[str, Any] | None) -> str:
    metadata = (obj or {}).get("metadata")
    return str(metadata.get("name") or "") if isinstance(metadata, dict) else ""


class _FullInformer(Informer):
    """Every member Lease of the instance; a full list also proves the view current."""

    def __init__(self, view: PeerView, scope: anyio.CancelScope) -> None:
        site = view.site
        super().__init__(
            site.kube,
            LEASES,
            namespace=site.namespace,
            label_selector=label_selector(site.instance),
            # The coordinator Lease carries the same labels; its candidates watch it on their own.
            field_selector=f"metadata.name!={coordinator_lease_name(site.instance)}",
            on_change=functools.partial(view._on_change, scope),
            name="member-leases",
        )
        self._view, self._scope = view, scope

    async def relist(self) -> None:
        sent = self._view.clock.monotonic()
        await super().relist()
        self._view._listed(self._scope, self.cache.values(), sent)


class _OneInformer(Informer):
    """One member Lease, by name; each list makes it known current as of when it was sent."""

    def __init__(self, view: PeerView, identity: str, scope: anyio.CancelScope) -> None:
        site = view.site
        super().__init__(
            site.kube,
            LEASES,
            namespace=site.namespace,
            field_selector=f"metadata.name={member_lease_name(site.instance, identity)}",
            on_change=functools.partial(view._on_change, scope),
            name="member-lease",
        )
        self._view, self._scope, self._identity = view, scope, identity

    async def relist(self) -> None:
        sent = self._view.clock.monotonic()
        await super().relist()
        self._view._listed_one(self._scope, self._identity, sent)
