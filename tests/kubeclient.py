"""Typed edges of the official kubernetes client, for tests that drive a server through it.

The generated models declare every field optional, the typed API methods want model instances where the
tests send raw JSON on purpose, some responses are typed `object`, and `watch.Watch` is unannotated. These
helpers say each of those once, with a runtime check where one is possible, instead of at every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar, cast

import urllib3
from kubernetes import watch
from kubernetes.client import V1ListMeta, V1ObjectMeta

T = TypeVar("T")


class _Object(Protocol):
    @property
    def metadata(self) -> V1ObjectMeta | None: ...


class _List(Protocol):
    @property
    def metadata(self) -> V1ListMeta | None: ...


def present(value: T | None) -> T:
    """`value`, which the server under test must have filled in."""
    assert value is not None
    return value


def meta(obj: _Object) -> V1ObjectMeta:
    return present(obj.metadata)


def name_of(obj: _Object) -> str:
    return present(meta(obj).name)


def version_of(obj: _Object | _List) -> str:
    """The resourceVersion of an object or of a list."""
    metadata = obj.metadata
    assert metadata is not None
    return present(metadata.resource_version)


def raw_body(model: type[T], body: Mapping[str, Any]) -> T:
    """`body` where the typed client wants a `model`. ApiClient.sanitize_for_serialization sends a dict as it
    is, so a test sends exactly the JSON it wrote (camelCase keys, fields a model would drop); only the
    static type changes."""
    return cast(T, body)


def as_dict(value: object) -> dict[str, Any]:
    """A response the client types as `object` (custom objects, some deletes): a JSON object here."""
    assert isinstance(value, dict), type(value)
    return cast(dict[str, Any], value)


def unparsed(response: object) -> bytes:
    """The body of a call made with `_preload_content=False`, which returns the urllib3 response whatever
    the method's annotation says."""
    assert isinstance(response, urllib3.BaseHTTPResponse), type(response)
    return response.data


class Watch:
    """`kubernetes.watch.Watch` with types: events are dicts with "type", "object" and "raw_object"."""

    def __init__(self) -> None:
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]  # the client's Watch is unannotated

    def stream(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        events: Iterator[dict[str, Any]] = self._watch.stream(fn, *args, **kwargs)  # type: ignore[no-untyped-call]
        return events

    def stop(self) -> None:
        self._watch.stop()  # type: ignore[no-untyped-call]
