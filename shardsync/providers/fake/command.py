"""`shardsync fake-provider`: the fake provider's server (server.py) as a command, seeded, with its limits,
profile (profile.py) and whether its webhook face speaks the fence extension from flags, until SIGTERM or
SIGINT. A flag value out of range is a usage error (exit 2) and an address it cannot listen on one line
(exit 1), both before anything is served."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

from shardsync import logs
from shardsync.flags import count, duration, non_negative, port
from shardsync.providers.fake.limits import Limits
from shardsync.providers.fake.profile import PROFILES
from shardsync.providers.fake.server import DEFAULT_PORT, FakeServer, log
from shardsync.providers.fake.store import FakeStore


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"0: any free one ({DEFAULT_PORT})")
    parser.add_argument("--zones", type=count, default=0, help="seed zones zone-0000.example ... (default 0)")
    parser.add_argument("--records-per-zone", type=count, default=0, help="A records seeded per zone")
    parser.add_argument("--latency", type=duration, default=0.0, help="per-call latency, e.g. 20ms")
    parser.add_argument("--rate-limit", type=non_negative, default=0.0, help="calls/s per client (0: none)")
    parser.add_argument(
        "--burst", type=count, default=0, help="rate limit bucket size (0: one second's worth)"
    )
    parser.add_argument(
        "--concurrency", type=count, default=0, help="calls in flight per client (0: no limit)"
    )
    parser.add_argument(
        "--queue-timeout",
        type=duration,
        default=2.0,
        help="how long a call waits for a concurrency slot before it is throttled (default 2s)",
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="none", help="API rules enforced")
    parser.add_argument(
        "--account-rate", type=non_negative, help="account requests/s (--profile route53: 10)"
    )
    parser.add_argument("--account-burst", type=count, help="account bucket size (--profile route53: 50)")
    parser.add_argument(
        "--webhook-fence",
        action="store_true",
        help="the webhook face also speaks shardsync's fence extension (advertised on GET /)",
    )
    parser.add_argument("--log-level", choices=logs.LOG_LEVELS, default="info")


def main(args: argparse.Namespace) -> int:
    logs.setup(identity="fake-provider", level=args.log_level)
    limits = Limits(
        latency=args.latency,
        rate=args.rate_limit or None,
        burst=args.burst or None,
        concurrency=args.concurrency or None,
        queue_timeout=args.queue_timeout,
    )
    profile = PROFILES[args.profile].with_account(args.account_rate, args.account_burst)
    store = FakeStore(limits=limits, profile=profile)
    store.seed(args.zones, args.records_per_zone)
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = FakeServer(store, host=args.host, port=args.port, webhook_fence=args.webhook_fence)
    try:
        server.start()
    except OSError as exc:  # a busy port, an address this host does not have or cannot resolve
        # asyncio words a bind error at length around the errno; the errno's own text says it
        why = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else exc.strerror or str(exc)
        print(f"shardsync fake-provider: cannot listen on {args.host}:{args.port}: {why}", file=sys.stderr)
        return 1
    try:
        log.info(
            "fake provider listening",
            url=server.url,
            zones=args.zones,
            profile=profile.name,
            webhook_fence=args.webhook_fence,
            **limits.to_json(),
        )
        # The URL alone on stdout, so a launcher that passed --port 0 can learn the port.
        print(server.url, flush=True)
        while not stopping.wait(0.5):
            pass
    finally:
        server.stop()
    log.info("fake provider stopped")
    return 0
