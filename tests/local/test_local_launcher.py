"""`shardsync local` as a user runs it: a real subprocess that starts the API server, the fake provider and
real replica processes. Checked from outside: every zone gets our records with their ownership TXT
records, `shardsync shards` reads a replica, `shardsync local scale` reaches it from another process, it
exits 0 after --duration or on SIGTERM, and no process it started is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from shardsync.cli import COMMANDS
from shardsync.providers.fake.client import FakeAdmin
from tests.processes import pid_alive
from tests.waits import eventually_sync

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif("run" not in COMMANDS, reason="`shardsync run` is not wired into the CLI yet"),
]

OWNER = "local-test"
# Two replicas, one object per zone asking for one record, a fast provider and a table every 2 s.
SMALL = ["--replicas=2", "--desired-per-zone=1", f"--owner-id={OWNER}", "--latency=5ms", "--every=2s"]
FAST = [
    "--replica-arg=--settle-delay=200ms",
    "--replica-arg=--lease-duration=6s",
    "--replica-arg=--renew-interval=1s",
]


class Local:
    """One `shardsync local` subprocess with its output in a file; killed (with its group) at the end."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.run_dir = tmp_path / "run"
        self.env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}  # a private pointer
        self.out_path = tmp_path / "local.out"
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "shardsync",
                    "local",
                    "--run-dir",
                    str(self.run_dir),
                    "--no-tty",
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def run_file(self) -> dict[str, Any]:
        try:
            doc: dict[str, Any] = orjson.loads((self.run_dir / "run.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        return doc

    def wait_run_file(self, key: str, within: float = 60) -> dict[str, Any]:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"launcher exited {self.proc.returncode}:\n{self.output()[-3000:]}")
            return key in self.run_file()

        eventually_sync(ready, within=within, poll=0.2)
        return self.run_file()

    def shardsync(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "shardsync", *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for pid in self.run_file().get("pids", []):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def local_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[Local] = []

    def start(*args: str) -> Local:
        local = Local(tmp_path, *args)
        started.append(local)
        return local

    try:
        yield start
    finally:
        for local in started:
            local.cleanup()


def owned_zone(admin: FakeAdmin, zone: str) -> bool:
    records = admin.records(zone)
    names = {r.dns_name for r in records}
    owned_txt = [
        r
        for r in records
        if r.record_type == "TXT" and any(f"external-dns/owner={OWNER}" in t for t in r.targets)
    ]
    return f"web.{zone}" in names and f"app-0.{zone}" in names and len(owned_txt) >= 2


def views_agree(local: Local, run: dict[str, Any]) -> bool:
    """Every running replica and the cluster objects give every zone the same single owner."""
    urls = local.run_file()["statusUrls"]
    cluster = local.shardsync(
        "shards", "--kubeconfig", run["kubeconfig"], "--fake-provider-url", run["fakeProvider"], "-o", "json"
    )
    assert cluster.returncode == 0, cluster.stderr
    expected = orjson.loads(cluster.stdout)
    owners = {z["zone"]: z["owner"] for z in expected["zones"]}
    if set(owners.values()) != set(urls) or any(z["state"] != "active" for z in expected["zones"]):
        return False
    for url in urls.values():
        replica = local.shardsync("shards", "--url", url, "-o", "json")
        if replica.returncode != 0:
            return False
        doc = orjson.loads(replica.stdout)
        if doc["generation"] != expected["generation"]:
            return False
        if {z["zone"]: z["owner"] for z in doc["zones"]} != owners:
            return False
    return True


def test_local_syncs_every_zone_scales_and_exits_after_duration(local_factory: Any) -> None:
    started = time.monotonic()
    local = local_factory(
        "--zones=6", "--records-per-zone=2", "--duration=30s", "--termination-grace=10s", *SMALL, *FAST
    )
    run = local.wait_run_file("fakeProvider")
    with FakeAdmin(run["fakeProvider"]) as admin:
        zones = admin._request("GET", "/v1/zones").json()["zones"]
        assert len(zones) == 6
        eventually_sync(lambda: all(owned_zone(admin, z) for z in zones), within=30, poll=0.5)

        # `shardsync shards` against a real replica
        url = local.run_file()["statusUrls"]["shardsync-0"]
        shards = local.shardsync("shards", "--url", url, "-o", "json")
        assert shards.returncode == 0, shards.stderr
        view = orjson.loads(shards.stdout)
        assert view["self"] == "shardsync-0" and len(view["zones"]) == 6

        # scale from another process: the StatefulSet follows and a third replica starts
        scaled = local.shardsync("local", "scale", "3")
        assert scaled.returncode == 0 and "scaled to 3 replicas" in scaled.stdout, scaled.stderr
        eventually_sync(lambda: "shardsync-2" in local.run_file().get("statusUrls", {}), within=10)
        from kubernetes import client as k8s

        from shardsync.local.apiserver.client import api_client

        apps = k8s.AppsV1Api(api_client(run["apiServer"]))
        assert apps.read_namespaced_stateful_set("shardsync", "default").spec.replicas == 3
        bad = local.shardsync("local", "scale", "99")
        assert bad.returncode == 1 and "between 0 and" in bad.stderr

        if view["generation"] > 0:  # sharded replicas (the default): the cluster's view agrees with theirs
            eventually_sync(lambda: all(owned_zone(admin, z) for z in zones), within=30, poll=0.5)
            eventually_sync(lambda: views_agree(local, run), within=20, poll=0.5)

        # scale back down: the StatefulSet first, then SIGTERM to the highest ordinal, which exits by itself
        scaled = local.shardsync("local", "scale", "2")
        assert scaled.returncode == 0, scaled.stderr
        eventually_sync(lambda: "shardsync-2 stopped (exit 0)" in local.output(), within=30, poll=0.5)
        assert apps.read_namespaced_stateful_set("shardsync", "default").spec.replicas == 2

    assert local.proc.wait(timeout=90) == 0, local.output()[-3000:]
    took = time.monotonic() - started
    assert took < 75
    out = local.output()
    assert "zones synced 6/6" in out and "stopped: " in out and f"logs: {local.run_dir}" in out
    pids = local.run_file()["pids"]
    assert len(pids) == 5  # api server, provider, three replicas
    assert "shardsync-0 pid" in out and "exit 0" in out
    assert not [pid for pid in pids if pid_alive(pid)]
    assert not (local.run_dir / "control").exists()
    # the scale command now finds no launcher
    gone = local.shardsync("local", "scale", "2")
    assert gone.returncode == 1 and "no running" in gone.stderr


def test_local_stops_everything_on_sigterm(local_factory: Any) -> None:
    local = local_factory("--replicas=1", "--zones=2", "--records-per-zone=0", "--every=1s", *FAST)
    local.wait_run_file("statusUrls")
    eventually_sync(lambda: "zones synced 2/2" in local.output(), within=40, poll=0.2)
    pids = local.run_file()["pids"]
    local.proc.send_signal(signal.SIGTERM)
    assert local.proc.wait(timeout=60) == 0, local.output()[-3000:]
    out = local.output()
    assert "SIGTERM: stopping" in out
    assert f"shardsync-0 pid {pids[2]} exit 0" in out  # the replica stopped by itself, not killed
    assert not [pid for pid in pids if pid_alive(pid)]


def test_local_runs_the_replicas_through_the_webhook_protocol(local_factory: Any) -> None:
    """`--provider=webhook --webhook-fence`: the replicas reach the fake provider through its webhook face,
    say their writes are fenced, and sync every zone; the run ends by itself with exit 0."""
    local = local_factory(
        "--provider=webhook",
        "--webhook-fence",
        "--zones=4",
        "--records-per-zone=1",
        "--duration=20s",
        *SMALL,
        *FAST,
    )
    run = local.wait_run_file("fakeProvider")
    with FakeAdmin(run["fakeProvider"]) as admin:
        zones = admin._request("GET", "/v1/zones").json()["zones"]
        assert len(zones) == 4
        eventually_sync(lambda: all(owned_zone(admin, z) for z in zones), within=30, poll=0.5)
    assert local.proc.wait(timeout=60) == 0, local.output()[-3000:]
    assert "zones synced 4/4" in local.output()
    for name in ("shardsync-0", "shardsync-1"):
        log = (local.run_dir / f"{name}.log").read_text()
        said = [line for line in log.splitlines() if "writes fenced" in line]
        assert len(said) == 1 and "provider=webhook" in said[0], log[-2000:]
        assert "level=error" not in log, log[-2000:]


def test_local_refuses_webhook_fence_without_the_webhook_provider(local_factory: Any) -> None:
    local = local_factory("--webhook-fence")
    assert local.proc.wait(timeout=30) == 2
    assert not local.run_dir.exists()  # refused before anything was made
    assert local.output().strip() == (
        "shardsync local: argument --webhook-fence: only with --provider=webhook; see shardsync local --help"
    )
