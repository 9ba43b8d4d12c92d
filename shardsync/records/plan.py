"""The planner: one zone's desired and current endpoints -> Changes (external-dns's plan package; pure).

The rules, following external-dns's plan/plan.go and plan/conflict.go unless said otherwise:

- Only managed record types take part (`--managed-record-types`, default A, AAAA, CNAME, minus
  `--exclude-record-types`); records of other types are ignored on both sides.
- An RRset is identified by (name, type, set identifier): different set identifiers are different RRsets.
- Create what is desired and not current. external-dns creates only where it has an ownership claim: when
  the (name, set identifier) holds a managed record that is not ours, the create is skipped and reported.
- Update what is desired and current when the targets differ (compared as sets, case-insensitively, IPv6 in
  any spelling), when the desired TTL is configured (non-zero) and differs, or when the provider-specific
  properties differ. Only records owned by `owner_id`; a needed update of another owner's record is
  skipped and reported.
- Delete what is current, ours, and no longer desired. Other owners' records are left alone silently.
- Two desired endpoints with one key from different source objects, as external-dns v0.22 (it merges in
  each source, endpoint.MergeEndpoints, then resolves in the plan, PerResource): objects of the same kind
  (the `resource` label's first part: service, ingress, crd, ...) with the same TTL publish the union of
  their targets; CNAMEs merge only when their targets are equal (one target per CNAME). What still
  competes is resolved as PerResource does: the object that already holds the record keeps it
  (ResolveUpdate), otherwise the smallest targets win (ResolveCreate: fewer targets first, addresses
  before names, IPv4 before IPv6). Ties, which external-dns leaves to list order, go to the oldest object
  (the `shardsync/created` label, `CREATED_LABEL`), then the smallest `resource` label, so every replica
  picks the same. Objects that lost with different content are reported as a `Conflict` (the caller
  emits an Event and a metric); equal content from several objects is published once, silently.
- A CNAME never shares a name with other records (RFC 1034 3.6.2). When CNAME and other types are desired
  at one name, the other types win and the CNAMEs are dropped and reported (external-dns's
  PerResource.ResolveRecordTypes prefers A/AAAA); unlike external-dns this holds across set identifiers.
  An existing CNAME of ours there is deleted. A create that would put a CNAME beside a record that stays
  (or another type beside a CNAME that stays, whoever owns it) is skipped: the server would refuse it.
- `owner_id` "" means no ownership (external-dns's noop registry, whose OwnerID() is ""): every managed
  record is ours to update or delete, and no create is held back for another owner.
- Policies: `sync` applies everything, `upsert-only` no deletes, `create-only` only creates; what a
  policy holds back is returned in `PlanResult.suppressed`.

Every list in the result is sorted by key, so equal inputs give equal plans whatever their order.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from ipaddress import ip_address
from operator import attrgetter

from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import (
    CREATED_LABEL,
    DEFAULT_MANAGED_TYPES,
    OWNER_LABEL,
    RESOURCE_LABEL,
    Changes,
    Endpoint,
    same_targets,
)

DEFAULT_OWNER_ID = "default"  # external-dns's --txt-owner-id default

Key = tuple[str, str, str]
_by_key = attrgetter("key")


class Policy(StrEnum):
    SYNC = "sync"
    UPSERT_ONLY = "upsert-only"
    CREATE_ONLY = "create-only"


class SkipReason(StrEnum):
    FOREIGN_OWNER = "foreign-owner"  # a create where another owner's (or an unowned) record holds the name
    NOT_OWNED = "not-owned"  # an update or delete of a record that is not ours
    CNAME_CONFLICT = "cname-conflict"  # a create that would put a CNAME beside another record
    TXT_NAME_TOO_LONG = "txt-name-too-long"  # its ownership TXT name would have a label over 63 characters


class ConflictReason(StrEnum):
    SAME_RECORD = "same-record"  # several source objects want one RRset
    RECORD_TYPE = "record-type"  # a CNAME wanted at a name where other types are wanted too


@dataclass(frozen=True, slots=True)
class Skipped:
    """A change the planner or the registry would not make, and why."""

    endpoint: Endpoint
    reason: SkipReason
    owner: str = ""  # owner of the record in the way ("" when unowned or not known)


@dataclass(frozen=True, slots=True)
class Conflict:
    """Source objects that asked for an RRset another object won."""

    winner: Endpoint
    losers: tuple[Endpoint, ...]
    reason: ConflictReason

    @property
    def loser_resources(self) -> tuple[str, ...]:
        return tuple(e.labels.get(RESOURCE_LABEL, "") for e in self.losers)


@dataclass(slots=True)
class PlanResult:
    changes: Changes
    conflicts: list[Conflict] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    suppressed: Changes = field(default_factory=Changes)  # held back by the policy


def plan(
    desired: Iterable[Endpoint],
    current: Iterable[Endpoint],
    policy: Policy | str = Policy.SYNC,
    owner_id: str = DEFAULT_OWNER_ID,
    managed_types: Collection[str] = DEFAULT_MANAGED_TYPES,
    exclude_types: Collection[str] = (),
    domains: DomainFilter | None = None,
) -> PlanResult:
    """The changes that move `current` (labelled by the registry) towards `desired`, for one zone.

    With `domains` (--domain-filter, --exclude-domains), records on both sides whose name the filter does
    not admit are left out of the plan, as external-dns's filterRecordsForPlan does: a record this owner
    wrote under a name the filter no longer admits is left alone, never deleted.
    """
    policy = Policy(policy)
    managed = frozenset(managed_types) - frozenset(exclude_types)
    if domains is not None and domains.configured:
        desired = [ep for ep in desired if domains.match(ep.dns_name)]
        current = [ep for ep in current if domains.match(ep.dns_name)]
    current = current if isinstance(current, list | tuple) else list(current)

    # The two loops below run once per record: keys are built inline and lookups bound to locals, because
    # at 100,000 records every attribute access and call shows in the time.
    want: dict[Key, Endpoint] = {}
    dupes: dict[Key, list[Endpoint]] = {}
    cname_names: set[str] = set()
    set_ids: set[str] = {""}
    want_get = want.get
    for ep in desired:
        rtype = ep.record_type
        if rtype not in managed:
            continue
        key = (ep.dns_name, rtype, ep.set_identifier)
        first = want_get(key)
        if first is None:
            want[key] = ep
        elif key in dupes:
            dupes[key].append(ep)
        else:
            dupes[key] = [first, ep]
        if rtype == "CNAME":
            cname_names.add(ep.dns_name)
        if ep.set_identifier:
            set_ids.add(ep.set_identifier)

    have: dict[Key, Endpoint] = {
        (ep.dns_name, ep.record_type, ep.set_identifier): ep for ep in current if ep.record_type in managed
    }

    conflicts: list[Conflict] = []
    for key, candidates in dupes.items():
        holder = have.get(key)
        winner, conflict = _resolve(candidates, holder.labels.get(RESOURCE_LABEL, "") if holder else "")
        want[key] = winner
        if conflict is not None:
            conflicts.append(conflict)
    if cname_names:
        _drop_conflicting_cnames(want, cname_names, set_ids, managed, have, conflicts)

    creates: list[Endpoint] = []
    update_old: list[Endpoint] = []
    update_new: list[Endpoint] = []
    skipped: list[Skipped] = []
    # `have` is consumed: what the loop leaves in it is current and not desired.
    take = have.pop
    for key, w in want.items():
        c = take(key, None)
        if c is None:
            creates.append(w)
            continue
        if (
            w.targets == c.targets
            and (not w.ttl or w.ttl == c.ttl)
            and w.provider_specific == c.provider_specific
        ):
            continue  # the common case, decided without allocating
        if not _needs_update(w, c):
            continue
        owner = c.labels.get(OWNER_LABEL, "")
        if owner_id and owner != owner_id:
            skipped.append(Skipped(w, SkipReason.NOT_OWNED, owner))
            continue
        update_old.append(c)
        update_new.append(_with_owner(w, owner_id))

    deletes = [c for c in have.values() if not owner_id or c.labels.get(OWNER_LABEL) == owner_id]

    # Sorted by key before the policy splits them, so equal inputs give equal results in any order.
    deletes.sort(key=_by_key)
    if len(update_old) > 1:
        order = sorted(range(len(update_old)), key=lambda i: update_old[i].key)
        update_old = [update_old[i] for i in order]
        update_new = [update_new[i] for i in order]

    suppressed = Changes()
    if policy is not Policy.SYNC:
        suppressed.delete, deletes = deletes, []
    if policy is Policy.CREATE_ONLY:
        suppressed.update_old, suppressed.update_new = update_old, update_new
        update_old, update_new = [], []

    if creates:
        creates = _guard_creates(creates, current, deletes, managed, owner_id, skipped)
    creates.sort(key=_by_key)
    skipped.sort(key=lambda s: (s.endpoint.key, s.reason))
    conflicts.sort(key=lambda c: (c.winner.key, c.reason))
    return PlanResult(Changes(creates, update_old, update_new, deletes), conflicts, skipped, suppressed)


def _with_owner(ep: Endpoint, owner_id: str) -> Endpoint:
    """external-dns's inheritOwner: the new version of a record of ours carries our owner label."""
    if not owner_id or ep.labels.get(OWNER_LABEL) == owner_id:
        return ep
    return Endpoint(
        ep.dns_name,
        ep.record_type,
        ep.targets,
        ep.ttl,
        ep.set_identifier,
        {**ep.labels, OWNER_LABEL: owner_id},
        ep.provider_specific,
    )


