"""One bench run: every scenario in order, each failure recorded in its own section instead of ending the
run, then the safety figures gathered from every cluster's audit. Returns the JSON document."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import report
from bench.profiles import Profile
from bench.progress import Progress
from bench.scenarios import (
    chaos,
    event_latency,
    failover,
    memory,
    memory_at_scale,
    micro,
    provider_budget,
    rebalance,
    rolling_restart,
    scaling,
    status_startup,
)
from bench.scenarios.common import Context, error_result

Scenario = Callable[[Context], dict[str, Any]]

# Run order: the quick micro-benchmarks first, then the cluster scenarios.
SCENARIOS: dict[str, Scenario] = {
    "planner": micro.run_planner,
    "apiserver": micro.run_apiserver,
    "scaling": scaling.run,
    "event_latency": event_latency.run,
    "rebalance": rebalance.run,
    "failover": failover.run,
    "rolling_restart": rolling_restart.run,
    "memory": memory.run,
    "memory_at_scale": memory_at_scale.run,
    "chaos": chaos.run,
    "provider_budget": provider_budget.run,
    "status_startup": status_startup.run,
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(profile: Profile, run_dir: Path, progress: Progress, only: Collection[str] = ()) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": 1,
        "profile": profile.name,
        "started": _now(),
        "machine": report.machine(),
        "settings": profile.to_json(),
        "logs": str(run_dir),
        "scenario_seconds": {},
    }
    ctx = Context(profile, run_dir, progress)
    started = time.monotonic()
    try:
        for name, scenario in SCENARIOS.items():
            if only and name not in only:
                doc[name] = {"not_run": "not selected with --only"}
                continue
            progress.begin(name)
            t = time.monotonic()
            try:
                doc[name] = scenario(ctx)
            except Exception as exc:  # a scenario's failure is a figure of the run, not its end
                progress.step(f"FAILED: {type(exc).__name__}: {exc}")
                doc[name] = error_result(exc)
            doc["scenario_seconds"][name] = round(time.monotonic() - t, 1)
            progress.done()
    finally:
        doc["safety"] = {
            "scenarios": dict(sorted(ctx.safety.items())),
            "total_overlapping_writes": sum(v["overlapping_writes"] for v in ctx.safety.values()),
            "total_fenced_writes": sum(v["fenced_writes"] for v in ctx.safety.values()),
        }
        doc["finished"] = _now()
        doc["duration_seconds"] = round(time.monotonic() - started, 1)
    return doc
