"""The fake provider server and its clients over loopback HTTP, and the `shardsync fake-provider` command."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest

from bench.audit import overlapping_writes
from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    Provider,
    ProviderError,
    ThrottledError,
    UnreachableError,
)
from shardsync.providers.fake.client import FakeAdmin, FakeHTTPProvider
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.limits import Limits
from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore
from shardsync.records.endpoint import Changes, Endpoint
from tests.providers.fake_helpers import Latency

Z0 = "zone-0000.example"


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore()
    store.seed(3, 2)
    return store


@pytest.fixture
async def client(server: FakeServer) -> AsyncIterator[FakeHTTPProvider]:
    provider = FakeHTTPProvider(server.url, "replica-0", timeout=5)
    try:
        yield provider
    finally:
        await provider.close()


@pytest.fixture
def admin(server: FakeServer) -> Iterator[FakeAdmin]:
    with FakeAdmin(server.url, timeout=5) as adm:
        yield adm


def a(name: str, target: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(name, "A", [target])


@pytest.mark.anyio
async def test_client_reads_and_writes(client: FakeHTTPProvider, store: FakeStore) -> None:
    assert isinstance(client, Provider)
    assert await client.zones() == ["zone-0000.example", "zone-0001.example", "zone-0002.example"]
    assert await client.records(Z0) == store.peek(Z0)
    www = Endpoint.new("www.zone-0000.example", "TXT", ['"hello"'], ttl=60, labels={"owner": "x"})
    await client.apply(Z0, Changes(create=[www]))
    assert www in await client.records(Z0)
    assert store.audit()[-1].writer == "replica-0"


@pytest.mark.anyio
async def test_client_fencing(client: FakeHTTPProvider, server: FakeServer, admin: FakeAdmin) -> None:
    other = FakeHTTPProvider(server.url, "replica-1", timeout=5)
    try:
        await client.acquire_fence(Z0, FenceToken(1, "replica-0"))
        with pytest.raises(FencedError, match="replica-0"):
            await other.acquire_fence(Z0, FenceToken(1, "replica-1"))
        await client.apply(Z0, Changes(create=[a("a.zone-0000.example")]), FenceToken(1, "replica-0"))
        await other.acquire_fence(Z0, FenceToken(2, "replica-1"))
        with pytest.raises(FencedError):
            await client.apply(Z0, Changes(create=[a("b.zone-0000.example")]), FenceToken(1, "replica-0"))
        await other.apply(Z0, Changes(create=[a("c.zone-0000.example")]), FenceToken(2, "replica-1"))
    finally:
        await other.close()
    assert admin.fence(Z0) == FenceToken(2, "replica-1")
    assert admin.fence("zone-0001.example") is None
    names = {r.dns_name for r in admin.records(Z0)}
    assert {"a.zone-0000.example", "c.zone-0000.example"} <= names
    assert "b.zone-0000.example" not in names
    audit = admin.audit(zone=Z0)
    assert [(e.op, e.writer, e.generation, e.outcome) for e in audit] == [
        ("fence", "replica-0", 1, "ok"),
        ("fence", "replica-1", 1, "fenced"),
        ("apply", "replica-0", 1, "ok"),
        ("fence", "replica-1", 2, "ok"),
        ("apply", "replica-0", 1, "fenced"),
        ("apply", "replica-1", 2, "ok"),
    ]
    assert overlapping_writes(audit) == []
    assert admin.audit(since=audit[-1].seq) == audit[-1:]


@pytest.mark.anyio
async def test_a_conditional_read_over_http(
    client: FakeHTTPProvider, server: FakeServer, store: FakeStore
) -> None:
    version, records = await client.records_if_changed(Z0, None)
    assert version is not None and records == store.peek(Z0)
    assert await client.records_if_changed(Z0, version) == (version, None)
    async with httpx.AsyncClient(timeout=5) as http:
        raw = await http.get(f"{server.url}/v1/zones/{Z0}/records", headers={"If-None-Match": f'"{version}"'})
    assert (raw.status_code, raw.content, raw.headers["ETag"]) == (304, b"", f'"{version}"')
    store.apply(Z0, Changes(delete=[store.peek(Z0)[0]]), writer="someone")  # a change behind our back
    changed, records = await client.records_if_changed(Z0, version)
    assert changed != version and records == store.peek(Z0)


@pytest.mark.anyio
async def test_the_zone_listing_names_each_zones_version_over_http(
    client: FakeHTTPProvider, store: FakeStore
) -> None:
    zones, versions = await client.zones_and_versions()
    assert zones == await client.zones() and versions is not None and set(versions) == set(zones)
    version, _ = await client.records_if_changed(Z0, None)
    assert versions[Z0] == version  # the version a records GET names in its ETag
    store.apply(Z0, Changes(delete=[store.peek(Z0)[0]]), writer="someone")
    _, after = await client.zones_and_versions()
    assert after is not None and after[Z0] != version
    assert {z: v for z, v in after.items() if z != Z0} == {z: v for z, v in versions.items() if z != Z0}


@pytest.mark.anyio
async def test_error_mapping(client: FakeHTTPProvider, admin: FakeAdmin) -> None:
    with pytest.raises(ProviderError, match="unknown zone") as info:
        await client.records("nope.example")
    assert type(info.value) is ProviderError
    with pytest.raises(BatchRejectedError, match="already exists"):
        await client.apply(Z0, Changes(create=[a("host-0000.zone-0000.example")]))
    admin.set_faults(Faults(throttle_next=1, fail_records=frozenset({"bad.zone-0000.example"})))
    with pytest.raises(ThrottledError):
        await client.zones()
    with pytest.raises(BatchRejectedError, match="injected failure"):
        await client.apply(Z0, Changes(create=[a("bad.zone-0000.example")]))
    assert admin.faults().fail_records == {"bad.zone-0000.example"}
    admin.set_faults(Faults(fail_zones=frozenset({Z0})))
    with pytest.raises(ProviderError, match="injected failure") as info:
        await client.records(Z0)
    assert type(info.value) is ProviderError  # a zone failure is retried, not split


@pytest.mark.anyio
async def test_rate_limit_over_http(client: FakeHTTPProvider, admin: FakeAdmin) -> None:
    admin.set_limits({"rateLimit": 0.5, "burst": 2})  # a token every 2 s: none comes back during the test
    await client.zones()
    await client.zones()
    with pytest.raises(ThrottledError, match="rate limit"):
        await client.zones()
    assert admin.limits().rate == 0.5
    async with httpx.AsyncClient(timeout=5) as raw:
        resp = await raw.get(f"{admin.url}/v1/zones", headers={"X-Shardsync-Client": "replica-0"})
    assert resp.status_code == 429
    assert resp.headers["Retry-After"] == "2"
    admin.set_limits({"rateLimit": None})
    await client.zones()


@pytest.mark.anyio
async def test_per_client_concurrency_keeps_replicas_apart() -> None:
    latency = Latency()
    latency.meet = threading.Barrier(6)
    store = FakeStore(limits=Limits(latency=0.001, concurrency=2), sleep_async=latency.sleep_async)
    store.seed(1, 1)
    server = FakeServer(store, port=0)
    server.start()
    clients = [FakeHTTPProvider(server.url, f"replica-{i}", timeout=8) for i in range(3)]
    try:
        # 3 replicas x 2 calls: all six are in flight together, or the barrier breaks.
        async with anyio.create_task_group() as tg:
            for c in clients:
                for _ in range(2):
                    tg.start_soon(c.zones)
        assert latency.most == 6
        latency.meet, latency.most = None, 0
        store.set_limits(Limits(latency=0.02, concurrency=2))
        began = time.monotonic()
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(clients[0].zones)
        assert latency.most <= 2  # one replica never has more than its 2 calls in flight
        assert time.monotonic() - began >= 3 * 0.02
    finally:
        for c in clients:
            await c.close()
        server.stop()


@pytest.mark.anyio
async def test_calls_in_flight_hold_no_thread_each() -> None:
    store = FakeStore(limits=Limits(latency=0.3))
    store.seed(1, 1)
    with FakeServer(store, port=0) as server:
        server_url = server.url
        clients = [FakeHTTPProvider(server_url, f"replica-{i}") for i in range(4)]
        before = threading.active_count()
        most = before
        try:
            began = time.monotonic()
            async with anyio.create_task_group() as tg:
                for c in clients:
                    for _ in range(25):
                        tg.start_soon(c.zones)
                while time.monotonic() - began < 0.25:  # the 100 calls are all waiting out their latency
                    most = max(most, threading.active_count())
                    await anyio.sleep(0.02)
        finally:
            for c in clients:
                await c.close()
    assert most < before + 10  # a thread per connection would have been up to 100 more


@pytest.mark.anyio
async def test_client_timeout_and_unreachable(server: FakeServer, admin: FakeAdmin) -> None:
    admin.set_limits({"latency": 0.5})
    slow = FakeHTTPProvider(server.url, "replica-0", timeout=0.1)
    try:
        with pytest.raises(UnreachableError, match="no answer within"):
            await slow.zones()
    finally:
        await slow.close()
    port = server.port
    server.stop()
    gone = FakeHTTPProvider(f"http://127.0.0.1:{port}", "replica-0", timeout=1)
    try:
        with pytest.raises(UnreachableError):
            await gone.zones()
    finally:
        await gone.close()


def test_admin_seeds_zones_and_rejects_bad_requests(admin: FakeAdmin) -> None:
    admin.wait_ready(timeout=2)
    assert admin.seed(5, 1)[-1] == "zone-0004.example"
    admin.add_zone("custom.example", [a("x.custom.example")])
    assert admin.records("custom.example") == [a("x.custom.example")]
    with pytest.raises(ProviderError, match="400"):
        admin.set_limits({"concurrency": 0})
    resp = httpx.post(f"{admin.url}/v1/zones/{Z0}/changes", content=b"{not json", timeout=5)
    assert resp.status_code == 400
    assert resp.json()["error"] == "bad-request"
    assert httpx.get(f"{admin.url}/v1/nothing", timeout=5).status_code == 404
    admin.clear_audit()
    assert admin.audit() == []


def test_fake_provider_command_serves_and_stops_on_sigterm() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "shardsync", "fake-provider", "--port", "0", "--zones", "4"]
    proc = subprocess.Popen(
        [*cmd, "--records-per-zone", "3", "--latency", "1ms", "--rate-limit", "500"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 15)
        assert ready, "fake-provider printed no URL within 15 s"
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
        with FakeAdmin(url, timeout=5) as admin:
            admin.wait_ready(timeout=5)
            assert len(admin.records("zone-0003.example")) == 3
            limits = admin.limits()
            assert (limits.latency, limits.rate) == (0.001, 500)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
