"""Record changes packed into the batches of a provider's API, within its per-batch limits.

`by_group(changes)` gathers the changes by record group (a record and its TXT ownership record, or an
update's two sides: what must land in one batch). `pack(groups, size, cap)` fills batches in order with
whole groups, starting a new batch when the next group would take one of the measures in `size` past `cap`.
A group larger than a whole batch goes alone in a batch of its own, where the API refuses it and the
provider reports its records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")


class Grouped(Protocol):
    """A change that knows its record group."""

    @property
    def group(self) -> str: ...


G = TypeVar("G", bound=Grouped)


def by_group(changes: Iterable[G]) -> dict[str, list[G]]:
    """The changes by record group, the groups in the order they first appear."""
    groups: dict[str, list[G]] = {}
    for change in changes:
        groups.setdefault(change.group, []).append(change)
    return groups


def pack(
    groups: Iterable[Sequence[T]], size: Callable[[Sequence[T]], tuple[int, ...]], cap: tuple[int, ...]
) -> list[list[T]]:
    """The groups as batches within `cap` (module docstring)."""
    batches: list[list[T]] = []
    current: list[T] = []
    used = tuple(0 for _ in cap)
    for group in groups:
        measured = size(group)
        if any(s > c for s, c in zip(measured, cap, strict=True)):
            batches.append(list(group))
            continue
        after = tuple(u + s for u, s in zip(used, measured, strict=True))
        if current and any(a > c for a, c in zip(after, cap, strict=True)):
            batches.append(current)
            current, after = [], measured
        current.extend(group)
        used = after
    if current:
        batches.append(current)
    return batches
