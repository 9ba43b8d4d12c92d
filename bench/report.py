"""The bench's output: the machine it ran on, the JSON document (`<timestamp>.json` and `latest.json`), and
the text table printed at the end. Pure formatting over the result dict, except the file writes."""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
from tabulate import tabulate

from bench.procstat import cores

SCENARIOS = (
    "scaling",
    "event_latency",
    "rebalance",
    "failover",
    "rolling_restart",
    "safety",
    "memory",
    "memory_at_scale",
    "provider_budget",
    "status_startup",
    "planner",
    "apiserver",
    "chaos",
)


def machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory_gib = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    memory_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                    break
    except OSError:
        pass
    return {
        "cores": cores(),
        "cpu_model": model or platform.processor() or "unknown",
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(v, 2) for v in os.getloadavg()],
    }


def write(doc: Mapping[str, Any], out_dir: Path, stamp: str) -> Path:
    """`<stamp>.json` and a copy as `latest.json`; returns the first."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stamp}.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    shutil.copyfile(path, out_dir / "latest.json")
    return path


# ---- the table --------------------------------------------------------------------------------------------


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, int | float) and spec:
        return format(value, spec)
    return str(value)


def _failed(section: Any) -> str | None:
    if not isinstance(section, Mapping):
        return "missing"
    if section.get("not_run"):
        return f"not run ({section['not_run']})"
    error = section.get("error")
    return f"FAILED: {error}" if error else None


def _scaling(s: Mapping[str, Any]) -> str:
    head = (
        f"scaling: {s['zones']} zones x {s['records_per_zone']} records from empty; provider "
        f"{s['latency_ms']:g} ms per call, {s['provider_concurrency']} calls in flight per replica"
    )
    rows = []
    keys = sorted({*s.get("sharded", {}), *s.get("active_passive", {})}, key=int)
    for key in keys:
        sh = s.get("sharded", {}).get(key, {})
        ap = s.get("active_passive", {}).get(key, {})
        cpu = sh.get("cpu", {}).get("converge", {})
        rows.append(
            [
                key,
                "FAILED" if sh.get("error") else _fmt(sh.get("zones_per_second"), ".1f"),
                _fmt(sh.get("speedup"), ".2f"),
                _fmt(sh.get("efficiency"), ".2f"),
                _fmt(sh.get("steady_reconciles_per_second"), ".0f"),
                _fmt(sh.get("load_max_over_mean"), ".2f"),
                "FAILED" if ap.get("error") else _fmt(ap.get("zones_per_second"), ".1f"),
                _fmt(sh.get("vs_active_passive"), ".2f"),
                _fmt(cpu.get("ours_cores"), ".2f") + ("*" if sh.get("cpu_bound") else ""),
            ]
        )
    table = tabulate(
        rows,
        headers=[
            "N",
            "zones/s",
            "speedup",
            "efficiency",
            "steady rec/s",
            "max/mean",
            "A/P zones/s",
            "vs A/P",
            "our cores",
        ],
        tablefmt="simple",
    )
    errors = [
        f"  {mode} N={key}: {entry['error']}"
        for mode in ("sharded", "active_passive")
        for key, entry in s.get(mode, {}).items()
        if "error" in entry
    ]
    return "\n".join([head, table, f"  {s.get('note', '')}", *errors])


def _event_latency(s: Mapping[str, Any]) -> str:
    return (
        f"event_latency: {s['changes']} Service changes at {s['rate_per_second']:g}/s over {s['zones']} "
        f"zones x {s['records_per_zone']} records, {s['replicas']} replica(s): "
        f"p50 {_fmt(s['p50_seconds'], '.3f')}s, "
        f"p99 {_fmt(s['p99_seconds'], '.3f')}s, max {_fmt(s['max_seconds'], '.3f')}s; {s['missing']} missing "
        f"(target p99 <= {s['target_p99_seconds']:g}s: {_fmt(s['meets_target'])})"
    )


def _rebalance(s: Mapping[str, Any]) -> str:
    rows = []
    for step in ("up", "down"):
        r = s.get(step)
        if not isinstance(r, Mapping):
            continue
        if "error" in r:
            rows.append([f"{r.get('from', '?')} -> {r.get('to', '?')}", "FAILED: " + str(r["error"])[:80]])
            continue
        rows.append(
            [
                f"{r['from']} -> {r['to']}",
                f"{r['moved']} ({r['moved_fraction']:.3f})",
                _fmt(r["ideal_fraction"], ".3f"),
                _fmt(r["moved_ratio"], ".2f"),
                _fmt(r["max_over_mean"], ".2f"),
                _fmt(r["seconds_to_full_ownership"], ".2f"),
                _fmt(r["longest_unowned_seconds"], ".2f"),
            ]
        )
    head = f"rebalance: {s.get('zones')} zones, graceful scale up and down"
    table = tabulate(
        rows,
        headers=[
            "scale",
            "moved",
            "ideal",
            "moved_ratio",
            "max/mean",
            "s to full ownership",
            "longest unowned s",
        ],
        tablefmt="simple",
    )
    return head + "\n" + table


def _failover(s: Mapping[str, Any]) -> str:
    rows = []
    for case in ("replica", "coordinator"):
        r = s.get(case)
        if not isinstance(r, Mapping):
            continue
        if "error" in r:
            rows.append([case, "FAILED: " + str(r["error"])[:80]])
            continue
        rows.append(
            [
                f"{case} ({r.get('victim')})",
                _fmt(r.get("zones")),
                _fmt(r.get("seconds_until_rewritten"), ".2f"),
                _fmt(r.get("seconds_to_full_ownership"), ".2f"),
                _fmt(r.get("seconds_without_coordinator"), ".2f"),
                _fmt(r.get("meets_target")),
            ]
        )
    head = (
        f"failover: kill -9, {s.get('replicas')} replicas, {s.get('zones')} zones, lease "
        f"{s.get('lease_duration')}s (target: rewritten within {s.get('target_seconds')}s)"
    )
    cost = s.get("steady_api_cost")
    if isinstance(cost, Mapping) and "error" not in cost:
        head += (
            f"\nsteady state, Lease and assignment watch events/s sent to a replica that does not lead: "
            f"{_fmt(cost.get('watch_events_per_second_per_member'), '.2f')} (most "
            f"{_fmt(cost.get('watch_events_per_second_per_member_max'), '.2f')}), to the coordinator "
            f"{_fmt(cost.get('watch_events_per_second_coordinator'), '.2f')}"
        )
    table = tabulate(
        rows,
        headers=[
            "killed",
            "its zones",
            "s until rewritten",
            "s to full ownership",
            "s without coordinator",
            "ok",
        ],
        tablefmt="simple",
    )
    return head + "\n" + table


def _rolling(s: Mapping[str, Any]) -> str:
    return (
        f"rolling_restart: {s['replicas']} replicas restarted one by one in {_fmt(s['seconds'], '.1f')}s; "
        f"zones moved {s['zones_moved']} (target 0); longest unowned "
        f"{_fmt(s['longest_unowned_seconds'], '.2f')}s"
    )


def _safety(s: Mapping[str, Any]) -> str:
    rows = [
        [name, v.get("overlapping_writes"), v.get("fenced_writes"), v.get("writes")]
        for name, v in sorted(s.get("scenarios", {}).items())
    ]
    table = tabulate(
        rows, headers=["scenario", "overlapping writes", "fenced writes", "writes"], tablefmt="simple"
    )
    verdict = "OK" if s.get("total_overlapping_writes") == 0 else "VIOLATED"
    return f"safety: overlapping writes must be 0 everywhere: {verdict}\n{table}"


def _memory(s: Mapping[str, Any]) -> str:
    rows = []
    for key, r in sorted(s.get("runs", {}).items(), key=lambda kv: int(kv[0])):
        if "error" in r:
            rows.append([key, "FAILED", str(r["error"])[:80]])
        else:
            rows.append([key, r["max_mib"], r["mean_mib"], _fmt(r.get("vs_one_replica"), ".2f")])
    table = tabulate(rows, headers=["N", "max peak MiB", "mean peak MiB", "vs N=1"], tablefmt="simple")
    return (
        f"memory: peak RSS per replica, {s.get('zones')} zones x {s.get('records_per_zone')} records\n{table}"
    )


def _memory_at_scale(s: Mapping[str, Any]) -> str:
    rows = []
    for key, r in sorted(s.get("runs", {}).items(), key=lambda kv: int(kv[0])):
        if "error" in r:
            rows.append([key, "FAILED", str(r["error"])[:80]])
            continue
        rows.append(
            [
                key,
                r["peak_rss_mib"],
                r.get("baseline_mib"),
                _fmt(r.get("above_baseline_vs_one"), ".2f"),
                _cpu_with_spread(r),
                _fmt(r.get("sync_cpu_vs_one"), ".2f"),
                _fmt(r.get("sync_cpu_above_baseline_vs_one"), ".2f"),
            ]
        )
    headers = [
        "N",
        "peak MiB/replica",
        "baseline MiB",
        "peak above baseline vs N=1",
        "sync CPU s (sum)",
        "vs N=1",
        "CPU above baseline vs N=1",
    ]
    table = tabulate(rows, headers=headers, tablefmt="simple")
    anchor = s.get("anchor", {})
    return (
        f"memory_at_scale: {s.get('services')} Services, {s.get('pods')} Pods, {s.get('nodes')} Nodes, "
        f"{s.get('dns_endpoints')} DNSEndpoints over {s.get('zones')} zones (anchor: external-dns "
        f"{anchor.get('peak_rss_mib')} MiB at {anchor.get('pods')} Pods)\n{table}{_pod_source(s)}"
    )


def _pod_source(s: Mapping[str, Any]) -> str:
    """memory_at_scale's runs with --source=pod too, one line per N."""
    lines = []
    for key, r in sorted(s.get("pod_source", {}).get("runs", {}).items(), key=lambda kv: int(kv[0])):
        if "error" in r:
            lines.append(f"  N={key} with --source=pod: FAILED {str(r['error'])[:80]}")
        else:
            lines.append(
                f"  N={key} with --source=pod: peak {r['peak_rss_mib']} MiB/replica "
                f"(x{_fmt(r.get('peak_vs_without'), '.3f')} of without), sync CPU {_cpu_with_spread(r)} s"
            )
    return "".join("\n" + line for line in lines)


