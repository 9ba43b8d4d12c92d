"""Small builders shared by the sharding tests."""

from __future__ import annotations

from dataclasses import replace

from shardsync.sharding.membership import MemberStatus
from shardsync.sharding.states import MemberState


def status(
    identity: str,
    state: MemberState = MemberState.READY,
    *,
    weight: int = 1,
    acked: int | None = None,
    last_change: float = 1000.0,
    as_of: float | None = None,
    lease_duration: float = 15.0,
    held: bool = True,
    renew_time: str | None = None,
) -> MemberStatus:
    """A member as an observer sees it; `last_change` and `as_of` are on the observer's monotonic clock
    (`as_of` defaults to `last_change`, or to the instant its lease lapsed for an EXPIRED member)."""
    if as_of is None:
        as_of = last_change + lease_duration if state is MemberState.EXPIRED else last_change
    return MemberStatus(
        identity=identity,
        state=state,
        weight=weight,
        observed_generation=acked,
        lease_duration=lease_duration,
        last_change=last_change,
        as_of=as_of,
        held=held,
        draining=state is MemberState.DRAINING,
        restarting=state is MemberState.RESTARTING,
        renew_time=renew_time,
    )


def ready(*identities: str, now: float = 1000.0, acked: int | None = None) -> dict[str, MemberStatus]:
    return {i: status(i, last_change=now, acked=acked) for i in identities}


def up_to_date(statuses: dict[str, MemberStatus], generation: int | None) -> dict[str, MemberStatus]:
    """The same members, each having acknowledged `generation` (None: left as they are)."""
    if generation is None:
        return statuses
    return {i: replace(s, observed_generation=generation) for i, s in statuses.items()}
