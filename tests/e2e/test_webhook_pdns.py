"""End to end, a real DNS server behind a webhook: a real `shardsync run --provider=webhook` replica writes
through a real `shardsync webhook-server --provider=pdns` process, which writes a real PowerDNS
Authoritative through its HTTP API (tests/dnsservers/pdns.py). Markers `pdns` and `multiprocess`.

What is checked is what an external-dns user running external-dns's own webhook server over its pdns
provider would see in PowerDNS: the A record and its TXT ownership record stored byte for byte as
external-dns's pdns provider PATCHes them (compared, row by row in PowerDNS's database, with a zone written
by that PATCH); another owner's record left alone; an update and a delete; a zone external-dns wrote adopted
without a write. The API key reaches the server from the environment (`SHARDSYNC_PDNS_API_KEY`).

Fencing: the pdns provider says it does not fence its writes (`fences_writes` False, its RFC 2136 check
being a request before the PATCH, not atomic with it), so the server does not offer the fence extension,
with `--pdns-rfc2136-fence` or without: the replica runs lease-timed and says so, `/shardsync/fence` is no
route, no fence record is written and writes go through. The second test pins that with the flag given.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from shardsync.providers.base import FenceToken
from shardsync.providers.webhook.protocol import FENCE_HEADER, FENCE_PATH, MEDIA_TYPE, fence_value
from tests.dnsservers import PowerDnsServer, require
from tests.dnsservers.pdns import external_dns_rrsets, owner_txt
from tests.processes import Processes, ShardsyncProcess, free_port, wait_ready
from tests.providers.test_pdns import rows
from tests.waits import eventually_sync

from .cloud_replica import replica_args
from .test_replica_pdns import assert_adopted, update_then_delete
from .test_replica_pdns import rows as absolute_rows
from .test_replica_rfc2136 import publish

pytestmark = [pytest.mark.pdns, pytest.mark.multiprocess]

ZONE = "hook.shardsync.test"
THEIRS = "theirs.shardsync.test"  # external-dns's PATCH of the same records, for the byte comparison
ADOPT = "hook-adopt.shardsync.test"
FENCED = "hook-fence.shardsync.test"
OWNER = "shard"
WEB = [
    {"name": "a-web", "type": "TXT", "contents": [owner_txt(OWNER, "service/default/web")]},
    {"name": "web", "type": "A", "contents": ["192.0.2.10"]},
]


@pytest.fixture(scope="module")
def pdns() -> Iterator[PowerDnsServer]:
    require(PowerDnsServer)
    server = PowerDnsServer([ZONE, THEIRS, ADOPT, FENCED], api=True)
    try:
        server.start()
        server.patch(THEIRS, external_dns_rrsets(THEIRS, WEB))
        foreign = [
            {"name": "other", "type": "A", "contents": ["198.51.100.7"]},
            {"name": "a-other", "type": "TXT", "contents": [owner_txt("someone-else", "service/default/x")]},
        ]
        server.patch(ZONE, external_dns_rrsets(ZONE, foreign))
        kept = [
            {"name": "kept", "type": "A", "contents": ["192.0.2.50"]},
            {"name": "a-kept", "type": "TXT", "contents": [owner_txt(OWNER, "service/default/kept")]},
        ]
        server.patch(ADOPT, external_dns_rrsets(ADOPT, kept))
        yield server
    finally:
        server.close()


def start_webhook_server(pdns: PowerDnsServer, procs: Processes, *extra: str) -> tuple[ShardsyncProcess, str]:
    """`shardsync webhook-server --provider=pdns` on a free loopback port, once ready; and its URL."""
    port, metrics = free_port(), free_port()
    args = [
        "webhook-server",
        "--provider=pdns",
        f"--pdns-server={pdns.api_url}",
        "--pdns-timeout=5s",
        f"--listen-address=127.0.0.1:{port}",
        f"--metrics-address=127.0.0.1:{metrics}",
        "--identity=webhook-0",
        *extra,
    ]
    server = procs.start("webhook-server", args, env={"SHARDSYNC_PDNS_API_KEY": pdns.api_key})
    wait_ready(f"http://127.0.0.1:{metrics}", server)
    return server, f"http://127.0.0.1:{port}"


def start_replica(apiserver: ApiServer, url: str, procs: Processes, *domains: str) -> ShardsyncProcess:
    port = free_port()
    webhook = ("--provider=webhook", f"--webhook-provider-url={url}")
    args = replica_args(str(apiserver.kubeconfig), port, OWNER, *webhook, domains=domains)
    replica = procs.start("replica", args)
    wait_ready(f"http://127.0.0.1:{port}", replica)
    return replica


def named(found: list[tuple[object, ...]], *names: str) -> list[tuple[object, ...]]:
    return [row for row in found if row[0] in names]


def test_a_replica_writes_powerdns_through_a_webhook_server(
    apiserver: ApiServer, pdns: PowerDnsServer, procs: Processes
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    publish(core, "web", f"web.{ZONE}", "192.0.2.10")
    publish(core, "other", f"other.{ZONE}", "192.0.2.99")
    publish(core, "kept", f"kept.{ADOPT}", "192.0.2.50")
    adopted = absolute_rows(pdns, ADOPT)
    server, url = start_webhook_server(pdns, procs)
    replica = start_replica(apiserver, url, procs, ZONE, ADOPT)

    # create: the A record and its TXT ownership record, stored as external-dns's pdns provider stores them
    eventually_sync(lambda: pdns.texts(f"web.{ZONE}", "A") == {"192.0.2.10"}, within=30)
    eventually_sync(lambda: len(named(rows(pdns, ZONE), "web", "a-web")) == 2, within=10)
    ours = named(rows(pdns, ZONE), "web", "a-web")
    assert ours == named(rows(pdns, THEIRS), "web", "a-web"), (ours, rows(pdns, THEIRS))
    assert ("a-web", "TXT", owner_txt(OWNER, "service/default/web"), 300, 0, 0, 1) in ours

    # another owner's record was never touched, though a Service asked for the name
    assert pdns.texts(f"other.{ZONE}", "A") == {"198.51.100.7"}
    assert "reason=not-owned" in replica.log()
    # the zone external-dns wrote with our owner id was adopted as it is: no write to it
    assert_adopted(pdns, replica, ADOPT, adopted)
    update_then_delete(core, pdns, ZONE)
    assert pdns.texts(f"other.{ZONE}", "A") == {"198.51.100.7"}

    # lease-timed, said once by each side; the API key stays in the server process
    assert "writes are lease-timed, not fenced" in replica.log()
    assert "fence extension not offered (the pdns provider does not fence its writes)" in server.log()
    assert pdns.api_key not in server.log() + replica.log()
    assert not [line for line in server.log().splitlines() if "level=error" in line]
    assert replica.alive() and server.alive()


def test_the_rfc2136_fence_flag_does_not_make_the_server_offer_the_extension(
    apiserver: ApiServer, pdns: PowerDnsServer, procs: Processes, tmp_path: Path
) -> None:
    secret_file = tmp_path / "tsig"
    secret_file.write_text(pdns.secret)
    server, url = start_webhook_server(
        pdns,
        procs,
        f"--pdns-rfc2136-fence={pdns.host}:{pdns.port}",
        f"--pdns-fence-tsig-keyname={pdns.key_name}",
        f"--pdns-fence-tsig-secret-file={secret_file}",
    )
    negotiation = httpx.get(url, headers={"Accept": MEDIA_TYPE}, timeout=5)
    assert negotiation.status_code == 200 and FENCE_HEADER not in negotiation.headers
    assert FENCED in negotiation.json()["include"]
    take = httpx.post(
        url + FENCE_PATH, headers={FENCE_HEADER: fence_value(FENCED, FenceToken(1, "shardsync-0"))}, timeout=5
    )
    assert take.status_code == 404  # no such route: the extension is not spoken

    core = k8s.CoreV1Api(apiserver.api_client())
    publish(core, "fenced", f"www.{FENCED}", "192.0.2.20")
    replica = start_replica(apiserver, url, procs, FENCED)
    eventually_sync(lambda: pdns.texts(f"www.{FENCED}", "A") == {"192.0.2.20"}, within=30)
    assert "writes are lease-timed, not fenced" in replica.log()
    assert "fence extension not offered" in server.log()
    assert pdns.texts(f"_shardsync-fence.{FENCED}", "TXT") == set()  # no fence was ever taken
    assert replica.alive() and server.alive()
