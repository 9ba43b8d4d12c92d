"""Fixtures for provider tests: one real DNS server of each kind per session, and a fresh zone per test.

`server` serves the test module's `store` fixture over HTTP (the fake provider server, loopback);
`fenced_server` the same with the webhook face's fence extension on.
`dns_server` is parametrized over BIND 9, Knot DNS and PowerDNS (tests/dnsservers; markers `bind`, `knot`,
`pdns`): each is started once with a pool of empty zones, and the tests that take it run once per server.
Each test takes its own zone from the pool with `fresh_zone`, so tests never see each other's records and
no server is restarted between them. A server that is not installed skips its tests, except in CI or as
root, where it fails them (.ci/run installs all three).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator

import pytest

from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore
from tests.dnsservers import SERVERS, DnsTestServer, require, server_params

ZONE_POOL = 64
_zone_counters: defaultdict[str, itertools.count[int]] = defaultdict(itertools.count)


@pytest.fixture
def server(store: FakeStore) -> Iterator[FakeServer]:
    """The fake provider's HTTP server over the test module's `store`, on a free loopback port."""
    srv = FakeServer(store, host="127.0.0.1", port=0)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def fenced_server(store: FakeStore) -> Iterator[FakeServer]:
    """`server`, its webhook face speaking shardsync's fence extension (`--webhook-fence`)."""
    with FakeServer(store, host="127.0.0.1", port=0, webhook_fence=True) as srv:
        yield srv


@pytest.fixture(scope="session", params=server_params())
def dns_server(request: pytest.FixtureRequest) -> Iterator[DnsTestServer]:
    cls = SERVERS[request.param]
    require(cls)
    instance = cls([f"z{i:02d}.shardsync.test" for i in range(ZONE_POOL)])
    try:
        instance.start()
        yield instance
    finally:
        instance.close()


@pytest.fixture
def fresh_zone(dns_server: DnsTestServer) -> str:
    """A zone of the running server that no other test has touched (SOA and NS only)."""
    index = next(_zone_counters[dns_server.kind])
    if index >= len(dns_server.zones):
        pytest.fail(f"zone pool exhausted: raise ZONE_POOL above {len(dns_server.zones)}")
    return dns_server.zones[index]
