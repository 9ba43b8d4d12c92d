"""TXT ownership registry, byte-compatible with external-dns v0.18+ (pure: no I/O).

external-dns records who owns a DNS record in a TXT record beside it. For the A record `www.ex.com` it writes
the TXT record `a-www.ex.com` holding
`"heritage=external-dns,external-dns/owner=<id>,external-dns/resource=<kind>/<ns>/<name>"`.
Before v0.12 the TXT name carried no type (`www.ex.com`, or `<prefix>www.ex.com`); such "legacy" records are
still read, and a record of ours that only has one gets its typed TXT record created next to it (external-dns
does the same upgrade).

Use per zone and reconcile (`Registry` is what the worker needs; the other one is
shardsync.records.noop_registry):

    view = registry.read(provider_records)        # current endpoints, labelled with owner and resource
    result = plan(desired, view.current, ...)     # shardsync.records.plan
    owned = registry.with_ownership(result.changes, view)   # + TXT changes, minus what is not ours

`read` consumes the ownership TXT records (they are not endpoints of their own). `with_ownership` never lets
an update or delete through for a record not owned by our owner id and skips a create on a name that holds
records of another owner; what it drops comes back in `OwnershipResult.skipped`.

As external-dns v0.22: an A alias record (`alias` "true" or "A") whose TXT record still has the `cname-`
name it had before v0.22 stays ours through it (its `a-` record is added), and no TXT record is written
under a name with a label over 63 characters (a create there is skipped: README, "Differences").

`--migrate-from-txt-owner` (external-dns's `old_owner_id`): a record whose TXT record names that old owner id
reads as ours, and its TXT record is rewritten to our owner id on the next reconcile (external-dns forces an
update of the record to the same end); an old owner's TXT record is also ours to delete or overwrite.

TXT record encryption (`--txt-encrypt-enabled`) is not supported: an encrypted ownership record does not
parse, so its record reads as unowned and is never touched.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from shardsync.records.endpoint import (
    DEFAULT_MANAGED_TYPES,
    INTERNAL_LABEL_PREFIX,
    OWNED_RECORD_LABEL,
    OWNER_LABEL,
    Changes,
    Endpoint,
)
from shardsync.records.plan import DEFAULT_OWNER_ID, Skipped, SkipReason

# Re-exported: callers built registries and mappers from here before the mapper had its own module.
from shardsync.records.txt_names import RegistryConfigError as RegistryConfigError
from shardsync.records.txt_names import TxtNameMapper as TxtNameMapper
from shardsync.records.txt_names import txt_name_fits

HERITAGE = "external-dns"

Key = tuple[str, str, str]
TxtKey = tuple[str, str]  # (TXT record name, set identifier)


def serialize_labels(labels: Mapping[str, str]) -> str:
    """The TXT content external-dns writes: heritage first, then the labels sorted by key, quoted."""
    tokens = [f"heritage={HERITAGE}"]
    tokens.extend(f"{HERITAGE}/{key}={labels[key]}" for key in sorted(labels))
    return '"' + ",".join(tokens) + '"'


def parse_labels(text: str) -> dict[str, str] | None:
    """The labels in an ownership TXT content, or None when it is not one (no or foreign heritage).

    Follows external-dns v0.22's parser: quotes trimmed, tokens split on ',', each token split at its first
    '=' (so an owner id containing '=' is kept whole), a token without '=' ignored.
    """
    labels: dict[str, str] = {}
    heritage_found = False
    for token in text.strip('"').split(","):
        key, sep, value = token.partition("=")
        if not sep:
            continue
        if key == "heritage":
            if value != HERITAGE:
                return None
            heritage_found = True
        elif key.startswith(HERITAGE):
            labels[key.removeprefix(HERITAGE + "/")] = value
    return labels if heritage_found else None


@dataclass(slots=True)
class OwnershipResult:
    """`with_ownership`'s answer: the changes to send to the provider, and what was refused and why."""

    changes: Changes
    skipped: list[Skipped] = field(default_factory=list)


