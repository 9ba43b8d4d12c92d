"""PNG plots of a bench result: the scaling curve, ownership over time (rebalance, failover, rolling
restart) and the event latency distribution. Needs matplotlib (`pip install -e '.[bench]'`); `available()`
says whether it is there, so the bench can still write its JSON and table without it."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

INSTALL_HINT = (
    "matplotlib is not installed, so no plots are drawn; install it with: pip install -e '.[bench]'"
)


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def draw(doc: Mapping[str, Any], out_dir: Path, stamp: str, latest: bool = True) -> list[Path]:
    """Draw every plot the result has data for, as `<stamp>-<name>.png`, with `latest` also copied to
    `latest-<name>.png`."""
    import matplotlib

    matplotlib.use("Agg")
    written = []
    for name, fn in (("scaling", _scaling), ("ownership", _ownership), ("event-latency", _latency)):
        path = out_dir / f"{stamp}-{name}.png"
        if fn(doc, path):
            if latest:
                shutil.copyfile(path, out_dir / f"latest-{name}.png")
            written.append(path)
    return written


def _series(section: Mapping[str, Any], mode: str, key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for n, entry in sorted(section.get(mode, {}).items(), key=lambda kv: int(kv[0])):
        value = entry.get(key)
        if isinstance(value, int | float):
            xs.append(int(n))
            ys.append(float(value))
    return xs, ys


def _due_per_second(section: Mapping[str, Any]) -> float | None:
    zones, interval = section.get("zones"), section.get("interval_seconds")
    if isinstance(zones, int | float) and isinstance(interval, int | float) and interval > 0:
        return zones / interval
    return None


def _scaling(doc: Mapping[str, Any], path: Path) -> bool:
    import matplotlib.pyplot as plt

    section = doc.get("scaling")
    if not isinstance(section, Mapping) or not section.get("sharded"):
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in (
        (axes[0], "zones_per_second", "converge from empty (zones/s)"),
        (axes[1], "steady_reconciles_per_second", "steady-state resyncs (zones/s)"),
    ):
        xs, ys = _series(section, "sharded", key)
        due = _due_per_second(section)
        if key == "steady_reconciles_per_second" and xs and due:
            # Every zone is due once an interval: that, not N, is the most the replicas can be asked for.
            ax.plot(xs, [due] * len(xs), linestyle=":", color="grey", label="every zone due every interval")
            ax.set_ylim(0, due * 1.3)  # from zero: the runs' differences are a percent or two of it
        elif xs and xs[0] == 1:
            ax.plot(xs, [ys[0] * n for n in xs], linestyle=":", color="grey", label="ideal (linear)")
        ax.plot(xs, ys, marker="o", label="sharded")
        bound = [(x, y) for x, y in zip(xs, ys, strict=True) if section["sharded"][str(x)].get("cpu_bound")]
        if bound:
            # A marker with a legend entry rather than a text label: a label beside a point can fall
            # outside the axes.
            ax.scatter(
                [x for x, _ in bound],
                [y for _, y in bound],
                s=140,
                facecolors="none",
                edgecolors="red",
                zorder=3,
                label=f"CPU-bound (our processes used ≥ 85% of {_cores(section)} cores)",
            )
        axs, ays = _series(section, "active_passive", key)
        ax.plot(axs, ays, marker="s", label="--sharding=off (active/passive)")
        ax.set_xlabel("replicas")
        ax.set_xticks(sorted(set(xs) | set(axs)))
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"{section.get('zones')} zones x {section.get('records_per_zone')} records, provider "
        f"{section.get('latency_ms')} ms/call, {section.get('provider_concurrency')} in flight per replica; "
        f"machine: {_cores(section)} cores"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _cores(section: Mapping[str, Any]) -> str:
    """The machine's core count as the runs recorded it ("?" when no run did)."""
    for mode in ("sharded", "active_passive"):
        for entry in (section.get(mode) or {}).values():
            cores = ((entry.get("cpu") or {}).get("converge") or {}).get("cores")
            if isinstance(cores, int):
                return str(cores)
    return "?"


def _timelines(doc: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found = []
    rebalance = doc.get("rebalance")
    if isinstance(rebalance, Mapping) and rebalance.get("timeline"):
        found.append(("rebalance (scale up, then down)", rebalance))
    failover = doc.get("failover")
    if isinstance(failover, Mapping):
        for case in ("replica", "coordinator"):
            entry = failover.get(case)
            if isinstance(entry, Mapping) and entry.get("timeline"):
                found.append((f"failover: kill -9 the {case}", entry))
    rolling = doc.get("rolling_restart")
    if isinstance(rolling, Mapping) and rolling.get("timeline"):
        found.append(("rolling restart", rolling))
    return found


def _ownership(doc: Mapping[str, Any], path: Path) -> bool:
    import matplotlib.pyplot as plt

    panels = _timelines(doc)
    if not panels:
        return False
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 2.8 * len(panels)), squeeze=False)
    for ax, (title, section) in zip(axes[:, 0], panels, strict=True):
        rows: Sequence[Mapping[str, Any]] = section["timeline"]
        ts = [r["t"] for r in rows]
        identities = sorted({i for r in rows for i in r["owned"]})
        # One distinct colour per replica, none of them the black of "unowned" or the grey of "parked".
        palette = plt.get_cmap("tab10")
        for index, identity in enumerate(identities):
            owned = [r["owned"].get(identity, 0) for r in rows]
            ax.step(ts, owned, where="post", color=palette(index % 10), label=identity)
        if any(r.get("parked") for r in rows):
            parked = [r.get("parked", 0) for r in rows]
            ax.step(ts, parked, where="post", color="grey", linestyle=":", linewidth=2, label="parked")
        unowned = [r["unowned"] for r in rows]
        ax.step(ts, unowned, where="post", color="black", linestyle="--", linewidth=2, label="unowned")
        for event in section.get("events", []):
            ax.axvline(event["t"], color="black", linestyle="--", linewidth=0.8)
            ax.annotate(event["label"], (event["t"], ax.get_ylim()[1]), fontsize=7, rotation=90, va="top")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("zones run")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _latency(doc: Mapping[str, Any], path: Path) -> bool:
    import matplotlib.pyplot as plt

    section = doc.get("event_latency")
    if not isinstance(section, Mapping) or not section.get("latencies_seconds"):
        return False
    values = [v * 1000 for v in section["latencies_seconds"]]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.hist(values, bins=min(40, max(5, len(values) // 4)))
    for key, style in (("p50_seconds", "-"), ("p99_seconds", "--")):
        value = section.get(key)
        if isinstance(value, int | float):
            ax.axvline(value * 1000, color="black", linestyle=style, label=f"{key[:3]} {value * 1000:.0f} ms")
    ax.set_xlabel("Service change -> record in the provider (ms)")
    ax.set_ylabel("changes")
    ax.set_title(f"event latency: {section.get('changes')} changes at {section.get('rate_per_second')}/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
