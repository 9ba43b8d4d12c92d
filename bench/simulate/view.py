"""The member Leases one simulated replica follows, as shardsync/sharding/peer_view.py follows them, and
what that costs: every one while it leads or must hear from everyone (or from more than FEW peers), else
the coordinator's member Lease and the peers rule 4 names for its pending zones (`ShardState.hearing`'s
rule, handoff.peers_to_hear), each by name.

The tracker is fed lazily but exactly: before statuses are read, every followed Lease written since it was
last looked at is observed with the time it was written (a watch delivers each write at once here), a
deleted one is forgotten. A Lease starts being followed with a list of it (first seen now, as client-go
counts a lease a new observer finds); following every Lease starts with a full list, which keeps what the
few watches had timed (a new coordinator has timed its predecessor's member Lease all along). The view is
proven current by the echo of our own write while following everyone; a Lease followed by name is current
as of its own last read (the list that started its watch, or a GET `confirm` makes of the ones not read
since the view was taken). Within one instant, reads are ordered against the replica's assignment reads
by its `reads` counter. Requests are counted per replica: a list and a watch per (re)started watch, a GET
per Lease read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from shardsync.sharding.membership import LivenessTracker, MemberStatus
from shardsync.sharding.peer_view import FEW

if TYPE_CHECKING:
    from bench.simulate.cluster import Cluster


class View:
    def __init__(self, cluster: Cluster, identity: str, reads: Callable[[], int]) -> None:
        self.c = cluster
        self.identity = identity
        self.reads = reads  # the replica's assignment reads so far
        self.tracker = LivenessTracker(grace=cluster.timing.renew_interval)
        self.everyone = False
        self.followed: set[str] = set()
        self.seen: dict[str, int] = {}  # a followed Lease -> the write seq observed last
        self.cursor = -1  # following everyone: the API's write seq observed up to
        self.proof: tuple[float, int] | None = None  # following everyone: when last proven (time, reads)
        self.read_at: dict[str, tuple[float, int]] = {}  # a followed Lease -> when last read (time, reads)

    # -- what to follow --------------------------------------------------------------------------------

    def follow(self, hearing: frozenset[str] | None, leading: bool, holder: str, now: float) -> None:
        """Follow what a replica that leads (or not), with `hearing` to hear from, follows (PeerView)."""
        wanted: set[str] | None = None
        if not leading and hearing is not None:
            wanted = (set(hearing) | {holder}) - {self.identity, ""}
            if len(wanted) > FEW:
                wanted = None
        c = self.c
        if wanted is None:
            if not self.everyone:
                self.sync()  # what the few watches delivered, at the times they delivered it
                for identity in self.followed:
                    c.followers[identity].discard(self.identity)
                self.followed.clear()
                self.everyone = True
                c.full_watchers.add(self.identity)
                c.traffic.request(self.identity, now, 2)  # list + watch
                self.tracker.resync(c.api.leases(), now, gap=False)
                self.cursor = c.api.seq
                self.read_at.clear()
                self._proved(now)
            return
        if self.everyone:
            self.everyone = False
            c.full_watchers.discard(self.identity)
            for identity in set(self.tracker.statuses(now)) - wanted:
                self.tracker.forget(identity)
            self.followed = set(wanted)  # watched by name from now on; the last full proof covered them
            self.read_at = dict.fromkeys(wanted, self.proof) if self.proof is not None else {}
            self.proof = None
            for identity in wanted:
                c.followers.setdefault(identity, set()).add(self.identity)
                self.seen[identity] = c.api.members[identity].seq if identity in c.api.members else -1
            c.traffic.request(self.identity, now, 2 * len(wanted))  # a list + watch of each, by name
        for identity in sorted(wanted - self.followed):
            c.followers.setdefault(identity, set()).add(self.identity)
            c.traffic.request(self.identity, now, 2)  # list + watch, by name
            self._read(identity, now)
        for identity in self.followed - wanted:
            c.followers[identity].discard(self.identity)
            self.tracker.forget(identity)
            self.seen.pop(identity, None)
            self.read_at.pop(identity, None)
        self.followed = set(wanted)

    def drop(self) -> None:
        """The process is gone: its watches with it."""
        self.c.full_watchers.discard(self.identity)
        for identity in self.followed:
            self.c.followers[identity].discard(self.identity)
        self.followed.clear()
        self.everyone = False

    # -- proofs --------------------------------------------------------------------------------------

    def echoed(self, now: float) -> None:
        """Our own write, delivered back by a watch of every Lease: the view is current up to it."""
        if self.everyone:
            self._proved(now)

    def confirm(self, now: float, since: int) -> None:
        """GET every followed Lease not read since the replica's `since`-th assignment read (a watch of
        every Lease is proven by our next renewal instead)."""
        if self.everyone:
            return
        for identity in sorted(self.followed):
            if self.read_at.get(identity, (0.0, -1))[1] < since:
                self.c.traffic.request(self.identity, now)
                self._read(identity, now)

    def _read(self, identity: str, now: float) -> None:
        """A list or a GET of `identity`'s Lease: observed as it is now, current as of now."""
        slot = self.c.api.members.get(identity)
        if slot is None:
            self.tracker.forget(identity)
            self.seen.pop(identity, None)
        else:
            self.tracker.observe(self.c.api.member(identity), now)
            self.seen[identity] = slot.seq
        self.read_at[identity] = (now, self.reads())

    def _proved(self, now: float) -> None:
        self.tracker.mark_synced(now)
        self.proof = (now, self.reads())

    def fresh_for(self, peers: frozenset[str] | None, since: int) -> bool:
        """As ShardState.view_confirmed on PeerView.synced_for: every one of `peers` (None: every member)
        read, or the whole view proven, after the replica's `since`-th assignment read."""
        if peers is not None and not peers:
            return True
        if self.everyone:
            return self.proof is not None and self.proof[1] >= since
        if peers is None:
            return False
        return all(self.read_at.get(identity, (0.0, -1))[1] >= since for identity in peers)

    # -- what the watches delivered --------------------------------------------------------------------

    def sync(self) -> None:
        """Observe every followed Lease written since our last look, at the time it was written."""
        api, tracker = self.c.api, self.tracker
        if self.everyone:
            if self.cursor == api.seq:
                return
            cursor = self.cursor
            for identity, slot in api.members.items():
                if slot.seq > cursor:
                    tracker.observe(api.member(identity), slot.written_at)
            for identity, seq in api.deleted.items():
                if seq > cursor:
                    tracker.forget(identity)
            self.cursor = api.seq
            return
        for identity in self.followed:
            stored = api.members.get(identity)
            if stored is None:
                tracker.forget(identity)
                self.seen.pop(identity, None)
            elif stored.seq > self.seen.get(identity, -1):
                tracker.observe(api.member(identity), stored.written_at)
                self.seen[identity] = stored.seq

    def statuses(self, now: float) -> dict[str, MemberStatus]:
        self.sync()
        if self.everyone:
            return self.tracker.statuses(now)
        return self.tracker.statuses(now, {i: at for i, (at, _) in self.read_at.items()})