@dataclass(slots=True)
class ZoneView:
    """One zone as `TxtRegistry.read` found it.

    `current` holds every record except the ownership TXT records, each labelled with the owner and resource
    of its TXT record (external-dns's Records()). The rest indexes what `with_ownership` needs to write TXT
    changes that match the zone: the TXT records as listed, the owners per (name, set identifier), and the
    records of ours that only have a legacy TXT record.
    """

    current: list[Endpoint]
    ownership_txts: dict[TxtKey, Endpoint]
    # (name, set identifier) -> owner of a managed record there that is not ours ("" when unowned)
    foreign_rows: dict[tuple[str, str], str]
    owner_by_key: dict[Key, str]
    upgrades: list[Endpoint]
    # (legacy TXT name, set identifier) -> keys of the non-AAAA records it may label; only TXT records
    # whose name parses as untyped count, so a typed record is never mistaken for a legacy one
    legacy_users: dict[TxtKey, list[Key]]
    # records whose typed TXT record names the --migrate-from-txt-owner id: that TXT record is rewritten
    migrations: list[Endpoint] = field(default_factory=list)


class Registry(Protocol):
    """What the worker asks of a registry (external-dns's Registry): the owner id the planner works for
    ("" for none: every record is ours), the managed record types, and the two pure steps of a reconcile."""

    @property
    def owner_id(self) -> str: ...

    @property
    def managed_types(self) -> frozenset[str]: ...

    def read(self, records: Iterable[Endpoint]) -> ZoneView: ...

    def with_ownership(self, changes: Changes, view: ZoneView | None = None) -> OwnershipResult: ...


