"""`python -m bench --profile smoke` as a user runs it (tiny sizes; its figures mean nothing): it exits 0,
writes `<timestamp>.json` and `latest.json` with every scenario's key and no failed scenario, the audit of
every cluster shows no overlapping writes, and no process it started is left running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from bench import plots, report
from bench.scenarios.provider_budget import PROFILE_RUNS

pytestmark = pytest.mark.multiprocess

TIMEOUT = 420  # the run takes about 225 s on 2 shared cores (provider_budget 90 s of it); this bounds a hang


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def test_smoke_profile_writes_every_key_and_no_overlap(tmp_path: Path) -> None:
    out, run_dir = tmp_path / "out", tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--profile", "smoke", "--out", str(out), "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert not _processes_mentioning(str(run_dir)), "processes left running"

    latest = orjson.loads((out / "latest.json").read_bytes())
    stamped = [p for p in out.glob("*.json") if p.name != "latest.json"]
    assert len(stamped) == 1 and orjson.loads(stamped[0].read_bytes()) == latest

    for key in report.SCENARIOS:
        assert isinstance(latest.get(key), dict), key
        assert "error" not in latest[key], (key, latest[key].get("error"))
    scaling = latest["scaling"]
    for n in ("1", "2"):
        for field in ("zones_per_second", "speedup", "efficiency", "vs_active_passive"):
            assert isinstance(scaling["sharded"][n][field], float), (n, field)
    assert latest["event_latency"]["missing"] == 0
    for step in ("up", "down"):
        assert "moved_ratio" in latest["rebalance"][step]
    for case in ("replica", "coordinator"):
        assert "seconds_until_rewritten" in latest["failover"][case]
        assert "seconds_without_coordinator" in latest["failover"][case]
    assert isinstance(latest["rolling_restart"]["zones_moved"], int)
    assert latest["memory"]["runs"]["1"]["max_mib"] > 0
    for field in ("peak_rss_mib", "baseline_mib", "sync_cpu_seconds"):
        assert latest["memory_at_scale"]["runs"]["1"][field] > 0, field
    assert latest["memory_at_scale"]["pod_source"]["runs"]["1"]["peak_vs_without"] > 0
    assert latest["scaling"]["cpu_ms_per_reconcile"] > 0
    budget = latest["provider_budget"]
    for n in ("1", "2"):
        for field in ("p50_seconds", "p99_seconds", "calls_per_change", "throttled"):
            assert budget["runs"][n][field] is not None, (n, field)
        assert budget["runs"][n]["observed"] == budget["runs"][n]["changes"], n
    assert budget["model_external_dns"]["model"] is True
    for name in PROFILE_RUNS:  # cloudflare's, azure's, google's
        account = budget["profiles"][name]
        for n in ("1", "2"):
            for field in ("p99_seconds", "calls_per_change", "throttled"):
                assert account["runs"][n][field] is not None, (name, n, field)
        assert account["five_minute_blocks"] == 0, name
    status = latest["status_startup"]
    assert status["dns_endpoints"] == 30 and status["seconds_to_all_observed"] > 0
    assert latest["planner"]["plan_seconds"] > 0
    assert latest["apiserver"]["get_replace_pairs_per_second"] > 0
    chaos = latest["chaos"]
    assert chaos["faults"] == 3 and chaos["verdict"] == "OK", chaos

    safety = latest["safety"]
    assert safety["total_overlapping_writes"] == 0
    assert {"scaling/sharded-2", "rebalance", "failover", "rolling_restart", "chaos"} <= set(
        safety["scenarios"]
    )
    for name, figures in safety["scenarios"].items():
        assert figures["overlapping_writes"] == 0, name
        assert figures["writes"] > 0, name

    assert "safety: overlapping writes must be 0 everywhere: OK" in proc.stdout
    if plots.available():
        assert (out / "latest-scaling.png").stat().st_size > 0
        assert (out / "latest-ownership.png").stat().st_size > 0
