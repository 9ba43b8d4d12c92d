"""README's rfc2136 example (examples/rfc2136-bind.sh) runs as written and shows the record."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.dnsservers import BindServer, require, require_command
from tests.processes import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "rfc2136-bind.sh"


@pytest.mark.bind
def test_bind_example_runs() -> None:
    require(BindServer)
    require_command("dig", "bind9-dnsutils")
    if not shutil.which("kubectl"):  # not in Debian's archive: .ci/run cannot install it
        pytest.skip("needs kubectl")
    assert f"bash {SCRIPT.relative_to(SCRIPT.parents[1])}" in (SCRIPT.parents[1] / "README.md").read_text()
    env = {
        **os.environ,
        "BIND_PORT": str(free_port()),
        "API_PORT": str(free_port()),
        "METRICS_PORT": str(free_port()),
    }
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "web.example.test A:        192.0.2.10" in done.stdout
    assert "external-dns/owner=demo,external-dns/resource=service/default/web" in done.stdout
