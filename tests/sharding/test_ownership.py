"""Active/active ownership against the embedded API server: several replicas in one process, each with its
own API client (User-Agent with its identity) and worker, writing a shared fake provider while a churn task
keeps every zone changing. Checked throughout: the provider's audit shows no two writers of one zone at
once, and no write was refused by a fence (the handoff rules kept every stale writer away before the
provider had to); the sampler never saw two replicas able to write one zone."""

from __future__ import annotations

import time
from collections import Counter

import anyio
import pytest
from prometheus_client import REGISTRY

from bench.audit import overlapping_writes
from shardsync.kube.client import KubeError
from shardsync.kube.objects import CONFIGMAPS, LEASES, STATEFULSETS
from shardsync.local.apiserver import ApiServer
from shardsync.providers.base import FenceToken
from shardsync.providers.fake.store import FakeStore
from shardsync.sharding.assignment import CONFIGMAP_KEY, Assignment, Member, configmap_name
from shardsync.sharding.membership import member_lease_name
from tests.sharding.cluster import (
    INSTANCE,
    LEASE,
    NAMESPACE,
    Cluster,
    cluster,
    describe,
    user_agent,
    wait_for,
)

pytestmark = pytest.mark.anyio


def assert_safe(c: Cluster) -> None:
    audit = c.store.audit()
    assert not overlapping_writes(audit, include_refused=True), overlapping_writes(audit)[:3]
    refused = [e for e in audit if e.outcome == "fenced"]
    assert not refused, refused[:3]
    assert not c.sampled_overlaps(), c.sampled_overlaps()[:3]


def applies_by(store: FakeStore, writer: str) -> int:
    return sum(1 for e in store.audit() if e.op == "apply" and e.outcome == "ok" and e.writer == writer)


async def start(c: Cluster, *identities: str, within: float = 20.0) -> None:
    for identity in identities:
        await c.add(identity)
    await wait_for(c.settled, within, f"settle with {identities}: {describe(c)}")


async def test_three_replicas_own_every_zone_once_and_agree_on_the_generation(apiserver: ApiServer) -> None:
    async with cluster(apiserver, zones=60) as c:
        await start(c, "r0", "r1", "r2")
        views = [o.view for o in c.sharded()]
        assert len({v.generation for v in views if v}) == 1
        load = Counter(c.owners().values())
        assert set(load) == {"r0", "r1", "r2"} and sum(load.values()) == 60
        await anyio.sleep(1.0)  # the churn keeps every owner writing
        for identity in ("r0", "r1", "r2"):
            assert applies_by(c.store, identity) > 0
        for zone in c.zones:
            fence = c.store.fence_of(zone)
            assert fence is not None and fence.identity == c.owners()[zone]
        assert_safe(c)

        # /shards: every replica tells the same story, in the contract's shape.
        snaps = [await o.snapshot(n) for o, n in zip(c.sharded(), c.nodes.values(), strict=True)]
        for node, snap in zip(c.nodes.values(), snaps, strict=True):
            assert set(snap) == {"generation", "coordinator", "self", "members", "zones", "assignment"}
            assert (
                snap["assignment"] == views[0].to_document() if views[0] else False
            )  # what owners come from
            assert snap["self"] == node.identity
            assert snap["generation"] == views[0].generation if views[0] else False
            assert snap["coordinator"] in c.nodes
            assert [m["identity"] for m in snap["members"]] == ["r0", "r1", "r2"]
            for member in snap["members"]:
                assert set(member) == {
                    "identity",
                    "state",
                    "weight",
                    "zones",
                    "observedGeneration",
                    "lastRenewSeen",
                }
                assert member["state"] == "ready"
                assert member["zones"] == load[member["identity"]]
                assert member["observedGeneration"] == snap["generation"]
                assert time.strptime(member["lastRenewSeen"], "%Y-%m-%dT%H:%M:%SZ")
            assert [z["zone"] for z in snap["zones"]] == sorted(c.zones)
            for row in snap["zones"]:
                assert set(row) == {
                    "zone",
                    "owner",
                    "state",
                    "lastSync",
                    "lastSyncSeconds",
                    "records",
                    "lastError",
                }
                assert row["owner"] == c.owners()[row["zone"]]
                assert row["state"] == "active"
                if row["owner"] == node.identity:
                    assert time.strptime(row["lastSync"], "%Y-%m-%dT%H:%M:%SZ")
                    assert row["records"] is not None and row["lastError"] == ""
                else:
                    assert row["lastSync"] is None and row["records"] is None
        assert len({s["coordinator"] for s in snaps}) == 1
        assert all(o.ready() == (True, "") for o in c.sharded())