def _cpu_with_spread(r: Mapping[str, Any]) -> str:
    """The reported (median) run's sync CPU, and the lowest and highest of the repeats when there were any."""
    repeats = [x["sync_cpu_seconds"] for x in r.get("repeats", ())]
    if len(repeats) < 2:
        return str(r["sync_cpu_seconds"])
    return f"{r['sync_cpu_seconds']} ({min(repeats)}-{max(repeats)})"


def _status_startup(s: Mapping[str, Any]) -> str:
    return (
        f"status_startup: {s['dns_endpoints']} DNSEndpoints' observedGeneration written by 1 replica "
        f"(default flags, --kube-api-status-qps {s['status_qps']:g}) "
        f"{_fmt(s['seconds_to_all_observed'], '.1f')}s after it started (ready after "
        f"{_fmt(s['seconds_to_ready'], '.1f')}s, first write seen after "
        f"{_fmt(s['seconds_to_first_observed'], '.1f')}s, {_fmt(s['writes_per_second'], '.0f')}/s); "
        f"target <= {s['target_seconds']:g}s: {_fmt(s['meets_target'])}"
    )


def _planner(s: Mapping[str, Any]) -> str:
    return (
        f"planner: {s['records']:,.0f} records planned in {s['plan_seconds']:.3f}s "
        f"({s['records_per_second']:,} records/s; target <= {s['target_seconds']:g}s: "
        f"{_fmt(s['meets_target'])})"
    )


