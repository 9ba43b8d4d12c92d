"""How the providers that write a plan in all-or-nothing batches (aws, google, cloudflare) send it.

A provider's `BatchWriter` (its name, the error that means "refused for its content", the pause between
batches) sends the batches of each `apply` in order, each after the first paced by the provider budget
(base.Pacer). A batch the API refuses for its content is sent again one record group at a time (a
record and its TXT ownership record, kept in one batch by the provider's split), as external-dns falls back
to single records: the records of the groups still refused are reported together (RecordsRejectedError)
while every other change applies. What a batch is, how it is sent and which error means "refused for its
content" are the provider's (its batches.py and provider.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import anyio

from shardsync.logs import KVLogger
from shardsync.providers.base import (
    Pacer,
    PartlyAppliedError,
    RecordsRejectedError,
    Rejected,
    ThrottledError,
    UnreachableError,
)
from shardsync.providers.packing import Grouped, by_group
from shardsync.records.endpoint import Endpoint


class GroupedChange(Grouped, Protocol):
    """One change of a batch: the endpoint it writes, and the record group it belongs to (packing.py)."""

    @property
    def endpoint(self) -> Endpoint: ...


G = TypeVar("G", bound=GroupedChange)

# Sends one batch (its changes, its index among the call's batches, how many there are); raises the
# provider's "refused for its content" error when the API applied none of it for that.
Send = Callable[[list[G], int, int], Awaitable[None]]
RejectedOf = Callable[[Sequence[G], Exception], list[Rejected]]


def each_rejected(batch: Sequence[GroupedChange], error: Exception) -> list[Rejected]:
    """Every change of a refused batch as a rejected record, with the API's reason."""
    return [Rejected(change.endpoint, str(error)) for change in batch]


@dataclass(frozen=True, slots=True)
class BatchWriter(Generic[G]):
    """How one provider sends a plan's batches (module docstring).

    `refused`: the provider's error for a batch refused for its content; `interval`: the pause between two
    batches of one call; `rejected_of`: the records a refused batch reports (default: each change's);
    `partly_applied`: a batch throttled or unreachable after earlier ones applied raises PartlyAppliedError
    (the worker plans again from a fresh read), not the error as it came."""

    log: KVLogger
    provider: str
    refused: type[Exception]
    interval: float = 1.0
    rejected_of: RejectedOf[G] = each_rejected
    partly_applied: bool = False

    async def write(
        self,
        zone: str,
        batches: Sequence[list[G]],
        send: Send[G],
        pacer: Pacer,
        *,
        already_rejected: Sequence[Rejected] = (),
    ) -> None:
        """Send `batches` through `send`, each after the first paced by `pacer`; RecordsRejectedError names
        the records still refused at the end, after `already_rejected` (refused before anything was sent)."""
        rejected = list(already_rejected)
        for index, batch in enumerate(batches):
            if index:
                await anyio.sleep(self.interval)
                await pacer("apply")
            try:
                await send(batch, index, len(batches))
            except self.refused as exc:
                rejected.extend(await self._one_group_at_a_time(zone, batch, exc, send, pacer))
            except (ThrottledError, UnreachableError) as exc:
                if not (self.partly_applied and index):
                    raise
                raise PartlyAppliedError(
                    f"zone {zone}: {index} of {len(batches)} batch(es) applied, then: {exc}"
                ) from None
        if rejected:
            raise RecordsRejectedError(zone, rejected)

    async def _one_group_at_a_time(
        self, zone: str, batch: list[G], error: Exception, send: Send[G], pacer: Pacer
    ) -> list[Rejected]:
        """A refused batch again, one record group per request: the records of the groups still refused."""
        groups = by_group(batch)
        if len(groups) == 1:
            return self.rejected_of(batch, error)
        self.log.info(
            f"{self.provider} batch refused; sending its records one group at a time",
            zone=zone,
            groups=len(groups),
        )
        rejected: list[Rejected] = []
        for group in groups.values():
            await pacer("apply")
            try:
                await send(group, 0, 1)
            except self.refused as exc:
                rejected.extend(self.rejected_of(group, exc))
        return rejected
