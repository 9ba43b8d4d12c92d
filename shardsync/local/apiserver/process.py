"""The embedded server as a child process (`python -m shardsync apiserver`), with the same handle surface
as the in-process ApiServer: url, kubeconfig, api_client(), faults (over the admin endpoint), stop/restart."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from shardsync.local.apiserver.admin import RemoteFaults
from shardsync.local.apiserver.client import api_client

_PREFIX = "listening on "


@dataclass(eq=False)
class ApiServerProcess:
    kubeconfig_path: Path  # written by the server once it listens
    port: int = 0  # 0 picks a free one; the bound port once started (a restart keeps it)
    data_dir: Path | None = None
    window: int | None = None  # None: the command's default
    bookmark_interval: float | None = None  # None: the command's default
    start_timeout: float = 20.0
    proc: subprocess.Popen[str] | None = field(default=None, init=False, repr=False)
    _stderr: list[str] = field(default_factory=list, init=False, repr=False)

    @property
    def kubeconfig(self) -> Path:
        return self.kubeconfig_path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def faults(self) -> RemoteFaults:
        return RemoteFaults(self.url)

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "shardsync",
            "apiserver",
            "--port",
            str(self.port),
            "--kubeconfig-out",
            str(self.kubeconfig_path),
        ]
        if self.data_dir is not None:
            cmd += ["--data-dir", str(self.data_dir)]
        if self.window is not None:
            cmd += ["--window", str(self.window)]
        if self.bookmark_interval is not None:
            cmd += ["--bookmark-interval", str(self.bookmark_interval)]
        return cmd

    def start(self) -> ApiServerProcess:
        if self.proc is not None:
            return self
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=_pump, args=(self.proc.stdout, lines), daemon=True).start()
        threading.Thread(target=_collect, args=(self.proc.stderr, self._stderr), daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=self.start_timeout)
            except queue.Empty:
                self.stop()
                raise RuntimeError(f"apiserver did not start in {self.start_timeout}s") from None
            if line is None:
                self.stop()
                raise RuntimeError("apiserver exited at start: " + "".join(self._stderr[-20:]))
            if line.startswith(_PREFIX):
                self.port = int(line[len(_PREFIX) :].strip().rsplit(":", 1)[1])
                return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (the server snapshots and exits), then SIGKILL if it has not exited within `timeout`."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        return proc.returncode

    def kill(self) -> None:
        """Stops without a snapshot, as a crash would."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def restart(self) -> ApiServerProcess:
        self.stop()
        return self.start()

    def api_client(self, user_agent: str | None = None) -> Any:
        return api_client(self.url, user_agent)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _collect(stream: IO[str], sink: list[str]) -> None:
    for line in stream:
        sink.append(line)
        del sink[:-200]