def _profile_run(n: str, run: Mapping[str, Any]) -> str:
    return (
        f"{n}: p99 {_fmt(run['p99_seconds'], '.3f')}s, {_fmt(run['calls_per_change'], '.2f')} calls/change, "
        f"{run['throttled']} throttled, {run.get('five_minute_blocks', 0)} five-minute blocks"
    )


def _provider_budget(s: Mapping[str, Any]) -> str:
    rows = [
        [
            n,
            _fmt(r["p50_seconds"], ".3f"),
            _fmt(r["p99_seconds"], ".3f"),
            _fmt(r["calls_per_change"], ".2f"),
            r["throttled"],
            r["throttled_since_scale"],
            f"{r['observed']}/{r['changes']}",
        ]
        for n, r in s["runs"].items()
    ]
    model = s["model_external_dns"]
    rows.append(
        ["external-dns (model)", model["p50_seconds"], model["p99_seconds"], "-", "-", "-", "computed"]
    )
    head = (
        f"provider_budget: {s['zones']} zones x {s['records_per_zone']} records, account limit "
        f"{s['account_rate']:g} calls/s, {s['latency_seconds'] * 1000:.0f} ms per call, changes at "
        f"{s['event_rate_per_second']:g}/s"
    )
    table = tabulate(
        rows,
        headers=["replicas", "p50 s", "p99 s", "calls/change", "throttled", "since scale", "seen"],
        tablefmt="github",
    )
    note = (
        f"  external-dns model: {model['list_calls_per_loop']} list calls per loop = "
        f"{model['seconds_per_loop']}s per loop (targets: p99 <= {s['target_p99_seconds']:g}s, "
        f"calls/change <= {s['target_calls_per_change']:g}, throttled 0)"
    )
    profiles = [
        f"  {name} ({r['zones']} zones, replicas at {r['account_rate']:g} calls/s): "
        + "; ".join(_profile_run(n, run) for n, run in r["runs"].items())
        for name, r in s.get("profiles", {}).items()
    ]
    return "\n".join([head, table, note, *profiles])


