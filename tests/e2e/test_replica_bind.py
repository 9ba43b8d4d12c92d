"""End to end: a real `shardsync run` process, the embedded API server and a real BIND 9.

The replica watches Services through the official client and writes BIND with TSIG-signed UPDATEs. The
tests check the records with real DNS queries: create, update and delete follow the Service; records owned
by another owner id are never touched; records external-dns wrote with our owner id are adopted as they
are, without a rewrite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from tests.bind import BindServer, find_named
from tests.kubeclient import raw_body
from tests.processes import Processes, free_port, processes, wait_ready
from tests.waits import eventually_sync

ZONE = "e2e.shardsync.test"
ADOPT_ZONE = "adopt.shardsync.test"
OWNER = "shard"
FOREIGN_TXT = (
    '"heritage=external-dns,external-dns/owner=someone-else,external-dns/resource=service/default/x"'
)
ADOPTED_TXT = f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/kept"'

pytestmark = pytest.mark.skipif(find_named() is None, reason="BIND 9 `named` is not installed")


@pytest.fixture(scope="module")
def bind() -> Iterator[BindServer]:
    server = BindServer(
        [ZONE, ADOPT_ZONE],
        records={
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


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    with processes(tmp_path) as group:
        yield group


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
    apiserver: ApiServer, bind: BindServer, secret_file: Path, port: int, *extra: str
) -> list[str]:
    return [
        "run",
        f"--kubeconfig={apiserver.kubeconfig}",
        "--source=service",
        "--provider=rfc2136",
        f"--rfc2136-host={bind.host}",
        f"--rfc2136-port={bind.port}",
        f"--rfc2136-zone={ZONE}",
        f"--rfc2136-zone={ADOPT_ZONE}",
        f"--rfc2136-tsig-keyname={bind.key_name}",
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


def test_service_lifecycle_reaches_bind(
    apiserver: ApiServer, bind: BindServer, procs: Processes, tmp_path: Path
) -> None:
    secret_file = tmp_path / "tsig"
    secret_file.write_text(bind.secret)
    core = k8s.CoreV1Api(apiserver.api_client())
    core.create_namespaced_service("default", lb_service("web", f"web.{ZONE}", "192.0.2.10"))
    set_lb_ip(core, "web", "192.0.2.10")
    core.create_namespaced_service("default", lb_service("other", f"other.{ZONE}", "192.0.2.99"))
    set_lb_ip(core, "other", "192.0.2.99")
    core.create_namespaced_service("default", lb_service("kept", f"kept.{ADOPT_ZONE}", "192.0.2.50"))
    set_lb_ip(core, "kept", "192.0.2.50")

    port = free_port()
    replica = procs.start(
        "replica", replica_args(apiserver, bind, secret_file, port, "--events", "--interval=1m")
    )
    wait_ready(f"http://127.0.0.1:{port}", replica)

    # create: the A record and its typed TXT ownership record
    eventually_sync(lambda: bind.texts(f"web.{ZONE}", "A") == {"192.0.2.10"}, within=30)
    owner = f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource=service/default/web"'
    assert bind.texts(f"a-web.{ZONE}", "TXT") == {owner}

    # update: a new load balancer address reaches DNS without waiting for the interval
    set_lb_ip(core, "web", "192.0.2.11")
    eventually_sync(lambda: bind.texts(f"web.{ZONE}", "A") == {"192.0.2.11"}, within=15)

    # delete: record and ownership record go
    core.delete_namespaced_service("web", "default")
    eventually_sync(lambda: bind.texts(f"web.{ZONE}", "A") == set(), within=15)
    assert bind.texts(f"a-web.{ZONE}", "TXT") == set()

    # another owner's record was never touched, though a Service asked for the name
    assert bind.texts(f"other.{ZONE}", "A") == {"198.51.100.7"}
    assert bind.texts(f"a-other.{ZONE}", "TXT") == {FOREIGN_TXT}
    assert (
        'event="change skipped" zone=e2e.shardsync.test name=other.e2e.shardsync.test type=A reason=not-owned'
        in (replica.log())
    )

    # external-dns's records with our owner id were adopted as they are: no change written to that zone
    assert bind.texts(f"kept.{ADOPT_ZONE}", "A") == {"192.0.2.50"}
    assert bind.texts(f"a-kept.{ADOPT_ZONE}", "TXT") == {ADOPTED_TXT}
    assert f"zone={ADOPT_ZONE}" not in "\n".join(
        line for line in replica.log().splitlines() if 'event="zone changes applied"' in line
    )
    assert replica.alive()


def test_once_syncs_and_exits(
    apiserver: ApiServer, bind: BindServer, procs: Processes, tmp_path: Path
) -> None:
    secret_file = tmp_path / "tsig"
    secret_file.write_text(bind.secret)
    core = k8s.CoreV1Api(apiserver.api_client())
    core.create_namespaced_service("default", lb_service("once", f"once.{ZONE}", "192.0.2.20"))
    set_lb_ip(core, "once", "192.0.2.20")
    replica = procs.start("once", replica_args(apiserver, bind, secret_file, free_port(), "--once"))
    assert replica.wait(timeout=60) == 0, replica.log()[-4000:]
    assert bind.texts(f"once.{ZONE}", "A") == {"192.0.2.20"}
