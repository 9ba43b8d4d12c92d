"""A plan's changes as Route53 change batches: actions, the split at the batch limits, and the fence CAS.

Pure. `route53_changes(changes, …)` turns a plan (create, update, delete) into Route53 changes as
external-dns's ApplyChanges does: creates as CREATE, deletes as DELETE, updates as UPSERT unless the record
type, set identifier, alias-ness or routing policy changes (then DELETE old + CREATE new).
`split(changes, limits)` packs them into batches within `--aws-batch-change-size` (changes),
`-size-values` (record values; an UPSERT counts twice) and `-size-bytes` (characters of values), keeping a
record and its TXT ownership record in one batch, and orders each batch as external-dns does (UPSERT, then
DELETE, then CREATE; by name and type).

The fence (design §2 rule 8) is the TXT RRset `_shardsync-fence.<zone>` holding one `FenceToken`, and every
batch starts with `[DELETE fence "<old>", UPSERT fence "<new>"]`: Route53 applies a batch all or nothing
and a DELETE must name the current values exactly, so a batch written under a stale token fails whole.
(UPSERT rather than CREATE after the DELETE: the same on Route53, where the RRset no longer exists at that
point of the batch, while moto, which the wire tests run against, checks a CREATE against the zone as it
was before the batch.) Room for those two changes is kept in every batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shardsync.providers.aws.records import requires_delete_create, value_size
from shardsync.providers.base import FenceToken, fence_record_name
from shardsync.providers.fence_record import FENCE_TTL, fence_value, token_in
from shardsync.providers.packing import by_group, pack
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint

_ORDER = {"UPSERT": 0, "DELETE": 1, "CREATE": 2}  # external-dns sorts actions descending by name


@dataclass(frozen=True, slots=True)
class Limits:
    """`--aws-batch-change-size`, `-size-values`, `-size-bytes` (external-dns's defaults)."""

    changes: int = 1000
    values: int = 1000
    chars: int = 32_000


@dataclass(frozen=True, slots=True)
class Change:
    """One Route53 change with what the batching needs to know about it."""

    action: str  # CREATE, DELETE or UPSERT
    rrset: dict[str, Any]
    endpoint: Endpoint
    group: str  # the record a TXT ownership record belongs to, else its own name: kept in one batch

    @property
    def size(self) -> tuple[int, int]:
        """(values, characters) toward the limits; an UPSERT counts twice."""
        values, chars = value_size(self.rrset)
        weight = 2 if self.action == "UPSERT" else 1
        return values * weight, chars * weight

    def to_api(self) -> dict[str, Any]:
        return {"Action": self.action, "ResourceRecordSet": self.rrset}


RRsetOf = Callable[[Endpoint], dict[str, Any]]


def route53_changes(changes: Changes, rrset_of: RRsetOf) -> list[Change]:
    """The plan as Route53 changes (module docstring)."""

    def make(action: str, eps: Iterable[Endpoint]) -> list[Change]:
        return [
            Change(action, rrset_of(ep), ep, ep.labels.get(OWNED_RECORD_LABEL) or ep.dns_name) for ep in eps
        ]

    creates, upserts, deletes = list(changes.create), [], list(changes.delete)
    update_deletes, update_creates = [], []
    for old, new in zip(changes.update_old, changes.update_new, strict=True):
        if requires_delete_create(old, new):
            update_deletes.append(old)
            update_creates.append(new)
        else:
            upserts.append(new)
    return [
        *make("CREATE", creates),
        *make("DELETE", deletes),
        *make("CREATE", update_creates),
        *make("UPSERT", upserts),
        *make("DELETE", update_deletes),
    ]


def split(
    changes: list[Change], limits: Limits, reserved: tuple[int, int, int] = (0, 0, 0)
) -> list[list[Change]]:
    """Batches within `limits` less `reserved` (changes, values, characters kept for the fence).

    A group (a record and its TXT ownership record) larger than a whole batch goes alone in a batch of
    its own, where Route53 refuses it and the caller reports its records.
    """
    cap = (limits.changes - reserved[0], limits.values - reserved[1], limits.chars - reserved[2])
    groups = by_group(changes)
    return [_ordered(batch) for batch in pack((groups[name] for name in sorted(groups)), _total, cap)]


def _total(group: Sequence[Change]) -> tuple[int, ...]:
    sizes = [c.size for c in group]
    return len(group), sum(s[0] for s in sizes), sum(s[1] for s in sizes)


def _ordered(batch: list[Change]) -> list[Change]:
    return sorted(batch, key=lambda c: (_ORDER[c.action], c.rrset["Name"], c.rrset["Type"]))


# ---- the fence ----


def fence_name(zone: str) -> str:
    return fence_record_name(zone)


def fence_rrset(zone: str, token: FenceToken) -> dict[str, Any]:
    return {
        "Name": fence_name(zone),
        "Type": "TXT",
        "TTL": FENCE_TTL,
        "ResourceRecords": [{"Value": fence_value(token)}],
    }


def fence_changes(zone: str, old: FenceToken | None, new: FenceToken) -> list[dict[str, Any]]:
    """The compare-and-swap at the head of a batch: replace `old` (None: no fence yet) by `new`."""
    if old is None:
        return [{"Action": "CREATE", "ResourceRecordSet": fence_rrset(zone, new)}]
    return [
        {"Action": "DELETE", "ResourceRecordSet": fence_rrset(zone, old)},
        {"Action": "UPSERT", "ResourceRecordSet": fence_rrset(zone, new)},
    ]


def fence_reserve(zone: str, token: FenceToken) -> tuple[int, int, int]:
    """What the fence changes take of a batch: 2 changes, 3 values (the UPSERT counts twice), characters."""
    chars = len(fence_value(token).encode())
    return 2, 3, 3 * chars


def token_of(rrset: dict[str, Any] | None) -> FenceToken | None:
    """The token a listed fence RRset holds (None when absent or unreadable)."""
    if not rrset:
        return None
    return token_in(str(r["Value"]) for r in rrset.get("ResourceRecords") or ())