async def test_a_fourth_replica_takes_about_a_quarter_of_the_zones_all_from_the_others(
    apiserver: ApiServer,
) -> None:
    async with cluster(apiserver, zones=120) as c:
        await start(c, "r0", "r1", "r2")
        before = c.owners()
        generation = c.sharded()[0].view.generation  # type: ignore[union-attr]
        joined = time.monotonic()
        await c.add("r3")
        took = await wait_for(c.settled, 20, f"settle with r3: {describe(c)}")
        after = c.owners()
        moved = {z for z in c.zones if before[z] != after[z]}
        assert moved and all(after[z] == "r3" for z in moved)  # only to the new replica
        fraction = len(moved) / len(c.zones)
        print(f"moved {len(moved)}/{len(c.zones)} = {fraction:.3f} (ideal 0.25) in {took:.2f}s")
        assert 0.15 <= fraction <= 0.35
        assert c.sharded()[0].view.generation == generation + 1  # type: ignore[union-attr]
        # Zones that did not move were never interrupted; moved ones only for the handoff itself.
        assert c.longest_unowned(since=joined) < 1.0
        assert_safe(c)


async def test_a_replica_leaving_for_good_drains_its_zones_first(apiserver: ApiServer) -> None:
    async with cluster(apiserver, zones=60) as c:
        await start(c, "r0", "r1", "r2")
        leaving = c.nodes["r1"]
        its_zones = {z for z, o in c.owners().items() if o == "r1"}
        assert its_zones
        stopping = time.monotonic()
        await c.stop(leaving)  # "r1" has no StatefulSet ordinal: it leaves for good
        stopped = time.monotonic() - stopping
        await wait_for(c.settled, 10, f"settle without r1: {describe(c)}")
        assert all(c.owners()[z] in ("r0", "r2") for z in its_zones)
        gap = c.longest_unowned(since=stopping)
        print(f"drain took {stopped:.2f}s, longest unowned {gap:.3f}s")
        assert gap < 1.0
        assert c.admin is not None
        leases = await c.admin.list(LEASES, namespace=NAMESPACE)
        names = {item["metadata"]["name"] for item in leases["items"]}
        assert member_lease_name(INSTANCE, "r1") not in names
        assert not leaving.worker.owned()
        assert_safe(c)


