"""Real `shardsync` child processes for multi-process tests: start, read their logs, stop them for sure.

Every process started through `Processes` is stopped when the fixture ends (SIGTERM, then SIGKILL after a
bound), and its log is kept in a file so a failing test can show it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts: reap before asking)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ShardsyncProcess:
    """One `python -m shardsync ...` child with its log in `log_path`."""

    def __init__(self, args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.args = list(args)
        self.log_path = log_path
        full_env = {**os.environ, **(env or {})}
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shardsync", *self.args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL; returns the exit code."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()
        return self.proc.returncode


class Processes:
    """Starts shardsync processes and stops every one of them at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[ShardsyncProcess] = []

    def start(self, name: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> ShardsyncProcess:
        proc = ShardsyncProcess(args, self.workdir / f"{name}.log", env)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            proc.stop()


@contextmanager
def processes(workdir: Path) -> Iterator[Processes]:
    group = Processes(workdir)
    try:
        yield group
    finally:
        group.stop_all()


def get_json(url: str, timeout: float = 2.0) -> object | None:
    """GET `url` as JSON; None when it does not answer (yet)."""
    try:
        resp = httpx.get(url, timeout=timeout)
    except httpx.HTTPError:
        return None
    return resp.json() if resp.status_code == 200 else None


def wait_ready(url: str, proc: ShardsyncProcess, within: float = 30.0) -> None:
    """Wait for `url/readyz` to answer 200, failing early (with the log) if the process died."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not proc.alive():
            raise AssertionError(f"process exited with {proc.proc.returncode}:\n{proc.log()[-4000:]}")
        try:
            if httpx.get(url + "/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} not ready within {within}s:\n{proc.log()[-4000:]}")
