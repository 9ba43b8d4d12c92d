"""shardsync's webhook server (providers/webhook/server.py) over a Provider, driven by shardsync's webhook
client (`WebhookProvider`, what `--provider=webhook` replicas run) and by plain HTTP where the client would
never send what is tested (another client's requests: external-dns's multi-zone POST, bad bodies).

The provider behind is the fake's in-process `FakeProvider`, a real Provider that fences its writes (its
store keeps the fence; every write audited). Two wrappers are test doubles of providers we cannot run in
this layer, each saying what it stands for: `NotFencing` (a provider whose `fences_writes` is False, as
pdns's is: tests/e2e/test_webhook_pdns.py runs the real one) and `Failing` (a provider raising the errors
a real one raises, to pin the status each becomes and what the client makes of it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    ProviderError,
    RecordsRejectedError,
    Rejected,
    ThrottledError,
    UnreachableError,
)
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.providers.webhook.client import WebhookProvider
from shardsync.providers.webhook.protocol import FENCE_HEADER, FENCE_PATH, MEDIA_TYPE, fence_value
from shardsync.providers.webhook.server import WebhookServer, start_runner
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import Changes, Endpoint

Z0, Z1 = "zone-0000.example", "zone-0001.example"
SUB = f"sub.{Z0}"
T1, T2 = FenceToken(1, "replica-0"), FenceToken(2, "replica-1")
HEADERS = {"Content-Type": MEDIA_TYPE, "Accept": MEDIA_TYPE}


def a(name: str, target: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(name, "A", [target])


class NotFencing:
    """Stands for a provider whose writes are not fenced (`fences_writes` False: pdns, with or without its
    RFC 2136 fence): the fake provider's reads and writes, without the claim."""

    def __init__(self, inner: FakeProvider) -> None:
        self.inner = inner
        self.name = "not-fencing"
        self.tokens: list[FenceToken | None] = []

    async def zones(self) -> list[str]:
        return await self.inner.zones()

    async def records(self, zone: str) -> list[Endpoint]:
        return await self.inner.records(zone)

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        self.tokens.append(fence)
        await self.inner.apply(zone, changes, fence)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        raise AssertionError("a server that does not offer the extension never takes a fence")

    async def fences_writes(self) -> bool:
        return False

    async def close(self) -> None:
        return None


class Failing(NotFencing):
    """Stands for a provider whose API fails: `apply` of the zones in `errors` raises that error (after
    applying the rest, for RecordsRejectedError), `records` of them too."""

    def __init__(self, inner: FakeProvider, errors: dict[str, ProviderError]) -> None:
        super().__init__(inner)
        self.errors = errors

    async def records(self, zone: str) -> list[Endpoint]:
        if zone in self.errors:
            raise self.errors[zone]
        return await super().records(zone)

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        error = self.errors.get(zone)
        if isinstance(error, RecordsRejectedError):
            await super().apply(zone, Changes(create=changes.create[1:]), fence)
        if error is not None:
            raise error
        await super().apply(zone, changes, fence)


class Adjusting(NotFencing):
    """A provider that rewrites desired endpoints (base.AdjustsDesired), as aws does: here a TTL of 300."""

    def adjust_desired(self, endpoints: list[Endpoint]) -> list[Endpoint]:
        return [Endpoint.new(e.dns_name, e.record_type, list(e.targets), ttl=e.ttl or 300) for e in endpoints]


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore()
    store.seed(2, 1)
    store.add_zone(SUB, [a(f"deep.{SUB}", "192.0.2.7")])
    store.add_zone("other.example", [a("www.other.example")])
    return store


