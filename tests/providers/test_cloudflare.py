"""The cloudflare provider through the official SDK over HTTP, against the contract fake on loopback
(tests/cloudfakes/cloudflare.py, which says what it encodes and what it cannot prove).

What these prove: the SDK's requests as the fake takes them (zones and records paged, the batch endpoint),
records written as external-dns writes them (TXT ownership records byte for byte, TTL 1 for "automatic",
proxied never on TXT), a foreign record left alone, deletes, an external-dns zone adopted with no record
write, a stale owner's batch refused whole by the fence, and a 429 with its five-minute block taken as
throttling the provider budget waits out.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from shardsync.providers.base import FencedError, FenceToken, Pacer, fence_record_name, unpaced
from shardsync.providers.budget import Budget, BudgetedProvider
from shardsync.providers.cloudflare.api import CloudflareApi
from shardsync.providers.cloudflare.errors import CloudflareThrottledError
from shardsync.providers.cloudflare.provider import CloudflareProvider
from shardsync.providers.cloudflare.records import PROXIED
from shardsync.reconcile.worker import Worker
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Changes, Endpoint
from tests.cloudfakes.cloudflare import BLOCK_SECONDS, CloudflareFake
from tests.providers.reconcile import reconcile_once

ZONE = "ex.org"
OWNER = "default"


def owner_txt(resource: str) -> str:
    return f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource={resource}"'


class CountingApi:
    """The real SDK-backed API, counting requests by call."""

    def __init__(self, api: CloudflareApi) -> None:
        self.api = api
        self.calls: Counter[str] = Counter()

    async def zones(self, pacer: Pacer) -> list[Any]:
        async def counted(kind: str) -> None:
            self.calls["zones"] += 1
            await pacer(kind)

        self.calls["zones"] += 1
        return await self.api.zones(counted)

    async def zone(self, zone_id: str) -> Any:
        self.calls["zone"] += 1
        return await self.api.zone(zone_id)

    async def records(
        self, zone_id: str, per_page: int, pacer: Pacer, *, name: str = "", type: str = ""
    ) -> list[dict[str, Any]]:
        async def counted(kind: str) -> None:
            self.calls["records"] += 1
            await pacer(kind)

        self.calls["records"] += 1
        return await self.api.records(zone_id, per_page, counted, name=name, type=type)

    async def batch(self, zone_id: str, body: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        self.calls["batch"] += 1
        return await self.api.batch(zone_id, body)

    async def close(self) -> None:
        await self.api.close()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[CloudflareFake]:
    with CloudflareFake().serve() as server:
        monkeypatch.setenv("CF_API_TOKEN", "test-token")
        monkeypatch.setenv("CLOUDFLARE_BASE_URL", server.url)
        yield server


def provider(**kw: Any) -> tuple[CloudflareProvider, CountingApi]:
    api = CountingApi(CloudflareApi(timeout=10))
    kw.setdefault("batch_interval", 0.0)
    return CloudflareProvider(api, **kw), api


def a(name: str, *targets: str, **kw: Any) -> Endpoint:
    return Endpoint.new(name, "A", targets or ["192.0.2.1"], **kw)


def stored(fake: CloudflareFake, zone_id: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The zone's records but the fence, by (name, type, content), in the fields a writer sets."""
    keep = ("name", "type", "content", "ttl", "proxied", "comment", "tags")
    return {
        (r["name"], r["type"], r["content"]): {k: r[k] for k in keep}
        for r in fake.listed(zone_id)
        if r["name"] != fence_record_name(ZONE)
    }


def sync(desired: DesiredIndex, token: FenceToken | None, **kw: Any) -> Worker:
    """One worker reconcile of ZONE through a provider made with `kw`."""
    return reconcile_once(lambda: provider(**kw)[0], desired, ZONE, token, OWNER)


def web(*targets: str, **kw: Any) -> DesiredIndex:
    desired = DesiredIndex([ZONE])
    if targets:
        desired.set_object(
            "service/default/web",
            [a(f"web.{ZONE}", *targets, labels={RESOURCE_LABEL: "service/default/web"}, **kw)],
        )
    return desired


