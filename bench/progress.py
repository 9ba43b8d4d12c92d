"""What the bench says while it runs: one line per step, and a status line that is redrawn in place on a
terminal (printed at most every few seconds otherwise, so a log stays readable)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, out: TextIO | None = None, every: float = 5.0) -> None:
        self.out = out if out is not None else sys.stdout
        self.tty = self.out.isatty()
        self.every = every
        self.started = time.monotonic()
        self.scenario = ""
        self._status_shown = False
        self._last_status = 0.0

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self.started:6.0f}s]"

    def _clear(self) -> None:
        if self.tty and self._status_shown:
            self.out.write("\r\x1b[2K")
            self._status_shown = False

    def begin(self, scenario: str) -> None:
        self.scenario = scenario
        self.step("started")

    def step(self, text: str) -> None:
        """A line that stays."""
        self._clear()
        prefix = f"{self._stamp()} {self.scenario}: " if self.scenario else f"{self._stamp()} "
        self.out.write(prefix + text + "\n")
        self.out.flush()

    def status(self, text: str) -> None:
        """A line that is replaced by the next one (a terminal) or shown now and then (a log)."""
        now = time.monotonic()
        line = f"{self._stamp()} {self.scenario}: {text}"
        if self.tty:
            self.out.write("\r\x1b[2K" + line[:200])
            self._status_shown = True
            self.out.flush()
        elif now - self._last_status >= self.every:
            self._last_status = now
            self.out.write(line + "\n")
            self.out.flush()

    def done(self) -> None:
        self._clear()
        self.scenario = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.started
