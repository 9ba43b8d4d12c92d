"""A plan's changes counted by type and split in halves: the arithmetic the worker needs to report what it
applied and to bisect a batch the provider refused whole until the bad record stands alone."""

from __future__ import annotations

from collections.abc import Collection

from shardsync.records.endpoint import Changes, Endpoint


def counts_of(changes: Changes, rejected: Collection[tuple[str, str, str]] = ()) -> dict[str, int]:
    def count(items: list[Endpoint]) -> int:
        return sum(1 for e in items if e.key not in rejected)

    return {
        "create": count(changes.create),
        "update": count(changes.update_new),
        "delete": count(changes.delete),
    }


def halves(changes: Changes) -> tuple[Changes, Changes]:
    """Split a plan in two by position over create + update + delete, keeping each update's two sides."""
    n_create, n_update = len(changes.create), len(changes.update_new)

    def part(lo: int, hi: int) -> Changes:
        def cut(items: list[Endpoint], start: int) -> list[Endpoint]:
            return items[max(lo - start, 0) : max(hi - start, 0)]

        return Changes(
            create=cut(changes.create, 0),
            update_old=cut(changes.update_old, n_create),
            update_new=cut(changes.update_new, n_create),
            delete=cut(changes.delete, n_create + n_update),
        )

    middle = len(changes) // 2
    return part(0, middle), part(middle, len(changes))
