"""The google provider's pure parts: record sets and endpoints both ways, the split of a plan into changes,
zone choice and filters, and how Cloud DNS's error answers map to base.py's errors."""

from __future__ import annotations

from typing import Any

import pytest
from google.api_core import exceptions as google_errors

from shardsync.providers.base import FenceToken, ProviderError
from shardsync.providers.google.api import _mapped
from shardsync.providers.google.batches import Limits, change_of, fence_reserve, items_of, split, token_of
from shardsync.providers.google.errors import ChangeRefusedError, GoogleThrottledError
from shardsync.providers.google.records import endpoint_of, listed, rrset_of
from shardsync.providers.google.zones import ManagedZone, ZoneFilter, by_dns_name
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint


def rrset(name: str, rtype: str, *values: str, ttl: int = 300, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": rtype, "ttl": ttl, "rrdatas": list(values), **extra}


@pytest.mark.parametrize(
    ("given", "endpoint"),
    [
        (
            rrset("Web.Ex.org.", "A", "192.0.2.1", ttl=60),
            Endpoint.new("web.ex.org", "A", ["192.0.2.1"], ttl=60),
        ),
        (
            rrset("c.ex.org.", "CNAME", "lb.example.net."),
            Endpoint.new("c.ex.org", "CNAME", ["lb.example.net"], ttl=300),
        ),
        (
            rrset("m.ex.org.", "MX", "10 mail.ex.org."),
            Endpoint.new("m.ex.org", "MX", ["10 mail.ex.org"], ttl=300),
        ),
        (
            rrset("_s._tcp.ex.org.", "SRV", "0 5 443 t.ex.org."),
            Endpoint.new("_s._tcp.ex.org", "SRV", ["0 5 443 t.ex.org"], ttl=300),
        ),
        (rrset("t.ex.org.", "TXT", '"a b."'), Endpoint.new("t.ex.org", "TXT", ['"a b."'], ttl=300)),  # as is
        (rrset("ex.org.", "SOA", "ns. host. 1 2 3 4 5"), None),
        (rrset("g.ex.org.", "A", routingPolicy={"wrr": {}}), None),  # a routing policy: no rrdatas
    ],
)
def test_record_sets_and_endpoints_both_ways(given: dict[str, Any], endpoint: Endpoint | None) -> None:
    assert endpoint_of(given) == endpoint
    if endpoint is not None:
        written = rrset_of(endpoint)
        assert written["name"] == given["name"].lower() and written["rrdatas"] == given["rrdatas"]
        assert (rrset_of(endpoint) == listed(given)) == (given["name"] == given["name"].lower())


def test_a_record_without_a_ttl_is_written_with_300_and_hosts_absolute() -> None:
    assert rrset_of(Endpoint.new("n.ex.org", "NS", ["ns1.ex.net"])) == rrset("n.ex.org.", "NS", "ns1.ex.net.")
    unsorted = rrset("a.ex.org.", "A", "192.0.2.9", "192.0.2.10")
    ep = endpoint_of(unsorted)
    assert ep is not None and rrset_of(ep) != listed(unsorted)  # not in our order: deleted as listed


def test_a_plan_is_split_with_each_record_beside_its_txt_and_each_update_whole() -> None:
    def txt(owner: str) -> Endpoint:
        return Endpoint.new(
            f"a-{owner}", "TXT", ['"heritage=external-dns"'], labels={OWNED_RECORD_LABEL: owner}
        )

    creates = [Endpoint.new(f"h{i}.ex.org", "A", ["192.0.2.1"]) for i in range(5)]
    olds = [Endpoint.new("u.ex.org", "A", ["192.0.2.2"])]
    news = [Endpoint.new("u.ex.org", "A", ["192.0.2.3"])]
    changes = Changes(
        create=[*creates, *(txt(e.dns_name) for e in creates)], update_old=olds, update_new=news
    )
    token = FenceToken(1, "r")
    batches = split(items_of(changes, rrset_of), Limits(changes=6), fence_reserve(token))
    assert [len(b) for b in batches] == [4, 4, 4]  # room for 4 beside the fence: pairs never cut
    for batch in batches:
        assert len({i.group for i in batch}) == len(batch) // 2
    change = change_of(batches[-1], "ex.org", token)
    assert [r["name"] for r in change.deletions] == ["_shardsync-fence.ex.org.", "u.ex.org."]
    assert [r["name"] for r in change.additions] == [
        "_shardsync-fence.ex.org.",
        "a-h4.ex.org.",
        "h4.ex.org.",
        "u.ex.org.",
    ]
    assert token_of(change.additions[0]) == token
    # a group larger than a change goes alone (Cloud DNS refuses it and says why)
    big = Endpoint.new("big.ex.org", "TXT", ['"' + "x" * 200 + '"'])
    assert [
        len(b) for b in split(items_of(Changes(create=[big, *creates[:2]]), rrset_of), Limits(3, 150))
    ] == [1, 2]


def test_zone_filters_and_one_zone_per_dns_name() -> None:
    def zone(name: str, dns_name: str, zid: str, visibility: str = "public", **kw: Any) -> ManagedZone:
        return ManagedZone.from_api(
            {"name": name, "dnsName": dns_name, "id": zid, "visibility": visibility, **kw}
        )

    zones = [
        zone("b-private", "ex.org.", "12", "private"),
        zone("a-private", "ex.org.", "11", "private"),
        zone("c-public", "ex.org.", "13"),
        zone("peer", "p.org.", "14", peeringConfig={"targetNetwork": {}}),
    ]
    assert not ZoneFilter().matches(zones[3])
    chosen, left = by_dns_name(z for z in zones if ZoneFilter().matches(z))
    assert chosen["ex.org"].name == "c-public" and [z.name for z in left] == ["a-private", "b-private"]
    chosen, _ = by_dns_name(z for z in zones if ZoneFilter(visibility="private").matches(z))
    assert chosen["ex.org"].name == "a-private"
    assert [z.name for z in zones if ZoneFilter(ids=("12",)).matches(z)] == ["b-private"]
    assert [z.name for z in zones if ZoneFilter(ids=("-private",)).matches(z)] == ["b-private", "a-private"]


def error(status: int, reason: str, message: str) -> google_errors.GoogleAPICallError:
    answer: google_errors.GoogleAPICallError = google_errors.from_http_status(  # type: ignore[no-untyped-call]
        status, message, errors=[{"reason": reason, "message": message}]
    )
    return answer


def test_error_answers_map_to_base_errors() -> None:
    stale = _mapped(
        "changes.create",
        error(412, "conditionNotMet", "Precondition not met for 'entity.change.deletions[0]'"),
    )
    assert isinstance(stale, ChangeRefusedError) and stale.at == ("deletions", 0)
    exists = _mapped(
        "changes.create",
        error(
            409, "alreadyExists", "The 'entity.change.additions[3]' resource named 'x. (A)' already exists."
        ),
    )
    assert isinstance(exists, ChangeRefusedError) and exists.at == ("additions", 3)
    quota = _mapped(
        "changes.create",
        error(403, "quotaExceeded", "The change would exceed quota for additions per change."),
    )
    assert isinstance(quota, ChangeRefusedError) and quota.at is None
    for throttled in (error(429, "rateLimitExceeded", "slow"), error(403, "userRateLimitExceeded", "slow")):
        assert isinstance(_mapped("managedZones.list", throttled), GoogleThrottledError)
    denied = _mapped("changes.create", error(403, "forbidden", "no permission"))
    assert type(denied) is ProviderError  # about the credentials: retried, never reported as records
    gone = _mapped(
        "changes.create",
        error(404, "notFound", "The 'parameters.managedZone' resource named 'z' does not exist."),
    )
    assert type(gone) is ProviderError  # the zone itself is gone: retried, never reported as records
    assert type(_mapped("resourceRecordSets.list", error(500, "backendError", "oops"))) is ProviderError