@asynccontextmanager
async def serving(server: WebhookServer) -> AsyncIterator[str]:
    runner = await start_runner(server, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def client_of(
    provider: Any, domain_filter: DomainFilter | None = None, **options: Any
) -> AsyncIterator[tuple[WebhookProvider, str]]:
    """A webhook client (identity replica-0) of a webhook server over `provider`, and the server's URL."""
    async with serving(WebhookServer(lambda caller: provider, domain_filter, **options)) as url:
        client = WebhookProvider(url, identity="replica-0", timeout=5, cache_ttl=0)
        try:
            yield client, url
        finally:
            await client.close()


async def get(url: str, **options: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as http:
        return await http.get(url, **options)


async def post(url: str, **options: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as http:
        return await http.post(url, **options)


def names(endpoints: Iterable[Endpoint]) -> list[str]:
    return sorted(e.dns_name for e in endpoints)


# ---- the protocol: negotiation, listings, writes ----


@pytest.mark.anyio
async def test_the_client_reads_and_writes_every_zone_through_the_server(store: FakeStore) -> None:
    async with client_of(FakeProvider(store, "server")) as (webhook, url):
        assert await webhook.zones() == sorted([Z0, Z1, SUB, "other.example"])
        assert await webhook.records(Z0) == store.peek(Z0)
        assert names(await webhook.records(SUB)) == [f"deep.{SUB}"]  # one read per zone, split by zone
        await webhook.apply(Z0, Changes(create=[a(f"www.{Z0}")]))
        assert a(f"www.{Z0}") in store.peek(Z0)
        old = store.peek(Z1)[0]
        new = Endpoint.new(old.dns_name, "A", ["10.0.0.1"], ttl=60)
        await webhook.apply(Z1, Changes(update_old=[old], update_new=[new]))
        await webhook.apply(Z0, Changes(delete=[a(f"www.{Z0}")]))
        assert new in store.peek(Z1) and a(f"www.{Z0}") not in store.peek(Z0)
        negotiation = await get(url, headers={"Accept": MEDIA_TYPE})
    assert negotiation.headers["Content-Type"] == MEDIA_TYPE
    assert negotiation.headers["Vary"] == "Content-Type"
    assert [(e.zone, e.writer) for e in store.audit()] == [(Z0, "server"), (Z1, "server"), (Z0, "server")]


@pytest.mark.anyio
async def test_a_post_spanning_zones_is_split_per_zone_and_one_outside_refuses_it_whole(
    store: FakeStore,
) -> None:
    """external-dns sends one POST for every zone; each record goes to its most specific zone."""
    changes = Changes(
        create=[a(f"x.{SUB}"), a(f"y.{Z0}"), a(f"z.{Z1}")], delete=[a(f"deep.{SUB}", "192.0.2.7")]
    )
    async with client_of(FakeProvider(store, "server")) as (_, url), httpx.AsyncClient(timeout=5) as http:
        resp = await http.post(f"{url}/records", json=changes.to_json(), headers=HEADERS)
        assert resp.status_code == 204, resp.text
        outside = Changes(create=[a(f"q.{Z0}"), a("www.nowhere.example")])
        refused = await http.post(f"{url}/records", json=outside.to_json(), headers=HEADERS)
    assert names(store.peek(SUB)) == [f"x.{SUB}"]
    assert f"y.{Z0}" in names(store.peek(Z0)) and f"z.{Z1}" in names(store.peek(Z1))
    assert sorted(e.zone for e in store.audit()) == sorted([SUB, Z0, Z1])  # one write per zone
    assert refused.status_code == 422 and "www.nowhere.example" in refused.json()["message"]
    assert f"q.{Z0}" not in names(store.peek(Z0))  # nothing of it applied


@pytest.mark.anyio
async def test_the_domain_filter_chooses_the_zones_served(store: FakeStore) -> None:
    served = DomainFilter.parse(["example"], ["other.example"])
    async with client_of(FakeProvider(store, "server"), served) as (webhook, url):
        assert await webhook.zones() == sorted([Z0, Z1, SUB])
        body = Changes(create=[a("new.other.example")]).to_json()
        refused = await post(f"{url}/records", json=body, headers=HEADERS)
        listed = (await get(f"{url}/records", headers=HEADERS)).json()
    assert refused.status_code == 422 and "in no zone this server serves" in refused.text
    assert "www.other.example" not in {e["dnsName"] for e in listed}
    assert names(store.peek("other.example")) == ["www.other.example"]


@pytest.mark.anyio
async def test_adjust_endpoints_is_the_providers(store: FakeStore) -> None:
    raw = Endpoint("WWW.zone-0000.example.", "A", ("192.0.2.2", "192.0.2.1"))
    async with client_of(Adjusting(FakeProvider(store))) as (webhook, _):
        assert await webhook.adjust_endpoints([raw]) == [
            Endpoint.new(f"www.{Z0}", "A", ["192.0.2.1", "192.0.2.2"], ttl=300)
        ]
    async with client_of(FakeProvider(store)) as (webhook, _):  # no adjust_desired: canonical form only
        assert await webhook.adjust_endpoints([raw]) == [
            Endpoint.new(f"www.{Z0}", "A", ["192.0.2.1", "192.0.2.2"])
        ]


# ---- the fence extension: offered when the provider fences its writes ----


@pytest.mark.anyio
async def test_a_fencing_provider_is_served_with_the_extension(store: FakeStore) -> None:
    async with (
        client_of(FakeProvider(store, "server")) as (old, url),
        serving(WebhookServer(lambda caller: FakeProvider(store, "server"))) as same_url,
    ):
        new = WebhookProvider(same_url, identity="replica-1")
        try:
            assert await old.fences_writes() is True and await new.fences_writes() is True
            await old.acquire_fence(Z0, T1)
            await old.apply(Z0, Changes(create=[a(f"w.{Z0}")]), T1)
            assert store.fence_of(Z0) == T1
            await new.acquire_fence(Z0, T2)  # the newer owner, through another server instance
            with pytest.raises(FencedError, match="409"):
                await old.apply(Z0, Changes(create=[a(f"late.{Z0}")]), T1)
            other = WebhookProvider(url, identity="replica-2")
            with pytest.raises(FencedError, match="409"):
                await other.acquire_fence(Z0, FenceToken(2, "replica-2"))
            await other.close()
            await new.apply(Z0, Changes(create=[a(f"new.{Z0}")]), T2)
        finally:
            await new.close()
        async with httpx.AsyncClient(timeout=5) as http:
            unknown = {FENCE_HEADER: fence_value("nowhere.example", T2)}
            missing = await http.post(url + FENCE_PATH, headers=unknown)
            outside = await http.post(
                f"{url}/records",
                json=Changes(create=[a(f"x.{SUB}")]).to_json(),  # the sub-zone's, not Z0's
                headers={**HEADERS, FENCE_HEADER: fence_value(Z0, T2)},
            )
    assert names(store.peek(Z0)) == sorted([f"host-0000.{Z0}", f"w.{Z0}", f"new.{Z0}"])
    assert [(e.op, e.fence and FenceToken.from_text(e.fence), e.outcome) for e in store.audit()] == [
        ("fence", T1, "ok"),
        ("apply", T1, "ok"),
        ("fence", T2, "ok"),
        ("apply", T1, "fenced"),
        ("fence", FenceToken(2, "replica-2"), "fenced"),
        ("apply", T2, "ok"),
    ]
    assert missing.status_code == 404
    assert outside.status_code == 422 and f"x.{SUB}" in outside.json()["message"]


@pytest.mark.anyio
async def test_a_provider_that_does_not_fence_is_served_without_the_extension(store: FakeStore) -> None:
    provider = NotFencing(FakeProvider(store, "server"))
    async with client_of(provider) as (webhook, url):
        assert await webhook.fences_writes() is False
        await webhook.acquire_fence(Z0, T1)  # kept in the client: the server is not asked
        await webhook.apply(Z0, Changes(create=[a(f"w.{Z0}")]), T1)
        async with httpx.AsyncClient(timeout=5) as http:
            negotiation = await http.get(url, headers=HEADERS)
            route = await http.post(url + FENCE_PATH, headers={FENCE_HEADER: fence_value(Z0, T1)})
            header_ignored = await http.post(
                f"{url}/records",
                json=Changes(create=[a(f"v.{Z0}")]).to_json(),
                headers={**HEADERS, FENCE_HEADER: fence_value(Z0, T2)},
            )
    assert FENCE_HEADER not in negotiation.headers
    assert route.status_code == 404
    assert header_ignored.status_code == 204 and FENCE_HEADER not in header_ignored.headers
    assert provider.tokens == [None, None]  # no token reached the provider: its writes are plain ones
    assert {f"w.{Z0}", f"v.{Z0}"} <= set(names(store.peek(Z0))) and store.fence_of(Z0) is None


# ---- errors: the status each failure becomes, and what the client makes of it ----


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "status", "raised"),
    [
        (ThrottledError("slow down", 7.0), 503, ThrottledError),
        (UnreachableError("pdns: no answer within 5s"), 502, ProviderError),
        (BatchRejectedError("422 bad content"), 422, BatchRejectedError),
        (RecordsRejectedError(Z0, [Rejected(a(f"w.{Z0}"), "unquoted TXT")]), 422, BatchRejectedError),
        (ProviderError("the API said no"), 500, ProviderError),
    ],
)
async def test_a_provider_failure_becomes_the_protocols_status(
    store: FakeStore, error: ProviderError, status: int, raised: type[ProviderError]
) -> None:
    changes = Changes(create=[a(f"w.{Z0}"), a(f"v.{Z0}")])
    async with client_of(Failing(FakeProvider(store), {Z0: error})) as (webhook, url):
        with pytest.raises(raised) as info:
            await webhook.apply(Z0, changes)
        again = Changes(create=[a(f"x.{Z0}"), a(f"y.{Z0}")])  # as another client sends it
        resp = await post(f"{url}/records", json=again.to_json(), headers=HEADERS)
        listing = await get(f"{url}/records", headers=HEADERS)
    assert resp.status_code == status and str(error)[:20] in resp.json()["message"]
    assert listing.status_code == status  # a zone that cannot be read fails the whole listing
    if status == 503:
        assert resp.headers["Retry-After"] == "7"
        assert isinstance(info.value, ThrottledError) and info.value.retry_after == 7.0
    else:
        assert not isinstance(info.value, ThrottledError)


@pytest.mark.anyio
async def test_zones_failing_in_one_post_answer_the_first_5xx_and_name_every_zone(store: FakeStore) -> None:
    errors: dict[str, ProviderError] = {Z0: BatchRejectedError("bad record"), Z1: ThrottledError("slow", 2.0)}
    changes = Changes(create=[a(f"w.{Z0}"), a(f"w.{Z1}"), a(f"w.{SUB}")])
    async with client_of(Failing(FakeProvider(store), errors)) as (_, url):
        resp = await post(f"{url}/records", json=changes.to_json(), headers=HEADERS)
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "2"
    message = resp.json()["message"]
    assert message.startswith("2 of 3 zones failed (the others were applied)")
    assert f"zone {Z0}: bad record" in message and f"zone {Z1}: slow" in message
    assert names(store.peek(SUB)) == sorted([f"deep.{SUB}", f"w.{SUB}"])


@pytest.mark.anyio
async def test_malformed_requests(store: FakeStore) -> None:
    async with (
        client_of(FakeProvider(store), max_body=1000) as (_, url),
        httpx.AsyncClient(timeout=5) as http,
    ):
        answers = {
            "not json": await http.post(f"{url}/records", content=b"{", headers=HEADERS),
            "not an object": await http.post(f"{url}/records", content=b"[1]", headers=HEADERS),
            "bad endpoint": await http.post(
                f"{url}/records", json={"create": [{"dnsName": 5, "recordType": "A"}]}, headers=HEADERS
            ),
            "uneven update": await http.post(
                f"{url}/records", json={"updateNew": [a(f"w.{Z0}").to_json()]}, headers=HEADERS
            ),
            "too large": await http.post(
                f"{url}/records", json=Changes(create=[a(f"w{i}.{Z0}") for i in range(50)]).to_json()
            ),
            "wrong method": await http.get(f"{url}/adjustendpoints", headers=HEADERS),
            "wrong type": await http.post(
                f"{url}/records", content=b"{}", headers={"Content-Type": "text/xml"}
            ),
            "version 2 only": await http.get(url, headers={"Accept": MEDIA_TYPE.replace("=1", "=2")}),
            "elsewhere": await http.get(f"{url}/v1/zones"),
        }
    statuses = {what: resp.status_code for what, resp in answers.items()}
    assert statuses == {
        "not json": 400,
        "not an object": 400,
        "bad endpoint": 400,
        "uneven update": 400,
        "too large": 413,
        "wrong method": 405,
        "wrong type": 415,
        "version 2 only": 406,
        "elsewhere": 404,
    }
    assert answers["wrong method"].headers["Allow"] == "POST"
    assert all(set(resp.json()) == {"error", "message"} for resp in answers.values())
    assert store.audit() == []


@pytest.mark.anyio
async def test_the_server_asks_the_provider_for_the_caller(store: FakeStore) -> None:
    """`provider_for` is given the caller's name (X-Shardsync-Client): the fake keys its audit on it."""
    callers: list[str] = []

    def provider_for(caller: str) -> FakeProvider:
        callers.append(caller)
        return FakeProvider(store, caller or "anonymous")

    async with serving(WebhookServer(provider_for)) as url:
        webhook = WebhookProvider(url, identity="replica-3")
        try:
            await webhook.apply(Z0, Changes(create=[a(f"w.{Z0}")]))
        finally:
            await webhook.close()
        await post(f"{url}/records", json=Changes(create=[a(f"v.{Z0}")]).to_json())
    assert set(callers) == {"replica-3", ""}
    assert [e.writer for e in store.audit()] == ["replica-3", "anonymous"]