def _needs_update(want: Endpoint, have: Endpoint) -> bool:
    if want.ttl and want.ttl != have.ttl:
        return True
    if want.provider_specific != have.provider_specific and dict(want.provider_specific) != dict(
        have.provider_specific
    ):
        return True
    return not same_targets(want.targets, have.targets)


def _created(ep: Endpoint) -> float:
    """Seconds since the epoch of the source object's creation; +inf when unknown (counts as newest)."""
    text = ep.labels.get(CREATED_LABEL)
    if not text:
        return math.inf
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return math.inf
    if stamp.tzinfo is None:
        return math.inf  # a timestamp without a zone cannot be ordered against the others
    return stamp.timestamp()


_TargetOrder = tuple[int, tuple[tuple[int, int, int, str], ...]]
_Rank = tuple[bool, _TargetOrder, float, str, int, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


def _target_order(targets: tuple[str, ...]) -> _TargetOrder:
    """external-dns's Targets.IsLess as a sort key: fewer targets first, then target by target (sorted as
    text) with addresses before names, IPv4 before IPv6, addresses by value and names as text."""
    keys: list[tuple[int, int, int, str]] = []
    for target in sorted(targets):
        try:
            addr = ip_address(target)
        except ValueError:
            keys.append((1, 0, 0, target))
        else:
            keys.append((0, addr.version, int(addr), ""))
    return (len(targets), tuple(keys))


def _rank(ep: Endpoint, holder_resource: str) -> _Rank:
    """Sort key of a claim (smallest wins): the holder's first, then the smallest targets (PerResource),
    then the oldest object, then by resource, TTL, properties and labels.

    The order is total, so the winner never depends on the order the sources listed their endpoints in.
    """
    resource = ep.labels.get(RESOURCE_LABEL, "")
    return (
        not holder_resource or resource != holder_resource,
        _target_order(ep.targets),
        _created(ep),
        resource,
        ep.ttl,
        tuple(sorted(ep.provider_specific)),
        tuple(sorted(ep.labels.items())),
    )


def _merge_per_kind(
    candidates: list[Endpoint], holder_resource: str
) -> list[tuple[Endpoint, list[Endpoint]]]:
    """external-dns's MergeEndpoints, which it runs inside each source: (merged endpoint, its members).

    Same kind of object and same TTL merge their targets; a CNAME only merges with an equal CNAME. The
    merged endpoint carries the labels and properties of its best-ranked member (external-dns keeps its
    first one; list order is not the same on every replica, rank is).
    """
    groups: dict[tuple[str, int, tuple[str, ...]], list[Endpoint]] = {}
    for ep in candidates:
        kind = ep.labels.get(RESOURCE_LABEL, "").partition("/")[0]
        single = ep.targets if ep.record_type == "CNAME" else ()
        groups.setdefault((kind, ep.ttl, single), []).append(ep)
    merged: list[tuple[Endpoint, list[Endpoint]]] = []
    for members in groups.values():
        first = min(members, key=lambda e: _rank(e, holder_resource))
        targets = {t for e in members for t in e.targets}
        if len(targets) != len(first.targets):
            first = replace(first, targets=tuple(sorted(targets)))
        merged.append((first, members))
    return merged


def _resolve(candidates: list[Endpoint], holder_resource: str) -> tuple[Endpoint, Conflict | None]:
    """The endpoint to publish for one key, and the conflict to report when objects lost to it."""
    merged = _merge_per_kind(candidates, holder_resource)
    winner, _ = min(merged, key=lambda m: _rank(m[0], holder_resource))
    same = (winner.targets, winner.ttl, winner.provider_specific)
    losers = sorted(
        (
            member
            for ep, members in merged
            if ep is not winner and (ep.targets, ep.ttl, ep.provider_specific) != same
            for member in members
        ),
        key=lambda e: _rank(e, ""),
    )
    return winner, Conflict(winner, tuple(losers), ConflictReason.SAME_RECORD) if losers else None


def _drop_conflicting_cnames(
    want: dict[Key, Endpoint],
    cname_names: set[str],
    set_ids: set[str],
    managed: frozenset[str],
    have: dict[Key, Endpoint],
    conflicts: list[Conflict],
) -> None:
    """Drop the CNAMEs wanted at a name where other types are wanted too (any set identifier)."""
    other_types = sorted(managed - {"CNAME"})
    for name in sorted(cname_names):
        others = [
            want[(name, rtype, set_id)]
            for rtype in other_types
            for set_id in set_ids
            if (name, rtype, set_id) in want
        ]
        if not others:
            continue
        holder = next((have[e.key] for e in others if e.key in have), None)
        holder_resource = holder.labels.get(RESOURCE_LABEL, "") if holder else ""
        winner = min(others, key=lambda e: _rank(e, holder_resource))
        losers = sorted(
            (want[(name, "CNAME", set_id)] for set_id in set_ids if (name, "CNAME", set_id) in want),
            key=_by_key,
        )
        for loser in losers:
            del want[loser.key]
        conflicts.append(Conflict(winner, tuple(losers), ConflictReason.RECORD_TYPE))


def _guard_creates(
    creates: list[Endpoint],
    current: Iterable[Endpoint],
    deletes: list[Endpoint],
    managed: frozenset[str],
    owner_id: str,
    skipped: list[Skipped],
) -> list[Endpoint]:
    """Drop creates on names held by another owner or that would break the CNAME rule."""
    names = {e.dns_name for e in creates}
    at_name: dict[str, list[Endpoint]] = {}
    for ep in current:
        if ep.dns_name in names:
            at_name.setdefault(ep.dns_name, []).append(ep)
    if not at_name:
        return creates
    going = {e.key for e in deletes}
    kept: list[Endpoint] = []
    for ep in creates:
        neighbours = at_name.get(ep.dns_name)
        if not neighbours:
            kept.append(ep)
            continue
        reason: SkipReason | None = None
        blocker = ""
        for other in neighbours:
            owner = other.labels.get(OWNER_LABEL, "")
            if (
                other.set_identifier == ep.set_identifier
                and other.record_type in managed
                and owner_id
                and owner != owner_id
            ):
                reason, blocker = SkipReason.FOREIGN_OWNER, owner
                break
        if reason is None:
            for other in neighbours:
                if other.key in going:
                    continue
                if ep.record_type == "CNAME" or other.record_type == "CNAME":
                    reason, blocker = SkipReason.CNAME_CONFLICT, other.labels.get(OWNER_LABEL, "")
                    break
        if reason is None:
            kept.append(ep)
        else:
            skipped.append(Skipped(ep, reason, blocker))
    return kept
