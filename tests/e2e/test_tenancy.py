"""End to end, against BIND 9: the namespace → domain policy and the delete guard in a real `shardsync run`
with the embedded API server. team-a may publish `*.a.example`: its Service claiming `x.b.example` is
refused with a `DomainNotAllowed` Event and `y.a.example` is written. Then a typo in the namespace's
annotation would delete every record of team-a's zone: the delete guard refuses it with a
`PolicyDeleteRefused` Event and the records stay; fixing the typo leaves them in place."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from tests.dnsservers import DnsTestServer, running_bind
from tests.kubeclient import raw_body
from tests.processes import Processes, ShardsyncProcess, free_port, wait_ready
from tests.waits import eventually_sync

pytestmark = pytest.mark.bind

ZONE_A, ZONE_B = "a.example", "b.example"
ANNOTATION = "shardsync.io/allowed-domains"
OWNER = "tenancy"


@pytest.fixture(scope="module")
def dns_server() -> Iterator[DnsTestServer]:
    yield from running_bind([ZONE_A, ZONE_B])


def rfc2136_args(dns_server: DnsTestServer, secret_file: Path) -> list[str]:
    return [
        "--provider=rfc2136",
        f"--rfc2136-host={dns_server.host}",
        f"--rfc2136-port={dns_server.port}",
        f"--rfc2136-zone={ZONE_A}",
        f"--rfc2136-zone={ZONE_B}",
        f"--rfc2136-tsig-keyname={dns_server.key_name}",
        f"--rfc2136-tsig-secret-file={secret_file}",
    ]


def start(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path, *extra: str
) -> tuple[ShardsyncProcess, str]:
    """A replica with the policy on, reacting to events; returns it and its status URL."""
    secret_file = tmp_path / "tsig"
    secret_file.write_text(dns_server.secret)
    port = free_port()
    args = [
        "run",
        f"--kubeconfig={apiserver.kubeconfig}",
        "--source=service",
        *rfc2136_args(dns_server, secret_file),
        f"--txt-owner-id={OWNER}",
        f"--metrics-address=127.0.0.1:{port}",
        "--identity=shardsync-0",
        "--lease-namespace=default",
        "--lease-duration=6s",
        "--renew-interval=1s",
        "--settle-delay=200ms",
        "--events",
        "--interval=2s",
        *extra,
    ]
    replica = procs.start("replica", args)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, replica)
    return replica, url


def namespace(name: str, allowed: str) -> k8s.V1Namespace:
    return raw_body(
        k8s.V1Namespace,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "annotations": {ANNOTATION: allowed}},
        },
    )


def publish(core: k8s.CoreV1Api, ns: str, name: str, host: str, ip: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "annotations": {"external-dns.alpha.kubernetes.io/hostname": host}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }
    core.create_namespaced_service(ns, raw_body(k8s.V1Service, body))
    core.patch_namespaced_service_status(name, ns, {"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}})


def events(core: k8s.CoreV1Api, ns: str, reason: str) -> list[str]:
    return [str(e.message) for e in core.list_namespaced_event(ns).items if e.reason == reason]


def test_team_a_publishes_its_domains_only_and_a_policy_typo_deletes_nothing(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    core.create_namespace(namespace("team-a", f"*.{ZONE_A}"))
    names = ["y", "p", "q", "r"]
    for i, name in enumerate(names):
        publish(core, "team-a", name, f"{name}.{ZONE_A}", f"192.0.2.{10 + i}")
    publish(core, "team-a", "x", f"x.{ZONE_B}", "192.0.2.99")
    replica, _ = start(apiserver, dns_server, procs, tmp_path, f"--namespace-domains-annotation={ANNOTATION}")

    eventually_sync(lambda: dns_server.texts(f"y.{ZONE_A}", "A") == {"192.0.2.10"}, within=30)
    eventually_sync(lambda: all(dns_server.texts(f"{n}.{ZONE_A}", "A") for n in names), within=15)
    eventually_sync(
        lambda: any(f"x.{ZONE_B} A not published" in m for m in events(core, "team-a", "DomainNotAllowed"))
    )
    assert dns_server.texts(f"x.{ZONE_B}", "A") == set()
    assert dns_server.texts(f"a-x.{ZONE_B}", "TXT") == set()

    # A typo in the annotation: every name of team-a's zone is refused now. Deleting 4 of the zone's 4 owned
    # records is more than the default half: refused, with an Event, and the records stay.
    core.patch_namespace("team-a", {"metadata": {"annotations": {ANNOTATION: f"*.{ZONE_A}x"}}})
    eventually_sync(lambda: len(events(core, "team-a", "PolicyDeleteRefused")) >= len(names), within=20)
    assert 'event="namespace policy deletes refused" zone=a.example deletes=4 owned=4' in replica.log()
    for i, name in enumerate(names):
        assert dns_server.texts(f"{name}.{ZONE_A}", "A") == {f"192.0.2.{10 + i}"}

    # The admin fixes the typo: nothing was lost, nothing to redo.
    core.patch_namespace("team-a", {"metadata": {"annotations": {ANNOTATION: f"*.{ZONE_A}"}}})
    eventually_sync(
        lambda: 'event="namespace policy deletes allowed again" zone=a.example' in replica.log(), within=20
    )
    for i, name in enumerate(names):
        assert dns_server.texts(f"{name}.{ZONE_A}", "A") == {f"192.0.2.{10 + i}"}
    assert replica.alive()