def _apiserver(s: Mapping[str, Any]) -> str:
    pairs = s["get_replace_pairs_per_second"]
    return f"apiserver: {pairs:,.0f} get+replace pairs/s (one client, server in its own process)"


def _chaos(s: Mapping[str, Any]) -> str:
    kinds = ", ".join(f"{k} {v}" for k, v in s["fault_kinds"].items())
    return (
        f"chaos: {s['faults']} faults (seed {s['seed']}; {kinds}) in {s['chaos_seconds']:.0f}s over "
        f"{s['zones']} zones\n  overlapping writes {s['overlapping_writes']}, desired records missing "
        f"{s['desired_missing']}, foreign records touched {s['foreign_touched']}, late recoveries "
        f"{s['late_recoveries']}: {s['verdict']}\n  longest a zone ran nowhere {s['max_unowned_seconds']}s, "
        f"slowest recovery {s['max_recovery_seconds']}s (bound {s['liveness_bound_seconds']}s)"
    )


_SECTIONS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "scaling": _scaling,
    "event_latency": _event_latency,
    "rebalance": _rebalance,
    "failover": _failover,
    "rolling_restart": _rolling,
    "safety": _safety,
    "memory": _memory,
    "memory_at_scale": _memory_at_scale,
    "provider_budget": _provider_budget,
    "status_startup": _status_startup,
    "planner": _planner,
    "apiserver": _apiserver,
    "chaos": _chaos,
}


def render(doc: Mapping[str, Any]) -> str:
    m = doc.get("machine", {})
    parts = [
        f"shardsync bench, profile {doc.get('profile')}: {_fmt(doc.get('duration_seconds'), '.0f')}s on "
        f"{m.get('cores')} cores ({m.get('cpu_model')}), Python {m.get('python')}"
    ]
    for name in SCENARIOS:
        section = doc.get(name)
        failed = _failed(section)
        if failed is not None:
            parts.append(f"{name}: {failed}")
            continue
        assert isinstance(section, Mapping)
        try:
            parts.append(_SECTIONS[name](section))
        except (KeyError, TypeError, ValueError) as exc:  # a partial section: show what is there
            parts.append(f"{name}: incomplete ({type(exc).__name__}: {exc})")
    return "\n\n".join(parts)
