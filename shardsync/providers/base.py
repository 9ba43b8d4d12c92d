"""The provider interface every DNS backend implements, and the errors it may raise.

A provider is zone-scoped: `records(zone)` lists one zone, `apply(zone, changes, fence)` writes one zone.
Writes are fenced (design §2 rule 8): `acquire_fence(zone, token)` stores a token (writer identity and
assignment generation) in the zone itself, and every `apply` with that token is conditional on it still
being there, so the provider refuses a stale owner's write whatever the clocks did. The fence record is
the provider's own business: `records()` never returns it. A provider that can fence only when its server
says so (the webhook's fence extension) answers `fences_writes()` (NegotiatesFencing); when it cannot, its
tokens are checked in this process only and the replicas rest on the lease protocol's timing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from shardsync.records.endpoint import Changes, Endpoint


@dataclass(frozen=True, slots=True, order=True)
class FenceToken:
    """Who may write a zone: the owner's identity at an assignment generation.

    Ordered by generation first, so a newer assignment's token always supersedes an older one.
    """

    generation: int
    identity: str

    def to_text(self) -> str:
        return f"identity={self.identity},generation={self.generation}"

    @classmethod
    def from_text(cls, text: str) -> FenceToken:
        fields = dict(part.split("=", 1) for part in text.strip('"').split(",") if "=" in part)
        try:
            return cls(generation=int(fields["generation"]), identity=fields["identity"])
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a fence token: {text!r}") from exc


# The name of a zone's fence record where a provider keeps it as a TXT record in the zone itself (aws, azure,
# cloudflare, google, rfc2136 and pdns's fence): `_shardsync-fence.<zone>`, outside any name external-dns
# writes (fence_record.py).
FENCE_LABEL = "_shardsync-fence"


def fence_record_name(zone: str) -> str:
    """The fence record's name in `zone` (canonical)."""
    return f"{FENCE_LABEL}.{zone}"


class ProviderError(Exception):
    """A provider call failed. The worker retries it with backoff; it never stops the process."""