async def test_a_replica_cut_off_from_the_api_stops_writing_before_its_zones_are_taken_over(
    apiserver: ApiServer,
) -> None:
    async with cluster(apiserver, zones=60) as c:
        await start(c, "r0", "r1", "r2")
        coordinator = c.sharded()[0].coordinator.candidate.leader
        victim = next(i for i in ("r2", "r1", "r0") if i != coordinator)
        node = c.nodes[victim]
        its_zones = {z for z, o in c.owners().items() if o == victim}
        cut = time.monotonic()
        apiserver.faults.refuse(user_agent=f"({victim})")
        fenced_after = await wait_for(lambda: not node.ownership.may_write(), LEASE + 1, "self-fence")
        others = [o for i, o in ((i, n.sharded) for i, n in c.nodes.items()) if i != victim]

        def taken_over() -> bool:
            return all(any(z in o.state.active for o in others) for z in its_zones)

        took = await wait_for(taken_over, 3 * LEASE, f"takeover: {describe(c)}")
        print(f"cut off: self-fenced after {fenced_after:.2f}s, zones taken over after {took:.2f}s")
        for zone in its_zones:  # make every new owner write
            c.set_record(zone, "10.254.0.1")

        def rewritten() -> bool:
            """Every zone of the victim written since the cut by one of the others."""
            return its_zones <= {
                e.zone
                for e in c.store.audit()
                if e.op == "apply" and e.outcome == "ok" and e.writer != victim and e.start > cut
            }

        await wait_for(rewritten, 5, "the new owners write")
        audit = c.store.audit()
        compared = 0
        for zone in its_zones:
            mine = [e.end for e in audit if e.zone == zone and e.writer == victim and e.outcome == "ok"]
            theirs = [e.start for e in audit if e.zone == zone and e.writer != victim and e.start > cut]
            if mine and theirs:
                compared += 1
                assert max(mine) < min(theirs), zone
        assert compared == len(its_zones)
        assert_safe(c)

        # Back on the network: it re-reads before writing, rejoins, and the zones come back to it.
        apiserver.faults.allow(user_agent=f"({victim})")
        await wait_for(c.settled, 20, f"settle after the partition: {describe(c)}")
        assert any(o == victim for o in c.owners().values())
        assert_safe(c)


async def test_with_the_api_paused_past_the_lease_every_replica_stops_writing_and_resumes_after(
    apiserver: ApiServer,
) -> None:
    async with cluster(apiserver, zones=40) as c:
        await start(c, "r0", "r1", "r2")
        owners = c.owners()
        generation = c.sharded()[0].view.generation  # type: ignore[union-attr]
        apiserver.faults.pause()
        paused = time.monotonic()
        await wait_for(
            lambda: not any(n.ownership.may_write() for n in c.nodes.values()), LEASE, "all fenced"
        )
        fenced = time.monotonic()
        await anyio.sleep(LEASE / 2)
        # A write already on the wire when the last replica fenced itself may land just after (the margin
        # before lease expiry is there for it); none may start once every replica has stopped writing.
        late = [e for e in c.store.audit() if e.op == "apply" and e.end > fenced]
        assert not [e for e in late if e.start > fenced or e.end > fenced + 0.1], late
        # One replica comes back a little later than the others (longer than the settle delay).
        laggard = next(i for i in ("r2", "r1") if i != c.sharded()[0].coordinator.candidate.leader)
        apiserver.faults.refuse(user_agent=f"({laggard})")
        apiserver.faults.resume()
        resumed = time.monotonic()
        await anyio.sleep(1.0)
        apiserver.faults.allow(user_agent=f"({laggard})")
        took = await wait_for(c.settled, 20, f"settle after the pause: {describe(c)}")
        print(
            f"API paused {resumed - paused:.2f}s: fenced after {fenced - paused:.2f}s, back after {took:.2f}s"
        )
        await anyio.sleep(LEASE)  # long enough for any wrongly expired member to be published away
        assert c.settled()
        # Nobody was judged gone for a silence nobody could help: no generation, no zone moved.
        assert {o.view.generation for o in c.sharded() if o.view} == {generation}
        assert c.owners() == owners
        assert_safe(c)


