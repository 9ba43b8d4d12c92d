"""Bench: get+replace pairs per second of one Lease from one client process (shardsync.kube.client, over the
official client) against the embedded API server running in its own process
(`python -m bench.apiserver [--seconds S] [--in-process]`)."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from shardsync.kube.client import BlockingKube
from shardsync.kube.objects import LEASES
from shardsync.local.apiserver import ApiServerProcess, serve


def _pairs(api: Any, seconds: float) -> float:
    kube = BlockingKube(api)
    body = {"metadata": {"name": "bench"}, "spec": {"leaseTransitions": 0}}
    kube.create(LEASES, body, namespace="default")
    count = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        lease = kube.get(LEASES, "bench", namespace="default")
        assert lease is not None
        lease["spec"]["leaseTransitions"] = count
        kube.replace(LEASES, "bench", lease, namespace="default")
        count += 1
    return count / (time.perf_counter() - start)


def get_replace_rate(seconds: float = 3.0, in_process: bool = False) -> float:
    """Pairs per second; the server runs as a child process unless `in_process` (then it shares the GIL)."""
    if in_process:
        server = serve(port=0)
        try:
            return _pairs(server.api_client(), seconds)
        finally:
            server.stop()
    with tempfile.TemporaryDirectory() as tmp:
        proc = ApiServerProcess(Path(tmp) / "kubeconfig").start()
        try:
            return _pairs(proc.api_client(), seconds)
        finally:
            proc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--in-process", action="store_true", help="run the server in this process")
    args = parser.parse_args()
    rate = get_replace_rate(args.seconds, args.in_process)
    where = "in-process" if args.in_process else "separate process"
    print(f"apiserver get+replace of one Lease, one client, server {where}: {rate:.0f} pairs/s")


if __name__ == "__main__":
    main()
