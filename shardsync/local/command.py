"""`shardsync local`: N replicas, the embedded API server and a fake DNS provider on this machine, with a
live table; `shardsync local scale N` changes the replica count of the running one from another shell.

Needs no cluster and nothing but `pip install -e .`. Everything it starts logs into a run directory that it
prints (default: a new temporary directory). When stdout is not a terminal (or with `--no-tty`) the table
is printed every few seconds instead of redrawn, and keys are not read.

Before anything starts: a replica count above the launcher's limit is a usage error (exit 2), and a run
directory that cannot be written, or that a running `shardsync local` uses, one line (exit 1). When the
reader of our output goes away (`shardsync local | head`), everything started is stopped and the exit
status is 141, as for any command whose reader left.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from shardsync.flags import count, duration


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replicas", type=count, default=3, help="replica processes to start (default 3)")
    parser.add_argument(
        "--zones", type=count, default=50, help="zones seeded in the fake provider (default 50)"
    )
    parser.add_argument(
        "--records-per-zone", type=count, default=20, help="foreign A records seeded per zone (default 20)"
    )
    parser.add_argument(
        "--desired-per-zone",
        type=count,
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
        "a Gateway and a route of that kind per zone, an istio-* kind Istio Gateways or VirtualServices, "
        "node a Node per zone, pod a Node and a host-network Pod per zone",
    )
    parser.add_argument(
        "--provider",
        choices=("fake", "webhook"),
        default="fake",
        help="the replicas' --provider: fake (the fake provider's own API) or webhook (the same server "
        "through external-dns's webhook protocol: writes lease-timed, unless --webhook-fence)",
    )
    parser.add_argument(
        "--webhook-fence",
        action="store_true",
        help="with --provider=webhook: the server also speaks shardsync's fence extension (fenced writes)",
    )
    sub = parser.add_subparsers(dest="local_action", metavar="ACTION")
    scale = sub.add_parser("scale", help="change the replica count of the running `shardsync local`")
    scale.add_argument("replicas", type=count, help="the new replica count")
    scale.add_argument(
        "--run-dir", dest="target_run_dir", type=Path, help="its run directory (default: latest)"
    )
    status = sub.add_parser("status", help="print the running `shardsync local`'s progress as JSON")
    status.add_argument(
        "--run-dir", dest="target_run_dir", type=Path, help="its run directory (default: latest)"
    )


def _fail(message: str, code: int) -> int:
    print(f"shardsync local: {message}", file=sys.stderr)
    return code


def _run_dir_problem(run_dir: Path) -> str | None:
    """Why `run_dir` cannot hold this run: not writable, or in use by a running `shardsync local` (two
    launchers in one directory would take each other's control socket and logs)."""
    from shardsync.local import control

    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return f"--run-dir={run_dir}: cannot write there: {exc.strerror or exc}"
    try:
        control.request(run_dir, {"status": True}, timeout=5.0)
    except control.ControlError:
        return None  # nobody answers: free
    return f"--run-dir={run_dir}: a running `shardsync local` uses it; stop it or choose another directory"


def main(args: argparse.Namespace) -> int:
    if args.local_action in ("scale", "status"):
        return _control(args)
    from shardsync.cli import OUTPUT_CLOSED, output_closed
    from shardsync.local.infra import LocalOptions
    from shardsync.local.launcher import MAX_REPLICAS, launch

    if args.webhook_fence and args.provider != "webhook":
        return _fail("argument --webhook-fence: only with --provider=webhook; see shardsync local --help", 2)
    if args.replicas > MAX_REPLICAS:
        return _fail(
            f"argument --replicas: at most {MAX_REPLICAS}, got {args.replicas}; see shardsync local --help", 2
        )
    if args.run_dir is None:
        try:
            run_dir = Path(tempfile.mkdtemp(prefix="shardsync-local-"))
        except OSError as exc:
            return _fail(f"cannot make a run directory in {tempfile.gettempdir()}: {exc.strerror}", 1)
    else:
        run_dir = args.run_dir
        problem = _run_dir_problem(run_dir)
        if problem is not None:
            return _fail(problem, 1)
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
        provider=args.provider,
        webhook_fence=args.webhook_fence,
    )
    with _keys_mode(keys):
        code = launch(options)
    return output_closed() if code == OUTPUT_CLOSED else code


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
        return _fail(str(exc), 1)
    return 0
