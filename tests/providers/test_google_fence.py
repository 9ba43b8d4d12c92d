"""The google provider's changes under Cloud DNS's rules, through the official library against the contract
fake (tests/cloudfakes/google.py): a change applies whole or not at all, a deletion must match the current
set exactly, and the limits of one change hold.

Two replicas write one zone through two providers: once the second has swapped the fence, the first one's
change — headed by the deletion of the fence "<its token>" — is refused whole (412), nothing of it lands,
and the fake's audit shows it. A plan too big for one change is split so that every change passes the
limits (1,000 additions, 1,000 deletions, 100,000 bytes), each carrying the fence. A worker whose calls
the project's rate limit refuses backs off behind the provider budget and syncs the zone all the same.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from google.auth.credentials import AnonymousCredentials

from shardsync.providers.base import FencedError, FenceToken
from shardsync.providers.budget import Budget, BudgetedProvider
from shardsync.providers.google.api import CloudDnsApi
from shardsync.providers.google.provider import GoogleProvider
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint
from shardsync.records.registry import TxtRegistry
from tests.cloudfakes.google import AuditEntry, GoogleCloudDnsFake
from tests.cloudfakes.google_rules import MAX_ADDITIONS, MAX_DELETIONS, MAX_RRDATA_BYTES
from tests.waits import eventually

ZONE = "ex.org"
FENCE = f"_shardsync-fence.{ZONE}."


@pytest.fixture
def fake() -> Iterator[GoogleCloudDnsFake]:
    server = GoogleCloudDnsFake(rrsets_page_size=500).start()
    try:
        yield server
    finally:
        server.stop()


def replica(fake: GoogleCloudDnsFake, identity: str) -> GoogleProvider:
    api = CloudDnsApi(
        project=fake.project,
        endpoint=fake.url,
        identity=identity,
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
    )
    return GoogleProvider(api, batch_interval=0.0)


def a(name: str, ip: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(f"{name}.{ZONE}", "A", [ip])


def test_a_stale_replicas_change_is_refused_whole_by_the_fence(fake: GoogleCloudDnsFake) -> None:
    zone = fake.add_zone(ZONE)
    first, second = replica(fake, "replica-a"), replica(fake, "replica-b")
    old, new = FenceToken(1, "replica-a"), FenceToken(2, "replica-b")

    async def main() -> None:
        await first.acquire_fence(ZONE, old)
        await first.apply(ZONE, Changes(create=[a("one")]), old)
        await second.acquire_fence(ZONE, new)
        before = fake.rrsets(zone)
        with pytest.raises(FencedError, match="no longer holds"):
            await first.apply(ZONE, Changes(create=[a("late")], delete=[a("one")]), old)
        assert fake.rrsets(zone) == before  # neither the addition nor the deletion landed
        with pytest.raises(FencedError):
            await first.acquire_fence(ZONE, old)
        await second.apply(ZONE, Changes(create=[a("two")]), new)
        assert {e.dns_name for e in await second.records(ZONE)} == {ZONE, f"one.{ZONE}", f"two.{ZONE}"}

    anyio.run(main)
    fence = [r["rrdatas"] for r in fake.rrsets(zone) if r["name"] == FENCE]
    assert fence == [[f'"{new.to_text()}"']]
    audit = fake.audit(zone)
    assert [(e.writer, e.outcome) for e in audit] == [
        ("replica-a", "ok"),  # its fence's addition
        ("replica-a", "ok"),
        ("replica-b", "ok"),  # the swap: deletion of replica-a's fence, addition of its own
        ("replica-a", "412 conditionNotMet"),  # the stale change, refused whole
        ("replica-b", "ok"),
    ]
    stale = audit[3]
    assert stale.deletions[0] == (FENCE, "TXT", (f'"{old.to_text()}"',))
    assert (f"late.{ZONE}.", "A", ("192.0.2.1",)) in stale.additions


def test_a_fence_deleted_behind_the_owners_back_refuses_its_writes(fake: GoogleCloudDnsFake) -> None:
    zone = fake.add_zone(ZONE)
    p = replica(fake, "replica-a")
    token = FenceToken(1, "replica-a")

    async def main() -> None:
        await p.acquire_fence(ZONE, token)
        fake.remove(zone, FENCE, "TXT")  # by hand, say
        with pytest.raises(FencedError):
            await p.apply(ZONE, Changes(create=[a("one")]), token)

    anyio.run(main)
    assert fake.audit(zone)[-1].outcome == "404 notFound"
    assert f"one.{ZONE}." not in {r["name"] for r in fake.rrsets(zone)}


def test_a_large_plan_is_split_into_changes_within_the_limits(fake: GoogleCloudDnsFake) -> None:
    zone = fake.add_zone(ZONE)
    p = replica(fake, "replica-a")
    token = FenceToken(1, "replica-a")
    # 1,500 records with their TXT records of ~250 bytes
    records = [a(f"h{i:04d}", f"10.0.{i // 250}.{i % 250 + 1}") for i in range(1500)]
    owner = "heritage=external-dns,external-dns/owner=x,external-dns/resource=service/default/" + "s" * 160
    txts = [
        Endpoint.new(
            f"a-h{i:04d}.{ZONE}", "TXT", [f'"{owner}{i}"'], labels={OWNED_RECORD_LABEL: f"h{i:04d}.{ZONE}"}
        )
        for i in range(1500)
    ]
    paced: list[str] = []

    async def pace(kind: str) -> None:  # the provider budget's pacer (base.MultiRequest)
        paced.append(kind)

    p.pacer = pace

    async def main() -> None:
        await p.acquire_fence(ZONE, token)
        await p.apply(ZONE, Changes(create=records + txts), token)
        assert len(await p.records(ZONE)) == 3001  # with the apex NS; 3,003 sets with SOA and fence
        olds = records[:1200]
        news = [Endpoint.new(e.dns_name, "A", ["192.0.2.99"]) for e in olds]
        await p.apply(ZONE, Changes(update_old=olds, update_new=news), token)

    anyio.run(main)
    changes = [e for e in fake.audit(zone)][1:]  # the first is the fence's acquisition
    assert all(e.outcome == "ok" for e in changes)
    for change in changes:
        assert change.deletions[0] == (FENCE, "TXT", (f'"{token.to_text()}"',))
        assert (FENCE, "TXT", (f'"{token.to_text()}"',)) in change.additions
        assert len(change.additions) + len(change.deletions) <= 1000  # --google-batch-change-size
        assert len(change.additions) <= MAX_ADDITIONS and len(change.deletions) <= MAX_DELETIONS
        assert _data(change) <= MAX_RRDATA_BYTES
    creates, updates = changes[:4], changes[4:]
    # 1,500 groups of ~260 bytes: the 100 KB limit binds (~388 groups a change), not the count
    sizes = [_data(c) for c in creates]
    assert all(size > MAX_RRDATA_BYTES - 300 for size in sizes[:-1])
    assert all(len(c.additions) < 1000 for c in creates)
    # 1,200 updates are 2,400 additions plus deletions: the count binds (499 updates and the fence a change)
    assert [len(c.deletions) - 1 for c in updates] == [499, 499, 202]
    # every request after a call's first one is paced: the fence's write after its read, 3 more changes,
    # 6 more pages of 500, 2 more changes
    assert paced == ["fence", *["apply"] * 3, *["records"] * 6, *["apply"] * 2]
    values = {r["name"]: r["rrdatas"] for r in fake.rrsets(zone)}
    assert sum(v == ["192.0.2.99"] for v in values.values()) == 1200


def _data(change: AuditEntry) -> int:
    """The bytes of record data of one change, as Cloud DNS counts them toward its limit."""
    return sum(len(v.encode()) for _, _, values in change.additions + change.deletions for v in values)


def test_a_worker_behind_the_budget_rides_out_the_project_rate_limit(fake: GoogleCloudDnsFake) -> None:
    # A project bucket of 3 requests refilled at 5/s: the first sync needs more than that, so some are
    # refused (429); the budget and the worker back off and the zone syncs all the same.
    fake.rate, fake.burst = 5.0, 3
    zone = fake.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [a("web"), a("api", "192.0.2.2")])
    provider = BudgetedProvider(replica(fake, "replica-a"), Budget(1000.0, 1000))
    worker = Worker(provider, TxtRegistry(owner_id="x"), desired, WorkerOptions(interval=60, event_delay=0))

    async def main() -> None:
        await provider.zones()
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            worker.own(ZONE, FenceToken(1, "replica-a"))
            await eventually(lambda: worker.statuses[ZONE].syncs >= 1, within=30)
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert fake.throttled >= 1
    assert {r["name"] for r in fake.rrsets(zone)} >= {f"web.{ZONE}.", f"api.{ZONE}.", f"a-web.{ZONE}."}


def test_a_fence_that_moves_between_its_read_and_its_swap_is_read_again(fake: GoogleCloudDnsFake) -> None:
    zone = fake.add_zone(ZONE)
    taker = replica(fake, "replica-b")
    first, between, wanted = (
        FenceToken(1, "replica-a"),
        FenceToken(2, "replica-c"),
        FenceToken(3, "replica-b"),
    )
    moved: list[str] = []

    async def pace(kind: str) -> None:  # runs between the fence's read and its swap
        if not moved:
            moved.append(kind)
            fake.put(zone, FENCE, "TXT", [f'"{between.to_text()}"'], ttl=60)

    async def main() -> None:
        await replica(fake, "replica-a").acquire_fence(ZONE, first)
        taker.pacer = pace
        await taker.acquire_fence(ZONE, wanted)

    anyio.run(main)
    assert [(e.writer, e.outcome) for e in fake.audit(zone)] == [
        ("replica-a", "ok"),
        ("replica-b", "412 conditionNotMet"),  # deleting replica-a's token, which had moved on
        ("replica-b", "ok"),  # read again: replica-c's token, of an older generation, swapped
    ]
    assert [r["rrdatas"] for r in fake.rrsets(zone) if r["name"] == FENCE] == [[f'"{wanted.to_text()}"']]
