"""`shardsync local`'s engine: start the embedded API server, the fake provider and N replica processes,
keep the replica count where it is asked to be, show what they report, and stop everything it started.

Setup runs before the event loop (blocking: child processes, the kubernetes client); a Ctrl-C or SIGTERM
during it still stops what was started. The live part is one anyio task group: a ticker (keep processes
at the wanted count, read every replica's /shards and the provider's audit, draw the table), the control
socket (`shardsync local scale N`), the keyboard when stdin is a terminal, and the signals that end it.

Scaling behaves like a StatefulSet: the StatefulSet object's spec.replicas is updated first, so a replica
told to stop can tell a scale-down from a restart; scaling down then sends SIGTERM to the highest ordinals
(killed after the termination grace); scaling up starts the missing ordinals, each only once its previous
process has exited. A replica that dies on its own is restarted with a growing delay, as a kubelet would.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, TextIO

import anyio
import httpx
import orjson

from shardsync.cli import OUTPUT_CLOSED
from shardsync.durations import format_duration
from shardsync.kube.client import BlockingKube
from shardsync.local import control, infra, polling, seed
from shardsync.local.children import Child, stop_all
from shardsync.local.infra import Infrastructure, LocalOptions, SetupFailed, free_port
from shardsync.local.table import Milestones, ReplicaSnapshot, progress, render
from shardsync.logs import get_logger

log = get_logger(__name__)

MAX_REPLICAS = 32
_CLEAR = "\x1b[H\x1b[2J"
_KEYS_HELP = "keys: + / - add or remove a replica, 0-9 set the count, q quit"


class _Stop(BaseException):
    """A signal arrived during setup or shutdown (outside the event loop)."""


@dataclass(slots=True)
class _Slot:
    """One StatefulSet ordinal: its current process, if any, and what the launcher knows about it."""

    ordinal: int
    identity: str
    port: int
    child: Child | None = None
    stopping_since: float | None = None
    restarts: int = 0
    restart_at: float = 0.0
    shards: dict[str, Any] | None = None


class Launcher:
    def __init__(self, options: LocalOptions, out: TextIO | None = None) -> None:
        self.o = options
        self.out = out if out is not None else sys.stdout
        self.run_dir = options.run_dir
        self.desired = options.replicas
        self.slots: dict[int, _Slot] = {}
        self.infra: Infrastructure | None = None
        self.all_children: list[Child] = []
        self.events: deque[str] = deque(maxlen=6)
        self.written = 0
        self._audit_seq = 0
        self._started = time.monotonic()
        self.milestones = Milestones(self._started)
        self.provider_records: dict[str, int] | None = None  # zone → records at the provider, last read
        self._last_print = 0.0
        self._stop: anyio.Event | None = None  # made inside the event loop
        self._exit_code = 0
        self.kube: BlockingKube | None = None
        self.output_closed = False  # our reader went away (`shardsync local | head`)

    # ---- output ----------------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        """Once the reader of our output has gone (`shardsync local | head`), nothing more is written and
        everything stops, as when the terminal closes; an error here would skip stopping the children."""
        if self.output_closed:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            self.output_closed = True
            log.info("output closed: stopping")
            self.request_stop()

    def event(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.events.append(f"{stamp} {text}")
        log.info("local", what=text)
        if not self.o.live:
            self.say(f"{stamp} {text}")

    # ---- setup -----------------------------------------------------------------------------------------

    def _child(self, name: str, args: Sequence[str]) -> Child:
        child = Child(name, args, self.run_dir / f"{name}.log")
        self.all_children.append(child)
        self._write_run_file()
        return child

    def start_infrastructure(self) -> None:
        """API server, fake provider, seeded objects and the StatefulSet; SetupFailed on any failure."""
        self.infra = infra.start(self.o, self.desired, self._child, self.say)
        self.kube = self.infra.kube
        self._write_run_file()

    def replica_args(self, slot: _Slot) -> list[str]:
        return self.replica_command(slot.identity, slot.port)

    def replica_command(self, identity: str, port: int) -> list[str]:
        """The `shardsync run` arguments of replica `identity` serving status on `port`."""
        assert self.infra is not None
        return infra.replica_command(self.infra, self.o, identity, port)

    def _start(self, slot: _Slot) -> None:
        slot.port = free_port()
        slot.child = self._child(slot.identity, self.replica_args(slot))
        slot.shards = None

    def _write_run_file(self) -> None:
        """run.json: where everything is and every pid ever started (for scripts and tests)."""
        doc: dict[str, Any] = {
            "runDir": str(self.run_dir),
            "launcherPid": os.getpid(),
            "replicas": self.desired,
            "pids": [c.pid for c in self.all_children],
            "processes": [{"name": c.name, "pid": c.pid, "log": str(c.log_path)} for c in self.all_children],
        }
        if self.infra is not None:
            doc |= {
                "apiServer": self.infra.api_url,
                "kubeconfig": str(self.infra.kubeconfig),
                "fakeProvider": self.infra.provider_url,
                "zones": len(self.infra.zones),
                "ownerId": self.o.owner_id,
                "statusUrls": {s.identity: f"http://127.0.0.1:{s.port}" for s in self.slots.values()},
            }
        path = self.run_dir / "run.json"
        tmp = path.with_name("run.json.tmp")
        tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        tmp.replace(path)

    # ---- keeping the replica count -------------------------------------------------------------------

    def reconcile(self) -> None:
        """One pass of a StatefulSet controller over the slots (quick: no waiting)."""
        now = time.monotonic()
        for ordinal, slot in sorted(self.slots.items()):
            child = slot.child
            if child is not None and not child.alive():
                if slot.stopping_since is not None:
                    took = now - slot.stopping_since
                    self.event(f"{slot.identity} stopped (exit {child.returncode}) after {took:.1f}s")
                    del self.slots[ordinal]
                    continue
                slot.restarts += 1
                delay = min(30.0, 2.0 ** min(slot.restarts, 5))
                slot.child, slot.restart_at, slot.shards = None, now + delay, None
                self.event(f"{slot.identity} exited with {child.returncode}; restarting in {delay:.0f}s")
            if (
                slot.stopping_since is not None
                and child is not None
                and child.alive()
                and now - slot.stopping_since > self.o.termination_grace
            ):
                child.kill()
                self.event(f"{slot.identity} killed after {self.o.termination_grace:.0f}s")
        for ordinal, slot in sorted(self.slots.items()):
            if ordinal >= self.desired and slot.stopping_since is None:
                if slot.child is None:
                    del self.slots[ordinal]
                else:
                    slot.child.terminate()
                    slot.stopping_since = now
                    self.event(f"{slot.identity} sent SIGTERM (scale-down)")
        changed = False
        for ordinal in range(self.desired):
            existing = self.slots.get(ordinal)
            if existing is None:
                fresh = self.slots[ordinal] = _Slot(ordinal, f"{seed.STATEFULSET}-{ordinal}", 0)
                self._start(fresh)
                changed = True
            elif existing.child is None and existing.stopping_since is None and now >= existing.restart_at:
                self._start(existing)
                changed = True
        if changed:
            self._write_run_file()

    async def scale(self, replicas: int) -> dict[str, Any]:
        if not 0 <= replicas <= MAX_REPLICAS:
            return {"ok": False, "error": f"replicas must be between 0 and {MAX_REPLICAS}, got {replicas}"}
        if replicas == self.desired:
            return {"ok": True, "replicas": replicas}
        assert self.kube is not None, "infrastructure not started"
        try:
            await anyio.to_thread.run_sync(seed.set_replicas, self.kube, replicas)
        except Exception as exc:  # the API server is the launcher's child: report, keep running
            return {"ok": False, "error": f"updating the StatefulSet failed: {type(exc).__name__}: {exc}"}
        self.event(f"scale {self.desired} -> {replicas}")
        self.milestones.scaled(time.monotonic(), progress(self.snapshots(), 0, 0).generation)
        self.desired = replicas
        self.reconcile()
        self._write_run_file()
        return {"ok": True, "replicas": replicas}

    # ---- watching --------------------------------------------------------------------------------------

    async def poll(self, client: httpx.AsyncClient) -> None:
        """Read every running replica's /shards and the provider's new audit entries, concurrently."""
        assert self.infra is not None
        url, zones = self.infra.provider_url, self.infra.zones

        async def shards(slot: _Slot) -> None:
            slot.shards = await polling.replica_shards(client, slot.port)

        async def records() -> None:
            # None while unreadable: the owners' own counts are shown meanwhile.
            self.provider_records = await polling.provider_records(client, url, zones)

        async def audit() -> None:
            read = await polling.audit_writes(client, url, self._audit_seq)
            if read is not None:
                written, self._audit_seq = read
                self.written += written

        async with anyio.create_task_group() as tg:
            for slot in list(self.slots.values()):
                if slot.child is not None and slot.child.alive():
                    tg.start_soon(shards, slot)
                else:
                    slot.shards = None
            tg.start_soon(audit)
            tg.start_soon(records)

    def snapshots(self) -> list[ReplicaSnapshot]:
        now = time.monotonic()
        rows = []
        for _, slot in sorted(self.slots.items()):
            child = slot.child
            if child is None:
                process = f"restarting in {max(0.0, slot.restart_at - now):.0f}s"
            elif not child.alive():
                process = f"exited {child.returncode}"
            elif slot.stopping_since is not None:
                process = f"stopping {now - slot.stopping_since:.0f}s"
            else:
                process = "running"
            rows.append(
                ReplicaSnapshot(
                    slot.identity,
                    child.pid if child is not None else None,
                    slot.port,
                    process,
                    slot.shards,
                    slot.restarts,
                )
            )
        return rows

    def screen(self) -> str:
        assert self.infra is not None
        footer = f"{_KEYS_HELP}; " if self.o.live and self.o.keys else ""
        footer += "from another shell: shardsync local scale N; Ctrl-C stops everything"
        return render(
            self.snapshots(),
            desired=self.desired,
            zone_total=len(self.infra.zones),
            written=self.written,
            elapsed=time.monotonic() - self._started,
            run_dir=str(self.run_dir),
            footer=footer,
            events=list(self.events) if self.o.live else (),
            provider_records=self.provider_records,
        )

    def draw(self) -> None:
        now = time.monotonic()
        if self.o.live:
            self._write(_CLEAR + self.screen() + "\n")
        elif now - self._last_print >= self.o.every:
            self._last_print = now
            self.say(self.screen() + "\n")

    def check_infrastructure(self) -> None:
        assert self.infra is not None
        for child in (self.infra.apiserver, self.infra.provider):
            if not child.alive() and self._exit_code == 0:
                self.event(f"{child.name} exited with {child.returncode}: stopping (see {child.log_path})")
                self._exit_code = 1
                self.request_stop()

    # ---- the live part -----------------------------------------------------------------------------------

    async def run(self) -> int:
        """Until `duration`, a signal, `q`, or the API server or provider dying."""
        self._started = time.monotonic()
        self.milestones = Milestones(self._started)
        self._stop = stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._signals)
            tg.start_soon(control.serve, self.run_dir, self._control)
            if self.o.keys:
                tg.start_soon(self._keyboard)
            tg.start_soon(self._ticker)
            with anyio.move_on_after(self.o.duration if self.o.duration is not None else float("inf")):
                await stop.wait()
            tg.cancel_scope.cancel()
        return self._exit_code

    def request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def _ticker(self) -> None:
        async with httpx.AsyncClient(timeout=max(0.2, self.o.refresh * 0.8)) as client:
            while True:
                self.check_infrastructure()
                self.reconcile()
                await self.poll(client)
                zones = len(self.infra.zones) if self.infra is not None else 0
                for line in self.milestones.update(self.snapshots(), zones, time.monotonic()):
                    self.event(line)
                self.draw()
                await anyio.sleep(self.o.refresh)

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                self.event(f"{signal.Signals(signum).name}: stopping")
                self.request_stop()
                return

    async def _control(self, req: dict[str, Any]) -> dict[str, Any]:
        if "scale" in req:
            value = req["scale"]
            if isinstance(value, bool) or not isinstance(value, int):
                return {"ok": False, "error": f"scale needs an integer, got {value!r}"}
            return await self.scale(value)
        if req.get("status"):
            p = progress(self.snapshots(), len(self.infra.zones) if self.infra else 0, self.written)
            return {
                "ok": True,
                "replicas": self.desired,
                "generation": p.generation,
                "coordinator": p.coordinator,
                "zones": p.zones,
                "synced": p.synced,
                "written": p.written,
            }
        return {"ok": False, "error": "unknown request (known: scale, status)"}

    async def _keyboard(self) -> None:
        fd = sys.stdin.fileno()
        while True:
            await anyio.wait_readable(fd)
            data = os.read(fd, 64)
            if not data:
                return
            for key in data.decode(errors="ignore"):
                if key in "+=":
                    await self.scale(min(self.desired + 1, MAX_REPLICAS))
                elif key in "-_":
                    await self.scale(max(self.desired - 1, 0))
                elif key.isdigit():
                    await self.scale(int(key))
                elif key in "qQ":
                    self.request_stop()
            self.draw()

    # ---- stopping ---------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop every process started, replicas first; bounded: SIGTERM, then SIGKILL after the grace."""
        replicas = [s.child for s in self.slots.values() if s.child is not None]
        if any(c.alive() for c in replicas):
            self.say(f"stopping {sum(c.alive() for c in replicas)} replicas ...")
        stop_all([c for c in replicas if c.alive()], self.o.termination_grace)
        others = [c for c in self.all_children if c not in replicas]
        stop_all([c for c in others if c.alive()], 10.0)
        for child in self.all_children:  # earlier incarnations of a replica, too
            if child.alive():
                child.kill()
        if self.kube is not None:
            self.kube.close()
        statuses = ", ".join(f"{c.name} pid {c.pid} exit {c.returncode}" for c in self.all_children)
        if statuses:
            self.say(f"stopped: {statuses}")
        self.say(f"logs: {self.run_dir}")


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def _on_signals(handler: Callable[[int, FrameType | None], Any] | signal.Handlers) -> None:
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def launch(options: LocalOptions, out: TextIO | None = None) -> int:
    """Set up, run live, stop everything; the exit status."""
    launcher = Launcher(options, out)
    say = launcher.say
    _on_signals(_raise_stop)
    say(f"run directory:  {options.run_dir}   (logs, kubeconfig, run.json)")
    code = 1
    try:
        control.write_pointer(options.run_dir)
        launcher.start_infrastructure()
        say(
            f"replicas:       {options.replicas} ({seed.STATEFULSET}-0..{max(options.replicas - 1, 0)}); "
            "scale with `shardsync local scale N`"
            + (f"; stopping after {format_duration(options.duration)}" if options.duration else "")
        )
        if not launcher.output_closed:  # closed during the setup: nothing to run for
            code = anyio.run(launcher.run)
    except SetupFailed as exc:
        print(f"shardsync local: {exc}", file=sys.stderr, flush=True)
    except (_Stop, KeyboardInterrupt):
        code = 0
    finally:
        # A second Ctrl-C while stopping must not leave children behind: it is ignored here; the stop
        # itself is bounded (SIGTERM, then SIGKILL after the grace).
        _on_signals(lambda signum, frame: None)
        try:
            launcher.shutdown()
        finally:
            control.clear_pointer(options.run_dir)
            _on_signals(signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
    return OUTPUT_CLOSED if launcher.output_closed else code
