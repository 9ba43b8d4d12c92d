"""The launcher's child processes: `python -m shardsync ...` with its output in a log file, stopped for sure.

Each child runs in its own session, so a Ctrl-C in the launcher's terminal reaches the launcher alone and
the launcher stops its children in order (replicas first, the API server last) instead of all of them
dying at once. A child's stdout and stderr go to one log file, appended across restarts of the same name.

Before the first child starts, the package's bytecode is compiled (once per process; fresh files are left
as they are), so every child loads it as a replica of the image does (the Dockerfile compiles at install
time). Without it, an editable install under PYTHONDONTWRITEBYTECODE=1 (this project's CI and dev
machines) has every child compile ~160 modules from source: ~0.2 s of CPU a start that no deployed replica
spends, counted in the bench's CPU figures and paid by every multi-process test.
"""

from __future__ import annotations

import compileall
import functools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


@functools.cache
def compile_package() -> bool:
    """Compile shardsync's modules to bytecode beside them, once per process; False when the tree is not
    writable (the children then compile from source, as before: slower, not wrong)."""
    return bool(compileall.compile_dir(_PACKAGE, quiet=2, workers=1))


class ChildFailed(RuntimeError):
    """A child exited or did not say it was ready in time; the message ends with its last log lines."""


class Child:
    """One running `python -m shardsync <args>`."""

    def __init__(self, name: str, args: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.args = list(args)
        self.log_path = log_path
        compile_package()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(log_path, "ab") as log:
            self._offset = log.tell()  # where this run's output starts
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "shardsync", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def output(self) -> str:
        """This run's output so far."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def wait_for_line(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first output line matching `pattern` (a regex, matched per line), waiting up to `timeout`;
        ChildFailed if the child exits first or nothing matches in time."""
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.output())
            if match is not None:
                return match
            if not self.alive():
                raise ChildFailed(f"{self.name} exited with {self.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise ChildFailed(f"{self.name} did not start within {timeout:.0f}s:\n{self.tail()}")
            time.sleep(0.05)

    def terminate(self) -> None:
        """SIGTERM, without waiting (a replica may take a while to hand its zones over)."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self, grace: float) -> int | None:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL; the exit status (negative: killed)."""
        self.terminate()
        try:
            self.proc.wait(timeout=max(grace, 0.0))
        except subprocess.TimeoutExpired:
            self.kill()
        return self.proc.returncode


def stop_all(children: Sequence[Child], grace: float) -> None:
    """SIGTERM every child at once, wait up to `grace` in total, then SIGKILL the ones still running."""
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            child.kill()