# ---- zones and listings ----


def test_a_client_left_open_is_collected_quietly_after_its_event_loop_ended(fake: CloudflareFake) -> None:
    # A provider that is never closed (a test's, a crash path's) must not, when the garbage collector takes
    # it during a later event loop, try to close its connections on the loop that ended: that raised
    # "Event loop is closed" inside whatever ran then (the SDK's own client schedules that close).
    fake.add_zone(ZONE)
    held: dict[str, CloudflareApi] = {}

    async def first() -> None:
        held["api"] = CloudflareApi(timeout=5)
        await held["api"].zones(unpaced)  # a pooled connection, bound to this loop

    asyncio.run(first())
    errors: list[dict[str, Any]] = []

    async def later() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
        held.clear()
        gc.collect()
        await asyncio.sleep(0.05)

    asyncio.run(later())
    gc.collect()
    assert errors == []


def test_zones_are_listed_page_by_page_or_got_by_id(fake: CloudflareFake) -> None:
    ids = {fake.add_zone(f"z{i:02d}.org"): f"z{i:02d}.org" for i in range(60)}  # two pages of 50
    p, api = provider()
    assert anyio.run(p.zones) == sorted(ids.values())
    assert api.calls["zones"] == 2  # the last page is known from total_pages: no empty third page
    chosen = list(ids)[:2]
    p, api = provider(zone_ids=tuple(chosen))
    assert anyio.run(p.zones) == sorted(ids[i] for i in chosen)
    assert api.calls == Counter(zone=2)


def test_records_are_listed_in_pages_grouped_by_name_and_type_without_the_fence(fake: CloudflareFake) -> None:
    zone_id = fake.add_zone(ZONE)
    for i in range(230):
        fake.add_record(zone_id, {"name": f"h{i:03d}.{ZONE}", "type": "A", "content": "192.0.2.1", "ttl": 1})
    fake.add_record(zone_id, {"name": f"h000.{ZONE}", "type": "A", "content": "192.0.2.2", "ttl": 1})
    fake.add_record(zone_id, {"name": f"mx.{ZONE}", "type": "MX", "content": "mail.ex.org", "priority": 10})
    srv = {"priority": 0, "weight": 1, "port": 443, "target": "cal.ex.org"}
    fake.add_record(zone_id, {"name": f"_cal._tcp.{ZONE}", "type": "SRV", "data": srv, "ttl": 300})
    fake.add_record(zone_id, {"name": f"c.{ZONE}", "type": "CAA", "content": '0 issue "ca"'})  # not read
    p, api = provider(per_page=100)

    async def main() -> list[Endpoint]:
        await p.zones()
        await p.acquire_fence(ZONE, FenceToken(1, "r0"))
        api.calls.clear()
        return await p.records(ZONE)

    listed = {(e.dns_name, e.record_type): e for e in anyio.run(main)}
    assert api.calls["records"] == 3  # 236 records (the fence and its anchor among them): pages of 100
    assert fence_record_name(ZONE) not in {name for name, _ in listed}
    assert listed[(f"h000.{ZONE}", "A")].targets == ("192.0.2.1", "192.0.2.2")
    assert listed[(f"mx.{ZONE}", "MX")].targets == ("10 mail.ex.org",)
    assert listed[(f"_cal._tcp.{ZONE}", "SRV")].targets == ("0 1 443 cal.ex.org.",)
    assert dict(listed[(f"h001.{ZONE}", "A")].provider_specific) == {PROXIED: "false"}
    assert (f"c.{ZONE}", "CAA") not in listed and len(listed) == 232


# ---- writing as external-dns writes ----


