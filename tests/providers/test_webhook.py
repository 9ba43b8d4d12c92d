"""The webhook provider client against the fake provider server's webhook face (and a few canned answers);
the fence extension and lease-timed writes are test_webhook_fence.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from shardsync.providers.base import (
    BatchRejectedError,
    Provider,
    ProviderError,
    ThrottledError,
    UnreachableError,
)
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore
from shardsync.providers.webhook.client import WebhookProvider
from shardsync.providers.webhook.protocol import MEDIA_TYPE
from shardsync.records.endpoint import Changes, Endpoint

Z0 = "zone-0000.example"
SUB = "sub.zone-0000.example"


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore()
    store.seed(2, 2)
    store.add_zone(SUB, [Endpoint.new(f"deep.{SUB}", "A", ["192.0.2.7"])])
    return store


@pytest.fixture
async def webhook(server: FakeServer) -> AsyncIterator[WebhookProvider]:
    provider = WebhookProvider(server.url, identity="replica-0", timeout=5, cache_ttl=60)
    try:
        yield provider
    finally:
        await provider.close()


def a(name: str, target: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(name, "A", [target])


@pytest.mark.anyio
async def test_negotiation_and_zones(webhook: WebhookProvider) -> None:
    assert isinstance(webhook, Provider)
    domain_filter = await webhook.negotiate()
    assert domain_filter.include == (SUB, "zone-0000.example", "zone-0001.example")
    assert await webhook.zones() == [SUB, "zone-0000.example", "zone-0001.example"]


@pytest.mark.anyio
async def test_records_are_split_by_most_specific_zone(webhook: WebhookProvider, store: FakeStore) -> None:
    assert await webhook.records(Z0) == store.peek(Z0)
    assert [r.dns_name for r in await webhook.records(SUB)] == [f"deep.{SUB}"]
    with pytest.raises(ProviderError, match="not served"):
        await webhook.records("other.example")


@pytest.mark.anyio
async def test_apply_create_update_delete_and_cache_invalidation(
    webhook: WebhookProvider, store: FakeStore
) -> None:
    before = await webhook.records(Z0)
    await webhook.apply(Z0, Changes(create=[a("www.zone-0000.example")]))
    assert a("www.zone-0000.example") in await webhook.records(Z0)
    old = before[0]
    new = Endpoint.new(old.dns_name, "A", ["10.1.1.1"], ttl=300)
    await webhook.apply(Z0, Changes(update_old=[old], update_new=[new], delete=[before[1]]))
    assert await webhook.records(Z0) == sorted([new, a("www.zone-0000.example")], key=lambda e: e.key)
    assert store.peek(Z0) == await webhook.records(Z0)
    writes = store.audit()
    assert [(e.op, e.zone, e.writer, e.outcome, e.changes) for e in writes] == [
        ("apply", Z0, "replica-0", "ok", 1),
        ("apply", Z0, "replica-0", "ok", 2),
    ]


@pytest.mark.anyio
async def test_an_apply_makes_the_cached_listing_stale_for_its_zone_alone() -> None:
    zones = ["a.example", "b.example"]
    served = {z: [Endpoint.new(f"www.{z}", "A", ["192.0.2.1"])] for z in zones}
    listings: list[int] = []

    def serve(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Type": MEDIA_TYPE}
        if request.url.path == "/":
            return httpx.Response(200, json={"include": zones}, headers=headers)
        if request.url.path == "/records" and request.method == "GET":
            listings.append(1)
            return httpx.Response(200, json=[e.to_json() for z in zones for e in served[z]], headers=headers)
        served["a.example"] = [Endpoint.new("www.a.example", "A", ["192.0.2.2"])]  # what the POST did
        return httpx.Response(204)

    webhook = WebhookProvider("http://127.0.0.1:9", cache_ttl=60, transport=httpx.MockTransport(serve))
    try:
        await webhook.records("a.example")
        await webhook.records("b.example")
        assert len(listings) == 1
        await webhook.apply("a.example", Changes(create=[a("new.a.example")]))
        assert await webhook.records("b.example") == served["b.example"]  # b's share cannot have changed
        assert len(listings) == 1
        assert await webhook.records("a.example") == served["a.example"]  # a's is listed again
        assert len(listings) == 2
        await webhook.records("b.example")
        assert len(listings) == 2
    finally:
        await webhook.close()


@pytest.mark.anyio
async def test_apply_refuses_names_outside_the_zone_before_sending(
    webhook: WebhookProvider, store: FakeStore
) -> None:
    for name in ("x.zone-0001.example", f"x.{SUB}"):
        with pytest.raises(ProviderError, match="not in zone"):
            await webhook.apply(Z0, Changes(create=[a(name)]))
    assert store.audit() == []


@pytest.mark.anyio
async def test_server_errors_map_to_provider_errors(webhook: WebhookProvider, store: FakeStore) -> None:
    with pytest.raises(BatchRejectedError, match="422"):
        await webhook.apply(Z0, Changes(create=[a("host-0000.zone-0000.example")]))
    store.set_faults(Faults(fail_records=frozenset({"bad.zone-0000.example"})))
    with pytest.raises(BatchRejectedError, match="injected failure"):
        await webhook.apply(Z0, Changes(create=[a("bad.zone-0000.example")]))
    store.set_faults(Faults(throttle_next=1))
    with pytest.raises(ThrottledError):
        await webhook.apply(Z0, Changes(create=[a("t.zone-0000.example")]))
    store.set_faults(Faults(fail_zones=frozenset({Z0})))
    with pytest.raises(ProviderError, match="500") as info:
        await webhook.apply(Z0, Changes(create=[a("f.zone-0000.example")]))
    assert not isinstance(info.value, BatchRejectedError)
    assert store.audit()[-1].outcome == "error"


@pytest.mark.anyio
async def test_adjust_endpoints(webhook: WebhookProvider) -> None:
    raw = Endpoint("WWW.zone-0000.example.", "A", ("192.0.2.2", "192.0.2.1"))
    assert await webhook.adjust_endpoints([raw]) == [
        Endpoint.new("www.zone-0000.example", "A", ["192.0.2.1", "192.0.2.2"])
    ]


def _canned(handler: httpx.MockTransport) -> WebhookProvider:
    return WebhookProvider("http://127.0.0.1:9", timeout=1, transport=handler)


@pytest.mark.anyio
async def test_a_bad_negotiated_domain_filter_is_a_provider_error() -> None:
    answer = {"include": ["a.example"], "regexExclude": "("}
    headers = {"Content-Type": MEDIA_TYPE}
    bad = _canned(httpx.MockTransport(lambda r: httpx.Response(200, json=answer, headers=headers)))
    try:
        with pytest.raises(ProviderError, match="webhook negotiation: bad regular expression"):
            await bad.zones()
    finally:
        await bad.close()


@pytest.mark.anyio
async def test_negotiation_checks_media_type_and_zones() -> None:
    wrong = _canned(httpx.MockTransport(lambda r: httpx.Response(200, json={"include": ["a.example"]})))
    try:
        with pytest.raises(ProviderError, match="content type"):
            await wrong.zones()
    finally:
        await wrong.close()

    def regex_only(request: httpx.Request) -> httpx.Response:
        assert request.headers["Accept"] == MEDIA_TYPE
        return httpx.Response(200, json={"regexInclude": "x"}, headers={"Content-Type": MEDIA_TYPE})

    regex = _canned(httpx.MockTransport(regex_only))
    try:
        with pytest.raises(ProviderError, match="lists no zones"):
            await regex.zones()
    finally:
        await regex.close()
    configured = WebhookProvider(
        "http://127.0.0.1:9", zones=["A.example."], transport=httpx.MockTransport(regex_only)
    )
    try:
        assert await configured.zones() == ["a.example"]
    finally:
        await configured.close()


@pytest.mark.anyio
async def test_unreachable_webhook() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    provider = _canned(httpx.MockTransport(refuse))
    try:
        with pytest.raises(UnreachableError):
            await provider.zones()
    finally:
        await provider.close()


def test_server_accepts_capitalised_pre_v017_keys(server: FakeServer, store: FakeStore) -> None:
    body = {
        "Create": [a("cap.zone-0001.example").to_json()],
        "Delete": [store.peek("zone-0001.example")[0].to_json()],
    }
    resp = httpx.post(f"{server.url}/records", json=body, headers={"Content-Type": MEDIA_TYPE}, timeout=5)
    assert resp.status_code == 204
    assert [r.dns_name for r in store.peek("zone-0001.example")] == [
        "cap.zone-0001.example",
        "host-0001.zone-0001.example",
    ]
    negotiation = httpx.get(server.url, headers={"Accept": MEDIA_TYPE}, timeout=5)
    assert negotiation.headers["Content-Type"] == MEDIA_TYPE
    assert negotiation.headers["Vary"] == "Content-Type"
    bad = httpx.post(f"{server.url}/records", content=b"[1]", timeout=5)
    assert bad.status_code == 400
