"""The DNS test servers themselves (tests/dnsservers): each does what the interface promises.

For BIND 9, Knot DNS and PowerDNS alike: zones answer with their seed records on loopback only, a restart
keeps the port and the dynamic records, `reset_zone` and `regenerate` bring back the initial data, and
`stop` returns once the process is gone. In CI (or as root) every server must be installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import dns.query
import dns.rcode
import dns.update
import pytest

from tests.dnsservers import SERVERS, DnsTestServer, require, server_params, strict
from tests.dnsservers.base import find_binary

ZONES = ["one.shardsync.test", "two.shardsync.test"]
SEEDS = {
    "one.shardsync.test": [
        "www 300 IN A 192.0.2.1",
        'a-www 300 IN TXT "heritage=external-dns,external-dns/owner=x"',
        "mail.one.shardsync.test. 60 IN MX 10 www.one.shardsync.test.",
    ]
}


@pytest.fixture(params=server_params())
def dns_server(request: pytest.FixtureRequest) -> Iterator[DnsTestServer]:
    cls = SERVERS[request.param]
    require(cls)
    with cls(ZONES, records=SEEDS) as server:
        yield server


def add(server: DnsTestServer, zone: str, name: str, address: str) -> None:
    update = dns.update.UpdateMessage(zone + ".")
    update.use_tsig(server.tsig_key())
    update.add(f"{name}.{zone}.", 60, "A", address)
    assert dns.query.tcp(update, server.host, port=server.port, timeout=5).rcode() == dns.rcode.NOERROR


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net shows them) bound to `port`, over TCP and UDP, v4 and v6."""
    found = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        path = Path("/proc/net") / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            address, _, hex_port = line.split()[1].partition(":")
            if int(hex_port, 16) == port:
                found.add(address)
    return found


def test_zones_answer_with_their_seed_records_on_loopback_only(dns_server: DnsTestServer) -> None:
    one, two = ZONES
    for zone in ZONES:
        assert dns_server.serial(zone) == 1
        assert dns_server.texts(zone, "NS") == {"ns.shardsync.test."}
    assert dns_server.texts(f"www.{one}", "A") == {"192.0.2.1"}
    assert dns_server.texts(f"a-www.{one}", "TXT") == {'"heritage=external-dns,external-dns/owner=x"'}
    assert dns_server.texts(f"mail.{one}", "MX") == {f"10 www.{one}."}
    assert dns_server.rrset(f"www.{two}", "A") is None
    assert {r.name.to_text() for r in dns_server.axfr(two)} == {f"{two}."}
    assert listening_addresses(dns_server.port) == {"0100007F"}  # 127.0.0.1, nothing else


def test_restart_keeps_the_port_and_the_dynamic_records(dns_server: DnsTestServer) -> None:
    zone = ZONES[0]
    add(dns_server, zone, "dyn", "10.0.0.1")
    port, pid = dns_server.port, dns_server.pid
    assert pid is not None
    dns_server.restart()
    assert dns_server.port == port and dns_server.pid != pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the old process is gone (and reaped), not merely signalled
    assert dns_server.texts(f"dyn.{zone}", "A") == {"10.0.0.1"}
    assert dns_server.serial(zone) == 2


def test_reset_zone_brings_back_its_initial_data_and_leaves_the_others(dns_server: DnsTestServer) -> None:
    one, two = ZONES
    add(dns_server, one, "dyn", "10.0.0.1")
    add(dns_server, two, "dyn", "10.0.0.2")
    dns_server.reset_zone(one)
    assert dns_server.rrset(f"dyn.{one}", "A") is None
    assert dns_server.texts(f"www.{one}", "A") == {"192.0.2.1"}
    assert dns_server.serial(one) == 1
    assert dns_server.texts(f"dyn.{two}", "A") == {"10.0.0.2"}
    dns_server.reset_zone(two, ["other 300 IN A 192.0.2.9"])
    assert dns_server.rrset(f"dyn.{two}", "A") is None
    assert dns_server.texts(f"other.{two}", "A") == {"192.0.2.9"}
    # A reset survives a restart: the dropped records do not come back from a journal.
    dns_server.restart()
    assert dns_server.rrset(f"dyn.{one}", "A") is None and dns_server.rrset(f"dyn.{two}", "A") is None
    with pytest.raises(ValueError, match="not served"):
        dns_server.reset_zone("elsewhere.test")


def test_regenerate_drops_every_dynamic_record(dns_server: DnsTestServer) -> None:
    one, two = ZONES
    add(dns_server, one, "dyn", "10.0.0.1")
    dns_server.regenerate({two: ["fresh 300 IN A 192.0.2.7"]})
    assert dns_server.rrset(f"dyn.{one}", "A") is None
    assert dns_server.rrset(f"www.{one}", "A") is None  # the seeds given replace the old ones
    assert dns_server.texts(f"fresh.{two}", "A") == {"192.0.2.7"}


def test_stop_waits_for_the_process_and_close_removes_the_folder(dns_server: DnsTestServer) -> None:
    pid = dns_server.pid
    assert pid is not None
    os.kill(pid, 0)  # running
    dns_server.close()
    assert not dns_server.running and dns_server.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not dns_server.workdir.exists()


def test_every_server_and_client_the_tests_need_is_installed() -> None:
    """In CI or as root, .ci/run has installed everything: a missing tool is a failure, not a skip."""
    missing = {cls.title: cls.missing() for cls in SERVERS.values()}
    missing["dig"] = [] if find_binary("dig", ()) else ["dig"]
    missing = {what: parts for what, parts in missing.items() if parts}
    if missing and not strict():
        pytest.skip(f"not installed here: {missing}")
    assert not missing, f"not installed: {missing} (.ci/run installs them with apt-get)"
