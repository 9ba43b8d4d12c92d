"""A plan's changes as Cloudflare `dns_records/batch` requests, and the fence at the head of each.

Pure. `operations(changes, …)` turns a plan into record operations as external-dns's ApplyChanges does:
a create posts each value; an update deletes the values it drops, posts the ones it adds and puts the ones
it keeps (by their record ids); a delete deletes each value. `split(ops, size)` packs them into batches
of at most `size` operations (`--batch-change-size`), keeping a record and its TXT ownership record in one
batch. Cloudflare runs a batch's deletes, then its puts, then its posts, in one transaction: if any
operation fails, none is applied.

The fence (design §2 rule 8) is a TXT record `_shardsync-fence.<zone>` holding one `FenceToken`, beside
an anchor record of constant content at the same name. Every batch starts with
`[delete <id of the fence record>, post fence "<token>"]`: a stale owner's batch names an id a newer owner
has already deleted, the delete fails, and so does its whole batch. Taking the fence deletes every fence
and anchor record read and posts the anchor and the new fence: when there was none, the anchor's post is
the compare, as Cloudflare refuses a record identical to one that exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shardsync.providers.base import FenceToken, fence_record_name
from shardsync.providers.fence_record import FENCE_TTL, fence_value, token_in
from shardsync.providers.packing import by_group, pack
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint

Action = Literal["delete", "put", "post"]
ANCHOR = '"shardsync fence anchor"'
FENCE_OPS = 2  # what the fence takes of every batch: its delete and its post


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a batch, with the endpoint and value it writes (for the rejection report)."""

    action: Action
    endpoint: Endpoint
    target: str
    record_id: str = ""  # delete, put
    body: dict[str, Any] | None = None  # put, post

    @property
    def group(self) -> str:
        """The record a TXT ownership record belongs to, else its own name: kept in one batch."""
        return self.endpoint.labels.get(OWNED_RECORD_LABEL) or self.endpoint.dns_name


IdOf = Callable[[Endpoint, str], str | None]  # the id of the record holding one value, None: not there
BodyOf = Callable[[Endpoint, str], dict[str, Any]]


def missing_ids(changes: Changes, id_of: IdOf) -> bool:
    """Whether a record the changes delete or keep has no known id (the caller lists the zone again)."""
    for old in changes.update_old:
        if any(id_of(old, t) is None for t in old.targets):
            return True
    return any(id_of(ep, t) is None for ep in changes.delete for t in ep.targets)


def operations(changes: Changes, id_of: IdOf, body_of: BodyOf) -> list[Op]:
    """The plan as record operations (module docstring). A value to delete that the zone no longer holds
    is left out (the wanted state is there); a value to keep that it no longer holds is posted."""
    ops: list[Op] = []

    def delete(ep: Endpoint, target: str) -> None:
        record_id = id_of(ep, target)
        if record_id is not None:
            ops.append(Op("delete", ep, target, record_id))

    for ep in changes.create:
        ops.extend(Op("post", ep, t, body=body_of(ep, t)) for t in ep.targets)
    for old, new in zip(changes.update_old, changes.update_new, strict=True):
        for target in old.targets:
            if target not in new.targets:
                delete(old, target)
        for target in new.targets:
            record_id = id_of(old, target) if target in old.targets else None
            if record_id is None:
                ops.append(Op("post", new, target, body=body_of(new, target)))
            else:
                ops.append(Op("put", new, target, record_id, body_of(new, target)))
    for ep in changes.delete:
        for target in ep.targets:
            delete(ep, target)
    return ops


def split(ops: list[Op], size: int) -> list[list[Op]]:
    """Batches of at most `size` operations, a group never split (one larger than `size` goes alone, where
    Cloudflare refuses it and the caller reports its records)."""
    groups = by_group(ops)
    return pack((groups[name] for name in sorted(groups)), _count, (size,))


def _count(group: Sequence[Op]) -> tuple[int, ...]:
    return (len(group),)


def request(
    ops: list[Op], fence_id: str = "", fence: dict[str, Any] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The batch's body: deletes, puts and posts, the fence's delete and post first."""
    deletes = [{"id": fence_id}] if fence_id else []
    posts = [fence] if fence else []
    deletes += [{"id": op.record_id} for op in ops if op.action == "delete"]
    puts = [{"id": op.record_id, **(op.body or {})} for op in ops if op.action == "put"]
    posts += [op.body or {} for op in ops if op.action == "post"]
    return {"deletes": deletes, "puts": puts, "posts": posts}


# ---- the fence ----


def fence_body(zone: str, token: FenceToken) -> dict[str, Any]:
    return _at_fence_name(zone, fence_value(token))


def anchor_body(zone: str) -> dict[str, Any]:
    return _at_fence_name(zone, ANCHOR)


def _at_fence_name(zone: str, content: str) -> dict[str, Any]:
    return {
        "name": fence_record_name(zone),
        "type": "TXT",
        "content": content,
        "ttl": FENCE_TTL,
        "proxied": False,
    }


def token_of(content: str) -> FenceToken | None:
    """The token a fence record holds (None: the anchor, or content that is not a token)."""
    return None if content == ANCHOR else token_in([content])
