"""The pure half of the RFC 2136 provider: targets ↔ rdata, TSIG keys, batched UPDATEs, AXFR → endpoints.

No I/O here, so every rule is tested without a server.

Targets are the presentation form of one record's rdata, as external-dns writes them: `10.0.0.1`,
`2001:db8::1`, `www.example.com` (no final dot), `10 mail.example.com` (MX), `0 5 5060 sip.example.com`
(SRV). TXT is the one type with two spellings:

- a target wrapped in double quotes is zone-file text (`"heritage=external-dns,external-dns/owner=x"`,
  `"part one" "part two"`): the quotes delimit character-strings and are not part of the data. This is
  what external-dns's TXT registry produces, and what external-dns's own rfc2136 provider writes to the wire;
- any other target is the raw value (`v=spf1 -all`), written byte for byte in 255-byte character-strings.

Read back, a TXT record is always rendered quoted (dnspython's presentation form), so a quoted target
round-trips exactly; `written_spelling()` gives the form `records()` returns for any target, for callers
that compare desired with current.

Changes are written in batches of `batch_size` changes per UPDATE message, deletes first, then updates,
then creates: in one zone a CNAME and other data cannot coexist, and a server silently ignores an add that
would break that rule, so the old record must go before the new one arrives. Each message is atomic on
the server; with a fence every message carries the prerequisite "the fence RRset is exactly this value".
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdataset
import dns.rdatatype
import dns.rdtypes.ANY.TXT
import dns.rrset
import dns.tokenizer
import dns.tsig
import dns.update

from shardsync.providers.base import FenceToken, Rejected
from shardsync.records.endpoint import SUPPORTED_TYPES, Changes, Endpoint, normalize_name

TSIG_ALGORITHMS: dict[str, dns.name.Name] = {
    "hmac-md5": dns.tsig.HMAC_MD5,
    "hmac-sha1": dns.tsig.HMAC_SHA1,
    "hmac-sha224": dns.tsig.HMAC_SHA224,
    "hmac-sha256": dns.tsig.HMAC_SHA256,
    "hmac-sha384": dns.tsig.HMAC_SHA384,
    "hmac-sha512": dns.tsig.HMAC_SHA512,
}

MAX_STRING = 255
# A message of ~1,000 A records is ~23 KB; dnspython refuses messages over 64 KB (TooBig near 2,800).
DEFAULT_MAX_RRS_PER_MESSAGE = 1000
_IN = dns.rdataclass.IN
_TXT = dns.rdatatype.TXT
_NAME_TYPES = frozenset({"CNAME", "NS", "PTR"})


def make_tsig_key(keyname: str, secret: str, algorithm: str = "hmac-sha256") -> dns.tsig.Key:
    """A TSIG key from its name, base64 secret and algorithm name; ValueError that never shows the secret."""
    alg = TSIG_ALGORITHMS.get(algorithm.lower().rstrip("."))
    if alg is None:
        raise ValueError(
            f"TSIG algorithm {algorithm!r} is not supported; use one of {', '.join(TSIG_ALGORITHMS)}"
        )
    if not keyname:
        raise ValueError("TSIG key name is empty")
    try:
        raw = base64.b64decode(secret.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        raise ValueError(f"TSIG secret of key {keyname!r} is empty or not valid base64")
    return dns.tsig.Key(keyname, raw, alg)


def absolute(name: str) -> dns.name.Name:
    return dns.name.from_text(normalize_name(name) + ".")


def render_name(name: dns.name.Name) -> str:
    return str(name.to_text(omit_final_dot=True))


# -- targets ↔ rdata -------------------------------------------------------------------------------------


def _chunk(value: bytes) -> list[bytes]:
    """Split a value into character-strings of at most 255 bytes, never inside a UTF-8 sequence."""
    chunks: list[bytes] = []
    while len(value) > MAX_STRING:
        end = MAX_STRING
        while end > 0 and (value[end] & 0xC0) == 0x80:  # a continuation byte: step back to its start
            end -= 1
        if end == 0:
            end = MAX_STRING
        chunks.append(value[:end])
        value = value[end:]
    chunks.append(value)
    return chunks


def is_zone_quoted(target: str) -> bool:
    return len(target) >= 2 and target[0] == '"' and target[-1] == '"'


def txt_strings(target: str) -> list[bytes]:
    """The character-strings a TXT target stands for (see the module docstring for the two spellings)."""
    if not is_zone_quoted(target):
        return _chunk(target.encode("utf-8"))
    strings: list[bytes] = []
    try:
        for token in dns.tokenizer.Tokenizer(target).get_remaining():
            token = token.unescape_to_bytes()
            if not (token.is_quoted_string() or token.is_identifier()):
                raise ValueError(f"TXT target {target!r}: unexpected {token.value!r}")
            strings.extend(_chunk(token.value if isinstance(token.value, bytes) else token.value.encode()))
    except dns.exception.DNSException as exc:
        raise ValueError(f"TXT target {target!r} is not valid zone-file text: {exc}") from exc
    if not strings:
        raise ValueError(f"TXT target {target!r} holds no string")
    return strings


def to_rdata(record_type: str, target: str) -> dns.rdata.Rdata:
    """The rdata a target stands for; ValueError saying why when it cannot be one."""
    rtype = record_type.upper()
    if rtype not in SUPPORTED_TYPES:
        raise ValueError(f"record type {record_type!r} is not managed by this provider")
    if rtype == "TXT":
        return dns.rdtypes.ANY.TXT.TXT(_IN, _TXT, txt_strings(target))
    try:
        return dns.rdata.from_text(_IN, rtype, target, origin=dns.name.root, relativize=False)
    except (dns.exception.DNSException, ValueError) as exc:
        raise ValueError(f"{rtype} target {target!r} is invalid: {exc}") from exc


def to_target(rdata: dns.rdata.Rdata) -> str:
    """The target text of one record, in the form `to_rdata` reads back to the same rdata."""
    rtype = dns.rdatatype.to_text(rdata.rdtype)
    if rtype in _NAME_TYPES:
        return render_name(rdata.target).lower()  # type: ignore[attr-defined]
    if rtype == "MX":
        return f"{rdata.preference} {render_name(rdata.exchange)}"  # type: ignore[attr-defined]
    if rtype == "SRV":
        rd = rdata
        return f"{rd.priority} {rd.weight} {rd.port} {render_name(rd.target)}"  # type: ignore[attr-defined]
    return str(rdata.to_text())


def written_spelling(record_type: str, target: str) -> str:
    """The spelling `records()` returns for a target once written (ValueError if it cannot be written)."""
    return to_target(to_rdata(record_type, target))


# -- fence -------------------------------------------------------------------------------------------------


def fence_rdata(token: FenceToken) -> dns.rdata.Rdata:
    return dns.rdtypes.ANY.TXT.TXT(_IN, _TXT, [token.to_text().encode()])


def fence_rdataset(token: FenceToken, ttl: int = 0) -> dns.rdataset.Rdataset:
    return dns.rdataset.from_rdata_list(ttl, [fence_rdata(token)])


def token_of(rdata: dns.rdata.Rdata) -> FenceToken | None:
    """The fence token a TXT record holds, or None when it holds something else."""
    strings: Sequence[bytes] = getattr(rdata, "strings", ())
    try:
        return FenceToken.from_text(b"".join(strings).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def newest_token(rdataset: dns.rdataset.Rdataset | None) -> FenceToken | None:
    """The newest token in a fence RRset (a healthy fence holds exactly one)."""
    if rdataset is None:
        return None
    tokens = [t for t in (token_of(rd) for rd in rdataset) if t is not None]
    return max(tokens) if tokens else None


# -- UPDATE messages ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Op:
    """One change, resolved to records: what to remove, then what to add."""

    label: str
    name: dns.name.Name
    remove: dns.rdataset.Rdataset | None
    add: dns.rdataset.Rdataset | None

    @property
    def rr_count(self) -> int:
        return (len(self.remove) if self.remove else 0) + (len(self.add) if self.add else 0)


@dataclass(slots=True)
class UpdateBatch:
    """One UPDATE message and the changes it carries (for logs and error messages)."""

    message: dns.update.UpdateMessage
    labels: list[str] = field(default_factory=list)

    @property
    def changes(self) -> int:
        return len(self.labels)

    def describe(self, limit: int = 5) -> str:
        shown = ", ".join(self.labels[:limit])
        more = len(self.labels) - limit
        return shown + (f" and {more} more" if more > 0 else "")


class UpdateBuilder:
    """Turns one zone's Changes into batched, optionally fenced, UPDATE messages."""

    def __init__(
        self,
        zone: str,
        *,
        key: dns.tsig.Key | None,
        ttl_of: Callable[[Endpoint], int],
        batch_size: int = 50,
        reserved: Iterable[str] = (),
        max_rrs_per_message: int = DEFAULT_MAX_RRS_PER_MESSAGE,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch size must be at least 1")
        self.zone = absolute(zone)
        self.key = key
        self.ttl_of = ttl_of
        self.batch_size = batch_size
        self.reserved = {absolute(n) for n in reserved}
        self.max_rrs = max_rrs_per_message

    def build(
        self,
        changes: Changes,
        fence: tuple[str, FenceToken] | None = None,
    ) -> tuple[list[UpdateBatch], list[Rejected]]:
        """Messages to send in order, and the changes rejected before sending (bad name, type or target)."""
        if len(changes.update_old) != len(changes.update_new):
            raise ValueError(
                f"update_old has {len(changes.update_old)} entries, update_new {len(changes.update_new)}"
            )
        ops: list[_Op] = []
        rejected: list[Rejected] = []

        def resolve(ep: Endpoint, old: Endpoint | None, new: Endpoint | None, verb: str) -> None:
            try:
                name = self._owner(ep)
                remove = self._rdataset(old, 0) if old is not None else None
                if old is not None and new is not None and self._owner(old) != name:
                    raise ValueError(f"update renames {old.dns_name} to {new.dns_name}")
                add = self._rdataset(new, self.ttl_of(new)) if new is not None else None
            except ValueError as exc:
                rejected.append(Rejected(ep, str(exc)))
                return
            ops.append(_Op(f"{verb} {ep.dns_name} {ep.record_type}", name, remove, add))

        for ep in changes.delete:
            resolve(ep, ep, None, "delete")
        for old, new in zip(changes.update_old, changes.update_new, strict=True):
            if old.record_type != new.record_type:
                rejected.append(Rejected(new, f"update changes the type from {old.record_type}"))
                continue
            resolve(new, old, new, "update")
        for ep in changes.create:
            resolve(ep, None, ep, "create")
        return self._batches(ops, fence), rejected

    def _owner(self, ep: Endpoint) -> dns.name.Name:
        try:
            name = absolute(ep.dns_name)
        except dns.exception.DNSException as exc:
            raise ValueError(f"invalid name: {exc}") from exc
        if not name.is_subdomain(self.zone):
            raise ValueError(f"not in zone {render_name(self.zone)} (NOTZONE)")
        if name in self.reserved:
            raise ValueError("name is reserved for shardsync's write fence")
        if ep.record_type not in SUPPORTED_TYPES:
            raise ValueError(f"record type {ep.record_type!r} is not managed by this provider")
        return name

    def _rdataset(self, ep: Endpoint, ttl: int) -> dns.rdataset.Rdataset:
        if not ep.targets:
            raise ValueError("no targets")
        return dns.rdataset.from_rdata_list(ttl, [to_rdata(ep.record_type, t) for t in ep.targets])

    def _batches(self, ops: list[_Op], fence: tuple[str, FenceToken] | None) -> list[UpdateBatch]:
        batches: list[UpdateBatch] = []
        current: UpdateBatch | None = None
        rrs = 0
        for op in ops:
            if (
                current is None
                or current.changes >= self.batch_size
                or (rrs and rrs + op.rr_count > self.max_rrs)
            ):
                current = UpdateBatch(self._new_message(fence))
                batches.append(current)
                rrs = 0
            # Appended as separate RRsets, not merged through dnspython's add()/delete(): the server applies
            # the update section in order, and merging a later add into an earlier RRset would reorder it.
            if op.remove is not None:
                current.message.update.append(_rrset(op.name, op.remove, deleting=True))
            if op.add is not None:
                current.message.update.append(_rrset(op.name, op.add, deleting=False))
            current.labels.append(op.label)
            rrs += op.rr_count
        return batches

    def _new_message(self, fence: tuple[str, FenceToken] | None) -> dns.update.UpdateMessage:
        return update_message(self.zone, self.key, fence)


def update_message(
    zone: dns.name.Name, key: dns.tsig.Key | None, fence: tuple[str, FenceToken] | None
) -> dns.update.UpdateMessage:
    """An UPDATE of `zone`, signed with `key`, with the prerequisite "the fence `(name, token)` is exactly
    this token" when given. Sent as it is (no update section), it checks the fence and changes nothing."""
    msg = dns.update.UpdateMessage(zone)
    if key is not None:
        msg.use_tsig(key)
    if fence is not None:
        fence_name, token = fence
        msg.present(absolute(fence_name), fence_rdataset(token))
    return msg


def _rrset(name: dns.name.Name, rdataset: dns.rdataset.Rdataset, *, deleting: bool) -> dns.rrset.RRset:
    """An update-section RRset: class IN to add records, class NONE (TTL 0) to delete exactly these."""
    rrset = dns.rrset.RRset(name, _IN, rdataset.rdtype, deleting=dns.rdataclass.NONE if deleting else None)
    rrset.update_ttl(0 if deleting else rdataset.ttl)
    for rd in rdataset:
        rrset.add(rd)
    return rrset


def fence_update(
    zone: str,
    fence_name: str,
    expected: dns.rdataset.Rdataset | None,
    token: FenceToken,
    *,
    key: dns.tsig.Key | None,
    ttl: int,
) -> dns.update.UpdateMessage:
    """The compare-and-set of the fence: replace it with `token` only if it is exactly `expected`
    (or, with `expected` None, only if there is no fence at all)."""
    name = absolute(fence_name)
    msg = dns.update.UpdateMessage(absolute(zone))
    if key is not None:
        msg.use_tsig(key)
    if expected is None:
        msg.absent(name, _TXT)
    else:
        msg.present(name, dns.rdataset.from_rdata_list(0, list(expected)))  # prerequisites carry TTL 0
    msg.replace(name, fence_rdataset(token, ttl))
    return msg


# -- AXFR → endpoints --------------------------------------------------------------------------------------


def endpoints_from_rrsets(
    zone: str, rrsets: Iterable[dns.rrset.RRset], *, skip: Iterable[str] = ()
) -> list[Endpoint]:
    """One Endpoint per (name, type) of the managed types, all targets, the RRset's TTL.

    SOA is never listed (it is the server's), nor names in `skip` (the fence). The apex NS RRset is listed,
    as external-dns lists it: the registry leaves it alone unless an owner record claims it.
    """
    origin = absolute(zone)
    skipped = {absolute(n) for n in skip}
    grouped: dict[tuple[dns.name.Name, str], tuple[int, list[str]]] = {}
    for rrset in rrsets:
        rtype = dns.rdatatype.to_text(rrset.rdtype)
        if rrset.rdclass != _IN or rtype not in SUPPORTED_TYPES:
            continue
        if rrset.name in skipped or not rrset.name.is_subdomain(origin):
            continue
        key = (rrset.name, rtype)
        ttl, targets = grouped.get(key, (rrset.ttl, []))
        # A large RRset may arrive split over several AXFR messages: merge, keeping the lowest TTL.
        grouped[key] = (min(ttl, rrset.ttl), targets + [to_target(rd) for rd in rrset])
    return [
        Endpoint.new(render_name(name), rtype, targets, ttl=ttl)
        for (name, rtype), (ttl, targets) in grouped.items()
    ]
