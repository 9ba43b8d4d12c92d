"""Real DNS servers for the rfc2136 tests: BIND 9, Knot DNS and PowerDNS, one module each, one interface
(base.DnsTestServer). `SERVERS` maps each pytest marker (bind, knot, pdns) to its class, and
`server_params()` gives the pytest parameters that run a test once per server, each under its marker."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.dnsservers.base import DnsTestServer, require, require_command, strict
from tests.dnsservers.bind import BindServer
from tests.dnsservers.knot import KnotServer
from tests.dnsservers.pdns import PowerDnsServer

SERVERS: dict[str, type[DnsTestServer]] = {cls.kind: cls for cls in (BindServer, KnotServer, PowerDnsServer)}


def server_params() -> list[Any]:
    """`pytest.param(kind, marks=pytest.mark.<kind>, id=kind)` for each server, for `params=`/parametrize."""
    return [pytest.param(kind, marks=getattr(pytest.mark, kind), id=kind) for kind in SERVERS]


def running_bind(zones: Sequence[str]) -> Iterator[BindServer]:
    """A BIND 9 serving `zones`, for a module-scoped fixture (`yield from running_bind(...)`)."""
    require(BindServer)
    server = BindServer(list(zones))
    try:
        yield server.start()
    finally:
        server.close()


__all__ = [
    "SERVERS",
    "BindServer",
    "DnsTestServer",
    "KnotServer",
    "PowerDnsServer",
    "require",
    "require_command",
    "running_bind",
    "server_params",
    "strict",
]
