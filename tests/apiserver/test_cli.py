"""`shardsync apiserver`: prints where it listens, writes a kubeconfig the official loader accepts, and
stops cleanly (exit 0, snapshot written) on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client, config

from shardsync.local.apiserver import ApiServerProcess
from shardsync.local.apiserver.snapshot import FILE_NAME
from tests.kubeclient import name_of


@pytest.mark.multiprocess
def test_cli_serves_writes_kubeconfig_and_stops_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc = ApiServerProcess(kubeconfig, data_dir=tmp_path / "data").start()
    try:
        assert proc.port > 0 and kubeconfig.exists()
        text = kubeconfig.read_text()
        assert f"server: {proc.url}" in text and "users" not in text
        configuration = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]  # the client's loader is unannotated
            config_file=str(kubeconfig), client_configuration=configuration
        )
        assert configuration.host == proc.url
        with client.ApiClient(configuration) as api:
            names = [name_of(n) for n in client.CoreV1Api(api).list_namespace().items]
        assert "default" in names
    finally:
        code = proc.stop(timeout=10)
    assert code == 0
    assert (tmp_path / "data" / FILE_NAME).exists()


def test_cli_help_lists_the_flags() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "shardsync", "apiserver", "--help"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0
    for flag in ("--port", "--kubeconfig-out", "--data-dir"):
        assert flag in out.stdout


@pytest.mark.multiprocess
def test_cli_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    proc = ApiServerProcess(tmp_path / "kc").start()
    assert proc.proc is not None
    child = proc.proc
    child.send_signal(signal.SIGINT)
    try:
        assert child.wait(10) == 0
    finally:
        proc.stop()


def test_a_busy_port_is_one_line_and_exit_1() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "shardsync", "apiserver", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert out.returncode == 1
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"shardsync apiserver: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