async def test_coordinator_failover_never_moves_the_generation_backwards(apiserver: ApiServer) -> None:
    async with cluster(apiserver, zones=40) as c:
        await start(c, "r0", "r1", "r2")
        published: list[int] = []

        async def follow_configmap() -> None:
            assert c.admin is not None
            while True:
                try:
                    body = await c.admin.get(CONFIGMAPS, configmap_name(INSTANCE), namespace=NAMESPACE)
                except KubeError:
                    body = None  # a failed read is just a missing sample
                if body is not None:
                    published.append(Assignment.from_configmap_data(body["data"]).generation)
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow_configmap)
            generation = c.sharded()[0].view.generation  # type: ignore[union-attr]
            leader = c.sharded()[0].coordinator.candidate.leader
            crashed = time.monotonic()
            await c.crash(c.nodes[leader])  # kill -9: the coordinator lease is not released
            failover = await wait_for(
                lambda: any(o.coordinator.is_leader() for o in c.sharded()), 3 * LEASE, "new coordinator"
            )
            await wait_for(c.settled, 20, f"settle without {leader}: {describe(c)}")
            synced = time.monotonic() - crashed
            tg.cancel_scope.cancel()
        print(f"coordinator crash: new coordinator after {failover:.2f}s, zones settled after {synced:.2f}s")
        assert published and published == sorted(published)
        assert c.sharded()[0].view.generation > generation  # type: ignore[union-attr]
        assert leader not in c.sharded()[0].view.identities  # type: ignore[union-attr]
        assert_safe(c)

        # A graceful stop hands the coordinator lease over at once.
        leader = c.sharded()[0].coordinator.candidate.leader
        stopping = time.monotonic()
        await c.stop(c.nodes[leader])
        handover = await wait_for(
            lambda: any(o.coordinator.is_leader() for o in c.sharded()), 3 * LEASE, "handover"
        )
        print(f"graceful coordinator stop: new coordinator {time.monotonic() - stopping:.2f}s after SIGTERM")
        assert handover < LEASE
        await wait_for(c.settled, 10, f"settle with one replica: {describe(c)}")
        assert_safe(c)


