"""How the providers that write a plan in all-or-nothing batches (aws, google, cloudflare) send it.

`apply_in_batches` sends the batches in order, `interval` apart, each after the first paced by the provider
budget (base.Pacer). A batch the API refuses for its content is sent again one record group at a time (a
record and its TXT ownership record, kept in one batch by the provider's split), as external-dns falls back
to single records: the records of the groups still refused are reported together (RecordsRejectedError)
while every other change applies. What a batch is, how it is sent and which error means "refused for its
content" are the provider's (its batches.py and provider.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

import anyio

from shardsync.endpoint import Endpoint
from shardsync.logs import KVLogger
from shardsync.providers.base import (
    Pacer,
    PartlyAppliedError,
    RecordsRejectedError,
    Rejected,
    ThrottledError,
    UnreachableError,
)


class Grouped(Protocol):
    """One change of a batch: the endpoint it writes and the record group it belongs to."""

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def group(self) -> str: ...


G = TypeVar("G", bound=Grouped)

# Sends one batch (its changes, its index among the call's batches, how many there are); raises the
# provider's "refused for its content" error when the API applied none of it for that.
Send = Callable[[list[G], int, int], Awaitable[None]]
RejectedOf = Callable[[Sequence[G], Exception], list[Rejected]]


def each_rejected(batch: Sequence[Grouped], error: Exception) -> list[Rejected]:
    """Every change of a refused batch as a rejected record, with the API's reason."""
    return [Rejected(change.endpoint, str(error)) for change in batch]


async def apply_in_batches(
    log: KVLogger,
    provider: str,
    zone: str,
    batches: Sequence[list[G]],
    send: Send[G],
    *,
    refused: type[Exception],
    interval: float,
    pacer: Pacer,
    rejected_of: RejectedOf[G] = each_rejected,
    already_rejected: Sequence[Rejected] = (),
    partly_applied: bool = False,
) -> None:
    """Send `batches` (module docstring); RecordsRejectedError names the records still refused at the end,
    after `already_rejected` (those the provider refused before sending anything).

    `partly_applied`: a batch throttled or unreachable after earlier ones applied raises PartlyAppliedError
    (the worker plans again from a fresh read), not the error as it came."""

    async def one_group_at_a_time(batch: list[G], error: Exception) -> list[Rejected]:
        groups: dict[str, list[G]] = {}
        for change in batch:
            groups.setdefault(change.group, []).append(change)
        if len(groups) == 1:
            return rejected_of(batch, error)
        log.info(
            f"{provider} batch refused; sending its records one group at a time",
            zone=zone,
            groups=len(groups),
        )
        still: list[Rejected] = []
        for group in groups.values():
            await pacer("apply")
            try:
                await send(group, 0, 1)
            except refused as exc:
                still.extend(rejected_of(group, exc))
        return still

    rejected = list(already_rejected)
    for index, batch in enumerate(batches):
        if index:
            await anyio.sleep(interval)
            await pacer("apply")
        try:
            await send(batch, index, len(batches))
        except refused as exc:
            rejected.extend(await one_group_at_a_time(batch, exc))
        except (ThrottledError, UnreachableError) as exc:
            if not (partly_applied and index):
                raise
            raise PartlyAppliedError(
                f"zone {zone}: {index} of {len(batches)} batch(es) applied, then: {exc}"
            ) from None
    if rejected:
        raise RecordsRejectedError(zone, rejected)