class ThrottledError(ProviderError):
    """The provider asked us to slow down (rate limit). A soft error: back off and retry.

    `retry_after`: the seconds the provider asked us to wait (HTTP Retry-After), None when it named none.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FencedError(ProviderError):
    """The zone's fence holds another writer's token: this replica must stop writing the zone."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """A change the provider refused, and why (the rest of the call still applied)."""

    endpoint: Endpoint
    reason: str

    def __str__(self) -> str:
        return f"{self.endpoint.dns_name} {self.endpoint.record_type}: {self.reason}"


class RecordsRejectedError(ProviderError):
    """Some changes were not written (each with its reason); every other change of the call was applied.

    The worker reports each rejected record (Event + metric) and does not retry the zone for it: one bad
    record must never hold back the rest of its zone.
    """

    def __init__(self, zone: str, rejected: list[Rejected]) -> None:
        self.zone = zone
        self.rejected = rejected
        shown = "; ".join(str(r) for r in rejected[:5])
        more = f" (and {len(rejected) - 5} more)" if len(rejected) > 5 else ""
        super().__init__(f"zone {zone}: {len(rejected)} change(s) not written: {shown}{more}")


class BatchRejectedError(ProviderError):
    """The provider refused the whole call because of its content (a record it will not take); nothing was
    applied. The worker splits the changes to find the record(s) at fault and applies the rest."""


class UnreachableError(ProviderError):
    """The provider could not be reached (connection refused, timeout)."""


class PartlyAppliedError(ProviderError):
    """A change that took several requests stopped after some of them applied (throttled or unreachable
    in between: cloudflare's batches, azure's record sets): not retried as it stands, the worker plans the
    zone again from a fresh read."""


# Awaited by a provider before each further API request one of its calls makes (a listing's next page, a
# change split into several batches), with the kind of call: the provider budget paces and counts each
# request that way, not only each call (shardsync.providers.budget).
Pacer = Callable[[str], Awaitable[None]]


async def unpaced(kind: str) -> None:
    return None


@runtime_checkable
class MultiRequest(Protocol):
    """A provider whose calls may take several API requests; its `pacer` is awaited before each extra one."""

    pacer: Pacer


@runtime_checkable
class Provider(Protocol):
    """A DNS backend. All methods are coroutines; blocking clients run in worker threads inside them."""

    name: str

    async def zones(self) -> list[str]:
        """The zones this provider serves (canonical names)."""
        ...

    async def records(self, zone: str) -> list[Endpoint]:
        """Every RRset of the zone, excluding the fence record."""
        ...

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        """Apply all of `changes` to the zone, atomically where the backend allows.

        With `fence`, the write happens only while the zone's fence holds exactly that token; otherwise
        FencedError. Any other failure raises a ProviderError subclass.
        """
        ...

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        """Make `token` the zone's fence (FencedError when another writer's token of the same or a newer
        generation is there; a no-op when `token` itself is).

        A compare-and-set against the value read: two replicas racing for one zone cannot both succeed.
        """
        ...

    async def close(self) -> None: ...


@runtime_checkable
class NegotiatesFencing(Protocol):
    """Optional beside Provider: a provider whose writes are fenced only when its server offers it (a
    webhook server with shardsync's fence extension). `fences_writes()` asks, calling the server if it must
    (ProviderError when it cannot tell yet), and its answer does not change once given. False: `apply` and
    `acquire_fence` still take tokens, but only this process refuses a stale one; a paused replica's late
    write is not refused by the server, so the sharding loops keep the conservative timing
    (shardsync.sharding.timings). A provider without the method fences every write, as Provider says."""

    async def fences_writes(self) -> bool: ...


async def fences_writes(provider: object) -> bool:
    """Whether `provider` (or the one a wrapper holds as `inner`) refuses a stale owner's write itself (see
    NegotiatesFencing)."""
    while provider is not None:
        if isinstance(provider, NegotiatesFencing):
            return await provider.fences_writes()
        provider = getattr(provider, "inner", None)
    return True


@runtime_checkable
class ReadsIfChanged(Protocol):
    """Optional beside Provider: a conditional read, for the steady state (a zone read again every interval
    and found as it was). `records_if_changed(zone, version)` returns the zone's version and its records
    (`records(zone)`), or `(version, None)` without reading the records when the zone is still at
    `version`, the version an earlier answer named. Any change of the zone at the provider, ours or
    anyone's, gives it a new version; a version of None means the provider cannot tell one this time
    (then the caller never passes one). The fake provider has one (an HTTP ETag and 304); a provider
    without one is read in full every time, as external-dns does."""

    async def records_if_changed(
        self, zone: str, version: str | None
    ) -> tuple[str | None, list[Endpoint] | None]: ...


async def read_if_changed(
    provider: Provider, zone: str, version: str | None
) -> tuple[str | None, list[Endpoint] | None]:
    """The provider's conditional read when it has one (ReadsIfChanged), else its plain read, unversioned."""
    # getattr, not isinstance: a runtime protocol check costs more than the rest of a steady reconcile.
    conditional = getattr(provider, "records_if_changed", None)
    if conditional is not None:
        answer: tuple[str | None, list[Endpoint] | None] = await conditional(zone, version)
        return answer
    return None, await provider.records(zone)


@runtime_checkable
class ListsVersions(Protocol):
    """Optional beside ReadsIfChanged: the zone list with each zone's version (the one `records_if_changed`
    names) in one call. A replica lists its zones every interval anyway; with the versions, a zone whose
    version is still the one of its last plan that had nothing to do is verified without a call of its own
    (the provider's state is then at most one zone listing old, as a full read every interval would be).
    `zones_and_versions()` returns the zones and their versions (None: the provider cannot tell them this
    time). The fake provider has it; a provider without it is asked per zone."""

    async def zones_and_versions(self) -> tuple[list[str], dict[str, str] | None]: ...


async def list_zones(provider: Provider) -> tuple[list[str], dict[str, str] | None]:
    """The provider's zones with their versions when it can list them (ListsVersions), else its zones."""
    lister = getattr(provider, "zones_and_versions", None)
    if lister is not None:
        answer: tuple[list[str], dict[str, str] | None] = await lister()
        return answer
    return await provider.zones(), None


@runtime_checkable
class AdjustsDesired(Protocol):
    """Optional beside Provider: a provider that lists records in a form of its own (aws: alias records,
    explicit defaults) rewrites the desired endpoints the same way before they are planned, as external-dns's
    AdjustEndpoints, so records already as wanted plan no change."""

    def adjust_desired(self, endpoints: list[Endpoint]) -> list[Endpoint]: ...


def adjuster_of(provider: object) -> AdjustsDesired | None:
    """The provider, or the one a wrapper (budget, cache) holds as `inner`, that adjusts desired endpoints."""
    while provider is not None:
        if isinstance(provider, AdjustsDesired):
            return provider
        provider = getattr(provider, "inner", None)
    return None
