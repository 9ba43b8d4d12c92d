"""A Route53 API double over the fake provider's store in its `route53` profile, for the aws provider.

`Route53OnFake` answers the four calls `AwsProvider` makes (aws/provider.py's `Api`) from a `FakeStore` whose
profile enforces Route53's documented semantics (exact deletes, all-or-nothing batches, the limits,
PriorRequestNotComplete, the account bucket), so the aws provider's own batches — the fence's
`[DELETE "<token>", UPSERT "<token>"]` at their head included — meet those rules, which moto does not
enforce. The fence is an ordinary TXT record of the store's zone here, as it is in a Route53 zone. What the
double cannot prove: Route53's wire format (the moto tests do) and its real error texts (InvalidChangeBatch
is raised with the store's message, which names the RRset at fault as Route53's does).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

from shardsync.providers.aws.errors import InvalidChangeBatchError, Start
from shardsync.providers.aws.records import endpoints_of
from shardsync.providers.aws.zones import HostedZone
from shardsync.providers.fake.store import FakeStore, InvalidChangesError
from shardsync.records.endpoint import Changes, Endpoint


class Route53OnFake:
    def __init__(self, store: FakeStore, writer: str) -> None:
        self.store = store
        self.writer = writer

    def hosted_zones(self) -> list[HostedZone]:
        return [HostedZone(zone, zone, False) for zone in self.store.zones(self.writer)]

    def tags(self, zone_ids: Iterable[str]) -> dict[str, dict[str, str]]:
        return {i: {} for i in zone_ids}

    def rrsets(
        self, zone_id: str, start: Start | None, max_items: int
    ) -> tuple[list[dict[str, Any]], Start | None]:
        # Route53 pages start at a key; the store's pages start after one: the key just before `start`.
        keys = sorted(e.key for e in self.store.peek(zone_id))
        at = 0 if start is None else bisect.bisect_left(keys, (start[0].rstrip("."), start[1], start[2]))
        page, nxt = self.store.records_page(
            zone_id, self.writer, after=keys[at - 1] if at else None, limit=max_items
        )
        more = keys[at + len(page)] if nxt is not None and at + len(page) < len(keys) else None
        return [_rrset(e) for e in page], more

    def change(self, zone_id: str, changes: list[dict[str, Any]], comment: str = "") -> None:
        batch = Changes()
        deleted: set[tuple[str, str, str]] = set()
        current = {e.key for e in self.store.peek(zone_id)}
        for change in changes:
            (ep,) = endpoints_of(change["ResourceRecordSet"])
            if change["Action"] == "DELETE":
                batch.delete.append(ep)
                deleted.add(ep.key)
            elif change["Action"] == "CREATE" or ep.key in deleted or ep.key not in current:
                batch.create.append(ep)
            else:  # an UPSERT of an existing RRset: Route53 does not compare the old values
                (old,) = [e for e in self.store.peek(zone_id) if e.key == ep.key]
                batch.update_old.append(old)
                batch.update_new.append(ep)
        try:
            self.store.apply(zone_id, batch, writer=self.writer)
        except InvalidChangesError as exc:
            raise InvalidChangeBatchError(f"InvalidChangeBatch: {exc}") from None


def _rrset(ep: Endpoint) -> dict[str, Any]:
    rrset: dict[str, Any] = {"Name": ep.dns_name + ".", "Type": ep.record_type, "TTL": ep.ttl}
    rrset["ResourceRecords"] = [{"Value": t} for t in ep.targets]
    if ep.set_identifier:
        rrset["SetIdentifier"] = ep.set_identifier
    return rrset
