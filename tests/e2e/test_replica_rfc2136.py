"""End to end: a real `shardsync run` process, the embedded API server and a real DNS server.

Every test runs once per server: BIND 9, Knot DNS and PowerDNS (tests/dnsservers; markers `bind`, `knot`,
`pdns`). The replica watches Services through the official client and writes the server with TSIG-signed
UPDATEs. The tests check the records with real DNS queries: create, update and delete follow the Service,
with their TXT ownership records; records owned by another owner id are never touched; records
external-dns wrote with our owner id are adopted as they are, without a rewrite; and once another writer
has taken a zone's fence with a newer generation, the replica's write is refused by the server itself
(NXRRSET on the fence prerequisite) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.providers.base import FenceToken
from shardsync.providers.rfc2136.provider import Rfc2136Provider
from tests.dnsservers import SERVERS, DnsTestServer, require, server_params
from tests.kubeclient import raw_body
from tests.processes import Processes, ShardsyncProcess, free_port, wait_ready
from tests.waits import eventually_sync

ZONE = "e2e.shardsync.test"
ADOPT_ZONE = "adopt.shardsync.test"
FENCED_ZONE = "fenced.shardsync.test"
FILTER_ZONE = "filter.shardsync.test"
OWNER = "shard"
FOREIGN_TXT = (
    '"heritage=external-dns,external-dns/owner=someone-else,external-dns/resource=service/default/x"'
)
ADOPTED_TXT = f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/kept"'
# Ours (our owner id), for a Service long gone, under a name the domain filter below does not admit.
OUTSIDE_TXT = f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/gone"'


@pytest.fixture(scope="module", params=server_params())
def dns_server(request: pytest.FixtureRequest) -> Iterator[DnsTestServer]:
    cls = SERVERS[request.param]
    require(cls)
    server = cls(
        [ZONE, ADOPT_ZONE, FENCED_ZONE, FILTER_ZONE],
        records={
            FILTER_ZONE: [
                f"old.{FILTER_ZONE}. 300 IN A 192.0.2.60",
                f"a-old.{FILTER_ZONE}. 300 IN TXT {OUTSIDE_TXT}",
            ],
            ZONE: [f"other.{ZONE}. 300 IN A 198.51.100.7", f"a-other.{ZONE}. 300 IN TXT {FOREIGN_TXT}"],
            ADOPT_ZONE: [
                f"kept.{ADOPT_ZONE}. 300 IN A 192.0.2.50",
                f"a-kept.{ADOPT_ZONE}. 300 IN TXT {ADOPTED_TXT}",
            ],
        },
    )
    try:
        yield server.start()
    finally:
        server.close()


def lb_service(name: str, host: str, ip: str) -> k8s.V1Service:
    return raw_body(
        k8s.V1Service,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "annotations": {"external-dns.alpha.kubernetes.io/hostname": host}},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        },
    )


def set_lb_ip(core: k8s.CoreV1Api, name: str, ip: str) -> None:
    core.patch_namespaced_service_status(
        name, "default", {"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}
    )


def replica_args(
    apiserver: ApiServer,
    dns_server: DnsTestServer,
    secret_file: Path,
    port: int,
    *extra: str,
    zones: tuple[str, ...] = (ZONE, ADOPT_ZONE),
) -> list[str]:
    return [
        "run",
        f"--kubeconfig={apiserver.kubeconfig}",
        "--source=service",
        "--provider=rfc2136",
        f"--rfc2136-host={dns_server.host}",
        f"--rfc2136-port={dns_server.port}",
        *(f"--rfc2136-zone={zone}" for zone in zones),
        f"--rfc2136-tsig-keyname={dns_server.key_name}",
        f"--rfc2136-tsig-secret-file={secret_file}",
        f"--txt-owner-id={OWNER}",
        f"--metrics-address=127.0.0.1:{port}",
        "--identity=shardsync-0",
        "--lease-namespace=default",
        "--lease-duration=6s",
        "--renew-interval=1s",
        "--settle-delay=200ms",
        *extra,
    ]


def publish(core: k8s.CoreV1Api, name: str, host: str, ip: str) -> None:
    """A LoadBalancer Service asking for `host`, with `ip` as its load balancer's address."""
    core.create_namespaced_service("default", lb_service(name, host, ip))
    set_lb_ip(core, name, ip)


def start_replica(
    apiserver: ApiServer,
    dns_server: DnsTestServer,
    procs: Processes,
    tmp_path: Path,
    *extra: str,
    zones: tuple[str, ...] = (ZONE, ADOPT_ZONE),
) -> ShardsyncProcess:
    """A `shardsync run` reacting to events (`--events --interval=1m`), once it is ready."""
    secret_file = tmp_path / "tsig"
    secret_file.write_text(dns_server.secret)
    port = free_port()
    args = replica_args(
        apiserver, dns_server, secret_file, port, *extra, "--events", "--interval=1m", zones=zones
    )
    replica = procs.start("replica", args)
    wait_ready(f"http://127.0.0.1:{port}", replica)
    return replica


