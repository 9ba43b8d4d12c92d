"""`shardsync apiserver`: run the embedded Kubernetes API server until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from shardsync import logs
from shardsync.local.apiserver.server import ApiServer


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=6443, help="port to listen on; 0 picks a free one")
    parser.add_argument("--kubeconfig-out", type=Path, help="write a kubeconfig for this server here")
    parser.add_argument("--data-dir", type=Path, help="load state from here at start, save it here on stop")
    parser.add_argument("--window", type=int, default=10_000, help="events kept for watch resume")
    parser.add_argument(
        "--bookmark-interval",
        type=float,
        default=60.0,
        help="seconds between BOOKMARK events on watches that allow them",
    )
    parser.add_argument("--log-level", default="info")


def main(args: argparse.Namespace) -> int:
    logs.setup(identity="apiserver", level=args.log_level)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # Ctrl-C is handled like SIGTERM (a clean stop), also when it arrives between two statements of the
    # start-up, where a KeyboardInterrupt would escape every handler.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server = ApiServer(
            args.host, args.port, args.data_dir, args.kubeconfig_out, args.window, args.bookmark_interval
        ).start()
    except OSError as exc:  # a busy port, an address this host does not have
        print(
            f"shardsync apiserver: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr
        )
        return 1
    print(f"listening on {server.url}", flush=True)
    if args.kubeconfig_out:
        print(f"kubeconfig written to {args.kubeconfig_out}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    print("stopped", flush=True)
    return 0
