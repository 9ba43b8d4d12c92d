"""End to end: a real `shardsync run --provider=pdns` process, the embedded API server and a real PowerDNS
Authoritative with its HTTP API and RFC 2136 on loopback (tests/dnsservers/pdns.py). Marker `pdns`.

The replica finds its zones through the API (the domain filter leaves one out), writes a Service's A record
with its TXT ownership record, follows an update and a delete, leaves another owner's record alone, adopts
a zone external-dns wrote without a PATCH, and fences every write at the server: once another writer has
taken a zone's fence with a newer generation, the replica's check before its PATCH is refused (NXRRSET) and
nothing reaches the API. The API key comes from the environment (`SHARDSYNC_PDNS_API_KEY`), as from a
Kubernetes Secret. Records are checked with DNS queries and in PowerDNS's own database.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.providers.base import FenceToken
from shardsync.providers.rfc2136.provider import Rfc2136Provider
from tests.dnsservers import PowerDnsServer, require
from tests.dnsservers.pdns import external_dns_rrsets, owner_txt
from tests.processes import Processes, ShardsyncProcess, free_port, wait_ready
from tests.waits import eventually_sync

from .test_replica_rfc2136 import publish, set_lb_ip

pytestmark = [pytest.mark.pdns, pytest.mark.multiprocess]

ZONE = "e2e.shardsync.test"
ADOPT = "adopt.shardsync.test"
FENCED = "fenced.shardsync.test"
LEFT_OUT = "left-out.shardsync.test"  # served, but not admitted by the domain filter
OWNER = "shard"


@pytest.fixture(scope="module")
def pdns() -> Iterator[PowerDnsServer]:
    require(PowerDnsServer)
    server = PowerDnsServer([ZONE, ADOPT, FENCED, LEFT_OUT], api=True)
    try:
        server.start()
        server.patch(
            ZONE,
            external_dns_rrsets(
                ZONE,
                [
                    {"name": "other", "type": "A", "contents": ["198.51.100.7"]},
                    {
                        "name": "a-other",
                        "type": "TXT",
                        "contents": [owner_txt("someone-else", "service/default/x")],
                    },
                ],
            ),
        )
        server.patch(
            ADOPT,
            external_dns_rrsets(
                ADOPT,
                [
                    {"name": "kept", "type": "A", "contents": ["192.0.2.50"]},
                    {"name": "a-kept", "type": "TXT", "contents": [owner_txt(OWNER, "service/default/kept")]},
                ],
            ),
        )
        yield server
    finally:
        server.close()


def rows(pdns: PowerDnsServer, zone: str) -> set[tuple[object, ...]]:
    with closing(sqlite3.connect(pdns.database, timeout=10)) as db:
        return set(
            db.execute(
                "SELECT r.name, r.type, r.content, r.ttl FROM records r JOIN domains d ON r.domain_id = d.id "
                "WHERE d.name = ? AND r.type != 'SOA' AND r.name NOT LIKE '\\_shardsync-fence.%' ESCAPE '\\'",
                (zone,),
            ).fetchall()
        )


def start_replica(
    apiserver: ApiServer, pdns: PowerDnsServer, procs: Processes, tmp_path: Path, *domains: str
) -> ShardsyncProcess:
    secret_file = tmp_path / "tsig"
    secret_file.write_text(pdns.secret)
    port = free_port()
    args = [
        "run",
        f"--kubeconfig={apiserver.kubeconfig}",
        "--source=service",
        "--provider=pdns",
        f"--pdns-server={pdns.api_url}",
        f"--pdns-rfc2136-fence={pdns.host}:{pdns.port}",
        f"--pdns-fence-tsig-keyname={pdns.key_name}",
        f"--pdns-fence-tsig-secret-file={secret_file}",
        "--pdns-timeout=5s",
        *(f"--domain-filter={d}" for d in domains),
        f"--txt-owner-id={OWNER}",
        f"--metrics-address=127.0.0.1:{port}",
        "--identity=shardsync-0",
        "--lease-namespace=default",
        "--lease-duration=6s",
        "--renew-interval=1s",
        "--settle-delay=200ms",
        "--events",
        "--interval=1m",
    ]
    replica = procs.start("replica", args, env={"SHARDSYNC_PDNS_API_KEY": pdns.api_key})
    wait_ready(f"http://127.0.0.1:{port}", replica)
    return replica


def update_then_delete(core: k8s.CoreV1Api, pdns: PowerDnsServer, zone: str) -> None:
    """The Service `web` (192.0.2.10 in `zone`) moves to 192.0.2.11, then goes: its A record follows, then
    goes with its TXT ownership record."""
    set_lb_ip(core, "web", "192.0.2.11")
    eventually_sync(lambda: pdns.texts(f"web.{zone}", "A") == {"192.0.2.11"}, within=15)
    core.delete_namespaced_service("web", "default")
    eventually_sync(lambda: pdns.texts(f"web.{zone}", "A") == set(), within=15)
    assert pdns.texts(f"a-web.{zone}", "TXT") == set()


def assert_adopted(pdns: PowerDnsServer, replica: ShardsyncProcess, zone: str, before: object) -> None:
    """The zone holds what it held (`rows` before the replica started) and the replica wrote other zones,
    never this one."""
    assert rows(pdns, zone) == before
    applied = [line for line in replica.log().splitlines() if 'event="zone changes applied"' in line]
    assert applied and not [line for line in applied if f"zone={zone}" in line]


def test_a_replica_writes_powerdns_through_its_api(
    apiserver: ApiServer, pdns: PowerDnsServer, procs: Processes, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    publish(core, "web", f"web.{ZONE}", "192.0.2.10")
    publish(core, "other", f"other.{ZONE}", "192.0.2.99")
    publish(core, "kept", f"kept.{ADOPT}", "192.0.2.50")
    publish(core, "outside", f"outside.{LEFT_OUT}", "192.0.2.70")
    adopted = rows(pdns, ADOPT)
    replica = start_replica(apiserver, pdns, procs, tmp_path, ZONE, ADOPT)

    # create: the A record and its typed TXT ownership record
    eventually_sync(lambda: pdns.texts(f"web.{ZONE}", "A") == {"192.0.2.10"}, within=30)
    assert pdns.texts(f"a-web.{ZONE}", "TXT") == {owner_txt(OWNER, "service/default/web")}
    # every write was fenced at the server first: the fence is ours
    (fence,) = pdns.texts(f"_shardsync-fence.{ZONE}", "TXT")
    assert FenceToken.from_text(fence).identity == "shardsync-0"

    update_then_delete(core, pdns, ZONE)
    # another owner's record was never touched, though a Service asked for the name
    assert pdns.texts(f"other.{ZONE}", "A") == {"198.51.100.7"}
    assert "reason=not-owned" in replica.log()
    # external-dns's records with our owner id were adopted as they are: no PATCH to that zone
    assert_adopted(pdns, replica, ADOPT, adopted)
    # the zone the domain filter leaves out is never written, though the API lists it
    assert pdns.texts(f"outside.{LEFT_OUT}", "A") == set()
    # the API key and the TSIG secret stay in the process
    assert pdns.api_key not in replica.log() and pdns.secret not in replica.log()
    assert replica.alive()


def test_a_stale_replica_is_refused_before_its_patch(
    apiserver: ApiServer, pdns: PowerDnsServer, procs: Processes, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    publish(core, "before", f"before.{FENCED}", "192.0.2.30")
    replica = start_replica(apiserver, pdns, procs, tmp_path, FENCED)
    eventually_sync(lambda: pdns.texts(f"before.{FENCED}", "A") == {"192.0.2.30"}, within=30)

    # Another writer takes the zone's fence with a newer generation, as a new owner would.
    (held,) = pdns.texts(f"_shardsync-fence.{FENCED}", "TXT")
    ours = FenceToken.from_text(held)
    newer = FenceToken(ours.generation + 1, "shardsync-1")
    intruder = Rfc2136Provider(
        pdns.host, pdns.port, tsig_keyname=pdns.key_name, tsig_secret=pdns.secret, timeout=5
    )
    anyio.run(intruder.acquire_fence, FENCED, newer)
    before = rows(pdns, FENCED)

    # The replica still believes it owns the zone: its check before the PATCH is refused by the server.
    publish(core, "after", f"after.{FENCED}", "192.0.2.31")
    refused = f'event="write refused by the zone fence, dropping the zone" zone={FENCED}'
    eventually_sync(lambda: refused in replica.log(), within=15)
    (line,) = [line for line in replica.log().splitlines() if refused in line]
    assert f"no longer holds {ours.to_text()} (server answered NXRRSET)" in line
    assert rows(pdns, FENCED) == before
    assert pdns.texts(f"after.{FENCED}", "A") == set()
    assert pdns.texts(f"_shardsync-fence.{FENCED}", "TXT") == {f'"{newer.to_text()}"'}
    assert replica.alive()