class TxtRegistry:
    """external-dns's TXT registry for one owner id, as pure functions over a zone's records."""

    __slots__ = ("managed_types", "mapper", "old_owner_id", "owner_id")

    def __init__(
        self,
        owner_id: str = DEFAULT_OWNER_ID,
        prefix: str = "",
        suffix: str = "",
        wildcard_replacement: str = "",
        managed_types: Collection[str] = DEFAULT_MANAGED_TYPES,
        exclude_types: Collection[str] = (),
        old_owner_id: str = "",
    ) -> None:
        if not owner_id:
            raise RegistryConfigError("owner id cannot be empty")
        self.owner_id = owner_id
        self.old_owner_id = old_owner_id if old_owner_id != owner_id else ""
        self.mapper = TxtNameMapper(prefix, suffix, wildcard_replacement)
        # external-dns's IsManagedRecord: managed and not excluded (--exclude-record-types wins)
        self.managed_types = frozenset(t.upper() for t in managed_types) - {t.upper() for t in exclude_types}

    # -- reading -------------------------------------------------------------------------------------

    def read(self, records: Iterable[Endpoint]) -> ZoneView:
        """Split a zone's records into endpoints and ownership TXT records, and label the endpoints."""
        endpoints: list[Endpoint] = []
        txts: dict[TxtKey, Endpoint] = {}
        label_map: dict[Key, dict[str, str]] = {}
        legacy_txts: set[TxtKey] = set()
        for record in records:
            if record.record_type != "TXT":
                endpoints.append(record)
                continue
            if not record.targets:
                continue  # external-dns drops a TXT record without a value (routing-policy records)
            labels = parse_labels(record.targets[0])
            if labels is None:
                endpoints.append(record)  # an ordinary TXT record, not an ownership one
                continue
            name, rtype = self.mapper.endpoint_name(record.dns_name)
            label_map[(name, rtype, record.set_identifier)] = labels
            if len(record.targets) > 1:
                # Only the ownership value is ours to rewrite or delete, not the RRset's other strings.
                record = replace(record, targets=record.targets[:1])
            txts[(record.dns_name, record.set_identifier)] = record
            if not rtype:
                legacy_txts.add((record.dns_name, record.set_identifier))

        current: list[Endpoint] = []
        foreign_rows: dict[tuple[str, str], str] = {}
        owner_by_key: dict[Key, str] = {}
        upgrades: list[Endpoint] = []
        migrations: list[Endpoint] = []
        legacy_users: dict[TxtKey, list[Key]] = {}
        replacement = self.mapper.wildcard_replacement
        for ep in endpoints:
            name, rtype, set_id = ep.dns_name, ep.record_type, ep.set_identifier
            if replacement and name.startswith("*."):
                name = replacement + name[1:]
            elif replacement and name == "*":
                name = replacement
            labels = label_map.get((name, rtype, set_id)) if label_map else None
            typed = labels is not None
            if not typed and label_map and rtype == "A" and ep.alias_type in ("true", "A"):
                # external-dns wrote A alias records' TXT under `cname-` before v0.22 (its issue #2903);
                # v0.22 falls back to it so ownership survives, and the typed `a-` record is then added.
                labels = label_map.get((name, "CNAME", set_id))
            if labels is None and label_map and rtype != "AAAA":
                labels = label_map.get((name, "", set_id))
            if labels:
                ep = Endpoint(
                    dns_name=ep.dns_name,
                    record_type=rtype,
                    targets=ep.targets,
                    ttl=ep.ttl,
                    set_identifier=set_id,
                    labels={**ep.labels, **labels},
                    provider_specific=ep.provider_specific,
                )
            migrated = bool(self.old_owner_id) and ep.labels.get(OWNER_LABEL) == self.old_owner_id
            if migrated:  # external-dns's Records(): the old owner's records are relabelled ours
                ep = ep.with_labels(**{OWNER_LABEL: self.owner_id})
            current.append(ep)
            key = (ep.dns_name, rtype, set_id)
            owner = ep.labels.get(OWNER_LABEL, "")
            if migrated and typed and rtype in self.managed_types:
                migrations.append(ep)
            owner_by_key[key] = owner
            managed = rtype in self.managed_types
            if managed and owner != self.owner_id:
                foreign_rows.setdefault((ep.dns_name, set_id), owner)
            if legacy_txts and rtype != "AAAA":
                legacy = (self.mapper.legacy_txt_name(ep.dns_name), set_id)
                if legacy in legacy_txts:
                    legacy_users.setdefault(legacy, []).append(key)
            # external-dns upgrades records of ours that lack the typed TXT record (it forces an update
            # whose new TXT record is the typed one); here the typed record is simply created.
            # A typed name with a label over 63 characters cannot be written, so external-dns forces no
            # update for it (its generateTXTRecord returns nothing); neither do we.
            typed_name = self.mapper.txt_name(ep.dns_name, rtype)
            if (
                managed
                and owner == self.owner_id
                and txts
                and not typed
                and (typed_name, set_id) not in txts
                and txt_name_fits(typed_name)
            ):
                upgrades.append(ep)
        return ZoneView(current, txts, foreign_rows, owner_by_key, upgrades, legacy_users, migrations)

    def to_current(self, records: Iterable[Endpoint]) -> list[Endpoint]:
        """The zone's endpoints labelled with their owner and resource; ownership TXT records left out."""
        return self.read(records).current

    # -- writing -------------------------------------------------------------------------------------

    def ownership_record(self, ep: Endpoint) -> Endpoint:
        """The typed TXT record that says we own `ep` (owner label forced to ours).

        Internal `shardsync/` labels stay out of the content, so it is what external-dns would write.
        """
        labels = {
            k: v
            for k, v in ep.labels.items()
            if not k.startswith(INTERNAL_LABEL_PREFIX) and k != OWNED_RECORD_LABEL
        }
        labels[OWNER_LABEL] = self.owner_id
        return Endpoint(
            dns_name=self.mapper.txt_name(ep.dns_name, ep.record_type),
            record_type="TXT",
            targets=(serialize_labels(labels),),
            set_identifier=ep.set_identifier,
            labels={OWNED_RECORD_LABEL: ep.dns_name},
            provider_specific=ep.provider_specific,
        )

    def _owned(self, ep: Endpoint, view: ZoneView | None) -> bool:
        if ep.labels.get(OWNER_LABEL) != self.owner_id:
            return False
        # The view, when there is one, is what the zone says: a caller's label cannot claim a record.
        return view is None or view.owner_by_key.get(ep.key, self.owner_id) == self.owner_id

    def _txt_owned(self, txt: Endpoint) -> bool:
        labels = parse_labels(txt.targets[0]) if txt.targets else None
        owner = labels.get(OWNER_LABEL) if labels is not None else None
        return owner is not None and owner in (self.owner_id, self.old_owner_id or self.owner_id)

    def with_ownership(self, changes: Changes, view: ZoneView | None = None) -> OwnershipResult:
        """`changes` restricted to what we may do, plus the TXT changes that keep ownership in step.

        With the `view` the zone was read into, TXT records are written only where needed (an existing
        typed record is not re-created, one with the same content not rewritten), deleted with the value
        the zone holds, legacy records of ours get their typed record, and a legacy TXT record goes when
        the last record it labels does. Without a view it behaves as external-dns's ApplyChanges.
        """
        out = Changes()
        skipped: list[Skipped] = []
        txts = view.ownership_txts if view is not None else {}
        deleted: set[Key] = set()
        handled: set[Key] = set()

        for ep in changes.delete:
            if not self._owned(ep, view):
                skipped.append(Skipped(ep, SkipReason.NOT_OWNED, ep.labels.get(OWNER_LABEL, "")))
                continue
            out.delete.append(ep)
            deleted.add(ep.key)
            txt = self.ownership_record(ep)
            stored = txts.get((txt.dns_name, txt.set_identifier))
            if not txt_name_fits(txt.dns_name):
                continue  # no typed TXT record can exist under a name with a too-long label
            if view is None:
                out.delete.append(txt)
            elif stored is not None and self._txt_owned(stored):
                out.delete.append(stored)

        for old, new in zip(changes.update_old, changes.update_new, strict=True):
            if not self._owned(old, view):
                skipped.append(Skipped(new, SkipReason.NOT_OWNED, old.labels.get(OWNER_LABEL, "")))
                continue
            if new.labels.get(OWNER_LABEL) != self.owner_id:
                new = new.with_labels(**{OWNER_LABEL: self.owner_id})
            out.update_old.append(old)
            out.update_new.append(new)
            handled.add(old.key)
            handled.add(new.key)
            old_txt = self.ownership_record(old)
            new_txt = self.ownership_record(new)
            if not txt_name_fits(new_txt.dns_name):
                continue  # same key, same TXT name: external-dns writes no TXT change for it either
            if view is None:
                out.update_old.append(old_txt)
                out.update_new.append(new_txt)
                continue
            old_stored = txts.get((old_txt.dns_name, old_txt.set_identifier))
            if (old_txt.dns_name, old_txt.set_identifier) != (new_txt.dns_name, new_txt.set_identifier):
                if old_stored is not None and self._txt_owned(old_stored):
                    out.delete.append(old_stored)
                old_stored = txts.get((new_txt.dns_name, new_txt.set_identifier))
            self._put_txt(out, new_txt, old_stored)

        for ep in changes.create:
            row_owner = view.foreign_rows.get((ep.dns_name, ep.set_identifier)) if view else None
            if row_owner is not None:
                skipped.append(Skipped(ep, SkipReason.FOREIGN_OWNER, row_owner))
                continue
            txt = self.ownership_record(ep)
            if not txt_name_fits(txt.dns_name):
                # external-dns creates the record without a TXT record, leaving one it can never claim,
                # update or delete again; we do not create what we could not own (README: Differences).
                skipped.append(Skipped(ep, SkipReason.TXT_NAME_TOO_LONG))
                continue
            stored = txts.get((txt.dns_name, txt.set_identifier))
            if stored is not None and not self._txt_owned(stored):
                # Another owner's claim on exactly this RRset, even with the record itself gone.
                labels = parse_labels(stored.targets[0]) or {}
                skipped.append(Skipped(ep, SkipReason.FOREIGN_OWNER, labels.get(OWNER_LABEL, "")))
                continue
            if ep.labels.get(OWNER_LABEL) != self.owner_id:
                ep = ep.with_labels(**{OWNER_LABEL: self.owner_id})
            out.create.append(ep)
            self._put_txt(out, txt, stored)

        if view is not None:
            for ep in view.upgrades:
                if ep.key not in deleted and ep.key not in handled:
                    out.create.append(self.ownership_record(ep))
            for ep in view.migrations:
                if ep.key not in deleted and ep.key not in handled:
                    txt = self.ownership_record(ep)
                    self._put_txt(out, txt, txts.get((txt.dns_name, txt.set_identifier)))
            if deleted:
                for (legacy_name, set_id), users in view.legacy_users.items():
                    stored = txts[(legacy_name, set_id)]
                    if all(k in deleted for k in users) and self._txt_owned(stored):
                        out.delete.append(stored)
        return OwnershipResult(out, skipped)

    @staticmethod
    def _put_txt(out: Changes, txt: Endpoint, stored: Endpoint | None) -> None:
        if stored is None:
            out.create.append(txt)
        elif stored.targets != txt.targets:
            out.update_old.append(stored)
            out.update_new.append(txt)
