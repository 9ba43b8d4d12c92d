"""Paged lists as the API server answers them: objects in etcd key order, `limit` per page, and a `continue`
token naming the resource version and the last key given (Kubernetes' pagination, `metav1.ListOptions`).

`page` reads a resource's keys in list order (the store keeps them sorted until a key comes or goes), so
each page finds its start by bisection and stops once it has `limit` objects: a list of N objects in pages
of L costs O(N) in all, not O(N²/L).
"""

from __future__ import annotations

import base64
import bisect
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from shardsync.local.apiserver import meta as m
from shardsync.local.apiserver.errors import bad_request

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); "" for cluster-scoped objects


@dataclass(frozen=True)
class ListResult:
    items: list[Obj]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


def encode_continue(rv: int, start: Key) -> str:
    return base64.urlsafe_b64encode(
        orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(start)})
    ).decode()


def decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise bad_request(f"continue key is not valid: {exc}") from exc


def page(
    keys: Sequence[Key],
    objects: Mapping[Key, Obj],
    rv: int,
    namespace: str | None,
    start: Key | None,
    limit: int,
    keep: Callable[[Obj], bool],
    filtered: bool,
) -> ListResult:
    """One page of the objects at `keys` (sorted) that `keep` accepts, after `start`, in `namespace` (None:
    all); `remaining` is counted only when no selector `filtered` the list, as the API server does."""
    lo, hi = 0, len(keys)
    if namespace is not None:  # a namespace's keys are contiguous: from (ns, "") to (ns + "\0", "")
        lo, hi = bisect.bisect_left(keys, (namespace, "")), bisect.bisect_left(keys, (namespace + "\0", ""))
    if start is not None:
        lo = max(lo, bisect.bisect_right(keys, start))
    matched: list[Obj] = []
    for key in itertools.islice(keys, lo, hi):
        obj = objects.get(key)  # None: removed since the keys were read
        if obj is not None and keep(obj):
            matched.append(obj)
            if 0 < limit < len(matched):
                break
    if limit <= 0 or len(matched) <= limit:
        return ListResult(matched, rv)
    items = matched[:limit]
    last = m.metadata(items[-1])
    token = encode_continue(rv, (str(last.get("namespace") or ""), str(last.get("name") or "")))
    return ListResult(items, rv, token, None if filtered else hi - lo - limit)
