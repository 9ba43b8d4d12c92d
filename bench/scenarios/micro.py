"""Scenarios `planner` and `apiserver`: the two micro-benchmarks that already exist as their own scripts
(`bench/planner.py`, `bench/apiserver.py`), run with the profile's sizes and checked against their targets."""

from __future__ import annotations

from typing import Any

from bench import apiserver, planner
from bench.scenarios.common import Context, rounded

PLANNER_TARGET_SECONDS = 0.5  # one 100,000-record zone on one core (issue 3)


def run_planner(ctx: Context) -> dict[str, Any]:
    p = ctx.profile
    ctx.progress.step(f"planning one zone of {p.planner_records:,} records, best of {p.planner_repeat}")
    figures = planner.run(p.planner_records, p.planner_repeat)
    # The target is for 100,000 records; a smaller zone is judged at the same rate.
    target = PLANNER_TARGET_SECONDS * figures["records"] / 100_000
    result: dict[str, Any] = {k: rounded(v, 4) if isinstance(v, float) else v for k, v in figures.items()}
    result["records_per_second"] = round(figures["plan_records_per_second"])
    result["target_seconds"] = round(target, 4)
    result["meets_target"] = figures["plan_seconds"] <= target
    ctx.progress.step(
        f"{figures['records']:,.0f} records planned in {figures['plan_seconds']:.3f}s "
        f"({figures['plan_records_per_second']:,.0f} records/s)"
    )
    return result


def run_apiserver(ctx: Context) -> dict[str, Any]:
    seconds = ctx.profile.apiserver_seconds
    ctx.progress.step(f"get+replace of one Lease for {seconds:g}s, server in its own process")
    rate = apiserver.get_replace_rate(seconds, in_process=False)
    ctx.progress.step(f"{rate:,.0f} get+replace pairs/s")
    return {"get_replace_pairs_per_second": round(rate, 1), "seconds": seconds, "server": "separate process"}
