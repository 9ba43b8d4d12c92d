"""End to end, what an operator reads: a real `shardsync run` process against the embedded API server and a
real BIND 9 (tests/dnsservers) serving 50 zones.

- The DNS server down for 20 s: every zone's reconcile fails and retries with backoff (about 300 failures;
  305 warning lines before the failure digest), and the replica logs at most 10 warning lines for it.
- `--dry-run` prints one line per planned change with its name, type, targets and zone, and writes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from tests.dnsservers import BindServer, running_bind
from tests.e2e.test_replica_rfc2136 import publish, replica_args
from tests.processes import Processes, ShardsyncProcess, free_port, wait_ready
from tests.waits import eventually_sync

pytestmark = [pytest.mark.bind, pytest.mark.multiprocess]

ZONES = tuple(f"z{i:02d}.logs.shardsync.test" for i in range(50))
OUTAGE = 20.0


@pytest.fixture(scope="module")
def bind() -> Iterator[BindServer]:
    yield from running_bind(ZONES)


def start(
    apiserver: ApiServer, bind: BindServer, procs: Processes, tmp_path: Path, name: str, *extra: str
) -> ShardsyncProcess:
    secret_file = tmp_path / "tsig"
    secret_file.write_text(bind.secret)
    port = free_port()
    replica = procs.start(name, replica_args(apiserver, bind, secret_file, port, *extra, zones=ZONES))
    wait_ready(f"http://127.0.0.1:{port}", replica, within=60)
    return replica


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_dns_server_down_for_20s_is_a_few_warning_lines_not_one_per_zone_and_retry(
    apiserver: ApiServer, bind: BindServer, procs: Processes, tmp_path: Path
) -> None:
    # Every zone is read every 5 s (rfc2136 reads by AXFR), so each fails soon after the server stops.
    replica = start(apiserver, bind, procs, tmp_path, "outage", "--interval=5s", "--log-format=json")
    eventually_sync(
        lambda: sum('"event": "fence acquired"' in line for line in replica.log().splitlines()) == len(ZONES),
        within=60,
    )
    before = len(replica.log())
    bind.stop()
    try:
        time.sleep(OUTAGE)
        during = replica.log()[before:]
    finally:
        bind.start()  # on the same port
    lines = json_lines(during)
    warnings = [line for line in lines if line["level"] in ("warning", "error")]
    failed = [line for line in warnings if line["event"] == "zone reconcile failed"]
    print("\n".join(json.dumps(line) for line in warnings))
    assert failed, "the outage was not noticed"
    assert len(warnings) <= 10, f"{len(warnings)} warning lines: {warnings[:3]}"
    # ... which say how many zones failed (the count and an example)
    assert max(int(str(line.get("zones", 0))) for line in failed) >= 40
    # the server back: changes land again
    publish(k8s.CoreV1Api(apiserver.api_client()), "back", f"back.{ZONES[1]}", "192.0.2.41")
    eventually_sync(lambda: bind.texts(f"back.{ZONES[1]}", "A") == {"192.0.2.41"}, within=30)
    assert replica.alive()


def test_dry_run_prints_each_planned_change_and_writes_nothing(
    apiserver: ApiServer, bind: BindServer, procs: Processes, tmp_path: Path
) -> None:
    core = k8s.CoreV1Api(apiserver.api_client())
    publish(core, "dry", f"dry.{ZONES[0]}", "192.0.2.40")
    replica = start(apiserver, bind, procs, tmp_path, "dry", "--dry-run", "--interval=1m")
    planned = (
        f'event="dry run: change planned" action=CREATE name=dry.{ZONES[0]} type=A targets=192.0.2.40 '
        f"zone={ZONES[0]}"
    )
    eventually_sync(lambda: planned in replica.log(), within=30)
    txt = f'event="dry run: change planned" action=CREATE name=a-dry.{ZONES[0]} type=TXT'
    eventually_sync(lambda: txt in replica.log(), within=10)
    # (planned again at every sync of the zone, as external-dns's dry run does: the zone never gets there)
    summary = next(
        line
        for line in replica.log().splitlines()
        if "dry run: changes not applied" in line and f" zone={ZONES[0]} " in line
    )
    assert summary.endswith(" create=2 update=0 delete=0")
    assert bind.texts(f"dry.{ZONES[0]}", "A") == set()
    assert 'event="change applied"' not in replica.log()
    assert replica.alive()
