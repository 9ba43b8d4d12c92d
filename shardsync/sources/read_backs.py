"""Which of a kind's own objects wait for related objects to be read back before their translation.

A sharded replica keeps only the related objects its translator reads (`Translator.admits`: the Pods and
EndpointSlices of the Services it runs). When an object comes to read more (a Service read back for a
gained zone, created, or given a new selector), what it now reads may have been left out: it is read
back first (`SourceContext.read_back`), and until every read back asked for it is in, the object's
translation answers `NOT_YET` (its endpoints stay as they were). Then it is queued again
(`SourceContext.retranslate`). A translation from half its inputs would plan records away.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from shardsync.kube.objects import Resource

ReadBack = Callable[[Resource, str, str, Callable[[], None]], bool]


class _Waiting:
    """The read backs one object still waits for (a new wait for the same key counts on, a forgotten
    key's old waits are ignored: they hold another `_Waiting`)."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = 0


class ReadBacks:
    """See the module docstring: `read_back` and `retranslate` are the SourceContext's."""

    def __init__(self, read_back: ReadBack, retranslate: Callable[[Iterable[str]], None]) -> None:
        self._read_back = read_back
        self._retranslate = retranslate
        self._waiting: dict[str, _Waiting] = {}

    def ask(self, key: str, wanted: Iterable[tuple[Resource, str, str]]) -> None:
        """Object `key` now reads these related objects (resource, namespace, labelSelector)."""
        waiting = self._waiting.get(key) or _Waiting()
        for resource, namespace, selector in wanted:
            if self._read_back(resource, namespace, selector, lambda: self._done(key, waiting)):
                waiting.left += 1
                self._waiting[key] = waiting

    def _done(self, key: str, waiting: _Waiting) -> None:
        waiting.left -= 1
        if waiting.left <= 0 and self._waiting.get(key) is waiting:
            del self._waiting[key]
            self._retranslate((key,))

    def waits(self, key: str) -> bool:
        return key in self._waiting

    def cancel(self, key: str) -> None:
        """The object is gone or forgotten: what was asked for it no longer matters to it."""
        self._waiting.pop(key, None)
