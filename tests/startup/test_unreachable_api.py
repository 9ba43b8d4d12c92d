"""A replica whose API server is unreachable: few log lines, no urllib3 chatter, a quick exit on SIGTERM.

Both ways of being unreachable: nothing listening (refused at once) and a server that accepts connections
and never answers (every call runs into its timeout). The shipped defaults are measured over a window
shorter than the issue's 60 s (the shared warning rhythm, 1 s doubling to a minute, is checked over whole
minutes in tests/kube/test_health.py): the lines written so far, the `/readyz` reason and the metric,
then the time from SIGTERM to exit.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import Processes, free_port

pytestmark = pytest.mark.multiprocess

WINDOW = 16.0  # seconds watched; by then the shared rhythm has warned at 0, 1, 3, 7 and 15 s
MAX_LINES = 14  # ≈4 start-up lines + those warnings: well under the 20 per 60 s
EXIT_WITHIN = 2.0


def kubeconfig(path: Path, port: int) -> str:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f'clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]\n'
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: x}}]\ncurrent-context: c\n"
    )
    return str(path)


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        done.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        server.close()


def watch_unreachable(procs: Processes, tmp_path: Path, api_port: int) -> None:
    metrics = free_port()
    proc = procs.start(
        "replica",
        [
            "run",
            "--provider=fake",
            "--fake-zone=a.com",
            "--identity=dns",
            f"--kubeconfig={kubeconfig(tmp_path / 'kubeconfig', api_port)}",
            f"--metrics-address=127.0.0.1:{metrics}",
        ],
    )
    time.sleep(WINDOW)
    assert proc.alive(), proc.log()
    ready = httpx.get(f"http://127.0.0.1:{metrics}/readyz", timeout=2)
    assert ready.status_code == 503 and ready.text.startswith("API server unreachable for"), ready.text
    exposed = httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=2).text
    assert "shardsync_kube_api_reachable 0.0" in exposed
    lines = proc.log().splitlines()
    proc.signal(signal.SIGTERM)
    sent = time.monotonic()
    code = proc.wait(timeout=15)
    took = time.monotonic() - sent
    log = proc.log()
    print(f"\n{len(lines)} lines in {WINDOW:g}s; exit {code} {took:.2f}s after SIGTERM")
    assert len(lines) <= MAX_LINES, "\n".join(lines)
    assert "Retrying" not in log and "urllib3" not in log and "MaxRetryError" not in log
    assert "Traceback" not in log
    assert code == 0, log
    assert took <= EXIT_WITHIN, log


def test_nothing_listening(procs: Processes, tmp_path: Path) -> None:
    watch_unreachable(procs, tmp_path, free_port())


def test_a_server_that_never_answers(procs: Processes, tmp_path: Path, black_hole: int) -> None:
    watch_unreachable(procs, tmp_path, black_hole)
