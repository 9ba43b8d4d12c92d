"""A plan's changes as Azure DNS record-set writes in fenced batches, and the fence record set. Pure.

Azure DNS writes one record set per request and has no transaction across requests. `units(changes)`
turns a plan into writes as external-dns's ApplyChanges does, every delete first (TXT records last),
then every create and update as a PUT of the whole set; the provider makes each one conditional on the
zone as it read it: a create only where no set exists (`If-None-Match: *`), an update or a delete only of
the set it read (`If-Match: <etag>`). The writes of one record come in one unit, its own before its TXT
ownership record's, so a record is never left without the TXT record that says whose it is;
`batches(units, size)` packs units into batches of at most `size` writes.

The fence (design §2 rule 8) is the TXT record set `_shardsync-fence` (base.fence_record_name) holding one
FenceToken. Taking it is a conditional write against the etag read (`If-None-Match: *` when there is
none); every batch begins by writing it again, unchanged, with `If-Match: <the etag our last write of it
returned>` (the bump). A peer that took the fence changed its etag, so a stale writer's next bump is
refused (412) before the batch writes anything. What Azure cannot give: the batch's writes are not
conditional on the fence, so a writer that bumped the fence and then stalled writes the rest of that batch
after a peer has taken the fence (at most `size` record sets), as the README says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shardsync.providers.base import FENCE_LABEL, FenceToken
from shardsync.providers.fence_record import FENCE_TTL, fence_value, token_in
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint

FENCE_NAME = FENCE_LABEL  # the fence record set's name, relative to its zone
BATCH_WRITES = 20  # record-set writes one bump of the fence covers

Action = Literal["put", "delete"]


@dataclass(frozen=True, slots=True)
class Write:
    """One record-set write: a PUT of `endpoint` (`create`: where the zone holds no such set) or a DELETE of
    the set `endpoint` was read as."""

    action: Action
    endpoint: Endpoint
    create: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.endpoint.dns_name, self.endpoint.record_type)

    @property
    def group(self) -> str:
        """The record the write belongs to: a TXT ownership record's record, else its own name."""
        return _group(self.endpoint)

    @property
    def ownership(self) -> bool:
        """A TXT ownership record (the registry labels it with the record it belongs to)."""
        return OWNED_RECORD_LABEL in self.endpoint.labels


def _group(ep: Endpoint) -> str:
    """The record a write belongs to: a TXT ownership record's record, else its own name."""
    return ep.labels.get(OWNED_RECORD_LABEL) or ep.dns_name


def units(changes: Changes) -> list[list[Write]]:
    """The plan as units of writes (module docstring): the deletes' units, then the puts'."""
    deletes: dict[str, list[Write]] = {}
    puts: dict[str, list[Write]] = {}
    for ep in changes.delete:
        deletes.setdefault(_group(ep), []).append(Write("delete", ep))
    for old, new in zip(changes.update_old, changes.update_new, strict=True):
        if (old.dns_name, old.record_type) == (new.dns_name, new.record_type):
            puts.setdefault(_group(new), []).append(Write("put", new))
        else:  # a record that moved: the old set goes, the new one is created
            deletes.setdefault(_group(old), []).append(Write("delete", old))
            puts.setdefault(_group(new), []).append(Write("put", new, create=True))
    for ep in changes.create:
        puts.setdefault(_group(ep), []).append(Write("put", ep, create=True))
    ordered = [sorted(writes, key=_last_the_txt) for _, writes in sorted(deletes.items())]
    # A TXT record the registry read back carries no label naming its record: the deletes of TXT records
    # come after every other, so no record loses its ownership record before it is gone itself.
    ordered.sort(key=lambda unit: all(w.endpoint.record_type == "TXT" for w in unit))
    return ordered + [sorted(writes, key=_last_the_txt) for _, writes in sorted(puts.items())]


def _last_the_txt(write: Write) -> tuple[bool, bool, tuple[str, str]]:
    """A record's own writes before its TXT ownership record's."""
    return (write.ownership, write.endpoint.record_type == "TXT", write.key)


def batches(found: Iterable[list[Write]], size: int = BATCH_WRITES) -> list[list[list[Write]]]:
    """Units packed into batches of at most `size` writes, a unit never split (a larger one goes alone)."""
    out: list[list[list[Write]]] = []
    current: list[list[Write]] = []
    count = 0
    for unit in found:
        if current and count + len(unit) > size:
            out.append(current)
            current, count = [], 0
        current.append(unit)
        count += len(unit)
    if current:
        out.append(current)
    return out


# ---- the fence record set ----


def fence_body(token: FenceToken) -> dict[str, Any]:
    """The fence record set holding `token` (fence_record.py's value, one TXT string)."""
    return {"properties": {"TTL": FENCE_TTL, "TXTRecords": [{"value": [fence_value(token)]}]}}


def token_of(record_set: Mapping[str, Any] | None) -> FenceToken | None:
    """The token the fence record set holds (None: no set, or none that can be read)."""
    props = (record_set or {}).get("properties") or {}
    return token_in("".join(r.get("value") or ()) for r in props.get("TXTRecords") or ())
