"""The webhook client's two kinds of write: fenced, against a server with shardsync's fence extension (the
fake provider's webhook face with `webhook_fence`), and lease-timed, against one without it; the wire format
of the extension (a few canned answers show the exact headers and status codes a real server may send)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from prometheus_client import REGISTRY

from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    ProviderError,
    fences_writes,
)
from shardsync.providers.budget import BudgetedProvider
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore
from shardsync.providers.webhook import WebhookOptions, build
from shardsync.providers.webhook.client import WebhookProvider
from shardsync.providers.webhook.protocol import (
    FENCE_HEADER,
    FENCE_PATH,
    MEDIA_TYPE,
    fence_value,
    parse_fence_value,
)
from shardsync.records.endpoint import Changes, Endpoint

Z0 = "zone-0000.example"
T1, T2, T3 = FenceToken(1, "replica-0"), FenceToken(2, "replica-0"), FenceToken(3, "replica-1")


def a(name: str, target: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(name, "A", [target])


def unfenced_writes() -> float:
    return REGISTRY.get_sample_value("shardsync_webhook_unfenced_writes_total") or 0.0


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore()
    store.seed(2, 1)
    return store


@pytest.fixture
async def client_of() -> AsyncIterator[Callable[[str, str], WebhookProvider]]:
    made: list[WebhookProvider] = []

    def make(url: str, identity: str = "replica-0") -> WebhookProvider:
        made.append(WebhookProvider(url, identity=identity, timeout=5))
        return made[-1]

    yield make
    for provider in made:
        await provider.close()


# ---- against a server without the extension: lease-timed ----


@pytest.mark.anyio
async def test_without_the_extension_writes_are_lease_timed_and_tokens_checked_here(
    server: FakeServer, store: FakeStore, client_of: Callable[[str, str], WebhookProvider]
) -> None:
    webhook = client_of(server.url, "replica-0")
    assert await webhook.fences_writes() is False
    before = unfenced_writes()
    await webhook.acquire_fence(Z0, T2)  # kept in this process: nothing is sent
    await webhook.apply(Z0, Changes(create=[a("w.zone-0000.example")]), T2)
    assert unfenced_writes() == before + 1
    with pytest.raises(FencedError, match="not older than"):
        await webhook.acquire_fence(Z0, T1)
    await webhook.acquire_fence(Z0, FenceToken(4, "replica-0"))
    with pytest.raises(FencedError, match="this process holds"):  # its own stale write, refused here
        await webhook.apply(Z0, Changes(create=[a("v.zone-0000.example")]), T2)
    assert store.fence_of(Z0) is None
    assert [(e.op, e.outcome, e.fence) for e in store.audit()] == [("apply", "ok", None)]


@pytest.mark.anyio
async def test_unfenced_calls_work_with_either_server(
    server: FakeServer, fenced_server: FakeServer, client_of: Callable[[str, str], WebhookProvider]
) -> None:
    # --once passes no token; --sharding=off and sharded replicas pass one (above and below).
    for url in (server.url, fenced_server.url):
        await client_of(url, "once").apply(Z0, Changes(create=[a(f"once-{url[-5:]}.zone-0000.example")]))


# ---- against a server with the extension: fenced ----


@pytest.mark.anyio
async def test_with_the_extension_the_server_holds_the_fence_and_refuses_a_stale_token(
    fenced_server: FakeServer, store: FakeStore, client_of: Callable[[str, str], WebhookProvider]
) -> None:
    old, new = client_of(fenced_server.url, "replica-0"), client_of(fenced_server.url, "replica-1")
    assert await old.fences_writes() is True
    before = unfenced_writes()
    await old.acquire_fence(Z0, T2)
    assert store.fence_of(Z0) == T2
    await old.apply(Z0, Changes(create=[a("w.zone-0000.example")]), T2)
    await new.acquire_fence(Z0, T3)  # a newer generation takes the zone
    with pytest.raises(FencedError, match="409"):
        await old.apply(Z0, Changes(create=[a("late.zone-0000.example")]), T2)
    with pytest.raises(FencedError, match="409"):  # the compare-and-set: not back to an older generation
        await client_of(fenced_server.url, "replica-0").acquire_fence(Z0, T2)
    with pytest.raises(FencedError, match="409"):  # nor to another writer at the same generation
        await client_of(fenced_server.url, "replica-2").acquire_fence(Z0, FenceToken(3, "replica-2"))
    await new.acquire_fence(Z0, T3)  # taking the fence it holds again is a no-op
    await new.apply(Z0, Changes(create=[a("new.zone-0000.example")]), T3)
    assert unfenced_writes() == before
    assert store.fence_of(Z0) == T3
    names = {r.dns_name for r in store.peek(Z0)}
    assert {"w.zone-0000.example", "new.zone-0000.example"} <= names and "late.zone-0000.example" not in names
    audit = [(e.op, e.writer, e.generation, e.outcome) for e in store.audit()]
    assert audit == [
        ("fence", "replica-0", 2, "ok"),
        ("apply", "replica-0", 2, "ok"),
        ("fence", "replica-1", 3, "ok"),
        ("apply", "replica-0", 2, "fenced"),
        ("fence", "replica-0", 2, "fenced"),
        ("fence", "replica-2", 3, "fenced"),
        ("fence", "replica-1", 3, "ok"),
        ("apply", "replica-1", 3, "ok"),
    ]


@pytest.mark.anyio
async def test_a_fenced_write_stays_in_its_zone(
    fenced_server: FakeServer, store: FakeStore, client_of: Callable[[str, str], WebhookProvider]
) -> None:
    # The server checks it too (a client of another kind might not): 422, nothing applied, whether the
    # token holds the zone or not (the content is looked at before the fence).
    body = Changes(create=[a("x.zone-0001.example")]).to_json()
    headers = {"Content-Type": MEDIA_TYPE, FENCE_HEADER: fence_value(Z0, T2)}
    async with httpx.AsyncClient(timeout=5) as http:
        resp = await http.post(f"{fenced_server.url}/records", json=body, headers=headers)
        assert resp.status_code == 422, resp.text
        await client_of(fenced_server.url, "replica-0").acquire_fence(Z0, T2)
        resp = await http.post(f"{fenced_server.url}/records", json=body, headers=headers)
    assert resp.status_code == 422 and "which the fence names" in resp.text
    assert "x.zone-0001.example" not in {r.dns_name for r in store.peek("zone-0001.example")}


def test_the_fake_face_answers_the_extension_only_when_it_speaks_it(
    server: FakeServer, fenced_server: FakeServer
) -> None:
    header = {FENCE_HEADER: fence_value(Z0, T2)}
    plain = httpx.get(server.url, headers={"Accept": MEDIA_TYPE}, timeout=5)
    assert FENCE_HEADER not in plain.headers
    assert httpx.post(server.url + FENCE_PATH, headers=header, timeout=5).status_code == 404
    spoken = httpx.get(fenced_server.url, headers={"Accept": MEDIA_TYPE}, timeout=5)
    assert spoken.headers[FENCE_HEADER] == "1"
    assert httpx.post(fenced_server.url + FENCE_PATH, timeout=5).status_code == 400  # no header
    bad = {FENCE_HEADER: f"{Z0} generation=x"}
    assert httpx.post(fenced_server.url + FENCE_PATH, headers=bad, timeout=5).status_code == 400
    took = httpx.post(fenced_server.url + FENCE_PATH, headers=header, timeout=5)
    assert took.status_code == 204


# ---- the wire format, from canned answers ----


class Canned:
    """A webhook server of canned answers that records every request."""

    def __init__(self, *, advertise: str | None, records: httpx.Response, fence: int = 204) -> None:
        self.advertise = advertise
        self.records = records
        self.fence = fence
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "GET" and request.url.path == "/":
            headers = {"Content-Type": MEDIA_TYPE}
            if self.advertise is not None:
                headers[FENCE_HEADER] = self.advertise
            return httpx.Response(200, json={"include": [Z0]}, headers=headers)
        if request.url.path == FENCE_PATH:
            return httpx.Response(self.fence)
        return self.records

    def provider(self) -> WebhookProvider:
        transport = httpx.MockTransport(self)
        return WebhookProvider("http://127.0.0.1:9", identity="replica-0", transport=transport)

    def sent(self, path: str) -> list[str | None]:
        return [r.headers.get(FENCE_HEADER) for r in self.requests if r.url.path == path]


CONFIRMED = httpx.Response(204, headers={FENCE_HEADER: "1"})


@pytest.mark.anyio
async def test_the_fence_header_is_sent_with_the_acquire_and_every_write() -> None:
    canned = Canned(advertise="2, 1", records=CONFIRMED)  # a later server lists every version it speaks
    webhook = canned.provider()
    try:
        await webhook.acquire_fence(Z0 + ".", T2)
        await webhook.apply(Z0, Changes(create=[a("w.zone-0000.example")]), T2)
        await webhook.apply(Z0, Changes(create=[a("u.zone-0000.example")]))  # no token: none sent
    finally:
        await webhook.close()
    value = f"{Z0} identity=replica-0,generation=2"
    assert canned.sent(FENCE_PATH) == [value]
    assert canned.sent("/records") == [value, None]
    assert [r.method for r in canned.requests if r.url.path == FENCE_PATH] == ["POST"]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [409, 412])
async def test_a_refused_token_is_a_fenced_error(status: int) -> None:
    canned = Canned(advertise="1", records=httpx.Response(status, text="stale"), fence=status)
    webhook = canned.provider()
    try:
        with pytest.raises(FencedError, match=str(status)):
            await webhook.acquire_fence(Z0, T2)
        webhook._tokens[Z0] = T2  # as if taken before the server moved on
        with pytest.raises(FencedError, match=str(status)):
            await webhook.apply(Z0, Changes(create=[a("w.zone-0000.example")]), T2)
    finally:
        await webhook.close()


@pytest.mark.anyio
async def test_without_the_extension_nothing_is_sent_and_409_stays_a_rejected_batch() -> None:
    canned = Canned(advertise=None, records=httpx.Response(409, text="conflict"))
    webhook = canned.provider()
    try:
        await webhook.acquire_fence(Z0, T2)
        with pytest.raises(BatchRejectedError):  # the server's own 409: about the content, not a fence
            await webhook.apply(Z0, Changes(create=[a("w.zone-0000.example")]), T2)
    finally:
        await webhook.close()
    assert canned.sent(FENCE_PATH) == [] and canned.sent("/records") == [None]


@pytest.mark.anyio
async def test_a_fenced_write_the_server_did_not_confirm_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    canned = Canned(advertise="1", records=httpx.Response(204))  # e.g. rolled back to an older server
    webhook = canned.provider()
    before = unfenced_writes()
    try:
        await webhook.acquire_fence(Z0, T2)
        with caplog.at_level(logging.ERROR):
            for name in ("w", "v"):
                await webhook.apply(Z0, Changes(create=[a(f"{name}.zone-0000.example")]), T2)
    finally:
        await webhook.close()
    assert unfenced_writes() == before + 2
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "without confirming the fence" in errors[0]


@pytest.mark.anyio
async def test_a_failed_negotiation_is_asked_again_and_may_then_enable_fencing() -> None:
    answers = iter([httpx.Response(503), httpx.Response(503)])

    def flaky(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/":
            return next(answers, None) or Canned(advertise="1", records=CONFIRMED)(request)
        return CONFIRMED

    webhook = WebhookProvider("http://127.0.0.1:9", transport=httpx.MockTransport(flaky))
    try:
        for _ in range(2):
            with pytest.raises(ProviderError, match="503"):
                await webhook.fences_writes()
        assert await webhook.fences_writes() is True
    finally:
        await webhook.close()


def test_fence_header_values() -> None:
    assert fence_value("Zone-0000.Example.", T2) == "zone-0000.example identity=replica-0,generation=2"
    assert parse_fence_value("  zone-0000.example  identity=replica-0,generation=2 ") == (Z0, T2)
    for bad in ("", "zone-0000.example", "identity=a,generation=1", "z.example identity=a,generation=x"):
        with pytest.raises(ValueError):
            parse_fence_value(bad)


# ---- the flag that is no longer needed, and the capability as the replica asks it ----


@pytest.mark.anyio
async def test_allow_unfenced_is_accepted_and_changes_nothing(
    server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="shardsync.providers.webhook"):
        built = build(WebhookOptions(provider_url=server.url, allow_unfenced=True), "replica-0")
        plain = build(WebhookOptions(provider_url=server.url), "replica-0")
    try:
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and "no longer needed" in lines[0]
        assert await built.fences_writes() is await plain.fences_writes() is False
        await built.acquire_fence(Z0, T2)
        await built.apply(Z0, Changes(create=[a("w.zone-0000.example")]), T2)
    finally:
        await built.close()
        await plain.close()


@pytest.mark.anyio
async def test_fences_writes_asks_the_provider_through_its_wrappers(
    server: FakeServer, fenced_server: FakeServer, store: FakeStore
) -> None:
    assert await fences_writes(FakeProvider(store)) is True  # no question to ask: it fences by contract
    for url, expected in ((server.url, False), (fenced_server.url, True)):
        webhook = WebhookProvider(url, timeout=5)
        try:
            assert await fences_writes(BudgetedProvider(webhook, None)) is expected
        finally:
            await webhook.close()
