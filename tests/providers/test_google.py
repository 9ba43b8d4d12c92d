"""The google provider on the wire: the official `google-cloud-dns` library against the Cloud DNS contract
fake on loopback (tests/cloudfakes/google.py, which says what it encodes and what it cannot prove).

What these prove: the library's calls as the provider makes them (paged listings of zones and record sets,
filtered reads of the fence, changes), zone discovery and its filters, records written as external-dns
writes them (names absolute, TTL 300, TXT ownership values byte for byte), a foreign record left alone,
deletes, the adoption of a zone external-dns wrote with no write, and the throttling answers mapped for the
provider budget. The fence under two writers and the limits are in test_google_fence.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from google.auth.credentials import AnonymousCredentials

from shardsync.providers import google
from shardsync.providers.base import FenceToken, RecordsRejectedError
from shardsync.providers.google.api import CloudDnsApi
from shardsync.providers.google.errors import GoogleThrottledError
from shardsync.providers.google.provider import GoogleProvider
from shardsync.providers.google.zones import ZoneFilter
from shardsync.providers.table import PROVIDERS
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Changes, Endpoint
from shardsync.records.registry import TxtRegistry
from tests.cloudfakes.google import GoogleCloudDnsFake
from tests.waits import eventually

ZONE = "ex.org"
OWNER = "default"


def txt(resource: str) -> str:
    return f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource={resource}"'


@pytest.fixture
def fake() -> Iterator[GoogleCloudDnsFake]:
    server = GoogleCloudDnsFake(rrsets_page_size=100).start()
    try:
        yield server
    finally:
        server.stop()


def provider(fake: GoogleCloudDnsFake, identity: str = "r0", **kw: Any) -> GoogleProvider:
    api = CloudDnsApi(
        project=fake.project,
        endpoint=fake.url,
        identity=identity,
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
    )
    kw.setdefault("batch_interval", 0.0)
    return GoogleProvider(api, **kw)


def a(name: str, *targets: str, **kw: Any) -> Endpoint:
    return Endpoint.new(f"{name}.{ZONE}", "A", targets or ["192.0.2.1"], **kw)


def synced(worker: Worker, syncs: int) -> bool:
    """ZONE synced more than `syncs` times, or failed."""
    return worker.statuses[ZONE].syncs > syncs or bool(worker.statuses[ZONE].last_error)


def sync(p: GoogleProvider, desired: DesiredIndex, fence: FenceToken | None, *edits: Any) -> Worker:
    """A worker syncing ZONE once, then once after each edit (a callable changing `desired`)."""
    worker = Worker(p, TxtRegistry(owner_id=OWNER), desired, WorkerOptions(interval=60, event_delay=0))

    async def main() -> None:
        await p.zones()
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            worker.own(ZONE, fence)
            for step in range(len(edits) + 1):
                if step:
                    worker.mark_dirty(edits[step - 1]())
                await eventually(partial(synced, worker, step), within=20)
                assert worker.statuses[ZONE].last_error == ""
            tg.cancel_scope.cancel()

    anyio.run(main)
    return worker


# ---- zone discovery ----


def test_zone_discovery_pages_and_filters(fake: GoogleCloudDnsFake) -> None:
    fake.zones_page_size = 2
    public = fake.add_zone("a.org", "a-public")
    private = fake.add_zone("a.org", "a-private", visibility="private")
    fake.add_zone("b.org", "b-private", visibility="private")
    fake.add_zone("c.org")
    fake.add_zone("peer.org", peering=True)

    def zones(**kw: Any) -> dict[str, str]:
        p = provider(fake, zone_filter=ZoneFilter(**kw))
        names = anyio.run(p.zones)
        return {n: p._zones[n].name for n in names}

    # split horizon: the public a.org; a peering zone never
    assert zones() == {"a.org": public, "b.org": "b-private", "c.org": "c-org"}
    assert fake.requests["managedZones.list"] == 3  # 5 zones, pages of 2
    assert zones(visibility="private") == {"a.org": private, "b.org": "b-private"}
    assert zones(visibility="public") == {"a.org": public, "c.org": "c-org"}
    assert zones(ids=("a-private",)) == {"a.org": private}  # by managed zone name
    numeric = next(z["id"] for z in fake.zone_resources() if z["name"] == "c-org")
    assert zones(ids=(numeric[-2:],)) == {"c.org": "c-org"}  # by id, a suffix as external-dns matches
    assert zones(ids=("", "")) == zones()


# ---- listing ----


def test_listing_pages_and_leaves_out_the_fence_and_what_external_dns_does_not_manage(
    fake: GoogleCloudDnsFake,
) -> None:
    fake.rrsets_page_size = 40
    zone = fake.add_zone(ZONE)
    for i in range(150):
        fake.put(zone, f"h{i:03d}.{ZONE}.", "A", [f"10.0.0.{i}"])
    fake.put(zone, f"geo.{ZONE}.", "A", [], routingPolicy={"geo": {"items": []}})  # no rrdatas
    fake.put(zone, f"caa.{ZONE}.", "CAA", ['0 issue "ca.example.net"'])
    fake.put(zone, f"mx.{ZONE}.", "MX", ["10 mail.example.net."])
    fake.put(zone, f"txt.{ZONE}.", "TXT", ['"v=spf1 -all"'])
    p = provider(fake)

    async def main() -> list[Endpoint]:
        await p.zones()
        await p.acquire_fence(ZONE, FenceToken(1, "r0"))
        return await p.records(ZONE)

    records = {(e.dns_name, e.record_type): e for e in anyio.run(main)}
    assert len([k for k in records if k[1] == "A"]) == 150
    assert set(records) - {k for k in records if k[1] == "A"} == {
        (ZONE, "NS"),
        (f"mx.{ZONE}", "MX"),
        (f"txt.{ZONE}", "TXT"),
    }  # no SOA, CAA, routing policy or fence
    assert records[(f"mx.{ZONE}", "MX")].targets == ("10 mail.example.net",)
    assert records[(f"txt.{ZONE}", "TXT")].targets == ('"v=spf1 -all"',)
    # 156 record sets with the fence: 4 pages of 40, plus the fence's filtered read
    assert fake.requests["resourceRecordSets.list"] == 4 + 1


# ---- writing as external-dns writes ----


def test_a_and_txt_as_external_dns_writes_them_a_foreign_record_left_and_a_delete(
    fake: GoogleCloudDnsFake,
) -> None:
    zone = fake.add_zone(ZONE)
    fake.put(zone, f"foreign.{ZONE}.", "A", ["198.51.100.7"], ttl=60)  # no ownership record: not ours
    desired = DesiredIndex([ZONE])
    web = [a("web", "192.0.2.10", labels={RESOURCE_LABEL: "service/default/web"})]
    desired.set_object("service/default/web", web)
    before = {(r["name"], r["type"]): r for r in fake.rrsets(zone)}

    def delete_web() -> set[str]:
        return desired.set_object("service/default/web", [])

    written: dict[tuple[str, str], dict[str, Any]] = {}

    def remember() -> set[str]:
        written.update({(r["name"], r["type"]): r for r in fake.rrsets(zone)})
        return delete_web()

    sync(provider(fake), desired, None, remember)
    # external-dns's newRecord: absolute name, TTL 300, values as given (the TXT's quotes included)
    assert written[(f"web.{ZONE}.", "A")] == {
        "name": f"web.{ZONE}.",
        "type": "A",
        "ttl": 300,
        "rrdatas": ["192.0.2.10"],
    }
    assert written[(f"a-web.{ZONE}.", "TXT")] == {
        "name": f"a-web.{ZONE}.",
        "type": "TXT",
        "ttl": 300,
        "rrdatas": [txt("service/default/web")],
    }
    after = {(r["name"], r["type"]): r for r in fake.rrsets(zone)}
    assert after == before  # web and its TXT deleted; the foreign record, SOA and NS as they were
    assert [e.outcome for e in fake.audit(zone)] == ["ok", "ok"]


def test_an_external_dns_zone_is_adopted_without_a_write(fake: GoogleCloudDnsFake) -> None:
    zone = fake.add_zone(ZONE)
    # as external-dns (owner "default") leaves it: records and their TXT ownership records, a CNAME to a
    # load balancer written absolute, a record with two addresses in the order its source gave them
    fake.put(zone, f"web.{ZONE}.", "A", ["192.0.2.10"])
    fake.put(zone, f"a-web.{ZONE}.", "TXT", [txt("service/default/web")])
    fake.put(zone, f"lb.{ZONE}.", "CNAME", ["k8s-lb.elb.example.net."])
    fake.put(zone, f"cname-lb.{ZONE}.", "TXT", [txt("ingress/default/lb")])
    fake.put(zone, f"two.{ZONE}.", "A", ["192.0.2.3", "192.0.2.20"], ttl=60)
    fake.put(zone, f"a-two.{ZONE}.", "TXT", [txt("service/default/two")])
    before = fake.rrsets(zone)
    desired = DesiredIndex([ZONE])
    for key, eps in (
        ("service/default/web", [a("web", "192.0.2.10")]),
        ("ingress/default/lb", [Endpoint.new(f"lb.{ZONE}", "CNAME", ["k8s-lb.elb.example.net"])]),
        ("service/default/two", [a("two", "192.0.2.3", "192.0.2.20", ttl=60)]),
    ):
        desired.set_object(key, [e.with_labels(**{RESOURCE_LABEL: key}) for e in eps])

    sync(provider(fake), desired, FenceToken(1, "r0"))
    # the one write is the fence's own addition; not one record changed
    assert [(e.additions, e.deletions) for e in fake.audit(zone)] == [
        (((f"_shardsync-fence.{ZONE}.", "TXT", (f'"{FenceToken(1, "r0").to_text()}"',)),), ())
    ]
    assert [r for r in fake.rrsets(zone) if not r["name"].startswith("_shardsync-fence.")] == before


def test_a_record_listed_in_another_order_is_updated_and_deleted_as_listed(fake: GoogleCloudDnsFake) -> None:
    # A deletion must name the current values in their order; the provider keeps such a set as listed.
    zone = fake.add_zone(ZONE)
    fake.put(zone, f"two.{ZONE}.", "A", ["192.0.2.3", "192.0.2.20"], ttl=60)
    fake.put(zone, f"a-two.{ZONE}.", "TXT", [txt("service/default/two")])
    desired = DesiredIndex([ZONE])
    labels = {RESOURCE_LABEL: "service/default/two"}
    desired.set_object("service/default/two", [a("two", "192.0.2.3", "192.0.2.20", ttl=60, labels=labels)])

    def update() -> set[str]:
        return desired.set_object("service/default/two", [a("two", "192.0.2.4", ttl=60, labels=labels)])

    def delete() -> set[str]:
        return desired.set_object("service/default/two", [])

    p = provider(fake)
    sync(p, desired, FenceToken(1, "r0"), update, delete)
    outcomes = [(e.outcome, [d[:2] for d in e.deletions]) for e in fake.audit(zone)]
    fence = (f"_shardsync-fence.{ZONE}.", "TXT")
    assert outcomes == [
        ("ok", []),  # the fence
        ("ok", [fence, (f"two.{ZONE}.", "A")]),  # the update: the old set deleted as listed
        ("ok", [fence, (f"a-two.{ZONE}.", "TXT"), (f"two.{ZONE}.", "A")]),
    ]
    assert {r["name"] for r in fake.rrsets(zone)} == {f"{ZONE}.", f"_shardsync-fence.{ZONE}."}


def test_a_record_changed_by_another_writer_is_reported_and_the_rest_applies(
    fake: GoogleCloudDnsFake,
) -> None:
    zone = fake.add_zone(ZONE)
    p = provider(fake)
    token = FenceToken(1, "r0")
    old = [a("one", "192.0.2.1"), a("two", "192.0.2.2")]
    new = [a("one", "192.0.2.11"), a("two", "192.0.2.12")]

    async def main() -> None:
        await p.zones()
        await p.acquire_fence(ZONE, token)
        await p.apply(ZONE, Changes(create=old), token)
        fake.put(zone, f"two.{ZONE}.", "A", ["198.51.100.2"])  # someone else, since our read
        with pytest.raises(RecordsRejectedError) as refused:
            await p.apply(ZONE, Changes(update_old=old, update_new=new), token)
        assert [r.endpoint.dns_name for r in refused.value.rejected] == [f"two.{ZONE}", f"two.{ZONE}"]
        assert "412 conditionNotMet" in refused.value.rejected[0].reason

    anyio.run(main)
    values = {r["name"]: r["rrdatas"] for r in fake.rrsets(zone)}
    assert values[f"one.{ZONE}."] == ["192.0.2.11"] and values[f"two.{ZONE}."] == ["198.51.100.2"]
    # the whole change refused, then each group alone: one applied, the other refused again
    assert [e.outcome for e in fake.audit(zone)][2:] == ["412 conditionNotMet", "ok", "412 conditionNotMet"]


# ---- credentials ----


def test_build_finds_credentials_through_the_standard_chain(
    fake: GoogleCloudDnsFake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GOOGLE_APPLICATION_CREDENTIALS names a service account key file whose token endpoint is the fake, which
    # then refuses any request without that token: the library's own default-credentials chain at work; the
    # project comes from the key file, as no --google-project is given.
    fake.token = "token-from-the-chain"
    fake.add_zone(ZONE)
    for key, value in fake.environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    options = google.FLAGS.options(api_endpoint=fake.url)
    p = PROVIDERS["google"].create(options, "shardsync-0")
    assert isinstance(p, GoogleProvider)
    assert anyio.run(p.zones) == [ZONE]


def test_no_credentials_is_one_clear_error(tmp_path: Path) -> None:
    probe = (
        "from shardsync.providers.table import PROVIDERS\n"
        "kind = PROVIDERS['google']\n"
        "try:\n"
        "    kind.create(kind.flags.options(project='p'), 'shardsync-0')\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_"))}
    env.update(NO_GCE_CHECK="true", CLOUDSDK_CONFIG=str(tmp_path), HOME=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=True
    ).stdout
    assert out.startswith("--provider=google: no Google credentials found")


# ---- throttling ----


@pytest.mark.parametrize(("status", "retry_after"), [(429, 7.0), (403, None)])
def test_throttling_answers_are_throttled_errors_with_the_wait_named(
    fake: GoogleCloudDnsFake, status: int, retry_after: float | None
) -> None:
    fake.add_zone(ZONE)
    fake.throttle_status, fake.retry_after = status, retry_after
    p = provider(fake)
    fake.throttle_next(1)
    with pytest.raises(GoogleThrottledError) as throttled:
        anyio.run(p.zones)
    assert throttled.value.retry_after == retry_after
    assert "rateLimitExceeded" in str(throttled.value)
    assert anyio.run(p.zones) == [ZONE]  # the next call goes through
