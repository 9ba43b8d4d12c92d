"""`shardsync webhook-server`: one of shardsync's providers served over external-dns's webhook protocol
(server.py), so that anything speaking `--provider=webhook` (external-dns itself, or shardsync replicas)
writes through it: `shardsync webhook-server --provider=pdns --pdns-server=…`, as external-dns's own
`--webhook-server --provider=…` serves its in-tree providers.

Flags: the command's own (the group below; `--domain-filter` and `--exclude-domains` choose the zones
served, as a replica's do) and every provider's own group, as `shardsync run` takes them (flag_args:
`SHARDSYNC_<FLAG>` and `EXTERNAL_DNS_<FLAG>` from the environment too); only the chosen provider's are
checked. A mistake in a flag is one line and exit 2, a file or address that cannot be used one line and
exit 1, both before anything is served. Then the provider is built, `/metrics`, `/healthz` and `/readyz`
served on `--metrics-address` (ready once the provider has listed its zones) and the protocol on
`--listen-address`, whose URL is printed alone on stdout (a launcher that passed port 0 learns the port).
One line says, once the provider answers, how many zones are served and whether the fence extension is
offered. SIGTERM or SIGINT stops it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal

from shardsync import flag_args, logs
from shardsync.flags import ConfigError, Flag, FlagGroup, mirrored
from shardsync.pacing.backoff import Backoff
from shardsync.providers.base import Provider, ProviderError
from shardsync.providers.table import PROVIDERS
from shardsync.providers.webhook.server import WebhookServer, start_runner
from shardsync.records.domain_filter import DomainFilter
from shardsync.replica.config_checks import validate_address, validate_domain
from shardsync.replica.server import StatusEndpoints, StatusServer, parse_address

log = logs.get_logger(__name__)

USAGE, ENVIRONMENT = 2, 1
# Every provider but the webhook client: a webhook served from a webhook would add nothing but a hop.
SERVABLE = tuple(name for name in PROVIDERS if name != "webhook")


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The command's own flags."""

    provider: str = ""
    listen_address: str = "127.0.0.1:8888"
    metrics_address: str = ":8080"
    domain_filter: tuple[str, ...] = ()
    exclude_domains: tuple[str, ...] = ()
    identity: str = ""
    log_level: str = "info"
    log_format: str = "text"


def _validate(o: ServeOptions) -> None:
    if not o.provider:
        raise ConfigError(f"--provider is required: the provider to serve ({', '.join(SERVABLE)})")
    try:
        _, port = parse_address(o.listen_address)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigError(
            f"--listen-address={o.listen_address}: not HOST:PORT with a port from 0 to 65535, e.g. "
            "127.0.0.1:8888"
        )
    validate_address(o.metrics_address)
    for name, domains in (("--domain-filter", o.domain_filter), ("--exclude-domains", o.exclude_domains)):
        for domain in domains:
            validate_domain(name, domain)


FLAGS = FlagGroup(
    "webhook-server",
    "shardsync webhook-server",
    ServeOptions,
    (
        mirrored("provider", "the DNS provider to serve", choices=SERVABLE),
        Flag(
            "listen_address",
            "HOST:PORT of the webhook protocol (external-dns's sidecar address; port 0: any free one)",
        ),
        mirrored("metrics_address", "address of /metrics, /healthz and /readyz"),
        mirrored("domain_filter", "only serve the zones of these domains (repeatable)", repeat=True),
        mirrored("exclude_domains", "never serve the zones of these domains (repeatable)", repeat=True),
        Flag("identity", "the name the provider gives its DNS API (default: $POD_NAME, else the host name)"),
        mirrored("log_level", "debug, info, warning or error", choices=logs.LOG_LEVELS),
        mirrored("log_format", "text (logfmt) or json", choices=logs.LOG_FORMATS),
    ),
    _validate,
)
GROUPS = (FLAGS, *(PROVIDERS[name].flags for name in SERVABLE))


def configure(parser: argparse.ArgumentParser) -> None:
    flag_args.declare(parser, GROUPS, top=FLAGS)


def _fail(message: str, code: int) -> int:
    print(f"shardsync webhook-server: {message}", file=sys.stderr, flush=True)
    return code


