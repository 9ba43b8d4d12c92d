"""An informer cache that keeps each object as its compact JSON, decoded when read.

A parsed JSON object costs Python 3-5 times its JSON size: every dict, list and string is an object of its
own with its header, hash table and pointers (a slim Pod's few fields come to ~1.4 KiB parsed, 340 bytes as
JSON; a DNSEndpoint's to 2.2 KiB against 600). The caches a source reads by key (its own objects, the Pods
and EndpointSlices of one Service) hold tens of thousands of objects and read a few at a time, so they keep
the bytes and decode a read (orjson: about a microsecond for a slim object). A cache that is read whole on
every translation (Nodes, Gateways) stays a plain dict: decoding all of it each time would cost more CPU
than its memory is worth.

Each read returns a fresh object: callers never change cached objects in place (an event replaces an
object whole), and nothing may rely on two reads being the same object.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import orjson

Obj = dict[str, Any]


class PackedCache(MutableMapping[str, Obj]):
    """A `key → object` mapping storing each object as orjson bytes (see the module docstring)."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def __getitem__(self, key: str) -> Obj:
        value: Obj = orjson.loads(self._data[key])
        return value

    def get(self, key: str, default: Any = None) -> Any:
        raw = self._data.get(key)
        return default if raw is None else orjson.loads(raw)

    def __setitem__(self, key: str, value: Obj) -> None:
        # orjson.dumps answers in a bytes object of at least 4 KiB whatever the length (measured: 4,097
        # bytes held for 258 of JSON); a copy is the exact size.
        self._data[key] = memoryview(orjson.dumps(value)).tobytes()

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def pop(self, key: str, *default: Any) -> Any:
        raw = self._data.pop(key, None)
        if raw is None:
            if default:
                return default[0]
            raise KeyError(key)
        return orjson.loads(raw)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def packed_bytes(self) -> int:
        """The JSON bytes held (for inspection and tests)."""
        return sum(len(v) for v in self._data.values())
