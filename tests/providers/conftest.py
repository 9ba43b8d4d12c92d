"""Fixtures for provider tests: one real BIND 9 per test session, and a fresh zone for each test.

`server` serves the test module's `store` fixture over HTTP (the fake provider server, loopback).
`bind_server` starts `named` once (tests/bind.py) with a pool of empty zones and yields the running
BindServer (host, port, key_name, secret, algorithm, zones). Each test takes its own zone from the pool
with `fresh_zone`, so tests never see each other's records and BIND is not restarted between them.
Skips with the reason when `named` is missing; .ci/run installs it, so CI never skips.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore
from tests.bind import BindServer, find_named

ZONE_POOL = 64
_zone_counter = itertools.count()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server(store: FakeStore) -> Iterator[FakeServer]:
    """The fake provider's HTTP server over the test module's `store`, on a free loopback port."""
    srv = FakeServer(store, host="127.0.0.1", port=0)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def bind_server() -> Iterator[BindServer]:
    if find_named() is None:
        pytest.skip("BIND 9 `named` is not installed (apt-get install bind9; .ci/run installs it)")
    server = BindServer([f"z{i:02d}.shardsync.test" for i in range(ZONE_POOL)])
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def fresh_zone(bind_server: BindServer) -> str:
    """A zone of the running server that no other test has touched (SOA and NS only)."""
    index = next(_zone_counter)
    if index >= len(bind_server.zones):
        pytest.fail(f"zone pool exhausted: raise ZONE_POOL above {len(bind_server.zones)}")
    return bind_server.zones[index]
