"""`shardsync apiserver`: run the embedded Kubernetes API server until Ctrl-C or SIGTERM.

Everything that can fail at start is checked before the server is announced, each as one line on stderr
with exit 1: the `--data-dir` snapshot that does not read, a data directory that cannot be written (the
snapshot is written on stop: finding out then would lose the state), an address it cannot listen on, a
`--kubeconfig-out` it cannot write. A flag value out of range is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from shardsync import logs
from shardsync.flags import count, port, positive
from shardsync.local.apiserver.server import ApiServer


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port, default=6443, help="port to listen on; 0 picks a free one")
    parser.add_argument("--kubeconfig-out", type=Path, help="write a kubeconfig for this server here")
    parser.add_argument("--data-dir", type=Path, help="load state from here at start, save it here on stop")
    parser.add_argument("--window", type=count, default=10_000, help="events kept for watch resume")
    parser.add_argument(
        "--bookmark-interval",
        type=positive,
        default=60.0,
        help="seconds between BOOKMARK events on watches that allow them",
    )
    parser.add_argument("--log-level", choices=logs.LOG_LEVELS, default="info")


def _fail(message: str) -> int:
    print(f"shardsync apiserver: {message}", file=sys.stderr)
    return 1


def _unwritable(directory: Path) -> str | None:
    """Why a file could not be written into `directory` (made if missing), or None."""
    if directory.exists() and not directory.is_dir():
        return f"{directory} is not a directory"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None if os.access(directory, os.W_OK | os.X_OK) else "not writable"


def main(args: argparse.Namespace) -> int:
    logs.setup(identity="apiserver", level=args.log_level)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # Ctrl-C is handled like SIGTERM (a clean stop), also when it arrives between two statements of the
    # start-up, where a KeyboardInterrupt would escape every handler.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.data_dir is not None:
        why = _unwritable(args.data_dir)
        if why is not None:
            return _fail(f"--data-dir={args.data_dir}: cannot keep the state there: {why}")
    if args.kubeconfig_out is not None:
        why = "a directory" if args.kubeconfig_out.is_dir() else _unwritable(args.kubeconfig_out.parent)
        if why is not None:
            return _fail(f"--kubeconfig-out={args.kubeconfig_out}: cannot write it: {why}")
    try:
        server = ApiServer(args.host, args.port, args.data_dir, None, args.window, args.bookmark_interval)
    except Exception as exc:  # the snapshot is our own file: whatever is wrong with it is one message
        return _fail(f"--data-dir={args.data_dir}: cannot read its snapshot: {type(exc).__name__}: {exc}")
    try:
        server.start()
    except OSError as exc:  # a busy port, an address this host does not have
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    try:
        if args.kubeconfig_out:
            try:
                server.write_kubeconfig(args.kubeconfig_out)
            except OSError as exc:
                return _fail(
                    f"--kubeconfig-out={args.kubeconfig_out}: cannot write it: {exc.strerror or exc}"
                )
        print(f"listening on {server.url}", flush=True)
        if args.kubeconfig_out:
            print(f"kubeconfig written to {args.kubeconfig_out}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    print("stopped", flush=True)
    return 0