def options_from_args(args: argparse.Namespace) -> tuple[ServeOptions, Any]:
    """The command's options and the chosen provider's, checked (ConfigError naming the flag, and the
    environment variable it came from)."""
    origins: dict[str, str] = {}
    values = flag_args.group_values(args, FLAGS, origins, top=FLAGS)
    if not values["identity"]:
        values["identity"] = os.environ.get("POD_NAME") or socket.gethostname()
    try:
        options = FLAGS.build(values)
        group = PROVIDERS[options.provider].flags
        return options, group.build(flag_args.group_values(args, group, origins))
    except ConfigError as exc:
        raise ConfigError(flag_args.with_origin(str(exc), origins)) from None


def main(args: argparse.Namespace) -> int:
    try:
        options, provider_options = options_from_args(args)
    except OSError as exc:  # a file a flag names could not be read
        return _fail(str(exc), ENVIRONMENT)
    except (ConfigError, ValueError) as exc:
        return _fail(f"{exc}; see shardsync webhook-server --help", USAGE)
    logs.setup(options.identity, options.log_level, options.log_format)
    try:
        provider = PROVIDERS[options.provider].create(provider_options, options.identity)
    except (OSError, ValueError) as exc:
        return _fail(str(exc), ENVIRONMENT)
    served = _Served(options, provider)
    try:
        status = StatusServer(options.metrics_address, StatusEndpoints(served.ready, dict))
    except OSError as exc:
        anyio.run(provider.close)
        return _fail(
            f"--metrics-address={options.metrics_address}: cannot listen there ({_why(exc)})", ENVIRONMENT
        )
    try:
        return anyio.run(served.run, status)
    except _CannotListen as exc:
        return _fail(str(exc), ENVIRONMENT)
    finally:
        status.stop()


class _CannotListen(Exception):
    """The protocol's address cannot be listened on."""


def _why(exc: OSError) -> str:
    # asyncio words a bind error at length around the errno; the errno's own text says it
    return os.strerror(exc.errno) if exc.errno and exc.errno > 0 else exc.strerror or str(exc)


class _Served:
    """The provider served from start to stop, and whether it has answered yet (readiness)."""

    def __init__(self, options: ServeOptions, provider: Provider) -> None:
        self.options = options
        self.provider = provider
        domain_filter = DomainFilter.parse(options.domain_filter, options.exclude_domains)
        self.server = WebhookServer(lambda caller: provider, domain_filter)
        self.answered = False

    def ready(self) -> tuple[bool, str]:
        return (
            (True, "ok")
            if self.answered
            else (False, f"the {self.options.provider} provider has not answered")
        )

    async def run(self, status: StatusServer) -> int:
        try:
            await self._serve(status)
        finally:
            await self.provider.close()
        log.info("webhook server stopped")
        return 0

    async def _serve(self, status: StatusServer) -> None:
        """Serve until SIGTERM or SIGINT."""
        host, port = parse_address(self.options.listen_address)
        try:
            runner = await start_runner(self.server, host or None, port)
        except OSError as exc:
            raise _CannotListen(f"cannot listen on {self.options.listen_address}: {_why(exc)}") from None
        try:
            bound = runner.addresses[0]
            url = f"http://{host or bound[0]}:{bound[1]}"
            log.info("webhook server listening", url=url, provider=self.options.provider)
            print(url, flush=True)  # alone on stdout
            async with BlockingPortal() as portal, anyio.create_task_group() as tg:
                status.start(portal)
                tg.start_soon(self._learn)
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        break
                tg.cancel_scope.cancel()
        finally:
            await runner.cleanup()

    async def _learn(self) -> None:
        """Ask the provider for its zones and whether it fences its writes (with backoff until it answers),
        then say both in one line."""
        backoff = Backoff(initial=0.5, maximum=30.0)
        while True:
            try:
                zones = await self.server.zones.listed(self.provider)
                fenced = await self.server.offers_fence(self.provider)
                break
            except ProviderError as exc:
                delay = backoff.next()
                log.warning("the provider did not answer", error=str(exc)[:300], retry_in=f"{delay:.1f}s")
                await anyio.sleep(delay)
        self.answered = True
        name = self.options.provider
        if fenced:
            log.info(
                "webhook server ready: fence extension offered (the provider fences its writes)",
                provider=name,
                zones=len(zones),
            )
        else:
            log.info(
                f"webhook server ready: fence extension not offered (the {name} provider does not fence its "
                "writes); replicas writing through this server are lease-timed",
                provider=name,
                zones=len(zones),
            )
