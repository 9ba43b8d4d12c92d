"""Runs a chaos plan against a live cluster, one fault at a time: apply it, hold it for its duration, lift
it, then wait until every zone runs at exactly one live replica under the published generation again (the
recovery, measured against the liveness bound), rest the fault's gap, and go on.

Faults do not overlap one another (so each recovery is measured against one fault), but everything else
does: the source churn, the periodic reconciles, the recovery of the previous fault's stragglers. The
cluster is kept as a StatefulSet keeps pods: a replica that exits on its own while its ordinal is wanted
is counted (`unexpected_exits`, with its last log lines) and started again.

Every fault is lifted in a `finally` (SIGCONT, the API server's and the provider's faults cleared), so an
error in the middle of one leaves no frozen process or paused server behind.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import observe
from bench.chaos.plan import Fault
from bench.cluster import Cluster, ClusterError
from shardsync.kube.client import KubeError
from shardsync.local.apiserver.admin import RemoteFaults
from shardsync.local.apiserver.faults import check_mode
from shardsync.providers.fake.faults import Faults

Say = Callable[[str], None]


def user_agent_of(identity: str) -> str:
    """The substring of a replica's User-Agent (`shardsync/<version> (<identity>)`) that selects it alone."""
    return f"({identity})"


@dataclass(slots=True)
class Outcome:
    """What one fault did and how long the cluster took to recover from it."""

    fault: Fault
    target: str  # the replica it hit, if one
    started: float  # Unix time
    lifted: float  # Unix time the fault was over (the replica back, the pause lifted, ...)
    recovered: float | None  # Unix time every zone ran at exactly one live replica again; None: never
    note: str = ""

    @property
    def recovery_seconds(self) -> float | None:
        return None if self.recovered is None else max(0.0, self.recovered - self.lifted)

    def to_json(self) -> dict[str, Any]:
        rec = self.recovery_seconds
        out: dict[str, Any] = {
            "fault": self.fault.describe(),
            "kind": self.fault.kind,
            "target": self.target,
            "seconds": round(self.lifted - self.started, 2),
            "recovery_seconds": None if rec is None else round(rec, 2),
        }
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Executor:
    cluster: Cluster
    api: RemoteFaults
    sampler: observe.Sampler
    zones: Sequence[str]
    bound: float  # the liveness bound: seconds from a fault's end until every zone is owned again
    say: Say = print
    base_latency: float = 0.0
    start_timeout: float = 60.0
    outcomes: list[Outcome] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)

    # ---- the cluster as a StatefulSet keeps it -----------------------------------------------------------

    def live(self) -> list[str]:
        return [r.identity for r in self.cluster.live()]

    def pick(self, rank: int) -> tuple[int, str] | None:
        live = self.cluster.live()
        if not live:
            return None
        replica = live[rank % len(live)]
        return replica.ordinal, replica.identity

    def coordinator(self) -> tuple[int, str] | None:
        latest = self.sampler.latest()
        named = sorted(latest.coordinators()) if latest else []
        for replica in self.cluster.live():
            if replica.identity in named:
                return replica.ordinal, replica.identity
        return None

    def tend(self) -> None:
        """Start every wanted ordinal whose process is gone (after counting an exit we did not cause)."""
        cluster = self.cluster
        for ordinal in range(cluster.desired):
            replica = cluster.replicas.get(ordinal)
            if replica is not None and not replica.alive():
                code = replica.child.returncode
                self.unexpected_exits.append(
                    f"{replica.identity} exited with {code}: {replica.child.tail(5)}"
                )
                self.say(f"{replica.identity} exited by itself ({code}); starting it again")
                cluster.kill(ordinal)
            if ordinal not in cluster.replicas:
                cluster.start_ordinal(ordinal)
        cluster.reap()

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    # ---- faults -----------------------------------------------------------------------------------------

    def run(self, faults: Sequence[Fault]) -> list[Outcome]:
        for fault in faults:
            self.tend()
            outcome = self.apply(fault)
            outcome.recovered = self.recover(outcome.lifted)
            self.outcomes.append(outcome)
            rec = outcome.recovery_seconds
            self.say(
                f"{fault.describe()} {outcome.target} -> recovered "
                + ("never" if rec is None else f"in {rec:.1f}s")
                + ("" if rec is not None and rec <= self.bound else f" - LATE (bound {self.bound:.0f}s)")
                + (f" ({outcome.note})" if outcome.note else "")
            )
            self.sleep(fault.gap)
        return self.outcomes

    def apply(self, fault: Fault) -> Outcome:
        started = time.time()
        target, note = "", ""
        kind = fault.kind
        try:
            if kind in ("kill", "kill-coordinator"):
                picked = self.pick(fault.rank) if kind == "kill" else self.coordinator()
                if picked is None:
                    note = "no replica to kill"
                else:
                    ordinal, target = picked
                    self.cluster.kill(ordinal)
                    self.sleep(fault.seconds)
                    self.tend()
            elif kind == "stop":
                picked = self.pick(fault.rank)
                if picked is not None:
                    ordinal, target = picked
                    self._frozen(self.cluster.replicas[ordinal].child.pid, fault.seconds)
            elif kind == "scale":
                target = f"{len(self.cluster.replicas)} -> {fault.replicas}"
                self.scale(fault.replicas)
            elif kind == "rolling-restart":
                target = ",".join(self.live())
                self._rolling_restart()
            elif kind == "api-pause":
                try:
                    self.api.pause(seconds=fault.seconds, mode=check_mode(fault.mode))
                    self.sleep(fault.seconds)
                finally:
                    self.api.resume()
            elif kind == "api-cut":
                picked = self.pick(fault.rank)
                if picked is not None:
                    target = picked[1]
                    agent = user_agent_of(target)
                    try:
                        self.api.refuse(user_agent=agent, mode=check_mode(fault.mode), seconds=fault.seconds)
                        self.sleep(fault.seconds)
                    finally:
                        self.api.allow(user_agent=agent)
            elif kind == "provider-outage":
                target = "fake-provider"
                self._frozen(self.cluster.infra_pids()["fake-provider"], fault.seconds)
            elif kind == "provider-latency":
                try:
                    self.cluster.admin.set_limits({"latency": fault.latency})
                    self.sleep(fault.seconds)
                finally:
                    self.cluster.admin.set_limits({"latency": self.base_latency})
            elif kind == "provider-errors":
                rng = random.Random(fault.draw)
                failing = rng.sample(list(self.zones), max(1, round(fault.zones * len(self.zones))))
                try:
                    self.cluster.admin.set_faults(
                        Faults(throttle_ratio=fault.ratio, fail_zones=frozenset(failing), seed=fault.draw)
                    )
                    self.sleep(fault.seconds)
                finally:
                    self.cluster.admin.set_faults(Faults())
            else:
                raise ValueError(f"unknown fault kind {kind!r}")
        except (ClusterError, KubeError, RuntimeError) as exc:
            # A fault the cluster's machinery failed to carry out is a finding of the run, not its end.
            note = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return Outcome(fault, target, started, time.time(), None, note)

    def _frozen(self, pid: int, seconds: float) -> None:
        os.kill(pid, signal.SIGSTOP)
        try:
            self.sleep(seconds)
        finally:
            os.kill(pid, signal.SIGCONT)

    def scale(self, replicas: int) -> None:
        """`kubectl scale`: retried while the API server is slow to answer; the leaving replicas are given
        their termination grace to drain (then SIGKILL), the new ones start at once."""
        deadline = time.monotonic() + 30
        while True:
            try:
                self.cluster.scale(replicas)
                return
            except KubeError as exc:
                if time.monotonic() > deadline:
                    raise
                self.say(f"scale to {replicas}: {exc.status} {exc.reason}; retrying")
                time.sleep(0.5)

    def _rolling_restart(self) -> None:
        """`kubectl rollout restart`: highest ordinal first, each one ready before the next goes."""
        for ordinal in sorted(self.cluster.replicas, reverse=True):
            if ordinal in self.cluster.replicas and self.cluster.replicas[ordinal].alive():
                self.cluster.restart(ordinal)
                self.cluster.wait_ready(within=self.start_timeout, ordinals=[ordinal])

    # ---- recovery ---------------------------------------------------------------------------------------

    def owned(self, sample: observe.Sample) -> bool:
        """Every zone runs at exactly one live replica, all on the published generation listing them."""
        members = self.live()
        if not observe.full_ownership(self.zones, members)(sample):
            return False
        try:
            assignment = self.cluster.assignment()
        except Exception:  # the API server may be slow right after a fault: not yet
            return False
        return (
            assignment is not None
            and assignment.identities == set(members)
            and assignment.generation == observe.generation(sample)
        )

    def recover(self, lifted: float) -> float | None:
        """Unix time of the first sample after `lifted` in which the zones are owned again. None when that
        did not happen within three times the bound: the run records it and goes on."""
        deadline = time.monotonic() + 3 * self.bound
        seen = 0.0
        while time.monotonic() < deadline:
            self.tend()
            sample = self.sampler.latest()
            if sample is not None and sample.t > max(seen, lifted):
                seen = sample.t
                if self.owned(sample):
                    return sample.t
            time.sleep(self.sampler.period / 2)
        return None