async def test_a_corrupt_assignment_is_logged_and_the_last_good_view_kept(
    apiserver: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with cluster(apiserver, zones=40) as c:
        await start(c, "r0", "r1", "r2")
        owners = c.owners()
        generation = c.sharded()[0].view.generation  # type: ignore[union-attr]
        counted = REGISTRY.get_sample_value("shardsync_corrupt_assignments_total") or 0.0
        assert c.admin is not None
        body = await c.admin.get(CONFIGMAPS, configmap_name(INSTANCE), namespace=NAMESPACE)
        assert body is not None
        body["data"] = {CONFIGMAP_KEY: '{"version": 1, "generation": "many"'}
        corrupted = time.monotonic()  # the start-up's own unowned stretch is not this test's business
        await c.admin.replace(CONFIGMAPS, configmap_name(INSTANCE), body, namespace=NAMESPACE)
        await wait_for(
            lambda: (REGISTRY.get_sample_value("shardsync_corrupt_assignments_total") or 0.0) >= counted + 3,
            5,
            "every replica counts the corrupt assignment",
        )
        assert "corrupt assignment ignored" in caplog.text
        # Nobody dropped its zones on the strength of an unreadable document; the coordinator writes the
        # next generation over it, with the same members, so nothing moves.
        await wait_for(
            lambda: all(o.view is not None and o.view.generation == generation + 1 for o in c.sharded()),
            10,
            "repaired generation",
        )
        await wait_for(c.settled, 10, "settled after the repair")
        assert c.owners() == owners
        assert c.longest_unowned(since=corrupted) < 0.5
        assert_safe(c)


async def test_a_restarting_replica_gets_its_parked_zones_back_without_a_new_generation(
    apiserver: ApiServer,
) -> None:
    async with cluster(apiserver, zones=40) as c:
        assert c.admin is not None
        await c.admin.create(STATEFULSETS, statefulset("shard", 3), namespace=NAMESPACE)
        await start(c, "shard-0", "shard-1", "shard-2")
        generation = c.sharded()[0].view.generation  # type: ignore[union-attr]
        owners = c.owners()
        parked = {z for z, o in owners.items() if o == "shard-1"}
        await c.stop(c.nodes["shard-1"])  # ordinal 1 < 3 replicas: a restart
        lease = await c.admin.get(LEASES, member_lease_name(INSTANCE, "shard-1"), namespace=NAMESPACE)
        assert lease is not None
        assert lease["metadata"]["annotations"]["shardsync.io/restarting"] == "true"
        await anyio.sleep(LEASE + 1)  # its lease lapses, but the grace (30 s) keeps its zones parked
        for o, node in ((n.sharded, n) for n in c.nodes.values()):
            assert o.view is not None and o.view.generation == generation
            rows = {r["zone"]: r for r in (await o.snapshot(node))["zones"]}
            assert {z for z, r in rows.items() if r["state"] == "parked"} == parked
        await c.add("shard-1")  # the new incarnation
        await wait_for(c.settled, 10, f"settle after the restart: {describe(c)}")
        assert c.sharded()[0].view.generation == generation  # type: ignore[union-attr]
        assert c.owners() == owners
        assert_safe(c)


async def test_a_restarting_replica_that_does_not_come_back_loses_its_zones_after_the_grace(
    apiserver: ApiServer,
) -> None:
    async with cluster(apiserver, zones=30) as c:
        assert c.admin is not None
        await c.admin.create(STATEFULSETS, statefulset("shard", 3), namespace=NAMESPACE)
        for identity in ("shard-0", "shard-1", "shard-2"):
            await c.add(identity, restart_grace=1.0)
        await wait_for(c.settled, 20, "settled")
        await c.stop(c.nodes["shard-2"])
        await wait_for(c.settled, 4 * LEASE, f"zones moved after the grace: {describe(c)}")
        assert set(c.owners().values()) == {"shard-0", "shard-1"}
        assert_safe(c)


async def test_a_write_refused_by_the_fence_drops_the_zone_until_a_newer_generation(
    apiserver: ApiServer,
) -> None:
    async with cluster(apiserver, zones=30) as c:
        await start(c, "r0", "r1")
        first = c.sharded()[0].view
        assert first is not None
        await start(c, "r2")
        view = c.sharded()[0].view
        assert view is not None and view.generation == first.generation + 1
        grown = view.with_members((*view.members, Member("r3", 1)))
        # A zone its owner has held since the first generation (its fence is that old) and keeps with r3.
        zone = next(z for z in c.zones if first.owner_of(z) == view.owner_of(z) == grown.owner_of(z))
        owner = c.nodes[str(view.owner_of(zone))]
        assert c.store.fence_of(zone) == FenceToken(first.generation, owner.identity)
        # Someone with a newer token takes the fence: the owner's next write must be refused, and the
        # owner must let the zone go rather than retry it under the same generation.
        c.store.acquire_fence(zone, FenceToken(view.generation, "intruder"), writer="intruder")
        c.set_record(zone, "10.253.0.1")
        await wait_for(lambda: zone not in owner.worker.statuses, 5, "zone dropped")
        assert owner.sharded.state.dropped == {zone: view.generation}
        rows = {r["zone"]: r for r in (await owner.sharded.snapshot(owner))["zones"]}
        assert rows[zone]["state"] == "pending" and rows[zone]["owner"] == owner.identity
        await anyio.sleep(0.5)
        assert zone not in owner.worker.statuses  # not retried under the same generation
        # A newer generation that still gives it the zone: it takes a newer fence and writes again.
        await c.add("r3")
        await wait_for(lambda: zone in owner.worker.statuses, 10, "zone taken back")
        await wait_for(
            lambda: c.store.fence_of(zone) == FenceToken(view.generation + 1, owner.identity), 5, "new fence"
        )
        refused = [e for e in c.store.audit() if e.outcome == "fenced"]
        assert {(e.zone, e.writer) for e in refused} == {(zone, owner.identity)}
        assert not overlapping_writes(c.store.audit())


def statefulset(name: str, replicas: int) -> dict[str, object]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "shardsync", "image": "shardsync"}]},
            },
        },
    }


def test_user_agent_carries_the_identity() -> None:
    assert user_agent("r1").endswith("(r1)")