def test_an_a_record_and_its_txt_record_are_written_as_external_dns_writes_them(fake: CloudflareFake) -> None:
    zone_id = fake.add_zone(ZONE)
    sync(
        web("192.0.2.10", provider_specific=[(PROXIED, "true")]),
        FenceToken(1, "r0"),
        comment="managed by external-dns",
    )
    # external-dns v0.22's requests for this Service: the record proxied with TTL automatic; the TXT record
    # with the same comment, never proxied, its content quoted
    assert stored(fake, zone_id) == {
        (f"web.{ZONE}", "A", "192.0.2.10"): {
            "name": f"web.{ZONE}",
            "type": "A",
            "content": "192.0.2.10",
            "ttl": 1,
            "proxied": True,
            "comment": "managed by external-dns",
            "tags": [],
        },
        (f"a-web.{ZONE}", "TXT", owner_txt("service/default/web")): {
            "name": f"a-web.{ZONE}",
            "type": "TXT",
            "content": owner_txt("service/default/web"),
            "ttl": 1,
            "proxied": False,
            "comment": "managed by external-dns",
            "tags": [],
        },
    }
    batches = [e for e in fake.audit if e.ok]
    assert len(batches) == 2  # the fence's acquisition, then one batch: fence swap and both records
    assert batches[1].posts[0]["name"] == fence_record_name(ZONE) and len(batches[1].deletes) == 1


def test_a_foreign_record_is_left_alone_and_a_delete_takes_ours_with_its_txt(fake: CloudflareFake) -> None:
    zone_id = fake.add_zone(ZONE)
    fake.add_record(zone_id, {"name": f"other.{ZONE}", "type": "A", "content": "198.51.100.1", "ttl": 300})
    foreign = stored(fake, zone_id)
    token = FenceToken(1, "r0")
    sync(web("192.0.2.10", ttl=600), token)
    assert (f"web.{ZONE}", "A", "192.0.2.10") in stored(fake, zone_id)
    assert stored(fake, zone_id)[(f"web.{ZONE}", "A", "192.0.2.10")]["ttl"] == 600
    sync(web("192.0.2.10", "192.0.2.11"), token)  # an update: the kept value put, the new one posted
    assert {k[2] for k in stored(fake, zone_id) if k[:2] == (f"web.{ZONE}", "A")} == {
        "192.0.2.10",
        "192.0.2.11",
    }
    sync(web(), token)
    assert stored(fake, zone_id) == foreign


def test_an_external_dns_zone_is_adopted_without_a_record_write(fake: CloudflareFake) -> None:
    zone_id = fake.add_zone(ZONE)
    # the zone as external-dns v0.22 left it with --cloudflare-record-comment=team-a: records and TXT
    # records carry the comment, the proxied record has TTL automatic, TXT records are never proxied
    for body in (
        {"name": f"web.{ZONE}", "type": "A", "content": "192.0.2.10", "ttl": 1, "proxied": True},
        {"name": f"a-web.{ZONE}", "type": "TXT", "content": owner_txt("service/default/web"), "ttl": 1},
        {"name": f"api.{ZONE}", "type": "A", "content": "192.0.2.20", "ttl": 300},
        {"name": f"api.{ZONE}", "type": "A", "content": "192.0.2.21", "ttl": 300},
        {"name": f"a-api.{ZONE}", "type": "TXT", "content": owner_txt("service/default/api"), "ttl": 1},
    ):
        fake.add_record(zone_id, {**body, "comment": "team-a"})
    before = stored(fake, zone_id)
    desired = DesiredIndex([ZONE])
    desired.set_object(
        "service/default/web",
        [a(f"web.{ZONE}", "192.0.2.10", labels={RESOURCE_LABEL: "service/default/web"}, ttl=300,
           provider_specific=[(PROXIED, "true")])],
    )  # fmt: skip
    desired.set_object(
        "service/default/api",
        [
            a(
                f"api.{ZONE}",
                "192.0.2.20",
                "192.0.2.21",
                labels={RESOURCE_LABEL: "service/default/api"},
                ttl=300,
            )
        ],
    )
    sync(desired, FenceToken(1, "r0"), comment="team-a")
    assert stored(fake, zone_id) == before
    writes = [e for e in fake.audit if e.ok]
    assert len(writes) == 1 and {b["name"] for b in writes[0].posts} == {fence_record_name(ZONE)}


# ---- the fence ----


