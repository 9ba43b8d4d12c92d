"""README's rfc2136 example (examples/rfc2136-bind.sh) runs as written and shows the record, with kubectl or
with curl, whatever ports are busy; without its tools it says what to install."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.dnsservers import BindServer, require, require_command

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "rfc2136-bind.sh"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)


def _without(folder: Path, *commands: str) -> dict[str, str]:
    """The environment with a PATH (links in `folder`) on which `commands` cannot be found."""
    hidden = folder / "path"
    hidden.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        folder = Path(entry)
        if not folder.is_dir():
            continue
        for tool in folder.iterdir():
            target = hidden / tool.name
            if tool.name not in commands and not target.exists():
                target.symlink_to(tool)
    return {**os.environ, "PATH": str(hidden)}


@pytest.mark.bind
@pytest.mark.parametrize("client", ["kubectl", "curl"])
def test_bind_example_runs(client: str, tmp_path: Path) -> None:
    require(BindServer)
    require_command("dig", "bind9-dnsutils")
    if client == "kubectl" and not shutil.which("kubectl"):  # not in Debian's archive: curl covers CI
        pytest.skip("kubectl is not installed; the curl variant runs the example")
    require_command("curl", "curl")
    assert f"bash {SCRIPT.relative_to(SCRIPT.parents[1])}" in (SCRIPT.parents[1] / "README.md").read_text()
    # Port 6443 busy (where a real API server runs) must not matter: the script picks free ports.
    env = os.environ.copy() if client == "kubectl" else _without(tmp_path, "kubectl")
    with socket.socket() as busy:
        if _free(6443):
            busy.bind(("127.0.0.1", 6443))
            busy.listen()
        done = _run(env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "web.example.test A:        192.0.2.10" in done.stdout
    assert "external-dns/owner=demo,external-dns/resource=service/default/web" in done.stdout


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_missing_prerequisites_are_named_up_front(tmp_path: Path) -> None:
    done = _run(_without(tmp_path, "named", "dig", "kubectl", "curl"))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert "rfc2136-bind.sh: missing: dig (apt-get install bind9-dnsutils)" in lines
    assert "rfc2136-bind.sh: missing: kubectl or curl (apt-get install curl)" in lines
    assert "Traceback" not in done.stderr and done.stdout == ""
