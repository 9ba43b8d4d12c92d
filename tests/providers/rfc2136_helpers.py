"""Helpers of the rfc2136 tests against the session's BIND 9 (tests/bind.py)."""

from __future__ import annotations

from shardsync.providers.rfc2136.provider import Rfc2136Provider
from tests.bind import BindServer


def make_provider(bind: BindServer, **kw: object) -> Rfc2136Provider:
    options: dict[str, object] = {
        "tsig_keyname": bind.key_name,
        "tsig_secret": bind.secret,
        "tsig_algorithm": bind.algorithm,
        "timeout": 5.0,
    }
    options.update(kw)
    return Rfc2136Provider(bind.host, bind.port, bind.zones, **options)  # type: ignore[arg-type]


def serial(bind: BindServer, zone: str) -> int:
    soa = bind.rrset(zone, "SOA")
    assert soa is not None
    return int(soa[0].serial)


def zone_dump(bind: BindServer, zone: str) -> set[str]:
    return {rrset.to_text() for rrset in bind.axfr(zone)}