def test_a_stale_owners_batch_is_refused_whole_and_nothing_of_it_lands(fake: CloudflareFake) -> None:
    zone_id = fake.add_zone(ZONE)
    old, new = provider()[0], provider()[0]
    first, second = FenceToken(1, "replica-a"), FenceToken(2, "replica-b")

    async def main() -> None:
        await old.zones()
        await new.zones()
        await old.acquire_fence(ZONE, first)
        await old.apply(ZONE, Changes(create=[a(f"one.{ZONE}")]), first)
        await new.acquire_fence(ZONE, second)  # the takeover deletes the fence record old's batches name
        with pytest.raises(FencedError):
            await old.apply(ZONE, Changes(create=[a(f"two.{ZONE}"), a(f"three.{ZONE}")]), first)
        with pytest.raises(FencedError):
            await old.acquire_fence(ZONE, first)  # and it cannot take the fence back
        await new.apply(ZONE, Changes(create=[a(f"four.{ZONE}")]), second)

    anyio.run(main)
    names = {k[0] for k in stored(fake, zone_id)}
    assert names == {f"one.{ZONE}", f"four.{ZONE}"}
    refused = [e for e in fake.audit if not e.ok]
    assert [e.error.split(":")[0] for e in refused] == ["81044"]  # the missing fence id failed it whole
    assert {b["name"] for b in refused[0].posts} == {fence_record_name(ZONE), f"two.{ZONE}", f"three.{ZONE}"}
    fences = [r for r in fake.listed(zone_id) if r["name"] == fence_record_name(ZONE)]
    assert sorted(r["content"] for r in fences) == sorted(
        ['"shardsync fence anchor"', f'"{second.to_text()}"']
    )


def test_two_first_acquisitions_cannot_both_win(fake: CloudflareFake) -> None:
    # Both read an empty zone; the anchor each posts is the compare: the second post is identical, refused.
    zone_id = fake.add_zone(ZONE)
    p1, p2 = provider()[0], provider()[0]
    t1, t2 = FenceToken(1, "replica-a"), FenceToken(1, "replica-b")

    async def main() -> list[BaseException | None]:
        await p1.zones()
        await p2.zones()
        outcomes: list[BaseException | None] = []

        async def take(p: CloudflareProvider, token: FenceToken) -> None:
            try:
                await p.acquire_fence(ZONE, token)
                outcomes.append(None)
            except FencedError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(take, p1, t1)
            tg.start_soon(take, p2, t2)
        return outcomes

    outcomes = anyio.run(main)
    assert sorted(o is None for o in outcomes) == [False, True]
    tokens = [r["content"] for r in fake.listed(zone_id) if r["content"] != '"shardsync fence anchor"']
    assert len(tokens) == 1


# ---- throttling ----


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_429_is_throttling_with_retry_after_and_the_budget_waits_the_block_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    with CloudflareFake(rate_limit=3, clock=clock).serve() as fake:
        monkeypatch.setenv("CF_API_TOKEN", "test-token")
        monkeypatch.setenv("CLOUDFLARE_BASE_URL", fake.url)
        fake.add_zone(ZONE)
        p, _ = provider()

        async def exhausted() -> CloudflareThrottledError:
            for _ in range(3):
                await p.zones()
            with pytest.raises(CloudflareThrottledError) as caught:
                await p.zones()
            return caught.value

        async def sleep(seconds: float) -> None:
            clock.now += seconds  # the budget's naps pass the fake's time

        async def main() -> None:
            error = await exhausted()
            assert error.retry_after == BLOCK_SECONDS and fake.blocks == 1
            clock.now += 100
            with pytest.raises(CloudflareThrottledError) as caught:
                await p.zones()  # still blocked, whatever the window says
            assert caught.value.retry_after == BLOCK_SECONDS - 100
            paced = BudgetedProvider(p, Budget(4.0, clock=clock), sleep=sleep)
            assert await paced.zones() == [ZONE]  # throttled once more, then waited out the block
            await p.close()

        anyio.run(main)
        assert clock.now >= 1000 + BLOCK_SECONDS and fake.blocks == 1