def test_service_lifecycle_reaches_the_server(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    publish(core, "web", f"web.{ZONE}", "192.0.2.10")
    publish(core, "other", f"other.{ZONE}", "192.0.2.99")
    publish(core, "kept", f"kept.{ADOPT_ZONE}", "192.0.2.50")
    replica = start_replica(apiserver, dns_server, procs, tmp_path)

    # create: the A record and its typed TXT ownership record
    eventually_sync(lambda: dns_server.texts(f"web.{ZONE}", "A") == {"192.0.2.10"}, within=30)
    owner = f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/web"'
    assert dns_server.texts(f"a-web.{ZONE}", "TXT") == {owner}

    # update: a new load balancer address reaches DNS without waiting for the interval
    set_lb_ip(core, "web", "192.0.2.11")
    eventually_sync(lambda: dns_server.texts(f"web.{ZONE}", "A") == {"192.0.2.11"}, within=15)

    # delete: record and ownership record go
    core.delete_namespaced_service("web", "default")
    eventually_sync(lambda: dns_server.texts(f"web.{ZONE}", "A") == set(), within=15)
    assert dns_server.texts(f"a-web.{ZONE}", "TXT") == set()

    # another owner's record was never touched, though a Service asked for the name
    assert dns_server.texts(f"other.{ZONE}", "A") == {"198.51.100.7"}
    assert dns_server.texts(f"a-other.{ZONE}", "TXT") == {FOREIGN_TXT}
    assert (
        'event="change skipped" zone=e2e.shardsync.test name=other.e2e.shardsync.test type=A reason=not-owned'
        in (replica.log())
    )

    # external-dns's records with our owner id were adopted as they are: no change written to that zone
    assert dns_server.texts(f"kept.{ADOPT_ZONE}", "A") == {"192.0.2.50"}
    assert dns_server.texts(f"a-kept.{ADOPT_ZONE}", "TXT") == {ADOPTED_TXT}
    assert f"zone={ADOPT_ZONE}" not in "\n".join(
        line for line in replica.log().splitlines() if 'event="zone changes applied"' in line
    )
    assert replica.alive()


def test_once_syncs_and_exits(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    secret_file = tmp_path / "tsig"
    secret_file.write_text(dns_server.secret)
    core = k8s.CoreV1Api(apiserver.api_client())
    core.create_namespaced_service("default", lb_service("once", f"once.{ZONE}", "192.0.2.20"))
    set_lb_ip(core, "once", "192.0.2.20")
    replica = procs.start("once", replica_args(apiserver, dns_server, secret_file, free_port(), "--once"))
    assert replica.wait(timeout=60) == 0, replica.log()[-4000:]
    assert dns_server.texts(f"once.{ZONE}", "A") == {"192.0.2.20"}


def test_stale_replica_write_is_refused_by_the_server(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    publish(core, "before", f"before.{FENCED_ZONE}", "192.0.2.30")
    replica = start_replica(apiserver, dns_server, procs, tmp_path, zones=(FENCED_ZONE,))
    eventually_sync(lambda: dns_server.texts(f"before.{FENCED_ZONE}", "A") == {"192.0.2.30"}, within=30)

    # Another writer takes the zone's fence with a newer generation, as a new owner would.
    fence_name = f"_shardsync-fence.{FENCED_ZONE}"
    (held,) = dns_server.texts(fence_name, "TXT")
    ours = FenceToken.from_text(held.strip('"'))
    assert ours.identity == "shardsync-0"
    newer = FenceToken(ours.generation + 1, "shardsync-1")
    intruder = Rfc2136Provider(
        dns_server.host,
        dns_server.port,
        [FENCED_ZONE],
        tsig_keyname=dns_server.key_name,
        tsig_secret=dns_server.secret,
        timeout=5,
    )
    anyio.run(intruder.acquire_fence, FENCED_ZONE, newer)
    before = {rrset.to_text() for rrset in dns_server.axfr(FENCED_ZONE)}

    # The replica still believes it owns the zone: its next write carries its own (now stale) fence, and
    # the server refuses the whole message on that prerequisite.
    core.create_namespaced_service("default", lb_service("after", f"after.{FENCED_ZONE}", "192.0.2.31"))
    set_lb_ip(core, "after", "192.0.2.31")
    refused = f'event="write refused by the zone fence, dropping the zone" zone={FENCED_ZONE}'
    eventually_sync(lambda: refused in replica.log(), within=15)
    (line,) = [line for line in replica.log().splitlines() if refused in line]
    assert f"no longer holds {ours.to_text()} (server answered NXRRSET); 0 of 1 message(s)" in line
    assert dns_server.texts(f"after.{FENCED_ZONE}", "A") == set()
    assert dns_server.texts(f"a-after.{FENCED_ZONE}", "TXT") == set()
    assert {
        rrset.to_text() for rrset in dns_server.axfr(FENCED_ZONE)
    } == before  # not one record, nor the serial
    assert dns_server.texts(fence_name, "TXT") == {f'"{newer.to_text()}"'}
    assert replica.alive()


def test_owned_records_outside_the_domain_filter_survive_a_sync(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    # external-dns filters the zone's current records by --domain-filter before planning: a record we own
    # under a name the filter does not admit (say, one the filter was narrowed away from) is not ours to
    # delete. Planning the desired side alone would delete it in the same sync that writes web.keep.
    core = k8s.CoreV1Api(apiserver.api_client())
    host = f"web.keep.{FILTER_ZONE}"
    publish(core, "filtered", host, "192.0.2.61")
    replica = start_replica(
        apiserver, dns_server, procs, tmp_path, f"--domain-filter=keep.{FILTER_ZONE}", zones=(FILTER_ZONE,)
    )
    eventually_sync(lambda: dns_server.texts(host, "A") == {"192.0.2.61"}, within=30)
    assert dns_server.texts(f"old.{FILTER_ZONE}", "A") == {"192.0.2.60"}
    assert dns_server.texts(f"a-old.{FILTER_ZONE}", "TXT") == {OUTSIDE_TXT}
    assert replica.alive()
