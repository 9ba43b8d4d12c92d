"""`shardsync local`: N replicas, the embedded API server and a fake DNS provider on this machine, with a
live table; `shardsync local scale N` changes the replica count of the running one from another shell.

Needs no cluster and nothing but `pip install -e .`. Everything it starts logs into a run directory that it
prints (default: a new temporary directory). When stdout is not a terminal (or with `--no-tty`) the table
is printed every few seconds instead of redrawn, and keys are not read.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from shardsync.flags import duration


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replicas", type=_count, default=3, help="replica processes to start (default 3)")
    parser.add_argument(
        "--zones", type=_count, default=50, help="zones seeded in the fake provider (default 50)"
    )
    parser.add_argument(
        "--records-per-zone", type=_count, default=20, help="foreign A records seeded per zone (default 20)"
    )
    parser.add_argument(
        "--desired-per-zone",
        type=_count,
        default=5,
        help="records per zone asked for by a DNSEndpoint, besides one Service each (default 5)",
    )
    parser.add_argument("--owner-id", default="shardsync-local", help="TXT owner id of the replicas")
    parser.add_argument(
        "--latency", type=duration, default=0.05, help="fake provider latency per call (50ms)"
    )
    parser.add_argument("--run-dir", type=Path, help="directory for logs and state (default: a new temp dir)")
    parser.add_argument("--duration", type=duration, help="stop after this long (e.g. 90s); default: Ctrl-C")
    parser.add_argument(
        "--no-tty", action="store_true", help="print the table every few seconds, read no keys"
    )
    parser.add_argument(
        "--every", type=duration, default=5.0, help="seconds between tables without a tty (5s)"
    )
    parser.add_argument(
        "--termination-grace",
        type=duration,
        default=30.0,
        help="how long a stopping replica gets before SIGKILL (30s)",
    )
    parser.add_argument(
        "--replica-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra flag for every `shardsync run`, e.g. --replica-arg=--settle-delay=500ms (repeatable)",
    )
    parser.add_argument(
        "--source",
        action="append",
        metavar="KIND",
        help="--source of every replica (repeatable; default service and crd); a gateway-* kind also seeds "
        "a Gateway and a route of that kind per zone",
    )
    sub = parser.add_subparsers(dest="local_action", metavar="ACTION")
    scale = sub.add_parser("scale", help="change the replica count of the running `shardsync local`")
    scale.add_argument("replicas", type=_count, help="the new replica count")
    scale.add_argument(
        "--run-dir", dest="target_run_dir", type=Path, help="its run directory (default: latest)"
    )
    status = sub.add_parser("status", help="print the running `shardsync local`'s progress as JSON")
    status.add_argument(
        "--run-dir", dest="target_run_dir", type=Path, help="its run directory (default: latest)"
    )


def main(args: argparse.Namespace) -> int:
    if args.local_action in ("scale", "status"):
        return _control(args)
    from shardsync.local.infra import LocalOptions
    from shardsync.local.launcher import launch

    run_dir = args.run_dir if args.run_dir is not None else Path(tempfile.mkdtemp(prefix="shardsync-local-"))
    live = sys.stdout.isatty() and not args.no_tty
    keys = live and sys.stdin.isatty()
    options = LocalOptions(
        run_dir=run_dir.resolve(),
        replicas=args.replicas,
        zones=args.zones,
        records_per_zone=args.records_per_zone,
        desired_per_zone=args.desired_per_zone,
        owner_id=args.owner_id,
        latency=args.latency,
        duration=args.duration,
        live=live,
        keys=keys,
        every=args.every,
        termination_grace=args.termination_grace,
        replica_args=tuple(args.replica_arg),
        sources=tuple(args.source or ("service", "crd")),
    )
    with _keys_mode(keys):
        return launch(options)


@contextlib.contextmanager
def _keys_mode(enabled: bool) -> Iterator[None]:
    """Single key presses without Enter (cbreak: Ctrl-C still interrupts); the terminal restored after."""
    if not enabled:
        yield
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _control(args: argparse.Namespace) -> int:
    from shardsync.local import control

    try:
        run_dir = control.find_run_dir(args.target_run_dir)
        if args.local_action == "scale":
            reply = control.request(run_dir, {"scale": args.replicas})
            print(f"scaled to {reply['replicas']} replicas ({run_dir})")
        else:
            import orjson

            reply = control.request(run_dir, {"status": True})
            reply.pop("ok", None)
            print(orjson.dumps(reply, option=orjson.OPT_INDENT_2).decode())
    except control.ControlError as exc:
        print(f"shardsync local: {exc}", file=sys.stderr)
        return 1
    return 0
