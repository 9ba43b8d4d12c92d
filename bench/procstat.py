"""What the kernel says about a process and the machine: CPU seconds, peak and current RSS, busy cores.

Read straight from /proc (the bench runs on Linux): `VmHWM` (peak resident set) has no portable API, and
the CPU counters are two fields of one line, so a dependency would add nothing. Every reader returns None
for a process that has exited instead of raising, because the bench samples processes it may just have
killed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds the process has used so far (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            text = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _status_kib(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_rss_mib(pid: int) -> float | None:
    """The process's peak resident set size (VmHWM) in MiB (None: gone)."""
    kib = _status_kib(pid, "VmHWM")
    return None if kib is None else kib / 1024


def rss_mib(pid: int) -> float | None:
    """The process's resident set size now (VmRSS) in MiB (None: gone)."""
    kib = _status_kib(pid, "VmRSS")
    return None if kib is None else kib / 1024


@dataclass(frozen=True, slots=True)
class MachineCpu:
    """Cumulative busy and total jiffies of all cores (the first line of /proc/stat)."""

    busy: int
    total: int

    @classmethod
    def read(cls) -> MachineCpu:
        with open("/proc/stat", encoding="ascii") as fh:
            values = [int(v) for v in fh.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        total = sum(values[:8])  # guest time is already counted in user
        return cls(busy=total - idle, total=total)

    def busy_cores_since(self, earlier: MachineCpu) -> float:
        """Average number of busy cores between `earlier` and this reading."""
        total = self.total - earlier.total
        if total <= 0:
            return 0.0
        return (self.busy - earlier.busy) / total * cores()


def cores() -> int:
    return os.cpu_count() or 1


class CpuMeter:
    """CPU use of a set of processes over a window: `start()`, work, then `stop()` → cores used per name."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids)
        self._cpu: dict[str, float] = {}
        self._machine: MachineCpu | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._machine = MachineCpu.read()
        self._cpu = {}
        for name, pid in self.pids.items():
            seconds = cpu_seconds(pid)
            if seconds is not None:
                self._cpu[name] = seconds

    def stop(self) -> CpuUse:
        elapsed = max(time.monotonic() - self._started, 1e-9)
        assert self._machine is not None, "CpuMeter.stop() before start()"
        machine = MachineCpu.read().busy_cores_since(self._machine)
        per_process: dict[str, float] = {}
        for name, before in self._cpu.items():
            after = cpu_seconds(self.pids[name])
            if after is not None:
                per_process[name] = (after - before) / elapsed
        return CpuUse(seconds=elapsed, per_process=per_process, machine_busy_cores=machine)


@dataclass(frozen=True, slots=True)
class CpuUse:
    seconds: float
    per_process: dict[str, float]  # cores (1.0 = one core fully busy) by process name
    machine_busy_cores: float  # every process on the machine, ours or not

    @property
    def ours(self) -> float:
        return sum(self.per_process.values())

    def saturated(self, threshold: float = 0.85) -> bool:
        """Our processes (the ones measured) used more than `threshold` of the machine's cores over the
        window: CPU, not the provider, may have been the bound. Other processes' load does not count: it is
        reported beside (`machine_busy_cores`), never taken for ours."""
        return self.ours >= threshold * cores()

    def to_json(self) -> dict[str, object]:
        return {
            "seconds": round(self.seconds, 3),
            "cores": cores(),
            "machine_busy_cores": round(self.machine_busy_cores, 3),
            "ours_cores": round(self.ours, 3),
            "per_process_cores": {k: round(v, 3) for k, v in sorted(self.per_process.items())},
        }
