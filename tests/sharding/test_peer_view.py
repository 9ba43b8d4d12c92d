"""The member Leases a replica follows, against the embedded API server: every one (the coordinator, or a
replica that must hear from everyone), current from the echo of its own renewals; or a few by name (the
coordinator's, and the peers rule 4 names), current once read; a Lease no longer followed is forgotten.
What a replica that does not lead costs the API server, counted by the server per client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import pytest

from shardsync.kube.client import Kube
from shardsync.kube.objects import LEASES
from shardsync.local.apiserver import ApiServer
from shardsync.local.apiserver.clients import client_of
from shardsync.sharding.candidate import Candidate
from shardsync.sharding.election import coordinator_lease_name
from shardsync.sharding.member_loop import MemberLoop
from shardsync.sharding.membership import member_lease_name
from shardsync.sharding.peer_view import PeerView
from shardsync.sharding.site import Site
from shardsync.sharding.states import MemberState
from shardsync.sharding.timings import Timings
from tests.sharding.cluster import INSTANCE, LEASE, NAMESPACE, RENEW, user_agent, wait_for

pytestmark = pytest.mark.anyio

TIMINGS = Timings.derive(LEASE, RENEW)


@dataclass
class Replica:
    members: MemberLoop
    candidate: Candidate
    peers: PeerView

    @property
    def identity(self) -> str:
        return self.members.identity


@asynccontextmanager
async def replicas(
    apiserver: ApiServer, *identities: str, elect: bool = False
) -> AsyncIterator[list[Replica]]:
    """Member loops and peer views (and, with `elect`, running candidates) for `identities`."""
    kubes = [Kube(apiserver.api_client(user_agent=user_agent(i))) for i in identities]
    try:
        async with anyio.create_task_group() as tg:
            started = []
            for kube, identity in zip(kubes, identities, strict=True):
                site = Site(kube, NAMESPACE, INSTANCE, identity, TIMINGS)
                members, candidate = MemberLoop(site), Candidate(site)
                replica = Replica(members, candidate, PeerView(site, members, candidate))
                for task in [members.run, replica.peers.run] + ([candidate.run] if elect else []):
                    tg.start_soon(task)
                started.append(replica)
            try:
                yield started
            finally:
                tg.cancel_scope.cancel()
    finally:
        for kube in kubes:
            kube.api_client.close()  # type: ignore[no-untyped-call]


async def test_following_everyone_the_view_is_current_from_the_echo_of_our_own_renewals(
    apiserver: ApiServer,
) -> None:
    async with replicas(apiserver, "m0", "m1") as (m0, m1):
        m0.peers.follow(None)
        await wait_for(lambda: m0.peers.everyone and set(m0.peers.statuses()) == {"m0", "m1"}, 5, "listed")
        synced = m0.peers.synced_for(None)
        assert synced is not None and m0.peers.synced_for(frozenset({"m1", "x"})) == synced
        await wait_for(lambda: (m0.peers.synced_for(None) or 0) > synced, 2, "the echo of a renewal")
        assert m0.peers.statuses()["m1"].state is MemberState.READY
        # m1 leaves: deleted, so m0 forgets it at once (it released everything first).
        assert await m1.members.leave()
        await wait_for(lambda: set(m0.peers.statuses()) == {"m0"}, 2, "m1 forgotten")
        kube = m1.members.kube
        assert await kube.get(LEASES, member_lease_name(INSTANCE, "m1"), namespace=NAMESPACE) is None


async def test_following_a_few_each_is_current_as_of_its_last_read_and_forgotten_once_unfollowed(
    apiserver: ApiServer,
) -> None:
    async with replicas(apiserver, "m0", "m1", "m2") as (m0, _, _):
        await wait_for(lambda: m0.members.may_write(), 5, "renewing")
        asked = m0.members.clock.monotonic()
        m0.peers.follow(frozenset({"m1"}))
        # The list that starts the watch of m1's Lease is a read of it: current as of when it was sent.
        await wait_for(lambda: m0.peers.synced_for(frozenset({"m1"})) is not None, 5, "m1 listed")
        listed = m0.peers.synced_for(frozenset({"m1"}))
        assert listed is not None and listed >= asked
        assert set(m0.peers.statuses()) == {"m1"} and not m0.peers.everyone  # not even our own Lease
        assert m0.peers.synced_for(frozenset()) == float("inf")  # nobody to hear from
        assert m0.peers.synced_for(frozenset({"m1", "m2"})) is None and m0.peers.synced_for(None) is None
        await anyio.sleep(RENEW)
        m0.peers.confirm()  # a GET of each Lease not read since
        await wait_for(lambda: (m0.peers.synced_for(frozenset({"m1"})) or 0) > listed, 5, "m1 read again")
        m0.peers.follow(frozenset({"m2"}))
        assert set(m0.peers.statuses()) <= {"m2"}  # m1 forgotten at once
        await wait_for(lambda: m0.peers.synced_for(frozenset({"m2"})) is not None, 5, "m2 listed")
        assert set(m0.peers.statuses()) == {"m2"}
        # A followed Lease that does not exist is read as gone.
        m0.peers.follow(frozenset({"m2", "nobody"}))
        await wait_for(lambda: m0.peers.synced_for(frozenset({"m2", "nobody"})) is not None, 5, "listed")
        assert "nobody" not in m0.peers.statuses()


async def test_a_silent_peer_expires_for_its_follower_only_after_it_stopped_writing(
    apiserver: ApiServer,
) -> None:
    async with replicas(apiserver, "m0", "m1") as (m0, m1):
        m1.peers.follow(frozenset({"m0"}))
        await wait_for(lambda: m0.members.may_write() and "m0" in m1.peers.statuses(), 5, "both live")
        apiserver.faults.refuse(user_agent="(m0)")
        await wait_for(lambda: not m0.members.may_write(), LEASE, "self-fence")
        fenced_at = m0.members.clock.monotonic()
        m1.peers.confirm()  # a view current now: m0 has stopped writing, but is not judged lapsed yet
        await wait_for(lambda: (m1.peers.synced_for(frozenset({"m0"})) or 0) >= fenced_at, 5, "read")
        assert m1.peers.statuses()["m0"].state is MemberState.READY

        def expired() -> bool:
            m1.peers.confirm()  # as the shard loop asks once a silent peer's expiry has come on its clock
            return m1.peers.statuses()["m0"].state is MemberState.EXPIRED

        await wait_for(expired, 5, "expired for m1", poll=0.1)
        assert m1.members.clock.monotonic() - fenced_at >= TIMINGS.fence_margin * 0.9
        apiserver.faults.allow(user_agent="(m0)")
        await wait_for(m0.members.may_write, 5, "renewed again")
        await wait_for(lambda: m1.peers.statuses()["m0"].state is MemberState.READY, 5, "live again for m1")


async def test_a_replica_that_does_not_lead_follows_the_coordinator_and_costs_few_events(
    apiserver: ApiServer,
) -> None:
    ids = ("n0", "n1", "n2", "n3")
    async with replicas(apiserver, *ids, elect=True) as group:
        await wait_for(lambda: sum(r.candidate.is_leader() for r in group) == 1, 5, "a coordinator")
        leader = next(r for r in group if r.candidate.is_leader())
        others = [r for r in group if r is not leader]
        await wait_for(lambda: all(leader.identity in r.peers.statuses() for r in others), 5, "followed")
        await wait_for(lambda: leader.peers.everyone, 5, "the coordinator follows everyone")
        for r in others:
            assert set(r.peers.statuses()) == {leader.identity} and not r.peers.everyone
        before = apiserver.clients.state()
        await anyio.sleep(4 * RENEW * 2)  # four seconds of steady state
        after = apiserver.clients.state()
        seconds = 4 * RENEW * 2
        name = f"leases/{coordinator_lease_name(INSTANCE)}"
        for r in others:
            was, now = client_of(before, f"({r.identity})"), client_of(after, f"({r.identity})")
            events = now["watchEvents"] - was["watchEvents"]
            # The coordinator Lease and the coordinator's member Lease, each renewed every renew interval.
            assert events / seconds <= 2 / RENEW + 1, (r.identity, events)
            assert now["byRequest"].get(f"get {name}", 0) == was["byRequest"].get(f"get {name}", 0)
        was, now = client_of(before, f"({leader.identity})"), client_of(after, f"({leader.identity})")
        assert (now["watchEvents"] - was["watchEvents"]) / seconds >= len(ids) / RENEW - 1  # every member
