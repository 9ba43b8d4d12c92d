"""Running a matrix: one warm-up per size (replicas x zones), then each event played on that warm cluster.

Every event of a size starts from the very same steady state: the warm-up is simulated once and each event
runs in a child forked from the warm process (copy-on-write; the row comes back through a pipe), which
saves re-simulating the warm-up, the longest part of the small rows. Without `os.fork` (or with
`fork=False`) each event warms up again: the same rows, only slower.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from bench.report import machine
from bench.simulate.params import Matrix, Timing
from bench.simulate.scenarios import Prepared, SimulationError, play, prepare
from bench.simulate.zones import ZoneBook

SCHEMA = 1


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _play_in_child(prepared: Prepared, event: str) -> dict[str, Any]:
    """`play(prepared, event).row`, computed in a forked child so `prepared` stays as it is here."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: play, send the row, exit without running the parent's cleanup
        os.close(read_fd)
        try:
            try:
                payload = orjson.dumps(play(prepared, event).row)
            except BaseException as exc:  # reported by the parent, which owns the terminal
                payload = orjson.dumps({"error": f"{type(exc).__name__}: {exc}"})
            with os.fdopen(write_fd, "wb") as out:
                out.write(payload)
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        raise SimulationError(f"the simulation of {event!r} died (wait status {status})")
    row: dict[str, Any] = orjson.loads(data)
    if "error" in row:
        raise SimulationError(f"{event}: {row['error']}")
    return row


def run_matrix(
    matrix: Matrix,
    timing: Timing,
    seed: int = 1,
    say: Callable[[str], None] = print,
    fork: bool = True,
) -> dict[str, Any]:
    """Every row of `matrix`, as the JSON document `python -m bench.simulate` writes."""
    fork = fork and hasattr(os, "fork")
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": "simulate",
        "started": _now(),
        "seed": seed,
        "machine": machine(),
        "timing": timing.to_json(),
        "matrix": matrix.to_json(),
        "rows": [],
    }
    started = time.monotonic()
    book = ZoneBook()
    for replicas in matrix.replicas:
        for zones in matrix.zones:
            prepared: Prepared | None = None
            for event in matrix.events:
                if prepared is None:
                    say(f"{replicas} replicas, {zones:,} zones: warming up")
                    prepared = prepare(replicas, zones, timing, seed, book)
                if fork and len(matrix.events) > 1:
                    row = _play_in_child(prepared, event)
                else:
                    row, prepared = play(prepared, event).row, None
                doc["rows"].append(row)
                say(
                    f"{replicas} replicas, {zones:,} zones, {event}: {row['seconds_to_full_ownership']} s to "
                    f"full ownership, {row['zones_moved']:,} zones moved ({row['wall_seconds']:.1f} s)"
                )
    doc["finished"] = _now()
    doc["duration_seconds"] = round(time.monotonic() - started, 1)
    return doc
