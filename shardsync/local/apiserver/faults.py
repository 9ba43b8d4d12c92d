"""Fault injection: pause the whole API (503 or hang) and cut off chosen clients (by User-Agent substring or
an exact header) or requests (by a substring of their path: one resource) with 503, a hang, or a dropped
connection, for a while or until lifted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["503", "hang", "drop"]
MODES: tuple[Mode, ...] = ("503", "hang", "drop")
HeaderGetter = Callable[[str], str | None]


def check_mode(mode: str) -> Mode:
    for m in MODES:
        if m == mode:
            return m
    raise ValueError(f"unknown fault mode {mode!r}; expected one of {', '.join(MODES)}")


@dataclass(frozen=True)
class Rule:
    mode: Mode
    until: float | None = None
    user_agent: str | None = None
    header: tuple[str, str] | None = None
    path: str | None = None

    def selects(self, user_agent: str, header: HeaderGetter, path: str = "") -> bool:
        if self.user_agent is not None and self.user_agent not in user_agent:
            return False
        if self.path is not None and self.path not in path:
            return False
        return self.header is None or header(self.header[0]) == self.header[1]

    @property
    def target(self) -> tuple[str | None, tuple[str, str] | None, str | None]:
        return self.user_agent, self.header, self.path

    def describe(self, now: float) -> dict[str, Any]:
        left = None if self.until is None else max(0.0, round(self.until - now, 3))
        out: dict[str, Any] = {"mode": self.mode, "secondsLeft": left}
        if self.user_agent is not None:
            out["userAgent"] = self.user_agent
        if self.header is not None:
            out["header"] = f"{self.header[0]}: {self.header[1]}"
        if self.path is not None:
            out["path"] = self.path
        return out


class Faults:
    """What tests drive: in-process here, or over the admin endpoint as admin.RemoteFaults (same methods)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._pause: Rule | None = None
        self._refusals: list[Rule] = []

    def _until(self, seconds: float | None) -> float | None:
        return None if seconds is None else self._clock() + seconds

    def pause(self, seconds: float | None = None, mode: Mode = "503") -> None:
        with self._cond:
            self._pause = Rule(check_mode(mode), self._until(seconds))
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._pause = None
            self._cond.notify_all()

    def refuse(
        self,
        user_agent: str | None = None,
        header: tuple[str, str] | None = None,
        mode: Mode = "503",
        seconds: float | None = None,
        path: str | None = None,
    ) -> None:
        if user_agent is None and header is None and path is None:
            raise ValueError("refuse needs a user_agent substring, a header or a path substring")
        target = (user_agent, header, path)
        with self._cond:
            self._refusals = [r for r in self._refusals if r.target != target]
            self._refusals.append(Rule(check_mode(mode), self._until(seconds), *target))
            self._cond.notify_all()

    def allow(
        self, user_agent: str | None = None, header: tuple[str, str] | None = None, path: str | None = None
    ) -> None:
        """Lifts the refusal of those clients or requests (all refusals when none is given)."""
        target = (user_agent, header, path)
        with self._cond:
            if target == (None, None, None):
                self._refusals = []
            else:
                self._refusals = [r for r in self._refusals if r.target != target]
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._pause = None
            self._refusals = []
            self._cond.notify_all()

    def decide(self, user_agent: str, header: HeaderGetter, path: str = "") -> Mode | None:
        """The fault this request meets, if any. A refusal of this client wins over a general pause."""
        with self._cond:
            if self._pause is None and not self._refusals:
                return None
            now, pause, refusals = self._clock(), self._pause, self._refusals
        for rule in refusals:
            if (rule.until is None or rule.until > now) and rule.selects(user_agent, header, path):
                return rule.mode
        if pause is not None and (pause.until is None or pause.until > now):
            return pause.mode
        return None

    def hold(
        self, user_agent: str, header: HeaderGetter, stopping: Callable[[], bool], path: str = ""
    ) -> Mode | None:
        """Blocks while this request's fault is a hang; returns the fault that remains (None once lifted)."""
        while True:
            mode = self.decide(user_agent, header, path)
            if mode != "hang" or stopping():
                return mode
            with self._cond:
                self._cond.wait(0.1)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def state(self) -> dict[str, Any]:
        with self._cond:
            now = self._clock()
            pause = (
                self._pause
                if self._pause and (self._pause.until is None or self._pause.until > now)
                else None
            )
            return {
                "pause": pause.describe(now) if pause else None,
                "refusals": [r.describe(now) for r in self._refusals if r.until is None or r.until > now],
            }
